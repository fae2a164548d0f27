"""OCR speed: our chain learners against sklearn-crfsuite on the same folds, in one process.

For each requested fold and protocol, fits sklearn-crfsuite (L-BFGS, its defaults) and our four
learners exactly as ``ocr_table.py`` runs them (ChainCRF, StructuredSVM, PerturbMAPCRF,
MarginalPerturbMAPCRF; each with the α that the table's cross-validation picked most often for the
protocol), and prints Hamming error, fit seconds and the ratio crfsuite time / our time. On the
large protocol it also records the test-error curve of each perturb-and-MAP learner along one run
(its epoch budget in the table, read between warm-started rounds) and reports the time at which it
first reaches crfsuite's error and the time from which it stays there — the fit time "at matched
error". Then profiles one PerturbMAPCRF and one MarginalPerturbMAPCRF fit (large protocol) with
cProfile and reports the shares of the fit spent in the MAP solver (Viterbi / max-marginal passes
of ``pmap_sklearn._backend.chain``) and in the whole perturb-and-MAP oracle (drawing the Gumbel
perturbation, computing the perturbed potentials and solving: ``structure.potentials`` and the
solver's ``map`` / ``clamped_maps``).

Run: ``python benchmarks/ocr_speed.py [--folds 0] [--protocols small large]``
(needs ``pip install ".[benchmarks]"`` for sklearn-crfsuite); writes
``docs/results/ocr_speed.{md,json}``. ``--quick``: the small protocol only, whose training words
the profiles fit too; written to a temporary folder.
"""

import cProfile
import json
import pstats
from collections import Counter
from pathlib import Path

import numpy as np
from _common import RESULTS, Run, parser, rerun, timed
from ocr_table import methods, split
from sklearn.base import clone

from pmap_sklearn import mean_hamming_loss
from pmap_sklearn.datasets import load_ocr

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def crfsuite_features(word):
    """Active pixels of each letter as crfsuite attributes (plus crfsuite's own bias)."""
    return [{"bias": 1.0, **{f"p{k}": 1.0 for k in np.flatnonzero(letter)}} for letter in word]


def fit_crfsuite(X, y, X_test, y_test):
    import sklearn_crfsuite

    features = [crfsuite_features(word) for word in X]
    labels = [[LETTERS[k] for k in word] for word in y]
    model = sklearn_crfsuite.CRF(algorithm="lbfgs")
    _, seconds = timed(model.fit, features, labels)
    predicted = model.predict([crfsuite_features(word) for word in X_test])
    predicted = [np.array([LETTERS.index(c) for c in word]) for word in predicted]
    return 100 * mean_hamming_loss(y_test, predicted), seconds


def fit_ours(estimator, X, y, X_test, y_test):
    _, seconds = timed(estimator.fit, X, y)
    return 100 * mean_hamming_loss(y_test, estimator.predict(X_test)), seconds


def tuned_alpha(protocol):
    """The α the inner cross-validation of ``ocr_table.py`` picked most often over the ten outer
    folds for each method (``docs/results/ocr_table.json``): the α a user gets by tuning on the
    training words."""
    path = RESULTS / "ocr_table.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run benchmarks/ocr_table.py first")
    picks = {}
    for row in json.loads(path.read_text())["rows"]:
        if row["protocol"] == protocol:
            picks.setdefault(row["method"], Counter())[row["alpha"]] += 1
    return {method: counts.most_common(1)[0][0] for method, counts in picks.items()}


def ours(protocol):
    """Our learners exactly as ``ocr_table.py`` runs them (epochs, passes, tolerances), with
    their most often tuned α."""
    alpha = tuned_alpha(protocol)
    return {
        name: clone(estimator).set_params(alpha=alpha[name])
        for name, (estimator, _) in methods(protocol).items()
    }


