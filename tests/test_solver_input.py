"""Every registered solver checks what it is given: malformed potentials, clamps and parameters
get a ValueError (or TypeError) naming the argument, never a hang, a crash deep in numpy or
PyMaxflow, or a silent answer. Property-based (hypothesis), each call under a time limit."""

import signal
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pmap_sklearn import PerturbMAPCRF
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.solvers import (
    SOLVERS,
    AlphaExpansionSolver,
    BruteForceSolver,
    ChainLayout,
    ChainSolver,
    GibbsSampler,
    GraphCutSolver,
    MessagePassingSolver,
    Potentials,
)

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
