"""GraphCutSolver: the grid fast path, perturbed rounds and capacities."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmap_sklearn import GridStructure, PerturbMAPCRF, Potentials
from pmap_sklearn._backend import GraphCutSolver, Solver
from pmap_sklearn._validation import NonFiniteError
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.perturbation import draw, gumbel

from ..helpers import SETTINGS


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_grid_fast_path_agrees_with_general_graph_cut(seed):
    """The add_grid_edges fast path and the add_edges path solve the same problem."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(12, 9, 3))]
    grid = GridStructure(connectivity=8, contrast=True).fit(X, [np.zeros(1, int)])
    batch = grid.prepare(X)
    w = grid.project(rng.normal(size=grid.size_))
    p = grid.potentials(batch, w, gumbel(rng, (batch.n_nodes, 2)))
    general = replace(p, layout=None)
    solver = GraphCutSolver()
    np.testing.assert_array_equal(solver.map(p), solver.map(general))


def test_graph_cut_capacities_beyond_double_precision_are_refused():
    rng = np.random.default_rng(0)
    edges = np.array([[0, 1], [1, 2], [0, 2]])
    huge = Potentials(rng.normal(size=(3, 2)) * 1e300, edges, [-1e307] * 3)
    with pytest.raises(NonFiniteError, match="sample 0: its scores are too large.*scale the"):
        GraphCutSolver().map(huge)
    with pytest.raises(NonFiniteError, match="too large"):
        GraphCutSolver().clamped_maps(huge, [0], [1], [1.0])
    large = Potentials(rng.normal(size=(3, 2)) * 1e200, edges, [-1e200] * 3)
    labels = GraphCutSolver().map(large, clamp=np.array([1, -1, 0]))
    assert labels[0] == 1 and labels[2] == 0  # the clamps hold at any valid scale


@pytest.mark.parametrize("layout", ["grid", "graph"])
def test_graph_cut_rounds_reuse_each_graph_and_equal_one_map_per_round(layout):
    """GraphCutSolver builds each sample's edges once and copies them for every round: the
    labellings are those of one ``map`` of each perturbed model, ties (integer scores, a round
    without perturbation) and nodes without edges included; scores too large for a cut are
    named."""
    rng = np.random.default_rng(0)
    if layout == "grid":
        data = make_grid_data(n_samples=3, shape=(9, 7), random_state=0)
        model = PerturbMAPCRF(GridStructure(), max_iter=2, tol=None, random_state=0)
        potentials = model.fit(data.data, data.target).potentials(data.data)
        potentials = potentials.add_unary(np.round(potentials.unary) - potentials.unary)
    else:
        # the last sample has a node without an edge (its graph is not copied) and one alone
        potentials = Potentials(
            rng.integers(-2, 3, size=(16, 2)).astype(float),
            [[0, 1], [1, 2], [2, 3], [0, 3], [4, 5], [6, 7], [7, 8], [9, 10], [10, 11]]
            + [[12, 13]],
            -rng.integers(0, 3, size=10).astype(float),
            [0, 4, 6, 9, 12, 15, 16],
            [0, 4, 5, 7, 9, 10, 10],
        )
    solver = GraphCutSolver()
    block = np.stack([np.zeros(potentials.unary.shape)] + [draw(rng, potentials.n_nodes, 2)
                     for _ in range(4)])  # fmt: skip
    reused = solver.perturbed_rounds(potentials, block)
    assert reused.shape == (5, potentials.n_nodes)
    np.testing.assert_array_equal(reused, Solver.perturbed_rounds(solver, potentials, block))
    for labels, perturbation in zip(reused, block, strict=True):  # optimal: the exact MAP
        perturbed = potentials.add_unary(perturbation)
        np.testing.assert_allclose(
            perturbed.score(labels), perturbed.score(solver.map(perturbed)), rtol=0, atol=1e-9
        )
    block[2, 0, 0] = 1e300  # a round beyond double precision
    with pytest.raises(ValueError, match="sample 0: its scores are too large for exact graph"):
        solver.perturbed_rounds(potentials, block)
