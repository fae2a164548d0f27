"""The state of a fit: warm starts that continue only what they may, refits that fail cleanly,
and the label markers (``ignore_label``, ``unknown_label``) read by the same rule as labels, by
the estimators and by the scorers."""

from __future__ import annotations

import numpy as np
import pytest

from pmap_sklearn import MeanFieldCRF, StructuredSVM
from pmap_sklearn.datasets import make_chain_data


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=12, random_state=7)
    return list(data.data), list(data.target)


def _other(chains):
    """Other samples of the same kind: the chains of another seed."""
    data = make_chain_data(n_samples=12, random_state=8)
    return list(data.data), list(data.target)


# ---- warm starts continue a state only on its data and parameters ----------------------------
def test_bcfw_warm_start_on_other_data_is_a_fresh_fit(chains):
    """A's dual blocks on B gave a negative duality gap after two passes and a training
    accuracy of 0.056 (a cold fit: 1.0)."""
    (XA, YA), (XB, YB) = chains, _other(chains)
    warm = StructuredSVM(alpha=0.01, warm_start=True, random_state=0).fit(XA, YA).fit(XB, YB)
    cold = StructuredSVM(alpha=0.01, warm_start=True, random_state=0).fit(XB, YB)
    np.testing.assert_array_equal(warm.coef_, cold.coef_)
    assert min(warm.duality_gaps_) >= -1e-9
    assert warm.score(XB, YB) == cold.score(XB, YB) == 1.0
    warm.fit(XB, YB)  # the same data again: it continues (the gap keeps falling)
    assert warm.duality_gaps_[-1] <= cold.duality_gaps_[-1] + 1e-12


def test_subgradient_warm_start_after_a_new_alpha_is_a_fresh_fit(chains):
    """The average kept the old alpha's iterates: objective 450 against 3.94 cold."""
    X, y = chains
    warm = StructuredSVM(solver="subgradient", warm_start=True, random_state=0).fit(X, y)
    warm.set_params(alpha=0.1).fit(X, y)
    cold = StructuredSVM(solver="subgradient", alpha=0.1, random_state=0).fit(X, y)
    np.testing.assert_allclose(warm.coef_, cold.coef_)
    assert warm.loss_curve_[-1] == pytest.approx(cold.loss_curve_[-1])


@pytest.mark.parametrize("change", [{"n_iterations": 8}, {"damping": 0.3}])
def test_mean_field_warm_start_predicts_with_the_new_solver(chains, change):
    """Learning used the new value while prediction kept the old ``structure_.solver_``."""
    X, y = chains
    params = dict(structure="chain", max_iter=3, random_state=0)
    warm = MeanFieldCRF(warm_start=True, **params).fit(X, y).set_params(**change).fit(X, y)
    cold = MeanFieldCRF(**params, **change).fit(X, y)
    name, value = next(iter(change.items()))
    assert getattr(warm.structure_.solver_, name) == value
    np.testing.assert_allclose(warm.coef_, cold.coef_)
    for a, b in zip(warm.predict_marginals(X), cold.predict_marginals(X), strict=True):
        np.testing.assert_allclose(a, b)


# ---- a refit that fails leaves the fitted model as it was -------------------------------------
def test_a_two_stage_refit_whose_stage_two_fails_keeps_the_previous_model(chains):
    """A failed stage two kept the new ``n_features_in_`` beside the old stages, and predict
    failed on old and new data alike."""
    from pmap_sklearn import PerturbMAPCRF, TwoStageCRF

    X, y = chains
    model = TwoStageCRF(crf=PerturbMAPCRF("chain", max_iter=2, random_state=0), cv=2).fit(X, y)
    before, n_features = model.predict(X), model.n_features_in_
    wider = [np.hstack([x, x]) for x in X]
    model.set_params(crf__max_iter=0)  # stage two refuses it, after stage one has run
    with pytest.raises(ValueError, match="max_iter"):
        model.fit(wider, y)
    assert model.n_features_in_ == n_features
    for a, b in zip(before, model.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_failed_sequence_vectorizer_refit_keeps_its_vocabulary():
    from pmap_sklearn import SequenceVectorizer

    tokens = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    vectorizer = SequenceVectorizer().fit(tokens)
    before = vectorizer.transform(tokens)
    with pytest.raises(ValueError, match="is None"):
        vectorizer.set_params(n_features=16).fit([[{"w": None}]])  # the hasher's refit fails
    assert vectorizer.n_features_out_ == 3
    for a, b in zip(before, vectorizer.set_params(n_features=None).transform(tokens), strict=True):
        assert (a != b).nnz == 0
