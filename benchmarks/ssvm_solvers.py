"""The structured SVM's two solvers on OCR (the small protocol): BCFW against projected stochastic
subgradient descent.

Protocol: Taskar et al.'s OCR words, the small protocol of Shpakova, Bach & Osokin (2018)
(train on one fold, test on the other nine), the 10 outer folds. Both solvers minimise the same
primal with the α that ``ocr_table.py``'s inner cross-validation chose for BCFW on that fold
(read from ``docs/results/ocr_table.json``), 60 passes in mini-batches of 16 as the table's
BCFW row. Test Hamming error % (mean ± std over the folds), fit seconds, and the primal
objective estimate of the last pass.

Run: ``python benchmarks/ssvm_solvers.py [--quick]`` (needs ``../shared/data/ocr``); writes
``docs/results/ssvm_solvers.{md,json}`` (``--quick``: outer fold 0 only, written to a temporary
folder).
"""

import json
import warnings

import numpy as np
from _common import RESULTS, Run, parser, rerun, timed
from ocr_table import split
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import StructuredSVM, mean_hamming_loss
from pmap_sklearn.datasets import load_ocr

SOLVERS = {
    "BCFW (the OCR table's row)": dict(algorithm="bcfw"),
    "subgradient (Pegasos steps, weighted average)": dict(algorithm="subgradient"),
}


def main():
    args = parser(__doc__, "outer fold 0 only").parse_args()
    run = Run(__file__, args.quick)
    ocr = load_ocr()
    table = json.loads((RESULTS / "ocr_table.json").read_text())["rows"]
    alphas = {
        r["fold"]: r["alpha"]
        for r in table
        if r["method"] == "S-SVM+BCFW" and r["protocol"] == "small"
    }
    rows = {name: [] for name in SOLVERS}
    for fold in range(1 if args.quick else 10):
        train, test = split(ocr.folds, "small", fold)
        X, y = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
        X_test, y_test = [ocr.data[i] for i in test], [ocr.target[i] for i in test]
        for name, params in SOLVERS.items():
            model = StructuredSVM(
                alpha=alphas[fold], max_iter=60, batch_size=16, random_state=0, **params
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                _, seconds = timed(model.fit, X, y)
            error = 100 * mean_hamming_loss(y_test, model.predict(X_test))
            rows[name].append(
                dict(
                    fold=fold,
                    alpha=alphas[fold],
                    error=error,
                    seconds=seconds,
                    objective=model.loss_curve_[-1],
                )
            )
            print(f"fold {fold} {name:<48} {error:6.2f} %  {seconds:5.1f} s", flush=True)
    notes = run.notes()
    lines = [
        "# The structured SVM's solvers on OCR (small protocol)",
        "",
        "10 outer folds; each fold's α as chosen for BCFW by `ocr_table.py`; 60 passes, "
        "mini-batches of 16.",
        "",
        "| solver | test error % | fit s | primal objective (last pass) |",
        "|---|---|---|---|",
    ]
    for name, results in rows.items():
        errors = np.array([r["error"] for r in results])
        lines.append(
            f"| {name} | {errors.mean():.2f} ± {errors.std():.2f} | "
            f"{np.mean([r['seconds'] for r in results]):.1f} | "
            f"{np.mean([r['objective'] for r in results]):.4f} |"
        )
    lines += ["", rerun(notes)]
    text = "\n".join(lines)
    print(text)
    run.save("ssvm_solvers", text + "\n", dict(minutes=notes["minutes"], run=notes, rows=rows))


if __name__ == "__main__":
    main()
