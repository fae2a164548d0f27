"""The tests' brute-force references (tests/helpers.py) against enumeration."""

import numpy as np
import pytest

from pmap_sklearn import Potentials
from pmap_sklearn.solvers import BruteForceSolver

from .helpers import _grid_potentials, _potts_grid, exact_distribution, grid_exact_marginals


def test_exact_distribution_of_a_chain_sums_to_one(rng):
    p = Potentials(rng.normal(size=(4, 3)), [[0, 1], [1, 2], [2, 3]], rng.normal(size=(3, 3)))
    labellings, prob = exact_distribution(p)
    assert labellings.shape == (81, 4)
    np.testing.assert_allclose(prob.sum(), 1.0)


def test_transfer_matrix_matches_enumeration(rng):
    model = _grid_potentials(rng, (3, 4), coupling=1.0, k=2)
    exact = BruteForceSolver().marginals(model)
    marginals, log_z = grid_exact_marginals(model, (3, 4))
    np.testing.assert_allclose(marginals, exact.node, atol=1e-12)
    np.testing.assert_allclose(log_z, exact.log_partition[0])


@pytest.mark.parametrize("k", [2, 3])
def test_transfer_matrix_matches_enumeration_on_a_3x3_grid(k):
    rng = np.random.default_rng(k)
    for coupling in (0.3, 2.5):
        model = _potts_grid(rng, (3, 3), k, coupling)
        exact = BruteForceSolver().marginals(model)
        marginals, log_z = grid_exact_marginals(model, (3, 3))
        np.testing.assert_allclose(marginals, exact.node, atol=1e-12)
        np.testing.assert_allclose(log_z, exact.log_partition[0], rtol=1e-12)
