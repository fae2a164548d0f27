"""TRW-S (sequential tree-reweighted message passing): exact on forests, a valid bound and
near-optimal labellings on loopy models, clamps and warm starts honoured — checked against
brute-force enumeration of tiny models."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmap_sklearn import GraphSample, GraphStructure, PerturbMAPCRF, Potentials
from pmap_sklearn._backend import SOLVERS, BruteForceSolver, check_solver
from pmap_sklearn._backend.trws import LevelSchedule, TRWSSolver, trws
from pmap_sklearn.samples import grid_edges

from ..helpers import scores_of

SETTINGS = settings(max_examples=60, deadline=None)
KINDS = ("potts", "shared", "tables")
ORDERS = ("index", "colour")


def _pairwise(rng, kind, n_edges, k, scale):
    shape = {"potts": (n_edges,), "shared": (k, k)}.get(kind, (n_edges, k, k))
    return scale * rng.normal(size=shape)


def _forest(rng, n_nodes):
    """A random forest: nodes numbered at random, edges in random orientation."""
    edges = [(int(rng.integers(i)), i) for i in range(1, n_nodes) if rng.random() < 0.85]
    edges = np.array(edges, dtype=np.intp).reshape(-1, 2)
    edges = rng.permutation(n_nodes)[edges]
    flip = rng.random(len(edges)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    return edges


def _loopy(rng, n_nodes, density=0.6):
    pairs = np.array(list(itertools.combinations(range(n_nodes), 2)), dtype=np.intp)
    pairs = pairs.reshape(-1, 2)
    return pairs[rng.random(len(pairs)) < density]


def _batch(parts):
    """One Potentials of several one-sample models ``(unary, edges, pairwise)`` (tables)."""
    unary = np.concatenate([u for u, _, _ in parts])
    sizes = [len(u) for u, _, _ in parts]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    edges = np.concatenate([e + o for (_, e, _), o in zip(parts, offsets, strict=False)])
    n_edges = np.concatenate([[0], np.cumsum([len(e) for _, e, _ in parts])])
    return Potentials(unary, edges, np.concatenate([t for _, _, t in parts]), offsets, n_edges)


def _optimum(sample, clamp=None):
    labellings, scores = scores_of(sample)
    if clamp is not None:
        fixed = clamp >= 0
        scores = np.where((labellings[:, fixed] == clamp[fixed]).all(axis=1), scores, -np.inf)
    return scores.max()


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(KINDS),
    order=st.sampled_from(ORDERS),
    scale=st.sampled_from([0.3, 1.0, 3.0, 10.0]),
    clamped=st.booleans(),
)
def test_exact_on_forests(seed, kind, order, scale, clamped):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 8)), int(rng.integers(2, 5))
    edges = _forest(rng, n)
    p = Potentials(rng.normal(size=(n, k)), edges, _pairwise(rng, kind, len(edges), k, scale))
    clamp = np.where(rng.random(n) < 0.3, rng.integers(0, k, n), -1) if clamped else None
    result = TRWSSolver(order=order).solve(p, clamp)
    best = _optimum(p, clamp)
    if clamp is not None:
        np.testing.assert_array_equal(result.labels[clamp >= 0], clamp[clamp >= 0])
    np.testing.assert_allclose(p.score(result.labels)[0], best, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(result.bound[0], best, rtol=1e-6, atol=1e-6)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(KINDS),
    order=st.sampled_from(ORDERS),
    clamped=st.booleans(),
)
def test_loopy_models_stay_within_the_bound(seed, kind, order, clamped):
    """The labelling's score is what the solver says, the bound is never below the optimum
    (never above it in energy), and a labelling that reaches the bound is optimal."""
    rng = np.random.default_rng(seed)
    parts, k = [], int(rng.integers(2, 4))
    n_samples = int(rng.integers(1, 4))
    for _ in range(n_samples):
        n = int(rng.integers(1, 7))
        parts.append((n, _loopy(rng, n)))
    unary = rng.normal(size=(sum(n for n, _ in parts), k))
    offsets = np.concatenate([[0], np.cumsum([n for n, _ in parts])])
    edges = np.concatenate([e + o for (_, e), o in zip(parts, offsets, strict=False)])
    edge_offsets = np.concatenate([[0], np.cumsum([len(e) for _, e in parts])])
    pairwise = _pairwise(rng, kind, len(edges), k, 2.0)
    p = Potentials(unary, edges.reshape(-1, 2), pairwise, offsets, edge_offsets)
    clamp = (
        np.where(rng.random(p.n_nodes) < 0.3, rng.integers(0, k, p.n_nodes), -1)
        if clamped
        else None
    )
    result = TRWSSolver(order=order).solve(p, clamp)
    for i, sample in enumerate(p.split()):
        nodes = slice(offsets[i], offsets[i + 1])
        given_ = None if clamp is None else clamp[nodes]
        best = _optimum(sample, given_)
        score = sample.score(result.labels[nodes])[0]
        if given_ is not None:
            np.testing.assert_array_equal(result.labels[nodes][given_ >= 0], given_[given_ >= 0])
            continue  # the clamped model's scores hold the forbidding constants
        np.testing.assert_allclose(result.score[i], score, rtol=1e-9, atol=1e-9)
        assert score <= best + 1e-9
        assert result.bound[i] >= best - 1e-9 * (1 + abs(best))
        if result.bound[i] - score <= 1e-9 * (1 + abs(score)):
            np.testing.assert_allclose(score, best, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("order", ORDERS)
def test_near_optimal_on_small_grids(order):
    """On random 3×3 grids with 3 labels and tables of both signs, most labellings are
    optimal and the others close."""
    rng = np.random.default_rng(0)
    edges = grid_edges((3, 3))
    p = _batch(
        [(rng.normal(size=(9, 3)), edges, rng.normal(size=(len(edges), 3, 3))) for _ in range(60)]
    )
    result = TRWSSolver(order=order).solve(p)
    best = np.array([_optimum(sample) for sample in p.split()])
    assert np.all(result.bound >= best - 1e-9)
    assert np.mean(np.isclose(result.score, best)) >= 0.85
    assert np.mean(best - result.score) < 0.05


def test_many_tiny_full_graphs_with_binary_tables_of_any_sign():
    """The multi-label case: 400 complete graphs on 6 nodes, K = 2, frustrated tables."""
    rng = np.random.default_rng(1)
    edges = np.array(list(itertools.combinations(range(6), 2)))
    p = _batch([(rng.normal(size=(6, 2)), edges, rng.normal(size=(15, 2, 2))) for _ in range(400)])
    result = TRWSSolver().solve(p)
    best = p.score(BruteForceSolver().map(p))
    assert np.all(result.bound >= best - 1e-9)
    certified = result.bound - result.score <= 1e-9 * (1 + np.abs(result.bound))
    np.testing.assert_allclose(result.score[certified], best[certified])
    assert certified.mean() > 0.6 and np.mean(np.isclose(result.score, best)) > 0.85


@pytest.mark.parametrize("order", ORDERS)
def test_a_sample_is_labelled_the_same_in_any_batch(order):
    """A sample that is done stops improving while the rest of its batch runs on: its
    labelling, score, bound do not depend on which samples share its batch."""
    rng = np.random.default_rng(5)
    edges = grid_edges((3, 4))
    parts = [
        (rng.normal(size=(12, 3)), edges, 2 * rng.normal(size=(len(edges), 3, 3)))
        for _ in range(12)
    ]
    solver = TRWSSolver(order=order)
    together = solver.solve(_batch(parts))
    alone = [solver.solve(_batch([part])) for part in parts]
    pairs = [solver.solve(_batch(parts[i : i + 2])) for i in range(0, len(parts), 2)]
    assert len({r.n_iter for r in alone}) > 1  # the samples stop after different passes
    np.testing.assert_array_equal(together.labels, np.concatenate([r.labels for r in alone]))
    np.testing.assert_array_equal(together.labels, np.concatenate([r.labels for r in pairs]))
    np.testing.assert_allclose(together.score, np.concatenate([r.score for r in alone]))
    np.testing.assert_allclose(together.bound, np.concatenate([r.bound for r in alone]))


def test_chains_are_solved_in_one_pass():
    """On chains in index order every node has at most one earlier and one later neighbour:
    the forward pass is Viterbi's, labelling along the backward pass its backtracking, and the
    bound the optimum: certified after one pass."""
    rng = np.random.default_rng(2)
    edges = np.stack([np.arange(6), np.arange(1, 7)], axis=1)
    p = _batch([(rng.normal(size=(7, 4)), edges, rng.normal(size=(6, 4, 4))) for _ in range(20)])
    result = TRWSSolver().solve(p)
    np.testing.assert_allclose(result.bound, p.score(BruteForceSolver().map(p)))
    np.testing.assert_allclose(result.score, result.bound)
    assert result.n_iter == 1


def test_a_warm_start_is_never_lost():
    """``init`` starts the best labelling: with the optimum as ``init`` the result is optimal,
    even stopped after one pass; clamps override ``init``."""
    rng = np.random.default_rng(3)
    edges = grid_edges((3, 3))
    p = _batch(
        [(rng.normal(size=(9, 3)), edges, 3 * rng.normal(size=(len(edges), 3, 3)))] * 1
        + [(rng.normal(size=(9, 3)), edges, 3 * rng.normal(size=(len(edges), 3, 3)))]
    )
    optimum = BruteForceSolver().map(p)
    solver = TRWSSolver(max_iter=1)
    np.testing.assert_allclose(p.score(solver.map(p, init=optimum)), p.score(optimum))
    clamp = np.full(p.n_nodes, -1)
    clamp[4] = (optimum[4] + 1) % 3
    labels = solver.map(p, clamp, init=optimum)
    assert labels[4] == clamp[4]
    with pytest.raises(ValueError, match="init"):
        solver.map(p, init=np.full(p.n_nodes, 3))


def test_samples_without_edges_and_isolated_nodes():
    rng = np.random.default_rng(4)
    unary = rng.normal(size=(7, 3))
    p = Potentials(unary, [[1, 2], [4, 5]], rng.normal(size=(2, 3, 3)), [0, 1, 4, 7], [0, 0, 1, 2])
    result = TRWSSolver().solve(p)
    np.testing.assert_allclose(result.score, p.score(BruteForceSolver().map(p)))
    np.testing.assert_allclose(result.bound, result.score)
    empty = Potentials(unary[:3])
    np.testing.assert_array_equal(TRWSSolver().map(empty), unary[:3].argmax(axis=1))


def test_schedule_levels_share_no_edge_and_follow_the_order():
    """Every edge joins two levels, the earlier end's first; γ and the chains' shares."""
    p = Potentials(np.zeros((12, 2)), grid_edges((3, 4)), np.zeros(17))
    for order, n_levels in (("index", 6), ("colour", 2)):
        schedule = LevelSchedule.build(p, order)
        assert schedule.n_levels == n_levels
        level = np.empty(12, dtype=np.intp)
        for index, lv in enumerate(schedule.levels):
            level[lv.nodes] = index
        early, late = schedule.forward_ends.T
        assert np.all(level[early] < level[late])
        n_earlier = np.bincount(late, minlength=12)
        n_later = np.bincount(early, minlength=12)
        np.testing.assert_allclose(schedule.gamma, 1 / np.maximum(n_earlier, n_later))
        np.testing.assert_allclose(schedule.start_share, 1 - n_earlier * schedule.gamma)


def test_patience_and_bound():
    """A pass never raises the bound (Kolmogorov 2006, Theorem 3.6); ``max_iter`` caps the
    passes."""
    rng = np.random.default_rng(5)
    edges = grid_edges((4, 4))
    p = _batch([(rng.normal(size=(16, 3)), edges, 2 * rng.normal(size=(24, 3, 3)))] * 3)
    schedule = LevelSchedule.build(p, "index")
    trace = []
    trws(p, schedule, 30, 0.0, 30, trace=trace)
    bounds = np.array([bound for _, bound in trace])
    assert np.all(np.diff(bounds, axis=0) <= 1e-9 * (1 + np.abs(bounds[1:])))
    assert TRWSSolver(max_iter=2, patience=50).solve(p).n_iter <= 2


def test_registered_with_its_capabilities():
    assert isinstance(check_solver("trws"), TRWSSolver)
    capabilities = SOLVERS["trws"].capabilities
    assert capabilities.clamps and capabilities.warm_start and not capabilities.marginals
    assert "bound" in capabilities.map_quality


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"order": "random"}, ValueError, "order"),
        ({"max_iter": 0}, ValueError, "max_iter"),
        ({"patience": True}, TypeError, "patience"),
        ({"tol": -1.0}, ValueError, "tol"),
        ({"tol": float("inf")}, ValueError, "tol"),
    ],
)
def test_bad_parameters_get_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        TRWSSolver(**kwargs)


def test_clamped_maximisers_through_the_protocol():
    """``clamped_maps`` solves each clamped copy from the MAP (a warm start); on a tree the
    maximisers are exact, as brute force's."""
    rng = np.random.default_rng(6)
    edges = _forest(rng, 6)
    p = Potentials(rng.normal(size=(6, 3)), edges, rng.normal(size=(len(edges), 3, 3)))
    nodes, labels = np.arange(6), rng.integers(0, 3, 6)
    weights = rng.random(6)
    ours = TRWSSolver().clamped_maps(p, nodes, labels, weights)
    exact = BruteForceSolver().clamped_maps(p, nodes, labels, weights)
    np.testing.assert_allclose(ours.statistics.unary, exact.statistics.unary, atol=1e-12)
    np.testing.assert_allclose(ours.statistics.pairwise, exact.statistics.pairwise, atol=1e-12)