def error_curve(estimator, X, y, X_test, y_test, max_epochs, epochs_per_round):
    """Test error and cumulative fit seconds along one SGD run, read off between warm-started
    rounds of ``epochs_per_round`` epochs (the run is the same as one fit of ``max_epochs``
    epochs without the stopping rule: warm starts continue the schedule, the average and the
    random stream). Prediction time is not counted."""
    estimator.set_params(warm_start=True, max_iter=epochs_per_round, tol=None)
    curve, seconds = [], 0.0
    for epochs in range(epochs_per_round, max_epochs + 1, epochs_per_round):
        seconds += timed(estimator.fit, X, y)[1]
        error = 100 * mean_hamming_loss(y_test, estimator.predict(X_test))
        curve.append(dict(epochs=epochs, seconds=seconds, error=error))
    return curve


def time_to_match(curve, target):
    """First point of ``curve`` with error <= ``target``, and the first point after which the
    error stays <= ``target`` (None when never)."""
    first = next((point for point in curve if point["error"] <= target), None)
    stays = None
    for point in reversed(curve):
        if point["error"] > target:
            break
        stays = point
    return first, stays


def _in_solver(key):
    """Viterbi / max-marginal code: the MAP solver itself."""
    return key[0].endswith("_backend/viterbi.py")


def _in_oracle(key):
    """Entry points of the whole perturb-and-MAP oracle: drawing z, the perturbed potentials
    (``structure.potentials``) and the solver (its ``map`` / ``clamped_maps``)."""
    file, _, name = key
    return (
        (file.endswith("perturbation.py") and name in ("gumbel", "draw"))
        or (file.endswith("structures/_base.py") and name == "potentials")
        or (file.endswith("_backend/viterbi.py") and name in ("map", "clamped_maps"))
    )


def _share(stats, inside, total):
    """Time attributed to calls into ``inside`` code from outside it (no double counting)."""
    seconds = 0.0
    for key, (_, _, _, _, callers) in stats.items():
        if inside(key):
            seconds += sum(v[3] for caller, v in callers.items() if not inside(caller))
    return seconds / total


def oracle_share(estimator, X, y):
    """Shares of a profiled fit spent in the MAP solver and in the perturb-and-MAP oracle."""
    profiler = cProfile.Profile()
    _, total = timed(profiler.runcall, estimator.fit, X, y)
    stats = pstats.Stats(profiler).stats
    top = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:8]
    hot = [(f"{Path(k[0]).name}:{k[2]}", round(v[2], 2)) for k, v in top]
    return _share(stats, _in_solver, total), _share(stats, _in_oracle, total), total, hot


#: Epochs per round of the error curves (each runs the learner's epoch budget in the table).
CURVE_ROUNDS = {"perturb&MAP": 2, "marg. perturb&MAP": 5}


def match_crfsuite(X, y, X_test, y_test, fold, reference, target):
    """Time each perturb-and-MAP learner needs to reach crfsuite's error, from its error curve."""
    matches, learners = [], ours("large")
    for name, per_round in CURVE_ROUNDS.items():
        estimator = learners[name]
        curve = error_curve(estimator, X, y, X_test, y_test, estimator.max_iter, per_round)
        first, stays = time_to_match(curve, target)
        matches.append(dict(fold=fold, method=name, first=first, stays=stays, curve=curve))
        for label, point in (("first reaches", first), ("stays from", stays)):
            text = "never within the run"
            if point is not None:
                text = (
                    f"{point['seconds']:6.2f} s ({point['epochs']} epochs, {point['error']:.2f} %)"
                    f"  crfsuite/ours = {reference / point['seconds']:5.2f}"
                )
            print(f"fold {fold} large {name:<17} {label} {target:.2f} %: {text}", flush=True)
    return matches


