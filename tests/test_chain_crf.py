"""ChainCRF: exact likelihood, gradient and marginals against enumeration; learning."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from sklearn.linear_model import LogisticRegression

from pmap_sklearn import ChainCRF, ChainStructure, GridStructure, mean_hamming_loss
from pmap_sklearn._backend import BruteForceSolver
from pmap_sklearn.datasets import make_chain_data, make_grid_data

from .helpers import scores_of


@pytest.fixture
def tiny(rng):
    X = [rng.normal(size=(d, 2)) for d in (1, 3, 4)]
    y = [rng.integers(0, 3, size=len(x)) for x in X]
    crf = ChainCRF(ChainStructure(n_states=3), max_iter=1).fit(X, y)
    return crf, X, y


def _brute_log_likelihood(crf, batch, labels, w):
    total = 0.0
    for i, sample in enumerate(crf.structure_.potentials(batch, w).split()):
        labellings, scores = scores_of(sample)
        given = labels[batch.nodes_of(i)]
        agree = np.all((labellings == given) | (given < 0), axis=1)
        total += np.logaddexp.reduce(scores[agree]) - np.logaddexp.reduce(scores)
    return total / batch.n_samples


@pytest.mark.parametrize("unknown", [False, True])
def test_log_likelihood_and_gradient_are_exact(tiny, rng, unknown):
    crf, X, y = tiny
    batch = crf.structure_.prepare(X)
    labels = crf.structure_.prepare_labels(batch, y)
    if unknown:
        labels[[1, 5, 6]] = -1  # marginalised exactly
    w = rng.normal(size=crf.structure_.size_)
    value, gradient = crf._log_likelihood(batch, labels, w)
    np.testing.assert_allclose(value, _brute_log_likelihood(crf, batch, labels, w))
    numeric = approx_fprime(w, lambda v: crf._log_likelihood(batch, labels, v)[0], 1e-6)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)
    if not unknown:  # the fit's shortcut: Ψ(x, y) computed once instead of a clamped pass
        observed = crf.structure_.joint_feature(batch, labels)
        shortcut = crf._log_likelihood(batch, labels, w, observed)
        np.testing.assert_allclose(shortcut[0], value)
        np.testing.assert_allclose(shortcut[1], gradient, atol=1e-12)


def test_marginals_match_brute_force(tiny):
    crf, X, _ = tiny
    brute = BruteForceSolver().marginals(crf.potentials(X))
    np.testing.assert_allclose(np.concatenate(crf.predict_marginals(X)), brute.node, atol=1e-12)
    with pytest.raises(ValueError, match="method must be one of \\['exact'\\]"):
        crf.predict_marginals(X, method="perturb")


def test_any_structure_with_exact_marginals(rng):
    """The exact likelihood on a tiny grid by enumeration (solver='brute_force'); graph cuts,
    which compute no marginals, are refused with a clear error."""
    data = make_grid_data(n_samples=6, shape=(3, 3), noise=0.8, random_state=0)
    crf = ChainCRF(GridStructure(solver="brute_force"), alpha=1e-2).fit(data.data, data.target)
    pixelwise = mean_hamming_loss(data.target, [x[..., 0] > 0.5 for x in data.data])
    assert 1 - crf.score(data.data, data.target) <= pixelwise
    assert crf.predict_marginals(data.data[:1])[0].shape == (3, 3, 2)
    with pytest.raises(ValueError, match="graph_cut solver: it computes no marginals"):
        ChainCRF("grid").fit(data.data, data.target)


def test_learning_beats_independent_classification():
    data = make_chain_data(n_samples=160, n_states=4, n_features=6, noise=1.8, random_state=0)
    X, y, X_test, y_test = data.data[:100], data.target[:100], data.data[100:], data.target[100:]
    crf = ChainCRF(alpha=1e-3).fit(X, y)
    logistic = LogisticRegression(max_iter=1000).fit(np.vstack(X), np.concatenate(y))
    independent = 1 - mean_hamming_loss(y_test, [logistic.predict(x) for x in X_test])
    assert crf.score(X_test, y_test) > independent + 0.03
    decoded = crf.predict(X_test, decoding="marginal")
    assert mean_hamming_loss(y_test, decoded) < 1 - independent
    warm = ChainCRF(alpha=1e-3, warm_start=True).fit(X, y)
    objective = warm.objective_
    assert warm.fit(X, y).objective_ >= objective - 1e-9  # continues from the optimum
