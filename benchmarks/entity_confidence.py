"""Entity confidence on CoNLL-2002 Spanish (testb): how well calibrated, and how useful for
keeping the entities a model is sure of.

Each predicted entity (conlleval's reading of the predicted tags) gets a confidence and is right
when the gold tags hold the same entity (type, start, end). Confidences:

- ``entity_probabilities``: the probability the model gives the entity with its tags. With its
  defaults, the frequency of the entity over perturbed MAP labellings for the perturb-and-MAP
  learners (the distribution their training fits), each sentence drawn until its entities'
  standard errors are at most ``tol=0.03`` or it has 1,000 draws (for seed 0 also with
  ``tol=0``: 1,000 draws of every sentence, the default of earlier versions); ``method="exact"`` for
  ``PerturbMAPCRF``: the Gibbs distribution of its weights, exact by constrained
  forward-backward (the default of earlier versions, and the default after
  ``calibrate_marginals``, whose temperature is fitted for those marginals);
- the token-marginal heuristics users apply to crfsuite: the mean, and the product, of the
  predicted tags' marginals over the entity's tokens (the default marginals: exact for
  ``PerturbMAPCRF``) — for the same models and for sklearn-crfsuite's tutorial model (c1 = c2 =
  0.1, 100 iterations) with its marginals.

Scores: expected calibration error of the confidence (15 equal-width bins,
:func:`~pmap_sklearn.metrics.expected_calibration_error`), and the precision of the entities
kept when only the most confident 80 % are kept (selective prediction), beside the precision
of all of them. Every model with its defaults (``random_state=0``; the defaults of
``PerturbMAPCRF`` with seeds 1 and 2 too), trained on train; the one temperature is fitted on
testa, never on testb. The reliability diagram (10 bins) of ``PerturbMAPCRF``'s entity
probabilities, perturbed MAPs against exact, shows where they are over-confident.

Run: ``python benchmarks/entity_confidence.py [--quick]`` (about 10 minutes; sklearn-crfsuite
rows need the benchmark extras); writes ``docs/results/entity_confidence.{md,json}``
(``--quick``: the first 2,000 training sentences, 500 of testa and testb, written to a temporary
folder).
"""

import inspect
import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from _tagging import feature_dicts, first
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

COVERAGE = 0.8
BINS = 15
#: ``--quick``: the first sentences of each split.
QUICK = dict(train=2000, testa=500, testb=500)


def heuristics(predicted, marginals, classes):
    """Mean and product of the predicted tags' marginals over each predicted entity."""
    from pmap_sklearn.metrics import entity_spans

    index = {c: i for i, c in enumerate(classes)}
    mean, product = [], []
    for tags, marginal in zip(predicted, marginals, strict=True):
        at_tag = marginal[np.arange(len(tags)), [index[t] for t in tags]]
        for _, start, end in entity_spans(list(tags)):
            mean.append(at_tag[start:end].mean())
            product.append(at_tag[start:end].prod())
    return np.array(mean), np.array(product)


def correctness(predicted, truth):
    from pmap_sklearn.metrics import entity_spans

    right = []
    for tags, gold in zip(predicted, truth, strict=True):
        gold_set = set(entity_spans(list(gold)))
        right += [span in gold_set for span in entity_spans(list(tags))]
    return np.array(right, dtype=float)


def scores(confidence, right) -> dict:
    from pmap_sklearn.metrics import expected_calibration_error

    kept = np.argsort(-confidence, kind="stable")[: int(round(COVERAGE * len(confidence)))]
    return dict(
        ece=expected_calibration_error(right, confidence, n_bins=BINS),
        precision_at_coverage=float(right[kept].mean()),
        precision=float(right.mean()),
        entities=len(right),
    )


