"""OCR fold 0: Hamming error and fit time of the perturb-and-MAP CRFs on both protocols.

small = train on fold 0, test on folds 1-9; large = train on folds 1-9, test on fold 0.
Default hyper-parameters, several seeds; prints a table and writes
``docs/results/ocr_fold0.json`` and ``docs/results/ocr_fold0.md``.

Run: ``python benchmarks/ocr_fold.py [--seeds 3] [--data PATH]`` (``--quick``: the small
protocol, one seed; written to a temporary folder)
"""

import platform

import numpy as np
from _common import Run, parser, rerun, timed
from ocr_table import split

from pmap_sklearn import MarginalPerturbMAPCRF, PerturbMAPCRF, mean_hamming_loss
from pmap_sklearn.datasets import load_ocr

METHODS = {"perturb&MAP": PerturbMAPCRF, "marg. perturb&MAP": MarginalPerturbMAPCRF}


def main():
    cli = parser(__doc__, "the small protocol, one seed", data="letter.data(.gz) or its folder")
    cli.add_argument("--seeds", type=int, default=3)
    args = cli.parse_args()
    run = Run(__file__, args.quick)
    n_seeds = 1 if args.quick else args.seeds
    protocols = ("small",) if args.quick else ("small", "large")
    ocr = load_ocr(args.data)
    rows = []
    for protocol in protocols:
        train, test = split(ocr.folds, protocol, 0)
        X_train, y_train = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
        X_test, y_test = [ocr.data[i] for i in test], [ocr.target[i] for i in test]
        for method, estimator in METHODS.items():
            for seed in range(n_seeds):
                model = estimator(random_state=seed)
                _, seconds = timed(model.fit, X_train, y_train)
                error = 100 * mean_hamming_loss(y_test, model.predict(X_test))
                rows.append(
                    dict(
                        method=method,
                        protocol=protocol,
                        seed=seed,
                        n_train=len(train),
                        error=error,
                        fit_seconds=seconds,
                        epochs=model.n_iter_,
                        eta0=model.eta0_,
                    )
                )
                print(
                    f"{method:<18} {protocol:<6} seed {seed}: error {error:6.2f} %  "
                    f"fit {seconds:6.2f} s  ({model.n_iter_} epochs)",
                    flush=True,
                )
    summary = {}
    lines = [
        "| method | protocol | train words | Hamming error % | fit s | epochs |",
        "|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        for protocol in protocols:
            sel = [r for r in rows if r["protocol"] == protocol and r["method"] == method]
            err = np.array([r["error"] for r in sel])
            sec = np.array([r["fit_seconds"] for r in sel])
            summary[f"{method} {protocol}"] = dict(
                error_mean=err.mean(),
                error_std=err.std(),
                fit_seconds_mean=sec.mean(),
                fit_seconds_max=sec.max(),
            )
            lines.append(
                f"| {method} | {protocol} | {sel[0]['n_train']} | {err.mean():.2f} ± "
                f"{err.std():.2f} | {sec.mean():.1f} (max {sec.max():.1f}) | "
                f"{np.mean([r['epochs'] for r in sel]):.0f} |"
            )
    table = "\n".join(lines)
    print("\nDefault hyper-parameters, OCR fold 0, mean ± std over seeds\n" + table)
    notes = run.notes(f"--seeds {n_seeds}")
    meta = dict(
        machine=f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        command=notes["command"],
    )
    run.save(
        "ocr_fold0",
        f"# OCR fold 0 — perturb-and-MAP CRFs (defaults)\n\n{table}\n\n{rerun(notes)}\n",
        dict(meta, run=notes, rows=rows, summary=summary),
        indent=2,
    )


if __name__ == "__main__":
    main()
