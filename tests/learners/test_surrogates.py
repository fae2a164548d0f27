"""PiecewiseCRF and PseudoLikelihoodCRF."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from pmap_sklearn import ChainStructure, GraphSample, GraphStructure, GridStructure, PiecewiseCRF
from pmap_sklearn.datasets import make_chain_data, make_grid_data

from ..helpers import _brute_log_z, _grid_graphs


def _graphs(rng, k=3, n_samples=4):
    X, y = [], []
    for _ in range(n_samples):
        labels = rng.integers(0, k, size=5)
        features = np.eye(k)[labels] + rng.normal(size=(5, k))
        edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]])
        X.append(GraphSample(features, edges, rng.random((5, 2))))
        y.append(labels)
    return X, y


CASES = {
    "chain": lambda rng: (
        ChainStructure(),
        *(lambda d: (d.data, d.target))(
            make_chain_data(n_samples=5, n_states=3, n_features=2, length=(2, 5), random_state=0)
        ),
    ),
    "grid potts": lambda rng: (
        GridStructure(),
        *(lambda d: (d.data, d.target))(make_grid_data(n_samples=3, shape=(4, 5), random_state=0)),
    ),
    "grid untied": lambda rng: (
        GridStructure(untied=True),
        *(lambda d: (d.data, d.target))(make_grid_data(n_samples=3, shape=(3, 3), random_state=0)),
    ),
    "graph potts": lambda rng: (GraphStructure(solver="alpha_expansion"), *_graphs(rng)),
    "graph tables": lambda rng: (
        GraphStructure(pairwise="table", solver="message_passing"),
        *_graphs(rng),
    ),
}


def _fitted(case, rng, class_weight=None):
    structure, X, y = CASES[case](rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = PiecewiseCRF(structure, alpha=0.1, max_iter=3, class_weight=class_weight)
        model.fit(X, y)
    batch = model.structure_.prepare(X)
    labels = model.structure_.prepare_labels(batch, [np.ravel(t) for t in y])
    return model, batch, labels


@pytest.mark.parametrize("class_weight", [None, {0: 3.0, 1: 0.5}])
@pytest.mark.parametrize("case", list(CASES))
def test_objective_is_the_sum_of_independently_normalised_pieces(case, class_weight, rng):
    """The (class-weighted) sum of the pieces' log-losses, and its gradient."""
    model, batch, labels = _fitted(case, rng, class_weight)
    w = model.coef_ + 0.5 * rng.normal(size=model.coef_.shape)
    potentials = model.structure_.potentials(batch, w)
    k = model.structure_.n_states_
    weight = np.ones(k)
    for label, value in (class_weight or {}).items():
        weight[label] = value
    expected = 0.0
    for d, label in enumerate(labels):  # each node's own softmax
        expected -= weight[label] * (potentials.unary[d, label] - logsumexp(potentials.unary[d]))
    tables = np.asarray(potentials.edge_tables())
    for e, (i, j) in enumerate(batch.edges):  # each edge's own softmax over the K² pairs
        pairs = [tables[e, a, b] for a, b in itertools.product(range(k), repeat=2)]
        edge_weight = (weight[labels[i]] + weight[labels[j]]) / 2
        expected -= edge_weight * (tables[e, labels[i], labels[j]] - logsumexp(pairs))
    value, gradient = model._objective(batch, labels, w)
    regulariser = 0.5 * model.alpha * w @ w
    np.testing.assert_allclose(value, expected / batch.n_samples + regulariser)
    numeric = approx_fprime(w, lambda v: model._objective(batch, labels, v)[0], 1e-7)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)


def test_without_edges_it_is_multinomial_logistic_regression():
    """1×1 images have no edge: the unary pieces are a logistic regression of the pixels."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=60)
    X = [(np.eye(3)[t] + rng.normal(size=3)).reshape(1, 1, 3) for t in labels]
    y = [np.array([[t]]) for t in labels]
    for class_weight in (None, "balanced"):
        model = PiecewiseCRF(
            GridStructure(bias=False), alpha=0.5, tol=1e-10, class_weight=class_weight
        ).fit(X, y)
        unary, _ = model.structure_.unpack(model.coef_)
        reference = LogisticRegression(
            C=1 / (0.5 * 60), fit_intercept=False, tol=1e-10, class_weight=class_weight
        )
        reference.fit(np.vstack([x.reshape(1, 3) for x in X]), labels)
        # softmax weights are defined up to a constant per feature: compare centred columns
        np.testing.assert_allclose(
            unary - unary.mean(axis=1, keepdims=True),
            reference.coef_.T - reference.coef_.T.mean(axis=1, keepdims=True),
            atol=1e-4,
        )


def _blocky(rng, n, size=16, k=4):
    """Random rectangles of K classes seen through one-hot features plus N(0, 1) noise."""
    images, labels = [], []
    for _ in range(n):
        truth = rng.integers(k) * np.ones((size, size), dtype=int)
        for _ in range(4):
            r, c = rng.integers(0, size - 4, 2)
            h, w = rng.integers(4, size // 2, 2)
            truth[r : r + h, c : c + w] = rng.integers(k)
        images.append(np.eye(k)[truth] + rng.normal(size=(size, size, k)))
        labels.append(truth)
    return images, labels


def test_learns_attractive_potts_weights_that_beat_the_unary_pieces():
    """On noisy blocky 4-class images the learned Potts weights cut the held-out error of the
    unary pieces alone by more than half."""
    rng = np.random.default_rng(0)
    X, y = _blocky(rng, 16)
    model = PiecewiseCRF(GridStructure()).fit(X[:10], y[:10])
    _, pairwise = model.structure_.unpack(model.coef_)
    assert np.all(pairwise <= 0) and pairwise.min() < -0.5
    unaries_only = PiecewiseCRF(GridStructure()).fit(X[:10], y[:10])
    unaries_only.coef_[unaries_only.structure_.n_unary_weights_ :] = 0.0
    error = 1 - model.score(X[10:], y[10:])
    assert error < 0.5 * (1 - unaries_only.score(X[10:], y[10:]))


def test_pseudo_likelihood_objective_and_gradient(rng):
    from pmap_sklearn import PseudoLikelihoodCRF

    X, y = _grid_graphs(rng, n_samples=3, shape=(3, 3))
    model = PseudoLikelihoodCRF("graph", alpha=0.5, max_iter=3).fit(X, y)
    structure = model.structure_
    batch = structure.prepare(X)
    labels = structure.prepare_labels(batch, y)
    w = model.coef_ + 0.3 * rng.normal(size=model.coef_.shape)
    value, gradient = model._objective(batch, labels, w)
    expected = 0.0
    for i, sample in enumerate(structure.potentials(batch, w).split()):
        truth = labels[batch.nodes_of(i)]
        for node in range(sample.n_nodes):  # −log P(y_i | y_rest) by brute force
            clamp = truth.copy()
            clamp[node] = -1
            expected += _brute_log_z(sample, clamp) - sample.score(truth)[0]
    assert value == pytest.approx(expected / 3 + 0.25 * w @ w, rel=1e-10)
    numeric = approx_fprime(w, lambda v: model._objective(batch, labels, v)[0], 1e-6)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)
