"""Mean field: the solver's fixed points, bounds and schedules, the backpropagation through its
unrolled iterations (against finite differences), and MeanFieldCRF's learning."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import logsumexp, softmax

from pmap_sklearn import GridStructure, MeanFieldCRF
from pmap_sklearn._backend import MeanFieldModel, unrolled
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.learners.mean_field_crf import unrolled_backward
from pmap_sklearn.solvers import MeanFieldSolver, Potentials

from .helpers import scores_of

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


@pytest.mark.parametrize("loss", ["log", "hamming"])
def test_the_learner_gradient_in_w_matches_finite_differences(loss):
    """The oracle's gradient through the structure (Potts grids, K = 3), to 1e-6 relative."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(3, 4, 2)) for _ in range(2)]
    y = [rng.integers(0, 3, size=(3, 4)) for _ in range(2)]
    model = MeanFieldCRF(GridStructure(), loss=loss, n_iterations=3, max_iter=1).fit(X, y)
    batch = model.structure_.prepare(X)
    labels = model.structure_.prepare_labels(batch, y)
    oracle = model._make_oracle(batch, labels)
    w = rng.normal(size=model.coef_.shape)
    gradient, _ = oracle(slice(0, 2), w, None)
    numeric = approx_fprime(w, lambda v: oracle(slice(0, 2), v, None)[1], 1e-7)
    assert np.abs(numeric - gradient).max() / np.abs(gradient).max() < 1e-6


def test_learns_grids_and_its_marginals_are_its_mean_field():
    data = make_grid_data(n_samples=10, random_state=0)
    model = MeanFieldCRF(random_state=0).fit(data.data[:6], data.target[:6])
    assert isinstance(model.structure_.solver_, MeanFieldSolver)
    assert model.structure_.solver_.n_iterations == model.n_iterations
    assert model.score(data.data[6:], data.target[6:]) > 0.85
    (marginals,) = model.predict_marginals(data.data[6:7])
    np.testing.assert_allclose(marginals.sum(axis=-1), 1.0)
    np.testing.assert_array_equal(marginals.argmax(axis=-1), model.predict(data.data[6:7])[0])
