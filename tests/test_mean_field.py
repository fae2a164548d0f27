"""Mean field: the solver's fixed points, bounds and schedules, the backpropagation through its
unrolled iterations (against finite differences), and MeanFieldCRF's learning."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from pmap_sklearn import GridStructure, MeanFieldCRF
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.solvers import MeanFieldSolver


@pytest.mark.parametrize("loss", ["log", "hamming"])
def test_the_learner_gradient_in_w_matches_finite_differences(loss):
    """The oracle's gradient through the structure (Potts grids, K = 3), to 1e-6 relative."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(3, 4, 2)) for _ in range(2)]
    y = [rng.integers(0, 3, size=(3, 4)) for _ in range(2)]
    model = MeanFieldCRF(GridStructure(), loss=loss, n_iterations=3, max_iter=1).fit(X, y)
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
    assert model.structure_.solver_.n_iterations == model.n_iterations
    assert model.score(data.data[6:], data.target[6:]) > 0.85
    (marginals,) = model.predict_marginals(data.data[6:7])
    np.testing.assert_allclose(marginals.sum(axis=-1), 1.0)
    np.testing.assert_array_equal(marginals.argmax(axis=-1), model.predict(data.data[6:7])[0])
