"""Log-partition bounds (thesis Prop. 2.1): A <= A_logistic <= A_L-field, checked by enumeration."""

import itertools

import numpy as np
import pytest

from pmap_sklearn import GraphSample, PerturbMAPCRF, Potentials
from pmap_sklearn.bounds import (
    lfield_point,
    log_partition_exact,
    log_partition_lfield,
    log_partition_perturb,
)


def random_arrays(rng, n_nodes=9, density=0.35):
    unary = rng.normal(scale=1.5, size=(n_nodes, 2))
    edges = np.array(
        [(i, j) for i, j in itertools.combinations(range(n_nodes), 2) if rng.random() < density]
    ).reshape(-1, 2)
    weights = -rng.exponential(1.0, size=len(edges))
    return unary, edges, weights


def random_model(rng, n_nodes=9, density=0.35):
    return Potentials(*random_arrays(rng, n_nodes, density))


def enumerate_log_partition(unary, edges, weights):
    """Independent reference: a Python loop over all labellings."""
    scores = []
    for y in itertools.product([0, 1], repeat=len(unary)):
        y = np.array(y)
        score = unary[np.arange(len(y)), y].sum()
        score += sum(w for (i, j), w in zip(edges, weights, strict=True) if y[i] != y[j])
        scores.append(score)
    return float(np.log(np.sum(np.exp(scores))))


def cut_function(unary, edges, weights):
    """``F(S) = f(0) - f(1_S)`` as a function of a 0/1 vector."""
    gain = unary[:, 1] - unary[:, 0]

    def value(y):
        return -weights @ (y[edges[:, 0]] != y[edges[:, 1]]) - gain @ y

    return value


def greedy_vertex(function, order):
    """Vertex of the base polytope B(F) for a node order (Edmonds' greedy algorithm)."""
    y = np.zeros(len(order), dtype=int)
    vertex = np.zeros(len(order))
    previous = 0.0
    for node in order:
        y[node] = 1
        current = function(y)
        vertex[node] = current - previous
        previous = current
    return vertex


def test_exact_matches_an_independent_enumeration(rng):
    for _ in range(3):
        unary, edges, weights = random_arrays(rng, n_nodes=7)
        # exact accepts any sign of the pairwise weights, and any number of labels
        signed = weights * rng.choice([-1, 1], size=len(weights))
        for w in (weights, signed):
            assert log_partition_exact(Potentials(unary, edges, w)) == pytest.approx(
                enumerate_log_partition(unary, edges, w)
            )
    three = rng.normal(size=(4, 3))
    assert log_partition_exact(Potentials(three)) == pytest.approx(
        np.logaddexp.reduce(three, axis=1).sum()
    )


def test_bounds_are_ordered_on_random_models(rng):
    for _ in range(6):
        model = random_model(rng)
        exact = log_partition_exact(model)
        estimate, error = log_partition_perturb(model, n_samples=400, random_state=rng)
        lfield = log_partition_lfield(model)
        assert exact <= estimate + 4 * error  # A <= A_logistic (statistical)
        assert estimate - 4 * error <= lfield  # A_logistic <= A_L-field (statistical)
        assert exact <= lfield + 1e-9  # deterministic
        # With couplings the bounds are strict, so the test can fail if a bound is wrong.
        assert lfield - exact > 0.05


def test_gumbel_and_logistic_estimate_the_same_bound(rng):
    model = random_model(rng)
    logistic, se_logistic = log_partition_perturb(model, n_samples=1500, random_state=0)
    gumbel, se_gumbel = log_partition_perturb(
        model, n_samples=1500, perturbation="gumbel", random_state=1
    )
    assert abs(logistic - gumbel) < 4 * np.hypot(se_logistic, se_gumbel)


def test_bounds_are_tight_for_separable_models(rng):
    unary = rng.normal(scale=2.0, size=(12, 2))
    exact = log_partition_exact(Potentials(unary))
    assert exact == pytest.approx(np.logaddexp(unary[:, 0], unary[:, 1]).sum())
    assert log_partition_lfield(Potentials(unary)) == pytest.approx(exact, abs=1e-10)
    estimate, error = log_partition_perturb(Potentials(unary), n_samples=2000, random_state=0)
    assert abs(estimate - exact) < 4 * error


