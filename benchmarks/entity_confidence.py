"""Entity confidence on CoNLL-2002 Spanish (testb): how well calibrated, and how useful for
keeping the entities a model is sure of.

Each predicted entity (conlleval's reading of the predicted tags) gets a confidence and is right
when the gold tags hold the same entity (type, start, end). Confidences:

- ``entity_probabilities``: the probability the model gives the entity with its tags — exact by
  constrained forward-backward for ``PerturbMAPCRF`` (its default marginals on chains are the
  exact ones), a frequency over draws for ``MarginalPerturbMAPCRF``;
- the token-marginal heuristics users apply to crfsuite: the mean, and the product, of the
  predicted tags' marginals over the entity's tokens — for the same models and for
  sklearn-crfsuite's tutorial model (c1 = c2 = 0.1, 100 iterations) with its marginals.

Scores: expected calibration error of the confidence (15 equal-width bins), and the precision of
the entities kept when only the most confident 80 % are kept (selective prediction), beside the
precision of all of them. Every model with its defaults (``random_state=0``), trained on train.

Run: ``python benchmarks/entity_confidence.py`` (about 3 minutes; sklearn-crfsuite rows need the
benchmark extras); writes ``docs/results/entity_confidence.{md,json}``.
"""

import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
COVERAGE = 0.8
BINS = 15


def dicts_of(sentences):
    from pmap_sklearn.datasets import token_features

    return [[dict(token_features(s, i), bias=1.0) for i in range(len(s))] for s in sentences]


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
    which = np.minimum((confidence * BINS).astype(int), BINS - 1)
    ece = sum(
        abs(right[which == b].mean() - confidence[which == b].mean()) * np.mean(which == b)
        for b in range(BINS)
        if np.any(which == b)
    )
    kept = np.argsort(-confidence, kind="stable")[: int(round(COVERAGE * len(confidence)))]
    return dict(
        ece=float(ece),
        precision_at_coverage=float(right[kept].mean()),
        precision=float(right.mean()),
        entities=len(right),
    )


def main():
    from pmap_sklearn import MarginalPerturbMAPCRF, PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_conll2002
    from pmap_sklearn.inspection import entity_probabilities

    warnings.simplefilter("ignore", ConvergenceWarning)
    load, started = os.getloadavg(), time.perf_counter()
    train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
    train_dicts, test_dicts = dicts_of(train.tokens), dicts_of(test.tokens)
    rows = []

    def add(model, confidence_name, confidence, right):
        rows.append(dict(model=model, confidence=confidence_name, **scores(confidence, right)))
        print(rows[-1], flush=True)

    dev = load_conll2002("esp", "testa")
    for name, learner in (
        ("PerturbMAPCRF", PerturbMAPCRF(random_state=0)),
        ("PerturbMAPCRF, temperature fitted on testa", PerturbMAPCRF(random_state=0)),
        ("MarginalPerturbMAPCRF", MarginalPerturbMAPCRF(random_state=0)),
    ):
        model = make_pipeline(SequenceVectorizer(), learner).fit(train_dicts, train.tags)
        if "temperature" in name:  # temperature scaling of the marginals on the tuning split
            model[-1].calibrate_marginals(model[0].transform(dicts_of(dev.tokens)), dev.tags)
        predicted = list(model.predict(test_dicts))
        right = correctness(predicted, test.tags)
        start = time.perf_counter()
        exact = entity_probabilities(model, test_dicts, random_state=0)
        seconds = time.perf_counter() - start
        probability = np.array([p for sentence in exact for *_, p in sentence])
        how = "1,000 draws" if name.startswith("Marginal") else "exact"
        add(name, f"entity_probabilities ({how}, {seconds:.1f} s)", probability, right)
        mean, product = heuristics(
            predicted, list(model.predict_proba(test_dicts)), model[-1].classes_
        )
        add(name, "mean of the token marginals", mean, right)
        add(name, "product of the token marginals", product, right)

    try:
        from _tagging import crfsuite_tutorial_model

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

    minutes = (time.perf_counter() - started) / 60
    lines = [
        "# Entity confidence: CoNLL-2002 Spanish (testb)",
        "",
        f"`python benchmarks/entity_confidence.py` ({minutes:.1f} min, load average "
        f"{load[0]:.1f}). Each predicted entity's confidence against whether the gold tags "
        f"hold it; ECE over {BINS} bins; precision of the {COVERAGE:.0%} most confident "
        "entities and of all. Models with their defaults.",
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
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "entity_confidence.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "entity_confidence.json").write_text(
        json.dumps(dict(load=load, minutes=minutes, rows=rows), indent=1)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
