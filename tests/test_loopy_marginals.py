"""Marginals of loopy models: the exact transfer-matrix reference against enumeration, and the
Gibbs chains started from perturbed MAPs (``method="gibbs"``) against exact marginals, on known
labels, across workers, and against plain perturb-and-MAP on a coupled grid."""

import numpy as np
import pytest

from pmap_sklearn._backend import (
    AlphaExpansionSolver,
    BruteForceSolver,
    GraphCutSolver,
)
from pmap_sklearn.perturbation import perturb_and_map

from .helpers import _potts_grid, grid_exact_marginals


@pytest.mark.parametrize("k", [2, 3])
def test_transfer_matrix_matches_enumeration_on_a_3x3_grid(k):
    rng = np.random.default_rng(k)
    for coupling in (0.3, 2.5):
        model = _potts_grid(rng, (3, 3), k, coupling)
        exact = BruteForceSolver().marginals(model)
        marginals, log_z = grid_exact_marginals(model, (3, 3))
        np.testing.assert_allclose(marginals, exact.node, atol=1e-12)
        np.testing.assert_allclose(log_z, exact.log_partition[0], rtol=1e-12)


@pytest.mark.parametrize("k, solver", [(2, GraphCutSolver()), (3, AlphaExpansionSolver())])
def test_gibbs_from_perturbed_maps_reaches_the_exact_marginals(k, solver):
    rng = np.random.default_rng(10 + k)
    model = _potts_grid(rng, (3, 3), k, 1.0)
    exact = BruteForceSolver().marginals(model).node
    n_chains = 2000 if k == 2 else 800  # α-expansion's MAPs cost more
    gibbs = perturb_and_map(solver, model, n_chains, 0, maxima=False, n_sweeps=10).marginals
    np.testing.assert_allclose(gibbs.sum(axis=1), 1.0)
    # the chains' states are correlated across sweeps: one chain per draw bounds the error
    assert np.abs(gibbs - exact).max() < 4 * np.sqrt(0.25 / n_chains)


def test_gibbs_corrects_perturb_and_map_on_a_coupled_grid():
    """First-order perturbations bias the marginals of a coupled loopy model; Gibbs chains
    started from the same perturbed MAPs move them towards the exact ones."""
    rng = np.random.default_rng(5)
    shape = (6, 6)
    model = _potts_grid(rng, shape, 2, 1.0)
    exact, _ = grid_exact_marginals(model, shape)
    solver = GraphCutSolver()
    perturbed = perturb_and_map(solver, model, 400, 0, maxima=False).marginals
    gibbs = perturb_and_map(solver, model, 400, 0, maxima=False, n_sweeps=10).marginals
    assert np.abs(gibbs - exact).mean() < 0.5 * np.abs(perturbed - exact).mean()
