"""LocalSearchSolver: local optima, exactness where ICM is exact, agreement with TRW-S."""

import numpy as np
import pytest

from pmap_sklearn import Potentials
from pmap_sklearn._backend.local_search import STARTS
from pmap_sklearn.solvers import SOLVERS, LocalSearchSolver, TRWSSolver

from ..helpers import scores_of


def _dense_batch(rng, n_samples, n_nodes, k, coupling=1.0, tables=True):
    """``n_samples`` full graphs on ``n_nodes`` nodes, one after the other."""
    first, second = np.triu_indices(n_nodes, 1)
    local = np.column_stack([first, second])
    edges = np.concatenate([local + s * n_nodes for s in range(n_samples)])
    unary = rng.normal(size=(n_samples * n_nodes, k))
    if tables:
        pairwise = coupling * rng.normal(size=(len(edges), k, k))
    else:
        pairwise = coupling * rng.normal(size=len(edges))
    return Potentials(
        unary,
        edges,
        pairwise,
        np.arange(n_samples + 1) * n_nodes,
        np.arange(n_samples + 1) * len(local),
    )


def _flips_improve(potentials, labels, free=None):
    """Whether a single change of a (free) node's label raises some sample's score."""
    p = potentials
    base = p.score(labels)
    nodes = range(p.n_nodes) if free is None else np.flatnonzero(free)
    for node in nodes:
        for k in range(p.n_states):
            changed = labels.copy()
            changed[node] = k
            if p.score(changed)[p.node_sample[node]] > base[p.node_sample[node]] + 1e-9:
                return True
    return False


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("tables", [True, False])
def test_the_labelling_is_a_local_optimum(k, tables, rng):
    p = _dense_batch(rng, 6, 5, k, coupling=2.0, tables=tables)
    labels = LocalSearchSolver().map(p)
    assert labels.shape == (p.n_nodes,)
    assert not _flips_improve(p, labels)
    for s, sample in enumerate(p.split()):  # never above the optimum
        assert p.score(labels)[s] <= scores_of(sample)[1].max() + 1e-9


def test_exact_without_edges(rng):
    p = Potentials(rng.normal(size=(7, 3)), None, None, [0, 3, 7], [0, 0, 0])
    np.testing.assert_array_equal(LocalSearchSolver().map(p), p.unary.argmax(axis=1))


def test_exact_when_the_unary_margins_dominate(rng):
    """Every node's unary gap exceeds what its edges can change: the unary argmax is the unique
    optimum, which brute force finds too."""
    p = _dense_batch(rng, 5, 5, 2, coupling=0.05)
    gap = np.abs(p.unary[:, 1] - p.unary[:, 0])
    p = p.add_unary(np.where(gap < 1.0, 1.0, 0.0)[:, None] * np.array([[0.0, 1.0]]))
    labels = LocalSearchSolver().map(p)
    for s, sample in enumerate(p.split()):
        labellings, scores = scores_of(sample)
        np.testing.assert_array_equal(
            labels[p.node_offsets[s] : p.node_offsets[s + 1]], labellings[scores.argmax()]
        )


@pytest.mark.parametrize("k", [2, 3])
def test_energies_agree_with_trws_and_brute_force(k, rng):
    """On random dense graphs the searches reach TRW-S's score (and the optimum) on most
    samples."""
    p = _dense_batch(rng, 40, 6, k, coupling=1.0)
    local = p.score(LocalSearchSolver().map(p))
    trws = p.score(TRWSSolver().map(p))
    optimum = np.array([scores_of(sample)[1].max() for sample in p.split()])
    assert np.mean(local >= trws - 1e-9) >= 0.8
    assert np.mean(local >= optimum - 1e-9) >= 0.8
    assert np.all(local <= optimum + 1e-9)


def test_batch_of_mixed_graphs_equals_each_sample_alone(rng):
    parts = [_dense_batch(rng, 1, n, 2) for n in (3, 5, 4)]
    unary = np.concatenate([q.unary for q in parts])
    offsets = np.cumsum([0] + [q.n_nodes for q in parts])
    edges = np.concatenate([q.edges + o for q, o in zip(parts, offsets[:-1], strict=True)])
    pairwise = np.concatenate([q.pairwise for q in parts])
    edge_offsets = np.cumsum([0] + [q.n_edges for q in parts])
    p = Potentials(unary, edges, pairwise, offsets, edge_offsets)
    alone = np.concatenate([LocalSearchSolver().map(q) for q in parts])
    np.testing.assert_array_equal(LocalSearchSolver().map(p), alone)


@pytest.mark.parametrize("k", [2, 3])
def test_clamps_and_init(k, rng):
    p = _dense_batch(rng, 4, 5, k, coupling=2.0)
    clamp = np.full(p.n_nodes, -1)
    clamp[::3] = rng.integers(0, k, size=len(clamp[::3]))
    labels = LocalSearchSolver().map(p, clamp)
    np.testing.assert_array_equal(labels[clamp >= 0], clamp[clamp >= 0])
    assert not _flips_improve(p, labels, clamp < 0)
    init = rng.integers(0, k, size=p.n_nodes)
    started = LocalSearchSolver(starts="unary").map(p, init=init)
    assert np.all(p.score(started) >= p.score(init) - 1e-12)
    assert np.all(p.score(started) >= p.score(LocalSearchSolver(starts="unary").map(p)) - 1e-12)


def test_registered_with_honest_capabilities():
    assert SOLVERS["local_search"] is LocalSearchSolver
    caps = LocalSearchSolver.capabilities
    assert not caps.marginals and caps.clamps and caps.warm_start
    assert caps.map_quality.startswith("approximate")


def test_bad_parameters_are_named(rng):
    with pytest.raises(ValueError, match="starts"):
        LocalSearchSolver(starts=("best",))
    with pytest.raises(ValueError, match="starts"):
        LocalSearchSolver(starts=())
    with pytest.raises(ValueError, match="max_sweeps"):
        LocalSearchSolver(max_sweeps=0)
    with pytest.raises(TypeError, match="max_sweeps"):
        LocalSearchSolver(max_sweeps=True)
    with pytest.raises(TypeError, match="Potentials"):
        LocalSearchSolver().map(np.zeros((3, 2)))
    p = _dense_batch(rng, 2, 3, 2)
    with pytest.raises(ValueError, match="init"):
        LocalSearchSolver().map(p, init=np.full(p.n_nodes, 5))


@pytest.mark.parametrize("k", [2, 3])
def test_many_starts_keep_each_samples_best(k, rng):
    """The search from every start at once scores, on every sample, the best of the searches
    from each kind of start alone (binary batches sharing one graph take the quadratic form's
    scores: their choice must be the true scores' choice)."""
    p = _dense_batch(rng, 30, 7, k, coupling=3.0)
    together = p.score(LocalSearchSolver().map(p))
    alone = np.max([p.score(LocalSearchSolver(starts=(s,)).map(p)) for s in STARTS], axis=0)
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-9)
