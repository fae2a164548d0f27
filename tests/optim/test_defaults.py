"""What the learners' "auto" settings resolve to."""

import itertools

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from pmap_sklearn import (
    ChainCRF,
    PerturbMAPCRF,
    SequenceVectorizer,
    StructuredSVM,
    crfsuite_penalty,
)
from pmap_sklearn._optim import defaults
from pmap_sklearn.datasets import token_features
from pmap_sklearn.learners import _sgd_learner
from pmap_sklearn.metrics import entity_f1_score

from ..helpers import _ner_corpus, _sparse_and_dense


def test_defaults_resolve_from_sparse_features():
    sentences, tags = _ner_corpus(120)
    model = PerturbMAPCRF(random_state=0)
    pipe = make_pipeline(SequenceVectorizer(token_features), model).fit(sentences, tags)
    batch = model.structure_.prepare(pipe[0].transform(sentences))
    settings = model._settings(batch)
    assert (settings.learning_rate, settings.batch_size, settings.max_iter, settings.tol) == (
        "adagrad",
        24,  # n // 5 below the cap of 32
        8,
        None,
    )
    assert settings.average == 120 * 4  # the second half of the epochs
    assert settings.alpha == pytest.approx(0.2 / 120)  # crfsuite's c2 = 0.1, per sample
    assert model.n_iter_ == 8
    test_sentences, test_tags = _ner_corpus(60, seed=1)
    assert entity_f1_score(test_tags, list(pipe.predict(test_sentences))) > 0.95
    stopping = PerturbMAPCRF(early_stopping=True).set_params(structure=model.structure)
    stopping.structure_ = model.structure_
    assert stopping._settings(batch).tol == 1e-3  # a stopping rule on the validation score
    dense = PerturbMAPCRF(random_state=0)
    X = [np.eye(3)[np.arange(4) % 3] for _ in range(10)]
    dense.fit(X, [np.arange(4) % 3] * 10)
    assert dense._settings(dense.structure_.prepare(X)).learning_rate == "optimal"
    assert dense._settings(dense.structure_.prepare(X)).average is True


def test_every_auto_parameter_is_validated():
    X, y = [np.eye(2)[[0, 1]]] * 4, [[0, 1]] * 4
    for name, bad in itertools.product(["learning_rate", "average", "tol", "max_iter"], ["fast"]):
        with pytest.raises(ValueError, match=name):
            PerturbMAPCRF(**{name: bad}).fit(X, y)


def test_sparse_features_judge_the_step_size_on_held_out_sentences(monkeypatch):
    """``eta0="auto"`` on sparse token features: each candidate step's pass is judged on
    sentences it did not pass over (the pass's own reward memorising their rare words); dense
    features keep the search judged on the pass's samples."""
    searches = []
    search = _sgd_learner.calibrate_eta0

    def recorded(*args, **kwargs):
        searches.append(kwargs)
        return search(*args, **kwargs)

    monkeypatch.setattr(_sgd_learner, "calibrate_eta0", recorded)
    chains, dense, tags = _sparse_and_dense()
    on_sparse = PerturbMAPCRF(random_state=0, max_iter=2).fit(chains, tags)
    on_dense = PerturbMAPCRF(random_state=0, max_iter=2).fit(dense, tags)
    assert searches[0]["held_out"] == defaults.SPARSE_STEP_SEARCH["held_out"] > 0
    assert "held_out" not in searches[1]
    assert on_sparse.eta0_ > 0 and on_dense.eta0_ > 0


def test_baselines_resolve_auto_from_what_the_features_are():
    """``alpha="auto"`` (and the S-SVM's ``batch_size`` / ``max_iter``) on sparse token
    features is crfsuite's ``c2 = 0.1`` over the samples, mini-batches of 16 and 10 passes
    (ChainCRF: crfsuite's ``c1 = c2 = 0.1``, observed states, 100 iterations); on dense
    features the classes' former defaults. The fits are those of the settings."""
    chains, dense, tags = _sparse_and_dense(40, seed=1)
    n = len(chains)
    crf = ChainCRF().fit(chains, tags)
    alpha, l1_ratio = crfsuite_penalty(0.1, 0.1, n)
    assert (crf.alpha_, crf.l1_ratio_) == (pytest.approx(alpha), pytest.approx(l1_ratio))
    assert crf.all_possible_states_ is False
    explicit = ChainCRF(alpha=alpha, l1_ratio=l1_ratio, all_possible_states=False, max_iter=100)
    np.testing.assert_array_equal(crf.coef_, explicit.fit(chains, tags).coef_)
    on_dense = ChainCRF(max_iter=2).fit(dense, tags)
    assert (on_dense.alpha_, on_dense.l1_ratio_, on_dense.all_possible_states_) == (1e-4, 0, True)
    assert ChainCRF(l1_ratio=0.0).fit(chains, tags).alpha_ == alpha

    svm = StructuredSVM(random_state=0, tol=0.0).fit(chains, tags)
    assert (svm.alpha_, svm.batch_size_, svm.n_iter_) == (pytest.approx(0.2 / n), 16, 10)
    same = StructuredSVM(random_state=0, tol=0.0, alpha=0.2 / n, batch_size=16, max_iter=10)
    np.testing.assert_array_equal(svm.coef_, same.fit(chains, tags).coef_)
    on_dense = StructuredSVM(random_state=0, tol=0.0).fit(dense, tags)
    assert (on_dense.alpha_, on_dense.batch_size_, on_dense.n_iter_) == (1e-3, 1, 50)
    pegasos = StructuredSVM(algorithm="subgradient", random_state=0).fit(chains, tags)
    assert (pegasos.alpha_, pegasos.batch_size_, pegasos.n_iter_) == (svm.alpha_, 16, 10)
