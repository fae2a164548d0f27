"""MarginalPerturbMAPCRF: accelerations, exactness on separable models, weights, weak labels."""

import itertools

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from pmap_sklearn import (
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    mean_hamming_loss,
    weighted_hamming_loss,
)
from pmap_sklearn.datasets import make_chain_data, make_grid_data
from pmap_sklearn.perturbation import draw, perturb_and_map

from ..helpers import exact_expected_joint_feature, mean_oracle_gradient


def _fitted(structure, X, y, **params):
    """An estimator with its structure fitted, for calling the oracle directly."""
    estimator = MarginalPerturbMAPCRF(structure, **params)
    estimator.structure_ = structure.fit(X, y)
    estimator.classes_ = np.arange(estimator.structure_.n_states_)
    batch = estimator.structure_.prepare(X)
    labels = estimator.structure_.prepare_labels(batch, y, allow_unknown=True)
    return estimator, batch, labels


def _graphs(rng, n_samples=4, n_nodes=12):
    X, y = [], []
    for _ in range(n_samples):
        pairs = np.array([(i, j) for i in range(n_nodes) for j in range(i + 1, n_nodes)])
        edges = pairs[rng.random(len(pairs)) < 0.25]
        X.append(
            GraphSample(
                rng.normal(size=(n_nodes, 3)),
                edges,
                rng.random((len(edges), 2)),
                rng.integers(1, 20, size=n_nodes),
            )
        )
        y.append(rng.integers(0, 2, size=n_nodes))
    return X, y


@pytest.mark.parametrize("kind", ["chain", "graph", "grid"])
def test_gradient_is_identical_for_every_combination_of_accelerations(kind, rng):
    if kind == "chain":
        data = make_chain_data(n_samples=6, n_states=4, n_features=3, random_state=1)
        structure, X, y = ChainStructure(), data.data, data.target
    elif kind == "graph":
        structure, (X, y) = GraphStructure(), _graphs(rng)
    else:
        data = make_grid_data(n_samples=3, shape=(9, 7), random_state=1)
        structure, X, y = GridStructure(connectivity=8), data.data, data.target
    results = []
    for gumbel_reduction, dynamic in itertools.product([True, False], repeat=2):
        estimator, batch, labels = _fitted(
            structure,
            X,
            y,
            gumbel_reduction=gumbel_reduction,
            dynamic=dynamic,
            class_weight="balanced",
        )
        w = estimator.structure_.project(np.random.default_rng(5).normal(size=structure.size_))
        targets = estimator._targets(batch, labels, None, None)
        oracle = estimator._make_oracle(batch, targets)
        results.append(oracle(np.arange(batch.n_samples), w, np.random.default_rng(7)))
    assert np.abs(results[0][0]).sum() > 0
    for gradient, objective in results[1:]:
        np.testing.assert_allclose(gradient, results[0][0], atol=1e-10)
        np.testing.assert_allclose(objective, results[0][1], atol=1e-10)


@pytest.mark.parametrize("soft", [False, True])
def test_separable_gradient_is_the_exact_marginal_likelihood_gradient(soft, rng):
    """Without pairwise terms B_G and A_G are exact, so E_z[gradient] =
    Σ_d Σ_k C_d(k) (E[Ψ | y_d = k] − E[Ψ]) for any targets C (hard labels or soft q)."""
    X = [GraphSample(rng.normal(size=(4, 2)), [[0, 1], [1, 2], [2, 3]], None, [1, 2, 3, 4])]
    y = [np.array([1, 0, 0, 1])]
    estimator, batch, labels = _fitted(
        GraphStructure(), X, y, class_weight="balanced", unlabeled_weight=0.5
    )
    structure = estimator.structure_
    if soft:  # nodes 1 and 3 unknown with marginals q
        labels[[1, 3]] = -1
        coefficients = estimator._targets(batch, labels, None, None)
        q = np.array([[0.3, 0.7], [0.8, 0.2]])
        theta = estimator._node_weights(batch, np.array([[0, 1], q[0], [1, 0], q[1]]))
        coefficients[[1, 3]] = 0.5 * theta[[1, 3]] * q
    else:
        coefficients = estimator._targets(batch, labels, None, None)
    w = np.zeros(structure.size_)
    w[: structure.n_unary_weights_] = rng.normal(size=structure.n_unary_weights_)
    expected = exact_expected_joint_feature(structure, batch, w)
    exact = sum(
        coefficients[d, k]
        * (exact_expected_joint_feature(structure, batch, w, given=(d, k)) - expected)
        for d in range(4)
        for k in range(2)
    )
    mean, se = mean_oracle_gradient(estimator._make_oracle(batch, coefficients), [0], w)
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-9), np.abs(mean - exact) / (se + 1e-12)


