"""pmap_sklearn.perturbation: the average of perturbed MAPs and their Gibbs chains."""

import numpy as np
import pytest

from pmap_sklearn import Potentials
from pmap_sklearn._backend import (
    AlphaExpansionSolver,
    BruteForceSolver,
    ChainSolver,
    GraphCutSolver,
)
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.perturbation import draw, perturb_and_map
from pmap_sklearn.structures import ChainStructure

from .helpers import _potts_grid, grid_exact_marginals


def _chains():
    data = make_chain_data(n_samples=30, n_states=3, n_features=4, random_state=0)
    structure = ChainStructure().fit(data.data, data.target)
    w = np.random.default_rng(0).normal(size=structure.size_)
    return structure.potentials(structure.prepare(data.data), w)


@pytest.mark.parametrize("kind", ["gumbel", "logistic"])
def test_results_do_not_depend_on_chunking_or_n_jobs(kind):
    if kind == "gumbel":
        potentials, solver = _chains(), ChainSolver()
    else:
        rng = np.random.default_rng(1)
        potentials = Potentials(
            rng.normal(size=(12, 2)),
            [[0, 1], [1, 2], [2, 3], [4, 5], [6, 7], [7, 8], [9, 10], [10, 11]],
            -rng.random(8),
            [0, 4, 6, 9, 12],
            [0, 3, 4, 6, 8],
        )
        solver = GraphCutSolver()
    runs = [
        perturb_and_map(solver, potentials, 7, 3, kind, max_nodes=max_nodes, n_jobs=n_jobs)
        for max_nodes, n_jobs in [(1 << 18, None), (5, None), (1, 2)]
    ]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.marginals, runs[0].marginals)
        np.testing.assert_allclose(other.max_mean, runs[0].max_mean, rtol=1e-12)
    np.testing.assert_allclose(runs[0].marginals.sum(axis=1), 1.0)


def test_separable_marginals_and_maxima_are_exact():
    """Without pairwise terms a Gumbel-perturbed MAP is an exact sample, and the expected
    perturbed maximum is the log-partition function (the bound is tight)."""
    unary = np.random.default_rng(2).normal(size=(6, 3))
    one_node_chains = Potentials(unary, pairwise=np.zeros((3, 3)), node_offsets=np.arange(7))
    average = perturb_and_map(ChainSolver(), one_node_chains, 4000, 0)
    log_z = np.logaddexp.reduce(unary, axis=1)
    np.testing.assert_allclose(average.marginals, np.exp(unary - log_z[:, None]), atol=0.03)
    assert np.all(np.abs(average.max_mean - log_z) < 4 * average.max_sem)


def test_draws():
    rng = np.random.default_rng(0)
    logistic = draw(rng, 5, 2, "logistic")
    assert np.all(logistic[:, 0] == 0) and np.all(logistic[:, 1] != 0)
    with pytest.raises(ValueError, match="binary models"):
        draw(rng, 5, 3, "logistic")
    with pytest.raises(ValueError, match="perturbation must be one of"):
        draw(rng, 5, 3, "normal")


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
