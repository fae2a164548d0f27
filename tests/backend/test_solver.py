"""The Solver protocol: every solver against brute force, input checks, clamps and batches."""

import itertools
import signal
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pmap_sklearn import (
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    Potentials,
)
from pmap_sklearn._backend import Solver, check_solver
from pmap_sklearn._backend.mean_field import MeanFieldSolver
from pmap_sklearn._backend.potentials import Statistics
from pmap_sklearn._backend.trws import TRWSSolver
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.perturbation import gumbel
from pmap_sklearn.samples import grid_edges
from pmap_sklearn.solvers import (
    SOLVERS,
    AlphaExpansionSolver,
    BruteForceSolver,
    ChainSolver,
    ForestSolver,
    GibbsSampler,
    GraphCutSolver,
    MessagePassingSolver,
)

from ..helpers import (
    SETTINGS,
    _assert_optimal,
    _free_or_clamped,
    _random_chains,
    loop_scores,
    scores_of,
    statistics_of,
)


def _random_graph(rng, n_nodes):
    pairs = np.array([(i, j) for i in range(n_nodes) for j in range(i + 1, n_nodes)])
    edges = pairs.reshape(-1, 2)[rng.random(len(pairs)) < 0.5]
    return GraphSample(rng.normal(size=(n_nodes, 2)), edges, rng.random((len(edges), 2)))


def _model(rng, case):
    """(potentials with a Gumbel perturbation, solver) of a few tiny samples for a case."""
    if case.startswith("chain"):
        n_states = 2 if case == "chain-cut" else int(rng.integers(2, 5))
        X = [rng.normal(size=(d, 2)) for d in rng.integers(1, 6, size=3)]
        solver = "graph_cut" if case == "chain-cut" else "viterbi"
        structure = ChainStructure(n_states=n_states, solver=solver)
    elif case.startswith("grid"):
        X = [rng.normal(size=(h, w, 2)) for h, w in rng.integers(1, 4, size=(3, 2))]
        connectivity, contrast = int(rng.choice([4, 8])), bool(rng.integers(2))
        if case == "grid-brute":
            structure = GridStructure(
                connectivity, contrast=contrast, n_states=3, solver="brute_force"
            )
            X = [x[:2, :2] for x in X]
        else:
            structure = GridStructure(connectivity, contrast=contrast)
    else:
        X = [_random_graph(rng, n) for n in rng.integers(1, 8, size=3)]
        structure = GraphStructure()
    structure.fit(X, [np.zeros(1, int)])
    batch = structure.prepare(X)
    w = structure.project(2 * rng.normal(size=structure.size_))
    perturbation = gumbel(rng, (batch.n_nodes, structure.n_states_))
    return structure.potentials(batch, w, perturbation), structure.solver_


CASES = ["chain", "chain-cut", "grid", "graph", "grid-brute"]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), case=st.sampled_from(CASES), clamped=st.booleans())
def test_map_matches_brute_force(seed, case, clamped):
    rng = np.random.default_rng(seed)
    potentials, solver = _model(rng, case)
    clamp = _free_or_clamped(rng, potentials.n_nodes, potentials.n_states) if clamped else None
    labels = solver.map(potentials, clamp)
    for i, sample in enumerate(potentials.split()):
        nodes = slice(potentials.node_offsets[i], potentials.node_offsets[i + 1])
        _assert_optimal(sample, labels[nodes], None if clamp is None else clamp[nodes])


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    case=st.sampled_from(CASES),
    dynamic=st.booleans(),
    skip=st.booleans(),
)
def test_clamped_maps_match_brute_force(seed, case, dynamic, skip):
    """y*_A and Σ_q c_q [φ(y*_B,q) − φ(y*_A)] of dynamic cuts / max-product tracing / solves
    from scratch, with and without Gumbel reduction, equal brute force."""
    rng = np.random.default_rng(seed)
    p, solver = _model(rng, case)
    nodes = np.sort(rng.choice(p.n_nodes, size=min(p.n_nodes, 7), replace=False))
    labels = rng.integers(0, p.n_states, size=len(nodes))
    weights = rng.random(len(nodes))
    solution = solver.clamped_maps(p, nodes, labels, weights, skip_agreeing=skip, dynamic=dynamic)
    np.testing.assert_array_equal(solution.map_labels, solver.map(p))
    agreeing = solution.map_labels[nodes] == labels
    np.testing.assert_array_equal(solution.solved, ~agreeing if skip else np.ones(len(nodes), bool))
    expected = Statistics.zeros(p)
    for node, label, weight in zip(nodes, labels, weights, strict=True):
        i = p.node_sample[node]
        sample, offset = p.sample(i), p.node_offsets[i]
        labellings, scores = scores_of(sample)
        best = labellings[
            np.argmax(np.where(labellings[:, node - offset] == label, scores, -np.inf))
        ]
        y_b, y_a = solution.map_labels.copy(), solution.map_labels
        y_b[offset : offset + sample.n_nodes] = best
        difference = statistics_of(p, y_b)
        reference = statistics_of(p, y_a)
        expected.unary += weight * (difference.unary - reference.unary)
        expected.pairwise += weight * (difference.pairwise - reference.pairwise)
    np.testing.assert_allclose(solution.statistics.unary, expected.unary, atol=1e-9)
    np.testing.assert_allclose(solution.statistics.pairwise, expected.pairwise, atol=1e-9)
    z = rng.normal(size=p.unary.shape)
    np.testing.assert_allclose(solution.perturbation_gap(z), np.sum(expected.unary * z))


