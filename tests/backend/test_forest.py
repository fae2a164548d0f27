"""ForestSolver and ForestPlan: exact sum-product on forests."""

import numpy as np
import pytest

from pmap_sklearn import grid_edges
from pmap_sklearn.solvers import (
    BruteForceSolver,
    ForestSolver,
    Potentials,
)


def test_the_forest_solver_is_exact_once_a_feedback_vertex_set_is_clamped():
    from pmap_sklearn.solvers import feedback_vertex_set

    rng = np.random.default_rng(6)
    tree, grid = np.array([[0, 1], [1, 2], [1, 3], [3, 4]]), grid_edges((3, 3))
    edges = np.concatenate([tree, grid + 5, np.zeros((0, 2), dtype=int)])
    p = Potentials(
        rng.normal(size=(16, 3)),
        edges,
        rng.normal(size=(len(edges), 3, 3)),
        node_offsets=[0, 5, 14, 16],  # a tree, a grid, two nodes without an edge
        edge_offsets=[0, 4, len(edges), len(edges)],
    )
    fvs = feedback_vertex_set(9, grid)
    clamp = np.full(16, -1)
    clamp[5 + np.flatnonzero(fvs)] = rng.integers(0, 3, int(fvs.sum()))
    clamp[[1, 15]] = [0, 2]
    got, want = ForestSolver().marginals(p, clamp), BruteForceSolver().marginals(p, clamp)
    np.testing.assert_allclose(got.node, want.node, atol=1e-12)
    np.testing.assert_allclose(got.statistics.pairwise, want.statistics.pairwise, atol=1e-12)
    np.testing.assert_allclose(got.log_partition, want.log_partition, rtol=1e-12)
    assert np.array_equal(ForestSolver().map(p, clamp), BruteForceSolver().map(p, clamp))
    with pytest.raises(ValueError, match="sample 1 has a cycle"):
        ForestSolver().map(p)  # the grid without its clamps


def test_forest_sum_product_is_exact(rng):
    from pmap_sklearn._backend.forest import ForestPlan

    edges = np.array([[1, 0], [1, 2], [3, 1], [3, 4], [6, 5], [5, 7]])  # two trees, node 8 alone
    plan = ForestPlan(9, edges)
    unary, tables = rng.normal(size=(3, 9, 3)), rng.normal(size=(3, len(edges), 3, 3))
    out = plan.sum_product(unary, tables)
    for b in range(3):
        exact = BruteForceSolver().marginals(Potentials(unary[b], edges, tables[b]))
        assert out.log_partition[b] == pytest.approx(exact.log_partition[0], rel=1e-12)
        np.testing.assert_allclose(out.node[b], exact.node, atol=1e-12)
        np.testing.assert_allclose(out.edge[b], exact.statistics.pairwise, atol=1e-12)
    with pytest.raises(ValueError, match="cycle"):
        ForestPlan(3, [[0, 1], [1, 2], [2, 0]])