def main():
    from pmap_sklearn import MarginalPerturbMAPCRF, PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_conll2002
    from pmap_sklearn.inspection import entity_probabilities
    from pmap_sklearn.metrics import reliability_curve

    TOL = inspect.signature(entity_probabilities).parameters["tol"].default  # noqa: N806
    args = parser(
        __doc__, "the first 2,000 training sentences, 500 of testa and testb"
    ).parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, args.quick)
    train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
    if args.quick:
        train, test = first(train, QUICK["train"]), first(test, QUICK["testb"])
    train_dicts, test_dicts = feature_dicts(train.tokens), feature_dicts(test.tokens)
    rows, curves = [], {}

    def add(model, confidence_name, confidence, right):
        rows.append(dict(model=model, confidence=confidence_name, **scores(confidence, right)))
        print(rows[-1], flush=True)

    def probabilities(model, method=None, **draws):
        found, seconds = timed(
            entity_probabilities, model, test_dicts, method=method, random_state=0, **draws
        )
        return np.array([p for sentence in found for *_, p in sentence]), seconds

    dev = load_conll2002("esp", "testa")
    if args.quick:
        dev = first(dev, QUICK["testa"])
    for name, learner in (
        ("PerturbMAPCRF", PerturbMAPCRF(random_state=0)),
        ("PerturbMAPCRF, temperature fitted on testa", PerturbMAPCRF(random_state=0)),
        ("MarginalPerturbMAPCRF", MarginalPerturbMAPCRF(random_state=0)),
        ("PerturbMAPCRF, random_state=1", PerturbMAPCRF(random_state=1)),
        ("PerturbMAPCRF, random_state=2", PerturbMAPCRF(random_state=2)),
    ):
        model = make_pipeline(SequenceVectorizer(), learner).fit(train_dicts, train.tags)
        if "temperature" in name:  # temperature scaling of the marginals on the tuning split
            model[-1].calibrate_marginals(model[0].transform(feature_dicts(dev.tokens)), dev.tags)
        predicted = list(model.predict(test_dicts))
        right = correctness(predicted, test.tags)
        probability, seconds = probabilities(model)
        how = "exact" if "temperature" in name else f"perturbed MAPs to tol={TOL}"
        add(name, f"entity_probabilities ({how}, {seconds:.1f} s)", probability, right)
        if name.startswith("PerturbMAPCRF") and "temperature" not in name:
            curves[name] = {"perturbed MAPs": (probability, right)}
            default_seconds = seconds
            probability, seconds = probabilities(model, method="exact")
            curves[name]["exact"] = (probability, right)
            ratio = default_seconds / seconds
            how = f"method='exact' ({seconds:.1f} s; the default takes {ratio:.1f}×)"
            add(name, f"entity_probabilities, {how}", probability, right)
            if name == "PerturbMAPCRF":  # the fixed draws of earlier versions
                probability, seconds = probabilities(model, tol=0)
                how = f"tol=0: 1,000 perturbed MAPs, {seconds:.1f} s"
                add(name, f"entity_probabilities ({how})", probability, right)
        if "random_state" in name:
            continue
        mean, product = heuristics(
            predicted, list(model.predict_proba(test_dicts)), model[-1].classes_
        )
        add(name, "mean of the token marginals", mean, right)
        add(name, "product of the token marginals", product, right)

    try:
        from _tagging import crfsuite_tutorial_model  # sklearn-crfsuite, when installed

        crf = crfsuite_tutorial_model().fit(train_dicts, train.tags)
    except ImportError:
        print("sklearn-crfsuite is not installed: its rows are left out")
    else:
        predicted = crf.predict(test_dicts)
        right = correctness(predicted, test.tags)
        classes = sorted(crf.classes_)
        marginals = [
            np.array([[token[c] for c in classes] for token in sentence])
            for sentence in crf.predict_marginals(test_dicts)
        ]
        mean, product = heuristics(predicted, marginals, classes)
        add("sklearn-crfsuite", "mean of the token marginals", mean, right)
        add("sklearn-crfsuite", "product of the token marginals", product, right)

    notes = run.notes()
    lines = [
        "# Entity confidence: CoNLL-2002 Spanish (testb)",
        "",
        "Each predicted entity's confidence against whether the gold tags "
        f"hold it; ECE over {BINS} bins; precision of the {COVERAGE:.0%} most confident "
        "entities and of all. Models with their defaults (seed 0 unless named); the one "
        "temperature is fitted on testa.",
        "",
        f"| model | confidence | ECE | precision at {COVERAGE:.0%} coverage | precision | "
        "entities |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['confidence']} | {r['ece']:.3f} | "
            f"{r['precision_at_coverage']:.4f} | {r['precision']:.4f} | {r['entities']:,} |"
        )
    lines += [
        "",
        "Reliability of PerturbMAPCRF's entity probabilities (seed 0; 10 bins): entities, "
        "mean confidence and fraction right per bin, perturbed MAPs (the default) / exact.",
        "",
        "| bin | entities | confidence | right |",
        "|---|---|---|---|",
    ]
    reliability = {}
    for method, (probability, right) in curves["PerturbMAPCRF"].items():
        curve = reliability_curve(right.astype(bool), probability, n_bins=10)
        reliability[method] = {
            key: curve[key].tolist() for key in ("count", "confidence", "accuracy")
        }
    default, exact = reliability["perturbed MAPs"], reliability["exact"]
    for b in range(10):
        cells = [
            " / ".join(
                "–" if not r["count"][b] else fmt.format(r[key][b]) for r in (default, exact)
            )
            for key, fmt in (("count", "{:,}"), ("confidence", "{:.3f}"), ("accuracy", "{:.3f}"))
        ]
        lines.append(f"| {b / 10:.1f}–{(b + 1) / 10:.1f} | " + " | ".join(cells) + " |")
    lines += ["", rerun(notes)]
    run.publish(
        "entity_confidence",
        lines,
        dict(
            load=run.load, minutes=notes["minutes"], run=notes, rows=rows, reliability=reliability
        ),
    )


if __name__ == "__main__":
    main()
