"""MessagePassingSolver and belief propagation."""

import numpy as np
import pytest

from pmap_sklearn import grid_edges
from pmap_sklearn._backend.messages import BeliefPropagation, colour_nodes, in_forest
from pmap_sklearn.solvers import (
    SOLVERS,
    BruteForceSolver,
    ChainSolver,
    MessagePassingSolver,
    Potentials,
)

from ..helpers import _grid_potentials, grid_exact_marginals


def _loopy(rng, k=3, side=3):
    edges = grid_edges((side, side))
    unary = rng.normal(size=(side * side, k)) * 2
    return Potentials(unary, edges, rng.normal(size=(len(edges), k, k)))


def test_message_passing_clamps_are_exact_on_trees():
    rng = np.random.default_rng(1)
    edges = np.array([[0, 1], [1, 2], [1, 3], [3, 4], [3, 5]])
    p = Potentials(rng.normal(size=(6, 3)) * 2, edges, rng.normal(size=(5, 3, 3)) * 2)
    clamp = np.array([-1, 2, -1, 0, -1, -1])
    approx, exact = MessagePassingSolver(), BruteForceSolver()
    got, want = approx.marginals(p, clamp), exact.marginals(p, clamp)
    np.testing.assert_allclose(got.node, want.node, atol=1e-9)
    np.testing.assert_allclose(got.log_partition, want.log_partition, rtol=1e-9)
    assert np.array_equal(approx.map(p, clamp), exact.map(p, clamp))
    assert not np.allclose(got.node, approx.marginals(p).node)  # the clamps changed something


def test_message_passing_honours_clamps_on_loopy_graphs():
    rng = np.random.default_rng(2)
    p = _loopy(rng)
    clamp = np.full(p.n_nodes, -1)
    clamp[[0, 4, 8]] = [2, 1, 0]
    labels = MessagePassingSolver().map(p, clamp)
    assert np.array_equal(labels[[0, 4, 8]], [2, 1, 0])
    node = MessagePassingSolver().marginals(p, clamp).node
    np.testing.assert_allclose(node[[0, 4, 8]], np.eye(3)[[2, 1, 0]], atol=1e-12)


def test_a_belief_session_continues_from_its_messages():
    rng = np.random.default_rng(4)
    p = _loopy(rng)
    solver = MessagePassingSolver(counting_numbers="convex")
    session = solver.beliefs(p, 1.0)
    session.run(max_sweeps=500, tol=1e-12)
    np.testing.assert_allclose(session.node_beliefs(), solver.marginals(p).node, atol=1e-8)
    changed = _loopy(np.random.default_rng(5))
    session.set_scores(changed.unary, changed.edge_tables())
    session.run(max_sweeps=500, tol=1e-12)  # warm from the old messages, same fixed point
    np.testing.assert_allclose(session.node_beliefs(), solver.marginals(changed).node, atol=1e-8)
    assert SOLVERS["message_passing"].capabilities.beliefs
    assert not SOLVERS["graph_cut"].capabilities.beliefs


def test_marginal_map_on_a_tree_is_the_map_or_the_marginal_argmax_at_its_extremes():
    rng = np.random.default_rng(7)
    edges = np.array([[0, 1], [1, 2], [1, 3], [3, 4], [3, 5]])
    p = Potentials(rng.normal(size=(6, 3)) * 2, edges, rng.normal(size=(5, 3, 3)) * 2)
    solver, exact = MessagePassingSolver(), BruteForceSolver()
    start = np.zeros(6, dtype=np.intp)
    every = solver.marginal_map(p, np.ones(6, dtype=bool), start, n_iter=200)
    assert np.array_equal(every, exact.map(p))
    none = solver.marginal_map(p, np.zeros(6, dtype=bool), start, n_iter=200)
    assert np.array_equal(none, exact.marginals(p).node.argmax(axis=1))
    assert SOLVERS["message_passing"].capabilities.marginal_map
    assert not SOLVERS["graph_cut"].capabilities.marginal_map


