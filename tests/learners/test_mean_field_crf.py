"""MeanFieldCRF: its gradient, learning and warm starts."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from pmap_sklearn import GridStructure, MeanFieldCRF
from pmap_sklearn._validation import NonFiniteError
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.solvers import MeanFieldSolver


@pytest.mark.parametrize("change", [{"n_sweeps": 8}, {"damping": 0.3}])
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


@pytest.mark.parametrize("loss", ["log", "hamming"])
def test_the_learner_gradient_in_w_matches_finite_differences(loss):
    """The oracle's gradient through the structure (Potts grids, K = 3), to 1e-6 relative."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(3, 4, 2)) for _ in range(2)]
    y = [rng.integers(0, 3, size=(3, 4)) for _ in range(2)]
    model = MeanFieldCRF(GridStructure(), loss=loss, n_sweeps=3, max_iter=1).fit(X, y)
    batch = model.structure_.prepare(X)
    labels = model.structure_.prepare_labels(batch, y)
    oracle = model._make_oracle(batch, labels)
    w = rng.normal(size=model.coef_.shape)
    gradient, _ = oracle(slice(0, 2), w, None)
    numeric = approx_fprime(w, lambda v: oracle(slice(0, 2), v, None)[1], 1e-7)
    assert np.abs(numeric - gradient).max() / np.abs(gradient).max() < 1e-6


def test_learns_grids_and_its_marginals_are_its_mean_field():
    data = make_grid_data(n_samples=10, random_state=0)
    model = MeanFieldCRF(random_state=0).fit(data.data[:6], data.target[:6])
    assert isinstance(model.structure_.solver_, MeanFieldSolver)
    assert model.structure_.solver_.n_sweeps == model.n_sweeps
    assert model.score(data.data[6:], data.target[6:]) > 0.85
    (marginals,) = model.predict_marginals(data.data[6:7])
    np.testing.assert_allclose(marginals.sum(axis=-1), 1.0)
    np.testing.assert_array_equal(marginals.argmax(axis=-1), model.predict(data.data[6:7])[0])


@pytest.mark.parametrize("scale", [1e20, 1e200])
def test_mean_field_crf_asks_to_scale_huge_features(chains, scale):
    X, Y = chains
    with pytest.warns(UserWarning, match=r"node features as large as .*scale the features"):
        try:
            MeanFieldCRF("chain", max_iter=2, random_state=0).fit([x * scale for x in X], Y)
        except NonFiniteError:  # scores beyond double precision are refused after the warning
            pass
