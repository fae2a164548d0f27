"""AlphaExpansionSolver: expansion and swap moves."""

import itertools

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from pmap_sklearn import (
    GraphSample,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    StructuredSVM,
    grid_edges,
)
from pmap_sklearn import _parallel as solver_base
from pmap_sklearn._backend import expansion
from pmap_sklearn.solvers import (
    AlphaExpansionSolver,
    BruteForceSolver,
    GraphCutSolver,
    Potentials,
)

from ..helpers import _metric_tables, _random_potts


def _moves(labels, k, kind):
    """Every labelling one move away from ``labels``."""
    n = len(labels)
    if kind == "expansion":
        for alpha in range(k):
            for x in itertools.product([0, 1], repeat=n):
                yield np.where(np.array(x, bool), alpha, labels)
    else:
        for a, b in itertools.combinations(range(k), 2):
            inside = np.flatnonzero((labels == a) | (labels == b))
            for x in itertools.product([a, b], repeat=len(inside)):
                moved = labels.copy()
                moved[inside] = x
                yield moved


@pytest.mark.parametrize("moves", ["expansion", "swap"])
@pytest.mark.parametrize("kind", ["potts", "tables"])
def test_no_move_improves_the_result_and_potts_expansion_is_within_factor_two(rng, moves, kind):
    solver = AlphaExpansionSolver(moves=moves)
    for _ in range(12):
        p = _random_potts(rng, k=3, coupling=2.0)
        if kind == "tables":
            p = Potentials(p.unary, p.edges, _metric_tables(rng, p.n_edges, 3))
        labels = solver.map(p)
        energy = -p.score(labels)[0]
        best_move = min(-p.score(moved)[0] for moved in _moves(labels, 3, moves))
        assert energy <= best_move + 1e-9
        optimum = -p.score(BruteForceSolver().map(p))[0]
        assert energy >= optimum - 1e-9
        if kind == "potts" and moves == "expansion":
            # the bound holds for non-negative energies: shift every node's costs to min 0
            shift = (-p.unary).min(axis=1).sum()
            assert energy - shift <= 2.0 * (optimum - shift) + 1e-9


@pytest.mark.parametrize("kind", ["potts", "tables"])
def test_nodes_too_sure_of_their_label_stay_out_of_the_cuts_and_change_nothing(
    rng, monkeypatch, kind
):
    """A node whose unary score drops by more than its edges' total spread when it takes α
    is left out of the move's cut: the labels equal those of moves over every node, and are
    still optimal for every move (by enumeration)."""
    problems = []
    for scale in (0.5, 3.0, 10.0):
        p = _random_potts(rng, shape=(8, 9), k=4, coupling=1.5, n_samples=3)
        p = Potentials(scale * p.unary, p.edges, p.pairwise, p.node_offsets, p.edge_offsets)
        if kind == "tables":
            tables = _metric_tables(rng, p.n_edges, 4)
            p = Potentials(p.unary, p.edges, tables, p.node_offsets, p.edge_offsets)
        problems.append(p)
    pruned = [AlphaExpansionSolver().map(p) for p in problems]
    last = problems[-1]
    graph = expansion._MoveGraph(last, np.argmax(last.unary, axis=1))
    assert (graph.total < np.ptp(last.unary, axis=1)).any()
    monkeypatch.setattr(
        expansion._MoveGraph,
        "candidates",
        lambda self, movable, labels, alpha: np.flatnonzero(movable),
    )
    for p, labels in zip(problems, pruned, strict=True):
        np.testing.assert_array_equal(labels, AlphaExpansionSolver().map(p))
    small = _random_potts(rng, shape=(2, 3), k=3, coupling=1.0)
    small = Potentials(4.0 * small.unary, small.edges, small.pairwise)
    monkeypatch.undo()
    labels = AlphaExpansionSolver().map(small)
    assert (
        -small.score(labels)[0]
        <= min(-small.score(moved)[0] for moved in _moves(labels, 3, "expansion")) + 1e-9
    )