def test_separable_fit_matches_multinomial_logistic_regression(rng):
    """One-node chains have no pairwise term: the objective is the exact log-likelihood, so the
    weights converge to L2 multinomial logistic regression with C = 1 / (N α)."""
    n, alpha = 300, 1e-2
    labels = rng.integers(0, 3, size=n)
    features = np.eye(3)[labels] @ rng.normal(size=(3, 2)) + rng.normal(size=(n, 2))
    X, y = [f[None, :] for f in features], [np.array([k]) for k in labels]
    crf = MarginalPerturbMAPCRF(
        alpha=alpha, max_iter=150, tol=None, batch_size=10, random_state=0
    ).fit(X, y)
    unary, transition = crf.structure_.unpack(crf.coef_)
    logistic = LogisticRegression(
        C=1 / (n * alpha), fit_intercept=False, tol=1e-10, max_iter=10_000
    ).fit(np.hstack([features, np.ones((n, 1))]), labels)
    reference = logistic.coef_.T  # (n_features + bias, K), centred over labels like ours
    assert np.allclose(transition, 0)
    error = np.linalg.norm(unary - reference) / np.linalg.norm(reference)
    assert error < 0.05, error


def test_balanced_weights_win_on_the_weighted_hamming_loss(rng):
    """Rare foreground: the balanced objective trades background errors for foreground hits."""

    def sample():
        n = 30
        labels = (rng.random(n) < 0.12).astype(int)
        features = 1.0 * labels[:, None] + rng.normal(size=(n, 1))
        chain = np.column_stack([np.arange(n - 1), np.arange(1, n)])
        return GraphSample(features, chain, None, rng.integers(1, 5, size=n)), labels

    train = [sample() for _ in range(40)]
    test = [sample() for _ in range(40)]
    X, y = [s for s, _ in train], [t for _, t in train]
    X_test, y_test = [s for s, _ in test], [t for _, t in test]
    sizes = [s.node_sizes for s in X_test]
    losses = {}
    for class_weight in (None, "balanced"):
        crf = MarginalPerturbMAPCRF("graph", class_weight=class_weight, random_state=0)
        crf.fit(X, y)
        losses[class_weight] = weighted_hamming_loss(y_test, crf.predict(X_test), sizes)
    assert losses["balanced"] < losses[None] - 0.05, losses


def test_semi_supervised_uses_conditional_marginals_of_unknown_nodes():
    data = make_grid_data(n_samples=10, shape=(12, 12), noise=0.8, random_state=0)
    X, y = data.data, [t.copy() for t in data.target]
    for t in y[4:]:  # "bounding box" style: the border is known background, the rest unknown
        t[2:-2, 2:-2] = -1
    crf = MarginalPerturbMAPCRF(
        "grid", batch_size=4, max_iter=10, n_perturbations=30, random_state=0
    ).fit(X, y)
    assert crf.target_distributions_ is not None and len(crf.target_distributions_) == 10
    for q, given in zip(crf.target_distributions_, y, strict=True):
        np.testing.assert_allclose(q.sum(-1), 1)
        known = given >= 0
        np.testing.assert_array_equal(q[known].argmax(-1), given[known])  # one-hot targets
        assert set(np.unique(q[known])) <= {0.0, 1.0}
    # q of the unknown nodes are the conditional marginals of w_1 given the known border
    q_unknown = np.concatenate(
        [q[t < 0] for q, t in zip(crf.target_distributions_[4:], y[4:], strict=True)]
    )
    assert 0 < q_unknown[:, 1].mean() < 1
    truth_unknown = np.concatenate([a[t < 0] for a, t in zip(data.target[4:], y[4:], strict=True)])
    majority = max(truth_unknown.mean(), 1 - truth_unknown.mean())
    assert np.mean(q_unknown.argmax(-1) == truth_unknown) > majority + 0.03  # informative
    assert not np.allclose(crf.supervised_coef_, crf.coef_)  # the unlabelled data were used
    with pytest.raises(ValueError, match="at least one fully labelled sample"):
        MarginalPerturbMAPCRF("grid").fit(X[4:], y[4:])


