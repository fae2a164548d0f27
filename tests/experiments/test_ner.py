"""A small named-entity task: model selection, marginals and class weights through a pipeline."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from pmap_sklearn import ChainCRF, PerturbMAPCRF, SequenceVectorizer, StructuredSVM
from pmap_sklearn.datasets import token_features
from pmap_sklearn.metrics import entity_f1_scorer, flat_f1_scorer

from ..helpers import _ner_corpus


# ---- a small NER task ---------------------------------------------------------------------------
def test_scorers_work_in_model_selection():
    sentences, tags = _ner_corpus(60)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    search = GridSearchCV(
        pipe,
        {"perturbmapcrf__alpha": [1e-4, 1e-2]},
        cv=2,
        scoring={"entity": entity_f1_scorer, "flat": flat_f1_scorer},
        refit="entity",
    ).fit(sentences, tags)
    assert search.best_score_ > 0.9
    assert np.all(np.isfinite(search.cv_results_["mean_test_flat"]))


def test_pipeline_gives_marginals_as_arrays_and_dicts():
    sentences, tags = _ner_corpus(80)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    pipe.fit(sentences, tags)
    model = pipe[-1]
    arrays = pipe.predict_proba(sentences[:3])
    exact = model.predict_marginals(pipe[0].transform(sentences[:3]), method="exact")
    for a, b in zip(arrays, exact, strict=True):  # exact marginals by default on chains
        np.testing.assert_allclose(a, b)
    dicts = pipe.predict_proba(sentences[:3], as_dicts=True)
    assert [len(d) for d in dicts] == [len(s) for s in sentences[:3]]
    first = dicts[0][0]
    assert list(first) == model.classes_.tolist()
    assert sum(first.values()) == pytest.approx(1.0)
    np.testing.assert_allclose(list(first.values()), arrays[0][0])
    perturbed = pipe.predict_proba(sentences[:1], method="perturb", n_perturbations=10)
    assert np.all(np.isin(np.round(perturbed[0] * 10, 9) % 1, [0.0]))  # frequencies of 10
    # a learner without marginals has no predict_proba: the pipeline says so too
    svm = make_pipeline(SequenceVectorizer(token_features), StructuredSVM(max_iter=2))
    assert not hasattr(svm.fit(sentences, tags), "predict_proba")
    assert hasattr(ChainCRF(), "predict_proba")


def test_class_weight_balances_the_tags():
    sentences, tags = _ner_corpus(60)
    vectorizer = SequenceVectorizer(token_features)
    X = vectorizer.fit_transform(sentences)
    model = PerturbMAPCRF(class_weight="balanced", random_state=0, max_iter=2).fit(X, tags)
    flat = np.concatenate(tags)
    counts = {c: np.sum(flat == c) for c in model.classes_}
    expected = np.array([len(flat) / (len(counts) * counts[c]) for c in model.classes_])
    np.testing.assert_allclose(model._label_weights, expected)
    with pytest.raises(ValueError, match="not classes"):
        PerturbMAPCRF(class_weight={"B-XYZ": 2.0}).fit(X, tags)
    # a dict weighs the rare tags up: more of them are predicted
    rare = {c: 5.0 for c in model.classes_ if c != "O"}
    up = PerturbMAPCRF(class_weight=rare, random_state=0, max_iter=2).fit(X, tags)
    base = PerturbMAPCRF(random_state=0, max_iter=2).fit(X, tags)
    assert np.sum(np.concatenate(up.predict(X)) != "O") >= np.sum(
        np.concatenate(base.predict(X)) != "O"
    )