def test_move_candidates_match_the_pruning_rule_by_loops(rng):
    """The nodes an expansion on α visits are those whose loss of taking α their edges'
    ranges can make up: first over all their edges, then over the edges whose other end is
    at α or kept (one round) — after the graph is told of relabelled nodes."""
    for _ in range(20):
        p = _random_potts(rng, shape=(4, 5), k=4, coupling=1.0, n_samples=2)
        p = Potentials(3.0 * p.unary, p.edges, p.pairwise, p.node_offsets, p.edge_offsets)
        labels = rng.integers(4, size=p.n_nodes)
        graph = expansion._MoveGraph(p, labels)
        changed = rng.choice(p.n_nodes, size=5, replace=False)
        labels[changed] = rng.integers(4, size=5)
        graph.relabel(labels, changed)
        alpha, movable = int(rng.integers(4)), rng.random(p.n_nodes) < 0.8
        movable &= labels != alpha

        spread = -p.pairwise
        neighbours = [[] for _ in range(p.n_nodes)]
        for (a, b), s in zip(p.edges, spread, strict=True):
            neighbours[a].append((b, s))
            neighbours[b].append((a, s))
        loss = p.unary[np.arange(p.n_nodes), labels] - p.unary[:, alpha]
        first = [
            d
            for d in range(p.n_nodes)
            if movable[d] and loss[d] <= sum(s for _, s in neighbours[d]) + 1e-9
        ]
        inside = (labels == alpha) | np.isin(np.arange(p.n_nodes), first)
        expected = [
            d for d in first if loss[d] <= sum(s for o, s in neighbours[d] if inside[o]) + 1e-9
        ]
        np.testing.assert_array_equal(graph.candidates(movable, labels, alpha), expected)


def test_two_labels_give_exactly_the_graph_cut_map(rng):
    for _ in range(10):
        p = _random_potts(rng, shape=(4, 5), k=2, coupling=2.0, n_samples=3)
        clamp = np.where(rng.random(p.n_nodes) < 0.2, rng.integers(2, size=p.n_nodes), -1)
        np.testing.assert_array_equal(
            AlphaExpansionSolver().map(p, clamp), GraphCutSolver().map(p, clamp)
        )
        nodes = np.arange(0, p.n_nodes, 3)
        labels, weights = rng.integers(2, size=len(nodes)), rng.random(len(nodes))
        ours = AlphaExpansionSolver().clamped_maps(p, nodes, labels, weights)
        cuts = GraphCutSolver().clamped_maps(p, nodes, labels, weights)
        np.testing.assert_allclose(ours.statistics.unary, cuts.statistics.unary)
        np.testing.assert_allclose(ours.statistics.pairwise, cuts.statistics.pairwise)


def test_clamps_are_honoured_and_the_rest_is_move_optimal(rng):
    p = _random_potts(rng, shape=(2, 3), k=4, coupling=2.0)
    for _ in range(10):
        clamp = np.where(rng.random(p.n_nodes) < 0.3, rng.integers(4, size=p.n_nodes), -1)
        labels = AlphaExpansionSolver().map(p, clamp)
        fixed = clamp >= 0
        np.testing.assert_array_equal(labels[fixed], clamp[fixed])
        for moved in _moves(labels, 4, "expansion"):
            if (moved[fixed] == clamp[fixed]).all():
                assert -p.score(labels)[0] <= -p.score(moved)[0] + 1e-9


@pytest.mark.parametrize("window", [None, 4])  # 4 hops: every window is the whole 3 x 3 grid
def test_clamped_maximisers_agree_with_clamped_maps_solved_one_by_one(rng, window):
    p = _random_potts(rng, shape=(3, 3), k=3, coupling=1.0, n_samples=2)
    nodes = np.array([0, 4, 9, 17])
    labels, weights = np.array([2, 1, 0, 2]), np.array([0.5, 1.0, 2.0, 1.5])
    solver = AlphaExpansionSolver(clamp_window=window)
    together = solver.clamped_maps(p, nodes, labels, weights)
    map_labels = solver.map(p)
    expected = np.zeros_like(together.statistics.unary)
    for node, label, weight in zip(nodes, labels, weights, strict=True):
        clamp = np.full(p.n_nodes, -1)
        clamp[node] = label
        clamped = solver.map(p, clamp, init=map_labels)
        expected[np.arange(p.n_nodes), clamped] += weight
        expected[np.arange(p.n_nodes), map_labels] -= weight
    np.testing.assert_allclose(together.statistics.unary, expected)


def test_a_warm_start_never_ends_above_its_start(rng):
    p = _random_potts(rng, shape=(12, 12), k=5, coupling=1.5, n_samples=2)
    cold = AlphaExpansionSolver().map(p)
    np.testing.assert_array_equal(AlphaExpansionSolver().map(p, init=cold), cold)
    for _ in range(5):
        start = rng.integers(5, size=p.n_nodes)
        warm = AlphaExpansionSolver().map(p, init=start)
        assert (p.score(warm) >= p.score(start) - 1e-9).all()


