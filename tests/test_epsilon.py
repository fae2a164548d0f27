"""EpsilonCRF and convex belief propagation (Hazan & Urtasun 2010) against exact references."""

import numpy as np

from pmap_sklearn.solvers import BruteForceSolver

from .helpers import _grid_potentials, grid_exact_marginals


def test_transfer_matrix_matches_enumeration(rng):
    model = _grid_potentials(rng, (3, 4), coupling=1.0, k=2)
    exact = BruteForceSolver().marginals(model)
    marginals, log_z = grid_exact_marginals(model, (3, 4))
    np.testing.assert_allclose(marginals, exact.node, atol=1e-12)
    np.testing.assert_allclose(log_z, exact.log_partition[0])
