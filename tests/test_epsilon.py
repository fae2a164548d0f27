"""EpsilonCRF and convex belief propagation (Hazan & Urtasun 2010) against exact references."""

import numpy as np
import pytest

from pmap_sklearn.datasets import add_kumar_hebert_noise
from pmap_sklearn.solvers import BruteForceSolver

from .helpers import _grid_potentials, grid_exact_marginals


def test_transfer_matrix_matches_enumeration(rng):
    model = _grid_potentials(rng, (3, 4), coupling=1.0, k=2)
    exact = BruteForceSolver().marginals(model)
    marginals, log_z = grid_exact_marginals(model, (3, 4))
    np.testing.assert_allclose(marginals, exact.node, atol=1e-12)
    np.testing.assert_allclose(log_z, exact.log_partition[0])


def test_kumar_hebert_noise_statistics():
    clean = np.zeros((40, 30, 30), dtype=int)
    clean[:, :, 15:] = 1
    gaussian = add_kumar_hebert_noise(clean, "gaussian", random_state=0)
    assert np.std(gaussian - clean) == pytest.approx(0.3, rel=0.02)
    bimodal = add_kumar_hebert_noise(clean, "bimodal", random_state=0)
    assert bimodal[clean == 0].mean() == pytest.approx((0.08 + 0.46) / 2, abs=0.01)
    assert bimodal[clean == 1].mean() == pytest.approx((0.55 + 0.42) / 2, abs=0.01)
    with pytest.raises(ValueError, match="kind"):
        add_kumar_hebert_noise(clean, "laplace")
