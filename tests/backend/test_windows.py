"""Clamp windows: clamped maximisers solved around their clamp."""

import itertools

import numpy as np
import pytest

from pmap_sklearn.solvers import AlphaExpansionSolver, Potentials

from ..helpers import _metric_tables, _random_potts


def _clamped_labellings(solver, p, nodes, labels):
    """Each query's clamped maximiser, read back from the statistics of one query at a time."""
    map_labels = solver.map(p)
    found = []
    for node, label in zip(nodes, labels, strict=True):
        solution = solver.clamped_maps(p, [node], [label], [1.0])
        found.append(np.argmax(solution.statistics.unary + np.eye(p.n_states)[map_labels], 1))
    return map_labels, found


def _hops_from(p, node):
    """Graph distance of every node from ``node`` (breadth first)."""
    distance = np.full(p.n_nodes, p.n_nodes)
    distance[node], frontier = 0, [node]
    while frontier:
        touching = np.isin(p.edges, frontier).any(axis=1)
        reached = np.unique(p.edges[touching])
        reached = reached[distance[reached] > distance[frontier[0]] + 1]
        distance[reached] = distance[frontier[0]] + 1
        frontier = list(reached)
    return distance


@pytest.mark.parametrize("kind", ["potts", "tables", "shared"])
def test_windowed_clamped_maximisers_equal_whole_copies_when_the_window_is_the_sample(rng, kind):
    p = _random_potts(rng, shape=(4, 5), k=4, coupling=1.5, n_samples=3)
    if kind == "tables":
        p = Potentials(
            p.unary, p.edges, _metric_tables(rng, p.n_edges, 4), p.node_offsets, p.edge_offsets
        )
    if kind == "shared":
        p = Potentials(
            p.unary, p.edges, _metric_tables(rng, 1, 4)[0], p.node_offsets, p.edge_offsets
        )
    nodes = np.arange(p.n_nodes)
    labels, weights = rng.integers(4, size=p.n_nodes), rng.random(p.n_nodes)
    whole = AlphaExpansionSolver(clamp_window=None).clamped_maps(p, nodes, labels, weights)
    # 7 hops reach across the 4 x 5 grid: every window is its whole sample
    windowed = AlphaExpansionSolver(clamp_window=7).clamped_maps(p, nodes, labels, weights)
    np.testing.assert_array_equal(windowed.map_labels, whole.map_labels)
    np.testing.assert_allclose(windowed.statistics.unary, whole.statistics.unary)
    np.testing.assert_allclose(windowed.statistics.pairwise, whole.statistics.pairwise, atol=1e-12)


def test_a_windowed_clamped_maximiser_is_move_optimal_around_its_changes(rng):
    """Accepted in a window whose border it leaves unchanged, a maximiser is a local optimum
    of every expansion move on the nodes as far from the clamp as its farthest change (all
    inside that window) — not necessarily of moves reaching beyond it."""
    solver, grown = AlphaExpansionSolver(clamp_window=1), 0
    for _ in range(6):
        p = _random_potts(rng, shape=(3, 4), k=3, coupling=2.5)
        nodes = np.arange(p.n_nodes)
        labels = rng.integers(3, size=p.n_nodes)
        map_labels, found = _clamped_labellings(solver, p, nodes, labels)
        for node, label, clamped in zip(nodes, labels, found, strict=True):
            assert clamped[node] == label
            start = map_labels.copy()
            start[node] = label
            assert p.score(clamped)[0] >= p.score(start)[0] - 1e-9  # never below its start
            distance = _hops_from(p, node)
            radius = max(distance[clamped != map_labels].max(initial=0), 1)
            grown += radius > 1
            free = np.flatnonzero((distance <= radius) & (distance > 0))
            for alpha in range(3):
                for x in itertools.product([False, True], repeat=len(free)):
                    moved = clamped.copy()
                    moved[free[np.array(x, bool)]] = alpha
                    assert p.score(moved)[0] <= p.score(clamped)[0] + 1e-9
    assert grown  # some clamps changed neighbours: windows of 1 hop grew
