"""Potentials and Statistics: forms, checks and differences."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmap_sklearn import PerturbMAPCRF, Potentials
from pmap_sklearn._backend import forbid_states
from pmap_sklearn._backend.potentials import (
    Statistics,
    add_clamped_differences,
    add_sample_differences,
    add_sparse_differences,
    incidence,
)
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.solvers import (
    ChainLayout,
    ChainSolver,
    GraphCutSolver,
    MessagePassingSolver,
)

from ..helpers import SETTINGS, _assert_optimal, _random_chains, _random_potts, scores_of


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), shared=st.booleans())
def test_binary_tables_reduce_to_potts_form(seed, shared):
    """Any binary table = unary terms + Potts weight + constant; graph cuts solve attractive
    tables exactly."""
    rng = np.random.default_rng(seed)
    n = 5
    edges = np.array([(i, j) for i, j in itertools.combinations(range(n), 2)])
    shape = (2, 2) if shared else (len(edges), 2, 2)
    tables = rng.normal(size=shape)
    p = Potentials(rng.normal(size=(n, 2)), edges, tables)
    potts, constant = p.as_potts()
    labellings, scores = scores_of(p)
    np.testing.assert_allclose(scores_of(potts)[1] + constant[0], scores, atol=1e-12)
    coupling = tables[..., 0, 0] + tables[..., 1, 1] - tables[..., 0, 1] - tables[..., 1, 0]
    np.testing.assert_allclose(potts.pairwise, np.broadcast_to(-coupling / 2, len(edges)))
    attractive = replace(p, pairwise=tables + np.abs(coupling)[..., None, None] * np.eye(2))
    _assert_optimal(attractive, GraphCutSolver().map(attractive))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["potts", "shared", "tables"]))
def test_dense_and_sparse_clamped_statistics_agree(seed, kind):
    """The two ways of folding a block of clamped labellings into statistics (dense products
    for small graphs, visits of the changed nodes for large ones) give the same statistics."""
    rng = np.random.default_rng(seed)
    n, n_queries = int(rng.integers(2, 30)), int(rng.integers(1, 6))
    edges = np.array([(i, j) for i, j in itertools.combinations(range(n), 2)])
    edges = edges[rng.random(len(edges)) < 0.3].reshape(-1, 2)
    shape = {"potts": (len(edges),), "shared": (2, 2)}.get(kind, (len(edges), 2, 2))
    p = Potentials(rng.normal(size=(n, 2)), edges, rng.normal(size=shape))
    map_labels = rng.integers(0, 2, n)
    labellings = np.where(rng.random((n_queries, n)) < 0.2, 1 - map_labels, map_labels)
    weights = rng.random(n_queries)
    dense, sparse = Statistics.zeros(p), Statistics.zeros(p)
    add_sample_differences(dense, p, map_labels, labellings, weights, None)
    add_sample_differences(sparse, p, map_labels, labellings, weights, incidence(edges, n))
    np.testing.assert_allclose(sparse.unary, dense.unary, atol=1e-12)
    np.testing.assert_allclose(sparse.pairwise, dense.pairwise, atol=1e-12)


def test_sparse_differences_equal_the_differences_of_whole_labellings(rng):
    p = _random_potts(rng, shape=(4, 4), k=3, n_samples=2)
    map_labels = rng.integers(3, size=p.n_nodes)
    copies = np.array([0, 1, 1, 0])
    labellings = np.concatenate(
        [map_labels[p.node_offsets[c] : p.node_offsets[c + 1]] for c in copies]
    )
    flip = rng.random(len(labellings)) < 0.3
    labellings[flip] = rng.integers(3, size=flip.sum())
    weights = rng.random(len(copies))
    expected = Statistics.zeros(p)
    add_clamped_differences(expected, p, map_labels, copies, labellings, weights)
    sparse = Statistics.zeros(p)
    changed = np.flatnonzero(
        labellings
        != np.concatenate([map_labels[p.node_offsets[c] : p.node_offsets[c + 1]] for c in copies])
    )
    query = changed // 16
    node = p.node_offsets[copies[query]] + changed % 16
    add_sparse_differences(
        sparse,
        p,
        map_labels,
        query,
        node,
        labellings[changed],
        weights,
        incidence(p.edges, p.n_nodes),
    )
    np.testing.assert_allclose(sparse.unary, expected.unary)
    np.testing.assert_allclose(sparse.pairwise, expected.pairwise, atol=1e-12)


def test_forbidden_states_lose_to_every_allowed_labelling(rng):
    p = _random_chains(rng, n_chains=1, length=5, k=3)
    forbidden = rng.random(p.unary.shape) < 0.4
    forbidden[np.arange(5), rng.integers(0, 3, 5)] = False  # every node keeps a state
    unary = forbid_states(p.unary, forbidden, p.pairwise, p.n_edges)
    masked = Potentials(unary, p.edges, p.pairwise)
    labellings, scores = scores_of(masked)
    legal = ~forbidden[np.arange(5), labellings].any(axis=1)
    assert scores[~legal].max() < scores[legal].min() - 999
    np.testing.assert_array_equal(ChainSolver().map(masked), labellings[np.argmax(scores)])


def test_a_chain_layout_does_not_exempt_edges_from_the_checks():
    """``ChainLayout`` only tells the chain solver it may skip the chain-shape check: edges out
    of range are still named, by every solver."""
    p = Potentials(np.zeros((3, 2)), [[0, 1], [1, 7]], -np.eye(2), layout=ChainLayout())
    for solver in (GraphCutSolver(), MessagePassingSolver(), ChainSolver()):
        with pytest.raises(ValueError, match=r"edge 1 \(1, 7\) of sample 0 leaves"):
            solver.map(p)


def test_the_graph_is_checked_once_where_samples_enter():
    """Potentials a structure builds from its parsed samples (and their samples, subsets and
    re-scored copies) carry ``graph_checked``, so solvers skip the graph check on every
    internal call; potentials built by hand are checked by every solver call."""
    data = make_grid_data(n_samples=3, shape=(4, 5), random_state=0)
    model = PerturbMAPCRF("grid", max_iter=1, tol=None).fit(data.data, data.target)
    p = model.potentials(data.data)
    derived = [p, p.sample(1), p.take(slice(0, 2)), p.take([2, 0]), p.add_unary(p.unary)]
    derived.append(replace(p, pairwise=2 * p.pairwise))
    assert all(q.graph_checked for q in derived)
    labels = GraphCutSolver().map(p)
    assert np.array_equal(labels, GraphCutSolver().map(replace(p, graph_checked=False)))
    bad = Potentials(np.zeros((3, 2)), [[0, 1], [1, 3]], [-1.0, -1.0])
    assert not bad.graph_checked
    with pytest.raises(ValueError, match=r"edge 1 \(1, 3\) of sample 0 leaves"):
        GraphCutSolver().map(bad)