def main():
    cli = parser(
        __doc__,
        "the small protocol only (the profiles on its training words)",
        data="letter.data(.gz) or its folder",
    )
    cli.add_argument("--folds", type=int, nargs="+", default=[0])
    cli.add_argument("--protocols", nargs="+", default=["small", "large"])
    args = cli.parse_args()
    run = Run(__file__, args.quick)
    if args.quick:
        args.protocols = ["small"]
    profiled = "small" if args.quick else "large"
    ocr = load_ocr(args.data)
    rows, matches = [], []
    for fold in args.folds:
        for protocol in args.protocols:
            train, test = split(ocr.folds, protocol, fold)
            X, y = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
            X_test, y_test = [ocr.data[i] for i in test], [ocr.target[i] for i in test]
            error, seconds = fit_crfsuite(X, y, X_test, y_test)
            rows.append(
                dict(
                    fold=fold,
                    protocol=protocol,
                    method="sklearn-crfsuite",
                    error=error,
                    seconds=seconds,
                    ratio=1.0,
                )
            )
            print(
                f"fold {fold} {protocol:<5} sklearn-crfsuite  {error:6.2f} %  {seconds:7.2f} s",
                flush=True,
            )
            reference, crfsuite_error = seconds, error
            for name, estimator in ours(protocol).items():
                error, seconds = fit_ours(estimator, X, y, X_test, y_test)
                rows.append(
                    dict(
                        fold=fold,
                        protocol=protocol,
                        method=name,
                        error=error,
                        seconds=seconds,
                        ratio=reference / seconds,
                    )
                )
                print(
                    f"fold {fold} {protocol:<5} {name:<17} {error:6.2f} %  {seconds:7.2f} s  "
                    f"crfsuite/ours = {reference / seconds:5.2f}",
                    flush=True,
                )
            if protocol == "large":
                matches += match_crfsuite(X, y, X_test, y_test, fold, reference, crfsuite_error)
    train, _ = split(ocr.folds, profiled, args.folds[0])
    X, y = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
    profiles, learners = {}, ours(profiled)
    for name in ("perturb&MAP", "marg. perturb&MAP"):
        solver, oracle, total, hot = oracle_share(learners[name], X, y)
        profiles[name] = dict(
            solver_share=solver, oracle_share=oracle, profiled_seconds=total, hottest=hot
        )
        print(
            f"profile {name}: {100 * solver:.0f} % of {total:.1f} s in the MAP solver, "
            f"{100 * oracle:.0f} % in the perturb-and-MAP oracle; hottest (own time): {hot}",
            flush=True,
        )
    lines = [
        "| fold | protocol | method | Hamming error % | fit s | crfsuite s / ours s |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['fold']} | {r['protocol']} | {r['method']} | {r['error']:.2f} | "
        f"{r['seconds']:.1f} | {r['ratio']:.2f} |"
        for r in rows
    ]
    lines += [
        "",
        "Time to reach sklearn-crfsuite's error (large protocol; error curve of one run read "
        "between warm-started rounds):",
        "",
        "| fold | method | first reaches: s (epochs, error %) | stays from: s (epochs, error %) "
        "| crfsuite s / ours s (stays) |",
        "|---|---|---|---|---|",
    ]
    reference = {
        r["fold"]: r["seconds"]
        for r in rows
        if r["method"] == "sklearn-crfsuite" and r["protocol"] == "large"
    }
    for match in matches:
        cells = [
            "never" if p is None else f"{p['seconds']:.1f} ({p['epochs']}, {p['error']:.2f})"
            for p in (match["first"], match["stays"])
        ]
        ratio = (
            "—"
            if match["stays"] is None
            else f"{reference[match['fold']] / match['stays']['seconds']:.2f}"
        )
        lines.append(f"| {match['fold']} | {match['method']} | {cells[0]} | {cells[1]} | {ratio} |")
    lines += [
        "",
        f"Oracle share of the fit (cProfile, {profiled} protocol, fold {args.folds[0]}):",
        "",
    ]
    lines += [
        f"- {k}: MAP solver {100 * v['solver_share']:.0f} %, perturb-and-MAP oracle (draw z, "
        f"perturbed potentials, solver) {100 * v['oracle_share']:.0f} % of "
        f"{v['profiled_seconds']:.1f} s (profiled); hottest by own time: {v['hottest']}"
        for k, v in profiles.items()
    ]
    notes = run.notes(
        *([f"--folds {' '.join(map(str, args.folds))}"] if args.folds != [0] else []),
        *(
            [f"--protocols {' '.join(args.protocols)}"]
            if args.protocols != ["small", "large"] and not args.quick
            else []
        ),
    )
    lines += ["", rerun(notes)]
    text = "\n".join(lines)
    print(text)
    payload = dict(rows=rows, matches=matches, profiles=profiles, run=notes)
    run.save("ocr_speed", text + "\n", payload)


if __name__ == "__main__":
    main()
