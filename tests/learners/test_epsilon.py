"""EpsilonCRF against exact references."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import (
    ChainCRF,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    GridStructure,
    StructuredSVM,
)
from pmap_sklearn._backend.messages import BeliefPropagation
from pmap_sklearn._validation import NonFiniteError
from pmap_sklearn.datasets import add_kumar_hebert_noise, make_chain_data

from ..helpers import grid_exact_marginals, scores_of


def test_epsilon_one_without_loss_is_the_chain_crf():
    data = make_chain_data(n_samples=40, n_states=3, n_features=4, random_state=0)
    crf = ChainCRF(alpha=1e-2, tol=1e-10, max_iter=2000).fit(data.data, data.target)
    eps = EpsilonCRF(
        epsilon=1.0, loss=None, counting_numbers="bethe", alpha=1e-2, tol=1e-10, max_iter=500
    ).fit(data.data, data.target)
    assert eps.primal_history_[-1] == pytest.approx(-crf.objective_, abs=1e-7)
    np.testing.assert_allclose(eps.coef_, crf.coef_, atol=2e-3)
    marginals = eps.predict_marginals(data.data[:3])
    for mine, theirs in zip(marginals, crf.predict_marginals(data.data[:3]), strict=True):
        np.testing.assert_allclose(mine, theirs, atol=2e-3)


def test_the_default_counting_numbers_make_the_chain_crf():
    """``counting_numbers="auto"`` is Bethe on chains: with its defaults, EpsilonCRF at ε = 1
    without a loss is the chain CRF (the convex numbers were 129 % away)."""
    data = make_chain_data(n_samples=40, n_states=3, n_features=4, random_state=0)
    crf = ChainCRF(alpha=1e-2).fit(data.data, data.target)
    eps = EpsilonCRF("chain", epsilon=1.0, loss=None, alpha=1e-2).fit(data.data, data.target)
    gap = np.linalg.norm(eps.coef_ - crf.coef_) / np.linalg.norm(crf.coef_)
    assert gap < 0.01
    convex = EpsilonCRF("chain", epsilon=1.0, loss=None, alpha=1e-2, counting_numbers="convex")
    convex.fit(data.data, data.target)
    assert np.linalg.norm(convex.coef_ - crf.coef_) / np.linalg.norm(crf.coef_) > 0.1


def _hinge_objective(model, X, y, w):
    """(α/2)‖w‖² + mean_n max_ŷ [Δ(y_n, ŷ) + f(ŷ) − f(y_n)] by enumeration."""
    structure = model.structure_
    batch = structure.prepare(X)
    labels = structure.prepare_labels(batch, y)
    total = 0.0
    for i, sample in enumerate(structure.potentials(batch, w).split()):
        labellings, scores = scores_of(sample)
        truth = labels[batch.nodes_of(i)]
        delta = (labellings != truth).mean(axis=1)
        true_score = scores[np.ravel_multi_index(truth, (sample.n_states,) * len(truth))]
        total += np.max(delta + scores - true_score)
    return 0.5 * model.alpha * w @ w + total / batch.n_samples


def test_small_epsilon_reaches_the_structured_svm():
    data = make_chain_data(n_samples=12, n_states=3, n_features=3, length=(2, 4), random_state=1)
    X, y = data.data, data.target
    svm = StructuredSVM(alpha=0.1, max_iter=300, tol=1e-6, random_state=0).fit(X, y)
    eps = EpsilonCRF(epsilon=0.01, counting_numbers="bethe", alpha=0.1, max_iter=500).fit(X, y)
    best = _hinge_objective(svm, X, y, svm.coef_)
    ours = _hinge_objective(eps, X, y, eps.coef_)
    # the soft-max exceeds the max by at most ε ln |Y| (4 nodes, 3 labels); the S-SVM dual
    # objective bounds the optimal hinge objective from below
    assert ours <= best + 0.01 * np.log(3**4) + 1e-3
    assert ours >= svm.dual_objective() - 1e-9


def test_the_primal_gradient_is_lemma_2(rng):
    X = [rng.normal(size=(4, 5, 2)) for _ in range(3)]
    y = [rng.integers(0, 3, size=(4, 5)) for _ in range(3)]
    model = EpsilonCRF("grid", epsilon=0.5, alpha=0.1, max_iter=3).fit(X, y)
    structure = model.structure_
    batch = structure.prepare(X)
    labels = structure.prepare_labels(batch, y)
    loss = model._loss_scores(batch, labels)
    observed = structure.joint_feature(batch, labels) / batch.n_samples
    potentials = structure.potentials(batch, model.coef_)
    bp = BeliefPropagation(potentials, 0.5, "convex")
    for _ in range(3):
        bp.sweep()

    def primal(w):
        p, node, table = model._scores(batch, w, loss)
        bp.set_scores(node, table)
        return (bp.objective().sum() - p.score(labels).sum()) / batch.n_samples + 0.05 * w @ w

    w = model.coef_ + 0.1 * rng.normal(size=model.coef_.shape)
    gradient = model._lemma2(bp, batch, w, model._scores(batch, w, loss), observed)[0]
    np.testing.assert_allclose(gradient, approx_fprime(w, primal, 1e-6), atol=1e-5)


@pytest.mark.parametrize("epsilon", [1.0, 0.5, 0.01])
def test_primal_dual_gap_closes(rng, epsilon):
    X = [rng.normal(size=(5, 5, 2)) for _ in range(4)]
    y = [(x[:, :, 0] > 0).astype(int) for x in X]
    model = EpsilonCRF("grid", epsilon=epsilon, alpha=0.1, max_iter=2000, tol=1e-6).fit(X, y)
    assert 0 <= model.gap_history_[-1] <= 1e-6 * max(1, abs(model.primal_history_[-1]))
    assert model.primal_history_[-1] <= model.primal_history_[0]


def test_three_class_grid_beats_independent_pixels():
    rng = np.random.default_rng(0)

    def image():
        labels = np.zeros((12, 12), dtype=int)
        labels[:, 4:8], labels[:, 8:] = 1, 2
        labels = np.roll(labels, rng.integers(12), axis=1)
        if rng.random() < 0.5:
            labels = labels.T
        return labels, np.eye(3)[labels] + 1.2 * rng.normal(size=(12, 12, 3))

    train, test = [image() for _ in range(12)], [image() for _ in range(8)]
    model = EpsilonCRF("grid", epsilon=1.0, alpha=1e-3, max_iter=200).fit(
        [x for _, x in train], [t for t, _ in train]
    )
    pixels = LogisticRegression().fit(
        np.concatenate([x.reshape(-1, 3) for _, x in train]),
        np.concatenate([t.ravel() for t, _ in train]),
    )
    truth = np.concatenate([t.ravel() for t, _ in test])
    crf = np.concatenate([p.ravel() for p in model.predict([x for _, x in test])])
    independent = pixels.predict(np.concatenate([x.reshape(-1, 3) for _, x in test]))
    assert (crf != truth).mean() < 0.5 * (independent != truth).mean()


def test_learned_binary_grid_agrees_with_the_exact_model(rng):
    clean = np.zeros((6, 10, 10), dtype=int)
    clean[:, 2:8, 3:7] = 1
    noisy = add_kumar_hebert_noise(clean, "gaussian", random_state=0)
    model = EpsilonCRF("grid", alpha=1e-2, max_iter=200).fit(list(noisy[:4]), list(clean[:4]))
    beliefs = model.predict_marginals(list(noisy[4:]))
    for x, b in zip(noisy[4:], beliefs, strict=True):
        potentials = model.potentials([x])
        exact, _ = grid_exact_marginals(potentials, (10, 10))
        # the convex-entropy beliefs decode like the exact marginals of the same weights
        agree = (exact.argmax(axis=1) == b.reshape(-1, 2).argmax(axis=1)).mean()
        assert agree >= 0.95


def test_bad_input_gets_clear_errors():
    X, y = [np.ones((3, 2))], [np.array([0, 1, 0])]
    with pytest.raises(InvalidParameterError):
        EpsilonCRF(epsilon=-1).fit(X, y)
    with pytest.raises(ValueError, match="edge counting number"):
        EpsilonCRF(counting_numbers=(0.0, 1.0)).fit(X, y)
    with pytest.raises(ValueError, match="alpha > 0"):
        EpsilonCRF(epsilon=0, alpha=0).fit(X, y)
    images, labels = [np.zeros((3, 3, 1))], [np.array([[0, 1, 2]] * 3)]
    with pytest.raises(ValueError, match="message_passing"):
        GridStructure(pairwise="table", solver="graph_cut").fit(images, labels)
    assert GridStructure(pairwise="table").fit(images, labels).solver_.name == "trws"


def test_bethe_on_tree_graphs_is_the_exact_multi_label_crf(rng):
    def tree():
        n = int(rng.integers(3, 6))
        parents = [int(rng.integers(0, i)) for i in range(1, n)]
        edges = np.column_stack([parents, np.arange(1, n)])
        return GraphSample(rng.normal(size=(n, 2)), edges, np.abs(rng.normal(size=(n - 1, 1))))

    X = [tree() for _ in range(12)]
    y = [rng.integers(0, 3, size=len(x.node_features)) for x in X]
    exact = ChainCRF(
        GraphStructure(n_states=3, pairwise="table", solver="brute_force"), alpha=0.1, tol=1e-10
    ).fit(X, y)
    eps = EpsilonCRF(
        GraphStructure(n_states=3, pairwise="table", solver="message_passing"),
        loss=None,
        counting_numbers="bethe",
        alpha=0.1,
        tol=1e-10,
    ).fit(X, y)
    assert eps.primal_history_[-1] == pytest.approx(-exact.objective_, abs=1e-7)
    np.testing.assert_allclose(eps.coef_, exact.coef_, atol=1e-3)
    for mine, theirs in zip(
        eps.predict_marginals(X[:3]), exact.predict_marginals(X[:3]), strict=True
    ):
        np.testing.assert_allclose(mine, theirs, atol=1e-3)


RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    "params", [dict(epsilon=1e12), dict(epsilon=1e300), dict(counting_numbers=(1e300, 1e300))]
)
def test_a_temperature_float64_cannot_resolve_is_refused(params):
    """The weights collapsed to 0 without a word."""
    images = [RNG.normal(size=(3, 3, 2)) for _ in range(3)]
    labels = [RNG.integers(0, 2, size=(3, 3)) for _ in range(3)]
    with pytest.raises(ValueError, match="temperature above 1e\\+08"):
        EpsilonCRF("grid", **params).fit(images, labels)


def test_epsilon_crf_says_when_it_learned_nothing():
    data = make_chain_data(n_samples=30, n_states=3, n_features=4, random_state=0)
    with pytest.raises(NonFiniteError, match="learned nothing.*scale the features"):
        EpsilonCRF().fit([x * 1e10 for x in data.data], data.target)
    with pytest.raises(ValueError, match="temperature above 1e\\+08"):
        EpsilonCRF(epsilon=1e9).fit(data.data, data.target)
    assert np.any(EpsilonCRF().fit(data.data, data.target).coef_)