def test_solvers_refuse_what_they_cannot_solve():
    three = Potentials(np.zeros((2, 3)), [[0, 1]], [-1.0])
    with pytest.raises(ValueError, match="graph cuts need K = 2 labels"):
        GraphCutSolver().map(three)
    with pytest.raises(ValueError, match="attractive pairwise terms.*edge 0 of sample 0"):
        GraphCutSolver().map(Potentials(np.zeros((2, 2)), [[0, 1]], [0.5]))
    with pytest.raises(ValueError, match="chain-shaped"):
        ChainSolver().map(Potentials(np.zeros((3, 2)), [[0, 2]], np.zeros((2, 2))))
    with pytest.raises(ValueError, match="shared"):
        ChainSolver().map(Potentials(np.zeros((2, 2)), [[0, 1]], [-1.0]))
    with pytest.raises(ValueError, match="unary scores of sample 1 are not finite"):
        GraphCutSolver().map(
            Potentials(np.array([[0, 1], [0, 1], [0, np.inf]]), node_offsets=[0, 2, 3])
        )
    with pytest.raises(ValueError, match="increasing order"):
        ChainSolver().clamped_maps(
            Potentials(np.zeros((3, 2)), [[0, 1], [1, 2]], np.zeros((2, 2))), [2, 0], [0, 0], [1, 1]
        )
    with pytest.raises(ValueError, match="computes no marginals"):
        GraphCutSolver().marginals(Potentials(np.zeros((2, 2))))
    with pytest.raises(ValueError, match="too many to enumerate"):
        BruteForceSolver(max_labellings=100).map(Potentials(np.zeros((10, 2))))
    with pytest.raises(ValueError, match="solver must be one of"):
        check_solver("qpbo")
    with pytest.raises(ValueError, match="pairwise must have shape"):
        Potentials(np.zeros((3, 2)), [[0, 1]], np.zeros(3))
    with pytest.raises(ValueError, match="edge 0 .0, 2. of sample 0 leaves the sample.s nodes"):
        Potentials(np.zeros((3, 2)), [[0, 2]], [-1.0], [0, 2, 3], [0, 1, 1]).check()


class LoopSolver(Solver):
    """A new solver in one class: exact MAP by a Python loop over the labellings of each sample
    (``clamped_maps`` comes from the base class)."""

    name = "loop"

    def map(self, potentials, clamp=None, n_jobs=None):
        out = []
        for i, sample in enumerate(potentials.split()):
            labellings, scores = loop_scores(sample)
            if clamp is not None:
                given = clamp[potentials.node_offsets[i] : potentials.node_offsets[i + 1]]
                fixed = given >= 0
                scores = np.where((labellings[:, fixed] == given[fixed]).all(1), scores, -np.inf)
            out.append(labellings[np.argmax(scores)])
        return np.concatenate(out)


@pytest.mark.parametrize("estimator", [PerturbMAPCRF, MarginalPerturbMAPCRF])
def test_a_new_solver_is_one_class(estimator):
    """A solver written as one class plugs into a structure through solver= and trains the
    learners: it gives the same model as the built-in brute-force solver (both exact, same
    perturbations)."""
    data = make_grid_data(n_samples=6, shape=(3, 3), noise=1.0, random_state=0)
    fits = [
        estimator(GridStructure(solver=solver), max_iter=3, batch_size=2, random_state=0).fit(
            data.data, data.target
        )
        for solver in (LoopSolver(), "brute_force")
    ]
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, atol=1e-12)
    assert fits[0].structure_.solver_.name == "loop"
    assert fits[0].score(data.data, data.target) > 0.5
    probabilities = [
        f.predict_marginals(data.data[:2], method="perturb", n_perturbations=20) for f in fits
    ]
    np.testing.assert_allclose(probabilities[0][1], probabilities[1][1])