def test_learns_tables_on_loopy_graphs():
    """Tables on loopy graphs learn "the next label is this label + 1 along a ring" (with
    chords), which Potts terms cannot say; the learned models' MAPs are brute force's."""
    rng = np.random.default_rng(7)
    ring = np.array([(i, (i + 1) % 8) for i in range(8)] + [(0, 4), (2, 6)])
    edge_features = np.column_stack([np.ones(10), np.r_[np.zeros(8), np.ones(2)]])
    X, y = [], []
    for _ in range(60):
        labels = (np.arange(8) + rng.integers(4)) % 4
        features = np.eye(4)[labels] + 1.5 * rng.normal(size=(8, 4))
        X.append(GraphSample(features, ring, edge_features))
        y.append(labels)
    tables = PerturbMAPCRF(GraphStructure(pairwise="table", solver="trws"), random_state=0)
    potts = PerturbMAPCRF(GraphStructure(), random_state=0)
    tables.fit(X[:30], y[:30])
    potts.fit(X[:30], y[:30])
    assert tables.structure_.solver_.name == "trws"
    assert tables.score(X[30:], y[30:]) > potts.score(X[30:], y[30:]) + 0.2
    batch = tables.structure_.prepare(X[30:])
    potentials = tables.structure_.potentials(batch, tables.coef_)
    ours, exact = TRWSSolver().map(potentials), BruteForceSolver().map(potentials)
    np.testing.assert_allclose(potentials.score(ours), potentials.score(exact))