def test_chunks_and_jobs_give_the_labels_of_samples_solved_alone(rng, monkeypatch, always_parallel):
    p = _random_potts(rng, shape=(5, 6), k=4, coupling=1.5, n_samples=6)
    alone = np.concatenate([AlphaExpansionSolver().map(p.sample(i)) for i in range(6)])
    np.testing.assert_array_equal(AlphaExpansionSolver().map(p), alone)
    monkeypatch.setattr(expansion, "CHUNK_NODES", 70)  # two samples per max-flow
    monkeypatch.setattr(solver_base, "CHUNK_NODES", 70)
    np.testing.assert_array_equal(AlphaExpansionSolver().map(p), alone)
    np.testing.assert_array_equal(AlphaExpansionSolver().map(p, n_jobs=2), alone)


def test_swap_takes_semi_metrics_that_expansion_refuses(rng):
    # V(a, b) = (a − b)²: a semi-metric, not a metric (V(0, 2) = 4 > V(0, 1) + V(1, 2) = 2)
    a, b = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
    p = _random_potts(rng, k=3)
    p = Potentials(p.unary, p.edges, np.broadcast_to(-((a - b) ** 2.0), (p.n_edges, 3, 3)))
    with pytest.raises(ValueError, match="expansion moves need metric.*message_passing.*swap"):
        AlphaExpansionSolver().map(p)
    labels = AlphaExpansionSolver(moves="swap").map(p)
    assert -p.score(labels)[0] <= min(-p.score(m)[0] for m in _moves(labels, 3, "swap")) + 1e-9
    repulsive = _random_potts(rng, k=3, coupling=-1.0)  # Potts weights > 0
    with pytest.raises(ValueError, match="edge 0 of sample 0 violates it"):
        AlphaExpansionSolver().map(repulsive)
    not_semi_metric = Potentials(
        p.unary, p.edges, np.broadcast_to(np.eye(3) * -1.0, (p.n_edges, 3, 3))
    )
    with pytest.raises(ValueError, match="swap moves need semi-metric"):
        AlphaExpansionSolver(moves="swap").map(not_semi_metric)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda s, p: s.map(p, init=np.zeros(3, np.intp)),
            r"init must be an int array of shape \(6,\)",
        ),
        (lambda s, p: s.map(p, init=np.full(6, 3)), r"init labels must lie in 0..2"),
        (lambda s, p: s.map(p, init=np.zeros(6)), "init must be an int array"),
        (lambda s, p: s.map(p, clamp=np.full(6, 5)), r"clamp labels must lie in -1..2"),
        (lambda s, p: AlphaExpansionSolver(moves="jump"), "moves must be one of"),
    ],
)
def test_bad_input_is_named(rng, call, message):
    with pytest.raises(ValueError, match=message):
        call(AlphaExpansionSolver(), _random_potts(rng, k=3))


def _rectangles(rng, n, size=10, k=3, noise=0.9):
    images, labels = [], []
    for _ in range(n):
        truth = np.zeros((size, size), dtype=np.intp)
        for label in range(1, k):
            r, c = rng.integers(0, size - 4, 2)
            truth[r : r + 5, c : c + 5] = label
        images.append(np.eye(k)[truth] + noise * rng.normal(size=(size, size, k)))
        labels.append(truth)
    return images, labels


def _error(model, X, y):
    return np.mean([np.mean(p != t) for p, t in zip(model.predict(X), y, strict=True)])


@pytest.mark.parametrize("learner", [PerturbMAPCRF, MarginalPerturbMAPCRF, StructuredSVM])
@pytest.mark.parametrize("as_graphs", [False, True])
def test_the_learners_fit_three_class_grids_and_graphs_with_alpha_expansion(learner, as_graphs):
    """The default solver of K > 2 Potts models is α-expansion, and the structured learners
    beat the per-pixel model they start from."""
    rng = np.random.default_rng(3)
    X, y = _rectangles(rng, 8)
    X_test, y_test = _rectangles(rng, 8)
    if as_graphs:  # the same images as superpixel graphs of single pixels
        edges = grid_edges((10, 10))
        X, X_test = ([GraphSample(x.reshape(-1, 3), edges) for x in part] for part in (X, X_test))
        y, y_test = [t.ravel() for t in y], [t.ravel() for t in y_test]
    options = {"max_iter": 30} if learner is MarginalPerturbMAPCRF else {}
    model = learner("graph" if as_graphs else "grid", random_state=0, **options).fit(X, y)
    assert model.structure_.solver_.name == "alpha_expansion"
    pixels = LogisticRegression().fit(
        np.concatenate([np.reshape(x if not as_graphs else x.node_features, (-1, 3)) for x in X]),
        np.concatenate([t.ravel() for t in y]),
    )
    pixel_error = np.mean(
        [
            np.mean(
                pixels.predict(np.reshape(x if not as_graphs else x.node_features, (-1, 3)))
                != t.ravel()
            )
            for x, t in zip(X_test, y_test, strict=True)
        ]
    )
    assert _error(model, X_test, y_test) < 0.75 * pixel_error
