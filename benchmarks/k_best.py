"""k-best labellings on CoNLL-2002 Spanish (testb): the time of
``inspection.k_best_labellings`` for k = 1, 5 and 20 against ``predict``.

One ``PerturbMAPCRF`` with its defaults (``random_state=0``) is trained on train; on every
testb sentence it gives the k most probable tag sequences exactly with ``method="exact"`` (list
Viterbi under its weights, and log Z by forward-backward for the probabilities) and, with its
default (the distribution it is fitted to), the distinct labellings of 1,000 perturbed MAPs
ranked by frequency. Each row: the wall seconds (best of 3 for the exact rows, one call for the
draws) and their ratio to ``predict``'s, whether every first labelling is ``predict``'s MAP, the
mean probability of the first and second labellings and the mean sum of the listed ones. The
sentences are vectorised once, outside the timings.

Run: ``python benchmarks/k_best.py [--quick]`` (about 2 minutes); writes
``docs/results/k_best.{md,json}`` (``--quick``: the first 2,000 training and 300 testb
sentences, 100 draws, written to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from _tagging import PREDICT_REPEATS, feature_dicts, first
from sklearn.exceptions import ConvergenceWarning

KS = (1, 5, 20)
N_DRAWS = 1000
#: ``--quick``: the first sentences of each split, and the draws.
QUICK = dict(train=2000, testb=300, draws=100)


def summary(labellings, probabilities, predicted) -> dict:
    """Whether each first labelling is the MAP, and the mean probabilities of the list."""
    second = [p[1] if len(p) > 1 else 0.0 for p in probabilities]
    return dict(
        first_is_map=bool(
            all(np.array_equal(lab[0], p) for lab, p in zip(labellings, predicted, strict=True))
        ),
        first=float(np.mean([p[0] for p in probabilities])),
        second=float(np.mean(second)),
        listed=float(np.mean([p.sum() for p in probabilities])),
        mean_length=float(np.mean([len(p) for p in probabilities])),
    )


def main():
    from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_conll2002
    from pmap_sklearn.inspection import k_best_labellings

    quick = "the first 2,000 training and 300 testb sentences, 100 draws"
    args = parser(__doc__, quick).parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, args.quick)
    n_draws = QUICK["draws"] if args.quick else N_DRAWS
    train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
    if args.quick:
        train, test = first(train, QUICK["train"]), first(test, QUICK["testb"])
    vectorizer = SequenceVectorizer()
    X_train = vectorizer.fit_transform(feature_dicts(train.tokens))
    X_test = vectorizer.transform(feature_dicts(test.tokens))
    model = PerturbMAPCRF(random_state=0).fit(X_train, train.tags)
    predicted, predict_seconds = timed(model.predict, X_test, repeat=PREDICT_REPEATS)
    rows = [dict(query="predict", k=None, seconds=predict_seconds, ratio=1.0)]
    cases = [(k, "exact") for k in KS] + [(5, None)]
    for k, method in cases:
        repeat = PREDICT_REPEATS if method == "exact" else 1
        (labellings, probabilities), seconds = timed(
            k_best_labellings,
            model,
            X_test,
            k,
            method=method,
            n_draws=n_draws,
            random_state=0,
            repeat=repeat,
        )
        how = "method='exact'" if method else f"default ({n_draws:,} perturbed MAPs)"
        rows.append(
            dict(
                query=f"k_best_labellings, {how}",
                k=k,
                seconds=seconds,
                ratio=seconds / predict_seconds,
                **summary(labellings, probabilities, predicted),
            )
        )
        r = rows[-1]
        print(
            f"{r['query']:<50} k={k:<3} {seconds:7.2f} s  {r['ratio']:6.1f}x predict  "
            f"first=MAP {r['first_is_map']}  P1 {r['first']:.3f}  P2 {r['second']:.3f}  "
            f"listed {r['listed']:.3f}",
            flush=True,
        )
    notes = run.notes()
    lines = [
        "# k-best labellings: CoNLL-2002 Spanish (testb)",
        "",
        f"The k most probable tag sequences of the {len(X_test):,} testb sentences of a "
        "`PerturbMAPCRF` with its defaults, against `predict` (the same model, one call over "
        "all the sentences; seconds on the same run). P(1st), P(2nd): the mean probability of "
        "the first and second labellings; listed: the mean sum of the probabilities listed.",
        "",
        "| query | k | seconds | × predict | 1st = MAP | P(1st) | P(2nd) | listed |",
        "|---|---|---|---|---|---|---|---|",
        f"| predict | | {predict_seconds:.2f} | 1.0 | | | | |",
    ]
    for r in rows[1:]:
        lines.append(
            f"| {r['query']} | {r['k']} | {r['seconds']:.2f} | {r['ratio']:.1f} | "
            f"{'yes' if r['first_is_map'] else 'no'} | {r['first']:.3f} | "
            f"{'' if r['k'] == 1 else format(r['second'], '.3f')} | {r['listed']:.3f} |"
        )
    lines += ["", rerun(notes)]
    run.publish(
        "k_best",
        lines,
        dict(load=run.load, minutes=notes["minutes"], run=notes, n_draws=n_draws, rows=rows),
    )


if __name__ == "__main__":
    main()