def test_lfield_point_is_the_min_norm_point_of_the_base_polytope(rng):
    for _ in range(4):
        unary, edges, weights = random_arrays(rng, n_nodes=8)
        function = cut_function(unary, edges, weights)
        point = lfield_point(Potentials(unary, edges, weights))
        # In B(F): s(V) = F(V) and s(S) <= F(S) for every S.
        assert point.sum() == pytest.approx(function(np.ones(8, dtype=int)))
        for bits in itertools.product([0, 1], repeat=8):
            y = np.array(bits)
            assert point @ y <= function(y) + 1e-9
        # Minimal norm and minimal L-field objective over vertices and their mixtures.
        vertices = np.array([greedy_vertex(function, rng.permutation(8)) for _ in range(60)])
        mixtures = rng.dirichlet(np.ones(len(vertices)), size=200) @ vertices
        for s in np.concatenate([vertices, mixtures]):
            assert point @ point <= s @ s + 1e-9
            assert np.logaddexp(0, -point).sum() <= np.logaddexp(0, -s).sum() + 1e-9


def test_estimator_potentials_feed_the_bounds(rng):
    """A fitted estimator's potentials, one sample at a time, are the model the bounds see."""
    samples, labels = [], []
    for _ in range(6):
        n = 6
        edges = np.array([(i, i + 1) for i in range(n - 1)] + [(0, n - 1)])
        y = rng.integers(0, 2, size=n)
        features = np.column_stack([y + rng.normal(scale=0.5, size=n)])
        samples.append(GraphSample(features, edges, np.ones((len(edges), 1))))
        labels.append(y)
    model = PerturbMAPCRF("graph", max_iter=5, random_state=0).fit(samples, labels)
    potentials = model.potentials(samples).split()
    assert len(potentials) == 6
    first = potentials[0]
    batch = model.structure_.prepare(samples[:1])
    for bits in itertools.product([0, 1], repeat=6):
        y = np.array(bits)
        psi = model.structure_.joint_feature(batch, y)
        assert first.score(y)[0] == pytest.approx(model.coef_ @ psi)
    assert log_partition_exact(first) <= log_partition_lfield(first)
    tables = Potentials(first.unary, first.edges, first.edge_tables())  # same model, other kind
    assert log_partition_lfield(tables) == pytest.approx(log_partition_lfield(first))


def test_bad_models_are_refused(rng):
    unary, edges, weights = random_arrays(rng, n_nodes=5)
    repulsive = Potentials(unary, edges, np.abs(weights) + 0.1)
    with pytest.raises(ValueError, match="binary models"):
        log_partition_lfield(Potentials(rng.normal(size=(5, 3))))
    with pytest.raises(ValueError, match="attractive"):
        log_partition_lfield(repulsive)
    with pytest.raises(ValueError, match="attractive"):
        log_partition_perturb(repulsive)
    with pytest.raises(ValueError, match="24 binary nodes"):
        log_partition_exact(Potentials(np.zeros((30, 2))))
    with pytest.raises(ValueError, match="of sample 0 leaves the sample.s nodes 0..4"):
        log_partition_exact(Potentials(unary, edges + 10, weights))
    with pytest.raises(ValueError, match="non-finite"):
        log_partition_exact(Potentials(np.full((3, 2), np.nan)))
    with pytest.raises(ValueError, match="pairwise must have shape"):
        log_partition_exact(Potentials(unary, edges, weights[:-1]))
    with pytest.raises(ValueError, match="perturbation"):
        log_partition_perturb(Potentials(unary, edges, weights), perturbation="normal")
    with pytest.raises(ValueError, match="n_samples must be an int >= 2"):
        log_partition_perturb(Potentials(unary, edges, weights), n_samples=1.5)
    with pytest.raises(ValueError, match="one sample, got 2"):
        log_partition_exact(Potentials(np.zeros((2, 2)), node_offsets=[0, 1, 2]))
    with pytest.raises(TypeError, match="Potentials of one sample"):
        log_partition_exact(unary)


def test_bounds_refuse_an_empty_model():
    with pytest.raises(ValueError, match="no node"):
        log_partition_exact(Potentials(np.zeros((0, 2))))