#: Seconds a call may take before the test fails as a hang.
TIME_LIMIT = 10


@contextmanager
def time_limit(seconds=TIME_LIMIT):
    def fail(signum, frame):
        raise TimeoutError(f"the call did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _chain_potentials(lengths, k, rng, shared=False):
    """Valid chain-shaped potentials (every solver's input, Viterbi included)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    edges = np.concatenate(
        [
            np.column_stack([np.arange(a, b - 1), np.arange(a + 1, b)])
            for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ]
    ).astype(np.intp)
    edge_offsets = np.concatenate([[0], np.cumsum(np.maximum(np.asarray(lengths) - 1, 0))])
    pairwise = -np.eye(k) if shared else -rng.random(len(edges))
    if not shared:  # attractive Potts, handled by every solver up to its K
        pairwise = -np.abs(pairwise)
    return Potentials(rng.normal(size=(offsets[-1], k)), edges, pairwise, offsets, edge_offsets)


MALFORMATIONS = [
    "negative edge",
    "edge past the nodes",
    "edge across samples",
    "self-loop",
    "nan unary",
    "inf pairwise",
    "clamp of wrong length",
    "clamp label too large",
    "clamp label below -1",
    "float clamp",
]


def _malformed(kind, p, rng):
    """``(potentials, clamp)`` with one defect, and the words the error must contain."""
    clamp = None
    edges, unary, pairwise = p.edges.copy(), p.unary.copy(), p.pairwise.copy()
    e = int(rng.integers(p.n_edges))
    if kind == "negative edge":
        edges[e, 1] = -1
        words = "leaves the sample"
    elif kind == "edge past the nodes":
        edges[e, 1] = p.n_nodes + 3
        words = "leaves the sample"
    elif kind == "edge across samples":
        edges[0, 1] = p.node_offsets[1]  # sample 0's first edge to sample 1's first node
        words = "leaves the sample"
    elif kind == "self-loop":
        edges[e, 1] = edges[e, 0]
        words = "self-loop"
    elif kind == "nan unary":
        unary[int(rng.integers(p.n_nodes)), 0] = np.nan
        words = "not finite"
    elif kind == "inf pairwise":
        pairwise.flat[int(rng.integers(pairwise.size))] = -np.inf
        words = "not finite"
    else:
        clamp = np.full(p.n_nodes, -1)
        if kind == "clamp of wrong length":
            clamp = clamp[:-1]
            words = "clamp must be an int array"
        elif kind == "clamp label too large":
            clamp[0] = p.n_states
            words = "clamp labels must lie in"
        elif kind == "clamp label below -1":
            clamp[0] = -2
            words = "clamp labels must lie in"
        else:
            clamp = clamp.astype(float)
            words = "clamp must be an int array"
    broken = Potentials(unary, edges, pairwise, p.node_offsets, p.edge_offsets)
    return broken, clamp, words


@pytest.mark.parametrize("name", sorted(SOLVERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(MALFORMATIONS),
    lengths=st.lists(st.integers(2, 5), min_size=2, max_size=4),
    k=st.integers(2, 3),
    seed=st.integers(0, 2**16),
)
def test_every_solver_refuses_malformed_input_by_name(name, kind, lengths, k, seed):
    rng = np.random.default_rng(seed)
    solver = SOLVERS[name]()
    if solver.max_states is not None:
        k = min(k, solver.max_states)
    p = _chain_potentials(lengths, k, rng, shared=name == "viterbi")
    broken, clamp, words = _malformed(kind, p, rng)
    calls = [lambda: solver.map(broken, clamp)]
    if solver.has_marginals:
        calls.append(lambda: solver.marginals(broken, clamp))
    if clamp is None:
        calls.append(lambda: solver.clamped_maps(broken, np.array([0]), np.array([1]), np.ones(1)))
    for call in calls:
        with time_limit(), pytest.raises(ValueError, match=words):
            call()


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_every_solver_takes_edgeless_one_label_and_empty_models(name, rng):
    solver = SOLVERS[name]()
    shared = name == "viterbi"
    for k in (1, 2):
        single = Potentials(
            rng.normal(size=(3, k)),
            None,
            -np.eye(k) if shared else None,
            [0, 1, 2, 3],
            [0, 0, 0, 0],
        )
        with time_limit():
            labels = solver.map(single)
        np.testing.assert_array_equal(labels, single.unary.argmax(axis=1))
    empty = Potentials(np.zeros((0, 2)), None, -np.eye(2) if shared else None)
    with time_limit():
        assert solver.map(empty).shape == (0,)


def test_complex_scores_and_bad_solver_parameters_are_named():
    with pytest.raises(ValueError, match="unary scores must be real numbers"):
        Potentials(np.zeros((2, 2)) + 1j, [[0, 1]], [0.0])
    with pytest.raises(TypeError, match="takes Potentials, got ndarray"):
        BruteForceSolver().map(np.zeros((2, 2)))
    cases = [
        (lambda: MessagePassingSolver(max_sweeps=-5), "max_sweeps"),
        (lambda: MessagePassingSolver(max_sweeps=2.5), "max_sweeps"),
        (lambda: MessagePassingSolver(tol=np.nan), "tol must be a finite number"),
        (lambda: MessagePassingSolver(counting_numbers="loopy"), "counting_numbers must be one of"),
        (lambda: BruteForceSolver(max_labellings=0), "max_labellings"),
        (lambda: GibbsSampler(n_sweeps=0), "n_sweeps"),
        (lambda: AlphaExpansionSolver(max_cycles=-1), "max_cycles"),
    ]
    for make, words in cases:
        with pytest.raises((ValueError, TypeError), match=words):
            make()


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda v: AlphaExpansionSolver(max_cycles=v), "max_cycles"),
        (lambda v: AlphaExpansionSolver(clamp_window=v), "clamp_window"),
        (lambda v: MessagePassingSolver(max_sweeps=v), "max_sweeps"),
        (lambda v: GibbsSampler(n_sweeps=v), "n_sweeps"),
        (lambda v: BruteForceSolver(max_labellings=v), "max_labellings"),
    ],
)
def test_solver_counts_are_checked_alike(make, name):
    """Every solver's counting parameter: a ValueError below 1, a TypeError for a float or a
    bool, both naming it; numpy integers are taken as ints."""
    with pytest.raises(ValueError, match=name):
        make(0)
    for wrong in (2.0, True, "3"):
        with pytest.raises(TypeError, match=name):
            make(wrong)
    solver = make(np.int64(3))
    assert getattr(solver, name) == 3 and type(getattr(solver, name)) is int


def _set_clamped_reference(potentials, node, allowed):
    """The best labelling of a one-sample model with ``node`` in the set ``allowed``, by
    enumeration."""
    labellings, scores = scores_of(potentials)
    scores = np.where(allowed[labellings[:, node]], scores, -np.inf)
    return labellings[np.argmax(scores)]


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("solver", [ChainSolver(), BruteForceSolver()])
def test_set_valued_clamps_give_the_best_labelling_with_the_node_in_its_set(solver, dynamic, rng):
    sets = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0], [1, 1, 1, 0]], dtype=bool)
    for _ in range(5):
        p = _random_chains(rng)
        nodes = np.array([0, 2, 5, 7, 9, 11])
        labels = rng.integers(0, len(sets), size=len(nodes))
        weights = rng.random(len(nodes))
        for skip in (False, True):
            solution = solver.clamped_maps(
                p, nodes, labels, weights, sets=sets, skip_agreeing=skip, dynamic=dynamic
            )
            unary = np.zeros(p.unary.shape)
            pairwise = np.zeros(p.pairwise.shape)
            map_labels = solver.map(p)
            np.testing.assert_array_equal(solution.map_labels, map_labels)
            for node, label, weight in zip(nodes, labels, weights, strict=True):
                sample = p.node_sample[node]
                one = p.sample(sample)
                local = node - p.node_offsets[sample]
                best = _set_clamped_reference(one, local, sets[label])
                at_map = map_labels[p.node_offsets[sample] : p.node_offsets[sample + 1]]
                if skip:
                    assert solution.solved[list(nodes).index(node)] == (
                        not sets[label, at_map[local]]
                    )
                difference_b = statistics_of(one, best)
                difference_a = statistics_of(one, at_map)
                rows = slice(p.node_offsets[sample], p.node_offsets[sample + 1])
                unary[rows] += weight * (difference_b.unary - difference_a.unary)
                pairwise += weight * (difference_b.pairwise - difference_a.pairwise)
            np.testing.assert_allclose(solution.statistics.unary, unary, atol=1e-12)
            np.testing.assert_allclose(solution.statistics.pairwise, pairwise, atol=1e-12)


def test_singleton_sets_are_single_label_clamps(rng):
    p = _random_chains(rng)
    nodes, labels, weights = np.array([1, 6]), np.array([2, 0]), np.array([1.0, 0.5])
    identity = np.eye(4, dtype=bool)
    with_sets = ChainSolver().clamped_maps(p, nodes, labels, weights, sets=identity)
    single = ChainSolver().clamped_maps(p, nodes, labels, weights)
    np.testing.assert_array_equal(with_sets.statistics.unary, single.statistics.unary)


def test_bad_sets_are_refused(rng):
    p = _random_chains(rng)
    with pytest.raises(ValueError, match="sets must be a bool array of shape"):
        ChainSolver().clamped_maps(p, [0], [0], [1.0], sets=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="at least one label"):
        ChainSolver().clamped_maps(p, [0], [0], [1.0], sets=np.zeros((1, 4), bool))
    with pytest.raises(ValueError, match="query sets must lie in 0..0"):
        ChainSolver().clamped_maps(p, [0], [1], [1.0], sets=np.ones((1, 4), bool))


RNG = np.random.default_rng(0)


def test_clamp_query_weights_must_be_finite():
    potentials = Potentials(RNG.normal(size=(3, 2)), [[0, 1], [1, 2]], [-1.0, -1.0])
    with pytest.raises(ValueError, match="weights of the clamp queries must be finite"):
        GraphCutSolver().clamped_maps(potentials, [0, 1], [1, 0], [1.0, np.nan])


def _mixed_batch(rng, k=3):
    """Samples of several shapes in one batch: a grid (bipartite), a triangle with a tail and
    a complete graph (odd cycles), a chain, one lone node; tables of both signs."""
    graphs = [
        grid_edges((3, 4)),
        np.array([[0, 1], [1, 2], [2, 0], [2, 3]]),
        np.array(list(itertools.combinations(range(5), 2))),
        np.stack([np.arange(5), np.arange(1, 6)], axis=1),
        np.empty((0, 2), dtype=int),
    ]
    sizes = [int(e.max()) + 1 if len(e) else 1 for e in graphs]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    edges = np.concatenate([e + o for e, o in zip(graphs, offsets, strict=False)])
    edge_offsets = np.concatenate([[0], np.cumsum([len(e) for e in graphs])])
    unary = rng.normal(size=(offsets[-1], k))
    tables = 1.5 * rng.normal(size=(len(edges), k, k))
    return Potentials(unary, edges, tables, offsets, edge_offsets)


@pytest.mark.parametrize(
    "solver, call",
    [
        (TRWSSolver(), "map"),
        (TRWSSolver(order="colour"), "map"),
        (MessagePassingSolver(counting_numbers="convex"), "map"),
        (MessagePassingSolver(counting_numbers="convex"), "marginals"),
        (MessagePassingSolver(), "marginals"),
        (MeanFieldSolver(schedule="sequential"), "marginals"),
    ],
    ids=["trws", "trws-colour", "convex-bp-map", "convex-bp-marginals", "bp", "mean-field"],
)
def test_loopy_solvers_treat_a_sample_the_same_in_any_batch(solver, call):
    """Iterative solvers stop each sample on its own and colour each sample as if alone: a
    sample's labelling or marginals are the same in its batch, alone, or in another batch
    (so chunked and parallel predictions agree with one call)."""
    p = _mixed_batch(np.random.default_rng(7))

    def solve(samples):
        out = getattr(solver, call)(p.take(samples))
        return out if call == "map" else out.node

    together = solve(np.arange(p.n_samples))
    alone = np.concatenate([solve([i]) for i in range(p.n_samples)])
    shuffled_order = [3, 0, 4, 2, 1]
    shuffled = solve(shuffled_order)
    parts = np.split(shuffled, np.cumsum([p.lengths[i] for i in shuffled_order])[:-1])
    regrouped = np.concatenate([parts[shuffled_order.index(i)] for i in range(p.n_samples)])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(together, regrouped)


@pytest.mark.parametrize("solver", [ChainSolver(), ForestSolver(), BruteForceSolver()])
def test_event_log_probabilities_are_exact(solver, rng):
    """Whole labellings and partial events (clamped nodes) against enumeration on two chains."""
    k, unary, transition = 3, rng.normal(size=(7, 3)), rng.normal(size=(3, 3))
    edges = np.array([[0, 1], [1, 2], [2, 3], [4, 5], [5, 6]])
    potentials = Potentials(unary, edges, transition, np.array([0, 4, 7]), np.array([0, 3, 5]))
    nodes = [0, 1, 2, 3, 6, 4, 2, 1]  # a whole labelling, then two events of a few nodes
    labels = [0, 2, 1, 1, 0, 2, 1, 1]
    events = [0, 0, 0, 0, 1, 1, 2, 2]
    got = solver.event_log_probabilities(potentials, nodes, labels, events)

    def log_p(sample_nodes, fixed):
        scores, held = [], []
        for y in itertools.product(range(k), repeat=len(sample_nodes)):
            s = sum(unary[v, y[i]] for i, v in enumerate(sample_nodes))
            s += sum(transition[y[i], y[i + 1]] for i in range(len(y) - 1))
            scores.append(s)
            held.append(all(y[sample_nodes.index(v)] == label for v, label in fixed))
        scores, held = np.array(scores), np.array(held)
        return np.logaddexp.reduce(scores[held]) - np.logaddexp.reduce(scores)

    expected = [
        log_p([0, 1, 2, 3], [(0, 0), (1, 2), (2, 1), (3, 1)]),
        log_p([4, 5, 6], [(6, 0), (4, 2)]),
        log_p([0, 1, 2, 3], [(2, 1), (1, 1)]),
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_event_log_probabilities_refuse_bad_events():
    potentials = Potentials(np.zeros((4, 2)), np.array([[0, 1], [2, 3]]), np.zeros((2, 2)),
                            np.array([0, 2, 4]), np.array([0, 1, 2]))  # fmt: skip
    solver = ChainSolver()
    with pytest.raises(ValueError, match="two samples"):
        solver.event_log_probabilities(potentials, [1, 2], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="twice"):
        solver.event_log_probabilities(potentials, [1, 1], [0, 1], [0, 0])
    with pytest.raises(ValueError, match="at least one node"):
        solver.event_log_probabilities(potentials, [0], [0], [1])
    with pytest.raises(ValueError, match="labels must lie"):
        solver.event_log_probabilities(potentials, [0], [2], [0])


@pytest.mark.parametrize("solver", [ChainSolver(), ForestSolver(), BruteForceSolver()])
def test_set_event_log_probabilities_sum_over_the_allowed_states(solver, rng):
    """Events "each node in a set of states" (a label's hidden states) against enumeration:
    a whole labelling of sets, a partial one, and one the sets forbid."""
    k, unary, transition = 3, rng.normal(size=(7, 3)), rng.normal(size=(3, 3))
    edges = np.array([[0, 1], [1, 2], [2, 3], [4, 5], [5, 6]])
    potentials = Potentials(unary, edges, transition, np.array([0, 4, 7]), np.array([0, 3, 5]))
    sets = {0: [0, 1], 1: [2], 2: [1, 2], 3: [0, 2], 4: [], 5: [0, 1, 2], 6: [1]}
    nodes = [0, 1, 2, 3, 4, 6, 5]
    events = [0, 0, 0, 0, 1, 2, 2]
    allowed = np.array([[s in sets[v] for s in range(k)] for v in nodes])
    got = solver.set_event_log_probabilities(potentials, nodes, allowed, events)

    def log_p(sample_nodes, members):
        scores, held = [], []
        for y in itertools.product(range(k), repeat=len(sample_nodes)):
            s = sum(unary[v, y[i]] for i, v in enumerate(sample_nodes))
            s += sum(transition[y[i], y[i + 1]] for i in range(len(y) - 1))
            scores.append(s)
            held.append(all(y[sample_nodes.index(v)] in sets[v] for v in members))
        scores, held = np.array(scores), np.array(held)
        if not held.any():
            return -np.inf
        return np.logaddexp.reduce(scores[held]) - np.logaddexp.reduce(scores)

    expected = [log_p([0, 1, 2, 3], [0, 1, 2, 3]), log_p([4, 5, 6], [4]), log_p([4, 5, 6], [6, 5])]
    assert expected[1] == -np.inf
    np.testing.assert_allclose(np.exp(got), np.exp(expected), rtol=1e-10, atol=1e-300)
    with pytest.raises(
        ValueError, match=r"allowed must be a bool array of shape \(n_event_nodes, 3\)"
    ):
        solver.set_event_log_probabilities(potentials, [0], np.ones((1, 2), bool), [0])
