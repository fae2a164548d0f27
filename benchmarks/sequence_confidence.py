"""Sequence confidence on CoNLL-2002 Spanish (testb): is the probability of a sentence's
predicted tag sequence calibrated, and does it rank the sentences tagged right as a whole?

A sentence is right when its predicted tags equal the gold tags everywhere. Confidences:

- ``inspection.sequence_probabilities``: the probability the model gives the predicted sequence
  — by default the frequency of the sequence over 1,000 draws of ``sample`` (perturbed MAPs,
  the distribution both learners are fitted to); for ``PerturbMAPCRF`` also with
  ``method="exact"``, :math:`\\exp(f(y) - \\log Z)` by forward-backward under its weights;
- the token-marginal heuristics: the product of the tokens' top marginals (the probability if
  the tags were independent) and their minimum (the least sure token).

Scores: expected calibration error over 15 equal-width bins (``metrics.reliability_curve``), the
area under the ROC curve of the confidence as a detector of right sentences, the mean confidence
and the fraction of sentences right. Every model with its defaults (``random_state=0``),
trained on train.

Run: ``python benchmarks/sequence_confidence.py [--quick]`` (about 3 minutes); writes
``docs/results/sequence_confidence.{md,json}`` (``--quick``: the first 2,000 training and 500
testb sentences, 100 draws, written to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from _tagging import feature_dicts, first
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline

BINS = 15
N_DRAWS = 1000
#: ``--quick``: the first sentences of each split, and the draws.
QUICK = dict(train=2000, testb=500, draws=100)


def scores(confidence, right) -> dict:
    from pmap_sklearn.metrics import expected_calibration_error, reliability_curve

    curve = reliability_curve(right, confidence, n_bins=BINS)
    return dict(
        ece=expected_calibration_error(right, confidence, n_bins=BINS),
        auc=float(roc_auc_score(right, confidence)),
        mean_confidence=float(np.mean(confidence)),
        right=float(np.mean(right)),
        zero=int(np.sum(confidence == 0)),
        sentences=len(right),
        curve=dict(
            count=curve.count.tolist(),
            confidence=[None if np.isnan(c) else float(c) for c in curve.confidence],
            accuracy=[None if np.isnan(a) else float(a) for a in curve.accuracy],
        ),
    )


def main():
    from pmap_sklearn import MarginalPerturbMAPCRF, PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_conll2002
    from pmap_sklearn.inspection import sequence_probabilities

    quick = "the first 2,000 training and 500 testb sentences, 100 draws"
    args = parser(__doc__, quick).parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, args.quick)
    n_draws = QUICK["draws"] if args.quick else N_DRAWS
    train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
    if args.quick:
        train, test = first(train, QUICK["train"]), first(test, QUICK["testb"])
    train_dicts, test_dicts = feature_dicts(train.tokens), feature_dicts(test.tokens)
    rows = []
    for name, learner in (
        ("PerturbMAPCRF", PerturbMAPCRF(random_state=0)),
        ("MarginalPerturbMAPCRF", MarginalPerturbMAPCRF(random_state=0)),
    ):
        model = make_pipeline(SequenceVectorizer(), learner).fit(train_dicts, train.tags)
        predicted = model.predict(test_dicts)
        right = np.array(
            [np.array_equal(p, np.asarray(g)) for p, g in zip(predicted, test.tags, strict=True)]
        )
        confidences = {}
        methods = (
            {"default": None}
            if name.startswith("Marginal")
            else {"default": None, "method='exact'": "exact"}
        )
        for label, method in methods.items():
            probability, seconds = timed(
                sequence_probabilities,
                model,
                test_dicts,
                method=method,
                n_draws=n_draws,
                random_state=0,
            )
            how = "exact" if method == "exact" else f"{n_draws:,} perturbed MAPs"
            confidences[f"sequence_probabilities, {label} ({how}, {seconds:.1f} s)"] = probability
        top = [m.max(axis=1) for m in model.predict_proba(test_dicts)]
        confidences["product of the top token marginals"] = np.array([t.prod() for t in top])
        confidences["smallest top token marginal"] = np.array([t.min() for t in top])
        for what, confidence in confidences.items():
            rows.append(dict(model=name, confidence=what, **scores(confidence, right)))
            r = rows[-1]
            print(
                f"{name:<22} {what:<45} ECE {r['ece']:.3f}  AUC {r['auc']:.3f}  "
                f"confidence {r['mean_confidence']:.3f}  right {r['right']:.3f}  "
                f"zeros {r['zero']}",
                flush=True,
            )
    notes = run.notes()
    lines = [
        "# Sequence confidence: CoNLL-2002 Spanish (testb)",
        "",
        "Each sentence's confidence in its predicted tag sequence against "
        f"whether the whole sequence is right; ECE over {BINS} bins, AUC of the confidence as a "
        "detector of right sentences; sentences given confidence 0. Models with their defaults.",
        "",
        "| model | confidence | ECE | AUC | mean confidence | right | zeros | sentences |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['confidence']} | {r['ece']:.3f} | {r['auc']:.3f} | "
            f"{r['mean_confidence']:.3f} | {r['right']:.3f} | {r['zero']} | "
            f"{r['sentences']:,} |"
        )
    lines += ["", rerun(notes)]
    run.publish(
        "sequence_confidence",
        lines,
        dict(load=run.load, minutes=notes["minutes"], run=notes, bins=BINS, rows=rows),
    )


if __name__ == "__main__":
    main()
