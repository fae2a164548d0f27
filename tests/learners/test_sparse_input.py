"""Sparse = dense: every estimator that takes sparse features predicts the same from a sparse
``X`` as from its dense form, whichever container it was fitted on."""

import inspect
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression

import pmap_sklearn
from pmap_sklearn import ChainCRF, ChainStructure, MultiLabelStructure, TwoStageCRF

from ..helpers import _sparse_and_dense


def _structured_learners() -> list[str]:
    """The public estimators that take a structure (every one of them takes sparse features)."""
    return sorted(
        name
        for name in pmap_sklearn.__all__
        if inspect.isclass(getattr(pmap_sklearn, name))
        and "structure" in inspect.signature(getattr(pmap_sklearn, name)).parameters
    )


LEARNERS = _structured_learners()


def _make(name, structure):
    cls = getattr(pmap_sklearn, name)
    seeded = {"random_state": 0} if "random_state" in cls().get_params() else {}
    return cls(structure, **seeded)


def _assert_same_predictions(model, dense, as_sparse):
    """``predict`` (and ``decoding="marginal"``), ``predict_marginals`` and ``predict_proba``
    from both containers."""
    decodings = ["map", "marginal"] if "decoding" in model.get_params() else [None]
    for decoding in decodings:
        if decoding is not None:
            model.set_params(decoding=decoding)
        for got, expected in zip(model.predict(as_sparse), model.predict(dense), strict=True):
            np.testing.assert_array_equal(got, expected)
    probabilistic = bool(getattr(model, "_marginal_methods", True))  # not StructuredSVM
    for query in ("predict_marginals", "predict_proba"):
        if probabilistic and hasattr(model, query):
            got, expected = getattr(model, query)(as_sparse), getattr(model, query)(dense)
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_every_structured_learner_is_covered():
    assert len(LEARNERS) >= 10 and "ChainCRF" in LEARNERS and "StructuredSVM" in LEARNERS


@pytest.mark.parametrize("fitted_on", ["dense", "csr"])
@pytest.mark.parametrize("name", LEARNERS)
def test_multi_label_sparse_x_predicts_as_dense(name, fitted_on):
    """A dense-fitted model centres X on ``feature_mean_`` whatever its container: CSR and COO
    give the dense predictions, marginals and probabilities."""
    X, Y = make_multilabel_classification(n_samples=60, n_classes=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fits: convergence is not the point
        model = _make(name, MultiLabelStructure("tree"))
        model.fit(X if fitted_on == "dense" else sparse.csr_matrix(X), Y)
    if fitted_on == "dense":
        assert np.abs(model.structure_.feature_mean_).max() > 0.1  # the centring is at stake
    for container in (sparse.csr_matrix, sparse.coo_matrix):
        _assert_same_predictions(model, X, container(X))


@pytest.mark.parametrize("fitted_on", ["dense", "csr"])
@pytest.mark.parametrize("name", LEARNERS + ["TwoStageCRF"])
def test_sparse_chains_predict_as_dense(name, fitted_on):
    chains, dense, tags = _sparse_and_dense(30)
    if name == "TwoStageCRF":
        model = TwoStageCRF(LogisticRegression(), ChainCRF(), cv=3, random_state=0)
    else:
        model = _make(name, ChainStructure())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(dense if fitted_on == "dense" else chains, tags)
    _assert_same_predictions(model, dense, chains)