def _tree(rng, k=3):
    edges = np.array([[0, 1], [1, 2], [1, 3], [3, 4], [4, 5], [6, 4]])
    return Potentials(rng.normal(size=(7, k)), edges, rng.normal(size=(len(edges), k, k)))


def test_colouring_is_proper(rng):
    edges = np.array([[i, j] for i in range(30) for j in range(i + 1, 30) if rng.random() < 0.2])
    colour = colour_nodes(30, edges)
    assert (colour >= 0).all()
    assert (colour[edges[:, 0]] != colour[edges[:, 1]]).all()


def test_bethe_beliefs_are_exact_on_trees_and_chains(rng):
    tree = _tree(rng)
    exact, beliefs = BruteForceSolver().marginals(tree), MessagePassingSolver().marginals(tree)
    np.testing.assert_allclose(beliefs.node, exact.node, atol=1e-10)
    np.testing.assert_allclose(beliefs.statistics.pairwise, exact.statistics.pairwise, atol=1e-10)
    np.testing.assert_allclose(beliefs.log_partition, exact.log_partition, rtol=1e-12)
    chain = Potentials(
        rng.normal(size=(9, 4)), np.column_stack([range(8), range(1, 9)]), rng.normal(size=(4, 4))
    )
    np.testing.assert_allclose(
        MessagePassingSolver().marginals(chain).node,
        ChainSolver().marginals(chain).node,
        atol=1e-10,
    )


def test_max_product_decodes_the_map_of_a_tree(rng):
    for _ in range(5):
        tree = _tree(rng)
        np.testing.assert_array_equal(
            MessagePassingSolver().map(tree), BruteForceSolver().map(tree)
        )


def test_convex_program_bounds_the_log_partition_from_above(rng):
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    model = Potentials(rng.normal(size=(4, 3)), edges, rng.normal(size=(5, 3, 3)))
    bp = BeliefPropagation(model, 1.0, "convex")
    assert bp.run(max_sweeps=2000, tol=1e-12) < 2000
    assert bp.objective()[0] >= BruteForceSolver().log_partition(model)[0]
    # at the fixed point the beliefs are consistent: edge marginals agree with node beliefs
    edge, node = bp.edge_beliefs(), bp.node_beliefs()
    np.testing.assert_allclose(edge.sum(axis=2), node[edges[:, 0]], atol=1e-8)
    np.testing.assert_allclose(edge.sum(axis=1), node[edges[:, 1]], atol=1e-8)


@pytest.mark.parametrize("shape", [(5, 5), (10, 10)])
def test_weak_coupling_beliefs_follow_the_transfer_matrix(rng, shape):
    model = _grid_potentials(rng, shape, coupling=0.2)
    exact, log_z = grid_exact_marginals(model, shape)
    bethe = MessagePassingSolver("bethe").marginals(model)
    assert np.abs(bethe.node - exact).max() < 0.02
    assert abs(bethe.log_partition[0] - log_z) < 0.05 * abs(log_z)


def test_auto_counting_numbers_are_bethe_on_forests_and_convex_on_loops():
    rng = np.random.default_rng(0)
    tree = np.array([[0, 1], [1, 2], [1, 3]])
    square = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    # samples: a tree, a cycle, an edgeless pair, a forest of two paths
    edges = np.concatenate([tree, square + 4, np.array([[10, 11], [12, 13]])])
    p = Potentials(
        rng.normal(size=(14, 2)),
        edges,
        rng.normal(size=(len(edges), 2, 2)),
        node_offsets=[0, 4, 8, 10, 14],
        edge_offsets=[0, 3, 7, 7, 9],
    )
    forest = in_forest(p)
    assert forest.tolist() == [True] * 4 + [False] * 4 + [True] * 6
    auto = BeliefPropagation(p, 1.0, "auto").node_count
    bethe = BeliefPropagation(p, 1.0, "bethe").node_count
    np.testing.assert_array_equal(auto, np.where(forest, bethe, 1.0))
