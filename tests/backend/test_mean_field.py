"""MeanFieldSolver: fixed points, bounds, schedules and backpropagation."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import logsumexp, softmax

from pmap_sklearn import MeanFieldCRF, Potentials
from pmap_sklearn._backend import MeanFieldModel, unrolled
from pmap_sklearn._backend.viterbi import ChainSolver
from pmap_sklearn._validation import NonFiniteError
from pmap_sklearn.learners.mean_field_crf import unrolled_backward
from pmap_sklearn.solvers import MeanFieldSolver

from ..helpers import scores_of

LOOP = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])


def _loopy(rng, k=3, coupling=1.0):
    return Potentials(rng.normal(size=(4, k)), LOOP, coupling * rng.normal(size=(len(LOOP), k, k)))


def test_without_edges_mean_field_is_exact(rng):
    unary = rng.normal(size=(5, 3))
    marginals = MeanFieldSolver().marginals(Potentials(unary, np.empty((0, 2), int), np.zeros(0)))
    np.testing.assert_allclose(marginals.node, softmax(unary, axis=1))
    np.testing.assert_allclose(marginals.log_partition, [logsumexp(unary, axis=1).sum()])


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_fixed_point_and_lower_bound(schedule, rng):
    """Converged marginals are a fixed point of the update, and E_q[f] + H(q) <= log Z."""
    potentials = _loopy(rng, coupling=0.5)
    marginals = MeanFieldSolver(200, damping=0.3, schedule=schedule).marginals(potentials)
    q = marginals.node
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    np.testing.assert_allclose(softmax(MeanFieldModel(potentials).field(q), axis=1), q, atol=1e-9)
    _, scores = scores_of(potentials)
    assert marginals.log_partition[0] <= logsumexp(scores) + 1e-12


def test_sequential_updates_never_lower_the_bound(rng):
    """Coordinate ascent on the mean-field objective, one colour class at a time."""
    potentials = _loopy(rng, coupling=2.0)
    bounds = [
        MeanFieldSolver(n, schedule="sequential").marginals(potentials).log_partition[0]
        for n in range(8)
    ]
    assert np.all(np.diff(bounds) >= -1e-12), bounds


def test_potts_products_equal_those_of_their_tables(rng):
    """The O(E K) Potts field, pairwise statistics and bound are those of the (E, K, K) tables
    the Potts weights stand for."""
    weights = rng.normal(size=len(LOOP))
    unary = rng.normal(size=(4, 3))
    potts = MeanFieldModel(Potentials(unary, LOOP, weights))
    tables = MeanFieldModel(Potentials(unary, LOOP, weights[:, None, None] * (1 - np.eye(3))))
    q = softmax(rng.normal(size=(4, 3)), axis=1)
    np.testing.assert_allclose(potts.field(q), tables.field(q))
    np.testing.assert_allclose(potts.free_energy_bound(q), tables.free_energy_bound(q))
    u, v = rng.normal(size=(2, len(LOOP), 3))
    pair = np.einsum("ek,el->ekl", u, v)
    np.testing.assert_allclose(
        potts.pair_statistics(u, v), pair.sum((1, 2)) - np.trace(pair, 0, 1, 2)
    )


def test_clamped_nodes_keep_their_label(rng):
    potentials = _loopy(rng)
    clamp = np.array([2, -1, 0, -1])
    solver = MeanFieldSolver()
    labels = solver.map(potentials, clamp)
    assert labels[0] == 2 and labels[2] == 0
    q = solver.marginals(potentials, clamp).node
    np.testing.assert_allclose(q[[0, 2]], np.eye(3)[[2, 0]])


@pytest.mark.parametrize("kind", ["tables", "potts"])
@pytest.mark.parametrize("damping", [0.0, 0.4])
def test_backpropagation_matches_finite_differences(damping, kind, rng):
    """∂/∂(unary, pairwise scores) of a loss of the T-th iterate, to 1e-6 relative: per-edge
    tables, and Potts weights (their O(E K) products)."""
    potentials = _loopy(rng)
    if kind == "potts":
        potentials = Potentials(potentials.unary, LOOP, rng.normal(size=len(LOOP)))
    target = rng.normal(size=(4, 3))

    def loss(theta):
        unary, pairwise = theta[:12].reshape(4, 3), theta[12:]
        if kind == "tables":
            pairwise = pairwise.reshape(len(LOOP), 3, 3)
        iterates = unrolled(MeanFieldModel(Potentials(unary, LOOP, pairwise)), 4, damping)
        return float((target * iterates[-1]).sum())

    model = MeanFieldModel(potentials)
    iterates = unrolled(model, 4, damping)
    gradient = unrolled_backward(model, iterates, target, damping)
    analytic = np.concatenate([gradient.unary.ravel(), gradient.pairwise.ravel()])
    theta = np.concatenate([potentials.unary.ravel(), potentials.pairwise.ravel()])
    numeric = approx_fprime(theta, loss, 1e-7)
    assert np.abs(numeric - analytic).max() / np.abs(analytic).max() < 1e-6


def test_mean_field_solver_refuses_nan_damping_and_what_is_not_potentials():
    with pytest.raises(ValueError, match="damping must be a number"):
        MeanFieldSolver(damping=float("nan"))
    for call in (MeanFieldSolver().map, MeanFieldSolver().marginals):
        with pytest.raises(TypeError, match="takes Potentials, got ndarray"):
            call(np.zeros((3, 2)))
    empty = Potentials(np.zeros((0, 2)))
    for schedule in ("sequential", "parallel"):
        solver = MeanFieldSolver(schedule=schedule)
        assert solver.map(empty).shape == (0,)
        assert solver.marginals(empty).statistics.unary.shape == (0, 2)


def test_mean_field_names_scores_beyond_double_precision():
    unary = np.array([[1e308, 0.0], [0.0, 1e308], [1e308, 0.0]])
    potentials = Potentials(unary, edges=[[0, 1], [1, 2]], pairwise=[-1e308, -1e308])
    with pytest.raises(NonFiniteError, match="too large for mean field.*scale the features"):
        MeanFieldSolver().marginals(potentials)
    clamped = MeanFieldSolver().marginals(  # a clamp's -inf is not a score too large
        Potentials(np.ones((3, 2)), edges=[[0, 1], [1, 2]], pairwise=[-1.0, -1.0]),
        clamp=np.array([1, -1, 0]),
    )
    assert np.isfinite(clamped.statistics.unary).all()


def test_parallel_updates_that_oscillate_end_as_sequential_ones():
    """On strongly attractive chains parallel (Jacobi) updates swing between labellings; the
    samples whose iterates swing are finished by sequential sweeps (the default schedule),
    so their argmax is a mode, not the worst labelling."""
    rng = np.random.default_rng(0)
    n_samples, length = 60, 8
    edges = np.array([[d, d + 1] for d in range(length - 1)])
    potentials = Potentials(
        rng.normal(size=(n_samples * length, 2)),
        edges=np.concatenate([edges + s * length for s in range(n_samples)]),
        pairwise=-5.0 * (1 - np.eye(2)),
        node_offsets=np.arange(n_samples + 1) * length,
        edge_offsets=np.arange(n_samples + 1) * (length - 1),
    )
    best = potentials.score(ChainSolver().map(potentials))
    gap = {
        schedule: (best - potentials.score(MeanFieldSolver(schedule=schedule).map(potentials)))
        for schedule in ("parallel", "sequential")
    }
    assert MeanFieldSolver().schedule == "sequential"
    swung = best - potentials.score(unrolled(MeanFieldModel(potentials), 10, 0.0)[-1].argmax(1))
    assert swung.mean() > 3 * gap["sequential"].mean()  # the plain Jacobi iterates: 8.6 vs 1.5
    np.testing.assert_allclose(gap["parallel"], gap["sequential"])
    solver = MeanFieldCRF("chain")._make_structure().solver  # its model: the unrolled iterates
    assert solver.schedule == "parallel" and not solver.finish_oscillations


@pytest.mark.parametrize("damping", [0.0, 0.5])
def test_parallel_mean_field_finds_the_map_of_a_strongly_attractive_chain(damping):
    """Its Jacobi iterates end at [0, 1, 0] whether damped by 0.5 or not; the MAP is [1, 1, 1]."""
    chain = Potentials(
        np.array([[0.0, -1.1], [0.0, 1.5], [0.0, -0.1]]),
        edges=[[0, 1], [1, 2]],
        pairwise=[-10.0, -10.0],
    )
    iterates = unrolled(MeanFieldModel(chain), 10, damping)
    assert iterates[-1].argmax(axis=1).tolist() == [0, 1, 0]
    labellings = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)])
    best = labellings[np.argmax([chain.score(y)[0] for y in labellings])]
    parallel = MeanFieldSolver(schedule="parallel", damping=damping)
    sequential = MeanFieldSolver(schedule="sequential", damping=damping)
    assert parallel.map(chain).tolist() == best.tolist() == [1, 1, 1]
    assert sequential.map(chain).tolist() == best.tolist()
    np.testing.assert_allclose(parallel.marginals(chain).node, sequential.marginals(chain).node)
    kept = MeanFieldSolver(schedule="parallel", damping=damping, finish_oscillations=False)
    assert kept.map(chain).tolist() == [0, 1, 0]  # the unrolled network, MeanFieldCRF's model


def test_parallel_updates_that_settle_are_left_as_they_are(rng):
    """Without an oscillation the parallel schedule is the unrolled iteration CRF as RNN
    learns through."""
    potentials = _loopy(rng, coupling=0.3)
    q = MeanFieldSolver(5, schedule="parallel").marginals(potentials).node
    np.testing.assert_array_equal(q, unrolled(MeanFieldModel(potentials), 5, 0.0)[-1])