@pytest.mark.parametrize("kind", ["chain", "grid"])
def test_perturbed_marginals_condition_on_the_clamped_labels(kind):
    """Conditional marginals q(y_d | y_given): clamped nodes keep their label and, under a
    strong attractive coupling with no unary information, the free nodes follow them."""
    if kind == "chain":
        structure = ChainStructure(n_states=2).fit([np.zeros((6, 1))])
        X = [np.zeros((6, 1)) for _ in range(3)]
    else:
        structure = GridStructure().fit([np.zeros((4, 5))])
        X = [np.zeros((4, 5)) for _ in range(3)]
    batch = structure.prepare(X)
    w = np.zeros(structure.size_)
    n_unary = structure.n_unary_weights_
    w[n_unary:] = [8.0, 0.0, 0.0, 8.0] if kind == "chain" else -8.0  # agreeing neighbours
    clamp = np.full(batch.n_nodes, -1)
    clamp[batch.node_offsets[:-1]] = [1, 0, 1]  # the first node of each sample
    solver, potentials = structure.solver_, structure.potentials(batch, w)
    q = perturb_and_map(solver, potentials, 200, 0, clamp=clamp).marginals
    fixed = clamp >= 0
    np.testing.assert_array_equal(q[fixed, clamp[fixed]], 1.0)
    follows = q[np.arange(batch.n_nodes), np.repeat([1, 0, 1], batch.lengths)]
    assert follows[~fixed].min() > 0.9
    free = perturb_and_map(solver, potentials, 200, 0).marginals
    assert abs(free[:, 1].mean() - 0.5) < 0.15  # without the clamps: no preferred label
    # One perturbation: exactly the clamped perturbed MAP with the same draw (sample n's
    # perturbations come from its own stream, seeded from the random state).
    one = perturb_and_map(solver, potentials, 1, 1, clamp=clamp).marginals
    seeds = np.random.default_rng(1).integers(2**63, size=batch.n_samples)
    perturbation = np.concatenate(
        [draw(np.random.default_rng(s), n, 2) for s, n in zip(seeds, batch.lengths, strict=True)]
    )
    expected = solver.map(potentials.add_unary(perturbation), clamp)
    np.testing.assert_array_equal(one.argmax(1), expected)


def test_perturb_map_self_training_fills_unknown_labels_with_conditional_map():
    data = make_grid_data(n_samples=8, shape=(10, 10), noise=1.0, random_state=2)
    y = [t.copy() for t in data.target]
    for t in y[3:]:
        t[1:-1, 1:-1] = -1
    crf = PerturbMAPCRF("grid", batch_size=4, max_iter=5, random_state=0).fit(data.data, y)
    structure = crf.structure_
    batch = structure.prepare(data.data[3:])
    labels = structure.prepare_labels(batch, y[3:], allow_unknown=True)
    filled = crf._targets(batch, labels, crf.supervised_coef_, None)
    assert np.all(filled >= 0)
    np.testing.assert_array_equal(filled[labels >= 0], labels[labels >= 0])
    conditional_map = structure.solver_.map(
        structure.potentials(batch, crf.supervised_coef_), clamp=labels
    )
    np.testing.assert_array_equal(filled, conditional_map)
    assert not np.allclose(crf.supervised_coef_, crf.coef_)


def test_marginal_decoding_and_parameters():
    data = make_chain_data(n_samples=40, n_states=3, n_features=4, random_state=0)
    crf = MarginalPerturbMAPCRF(max_iter=5, random_state=0).fit(data.data, data.target)
    marginals = crf.predict_marginals(data.data[:5])
    decoded = crf.predict(data.data[:5], decoding="marginal")
    for m, d in zip(marginals, decoded, strict=True):
        np.testing.assert_array_equal(m.argmax(-1), d)
    assert mean_hamming_loss(data.target[:5], decoded) < 0.5
    with pytest.raises(ValueError, match="decoding must be"):
        crf.predict(data.data[:5], decoding="mode")
    with pytest.raises(ValueError, match="class_weight has labels \\[7\\]"):
        MarginalPerturbMAPCRF(class_weight={7: 2.0}).fit(data.data, data.target)
    with pytest.raises(ValueError, match="unlabeled_weight"):
        MarginalPerturbMAPCRF(unlabeled_weight=-1.0).fit(data.data, data.target)
