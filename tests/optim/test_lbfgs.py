"""The optimiser layer's L-BFGS: OWL-QN (L1) against references and optimality conditions,
and the unchanged L-BFGS-B path without L1."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from pmap_sklearn._optim.lbfgs import minimise, pseudo_gradient


def _logistic_problem(rng, n=200, p=30):
    X = rng.normal(size=(n, p))
    truth = np.zeros(p)
    truth[:5] = [2.0, -1.5, 1.0, 0.5, -3.0]
    y = (rng.random(n) < expit(X @ truth)).astype(float)

    def objective(w):  # mean logistic loss and its gradient
        z = X @ w
        return np.mean(np.logaddexp(0, z) - y * z), X.T @ (expit(z) - y) / n

    return X, y, objective


def _minimise(objective, p, **kwargs):
    options = dict(name="test", max_iter=1000, tol=1e-10, verbose=0)
    return minimise(objective, np.zeros(p), **{**options, **kwargs})


def test_owlqn_matches_l1_logistic_regression(rng):
    X, y, objective = _logistic_problem(rng)
    strength = 0.05
    w, n_iter, value = _minimise(objective, X.shape[1], l1=strength)
    # liblinear's L1 logistic regression: C Σ loss + ‖w‖₁, i.e. C = 1 / (n · strength)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's deprecation of ``penalty``
        reference = LogisticRegression(
            penalty="l1",
            C=1.0 / (len(y) * strength),
            solver="liblinear",
            fit_intercept=False,
            tol=1e-12,
            max_iter=10_000,
        ).fit(X, y)
    np.testing.assert_allclose(w, reference.coef_[0], atol=1e-4)
    np.testing.assert_array_equal(w == 0, reference.coef_[0] == 0)  # exact zeros, the same ones
    assert 0 < n_iter < 1000
    np.testing.assert_allclose(value, objective(w)[0] + strength * np.abs(w).sum())


@pytest.mark.parametrize("strength", [0.01, 0.1])
def test_owlqn_solution_meets_the_subgradient_conditions(rng, strength):
    """Optimality of ``loss + λ‖w‖₁``: ``|g_i| <= λ`` where ``w_i = 0`` and ``g_i = −λ sign w_i``
    elsewhere; with a larger λ, more weights are exactly zero."""
    X, y, objective = _logistic_problem(rng, p=40)
    w, _, _ = _minimise(objective, X.shape[1], l1=strength)
    _, g = objective(w)
    zero = w == 0
    assert zero.any() and not zero.all()
    assert np.all(np.abs(g[zero]) <= strength + 1e-8)
    np.testing.assert_allclose(g[~zero], -strength * np.sign(w[~zero]), atol=1e-5)
    assert np.abs(pseudo_gradient(w, g, strength)).max() < 1e-5


def test_owlqn_elastic_net_least_squares_against_coordinate_descent(rng):
    """Per-coordinate strengths: an elastic net (L2 in the objective) whose first coordinate is
    not penalised, against coordinate descent run to convergence."""
    n, p = 80, 12
    A = rng.normal(size=(n, p))
    b = A[:, :3].sum(axis=1) + 0.1 * rng.normal(size=n)  # three informative columns
    l1 = np.full(p, 0.2)
    l1[0] = 0.0  # an unpenalised weight (e.g. an intercept)
    l2 = 0.05

    def objective(w):
        r = A @ w - b
        return 0.5 * r @ r / n + 0.5 * l2 * w @ w, A.T @ r / n + l2 * w

    w, _, _ = _minimise(objective, p, l1=l1)
    reference = np.zeros(p)  # coordinate descent with soft-thresholding
    squares = (A**2).sum(axis=0) / n + l2
    for _ in range(5000):
        for i in range(p):
            partial = A[:, i] @ (b - A @ reference + A[:, i] * reference[i]) / n
            reference[i] = np.sign(partial) * max(abs(partial) - l1[i], 0.0) / squares[i]
    np.testing.assert_allclose(w, reference, atol=2e-5)
    assert (w == 0).any() and w[0] != 0


def test_without_l1_the_path_is_scipys_lbfgsb(rng):
    X, y, objective = _logistic_problem(rng)
    w, n_iter, value = _minimise(objective, X.shape[1], max_iter=50, tol=1e-6, l1=0.0)
    direct = minimize(
        objective,
        np.zeros(X.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options=dict(maxiter=50, gtol=1e-6),
    )
    np.testing.assert_array_equal(w, direct.x)  # bit for bit
    assert (n_iter, value) == (direct.nit, direct.fun)


def test_l1_refuses_bounds_and_bad_strengths(rng):
    _, _, objective = _logistic_problem(rng, p=8)
    with pytest.raises(ValueError, match="cannot be combined with bounds"):
        _minimise(objective, 8, l1=0.1, bounds=[(None, 0)] * 8)
    with pytest.raises(ValueError, match="l1 must be finite and >= 0"):
        _minimise(objective, 8, l1=np.r_[0.1, -1.0, np.zeros(6)])


def test_pseudo_gradient_takes_the_descending_side_at_zero():
    w = np.array([1.0, -1.0, 0.0, 0.0, 0.0])
    g = np.array([0.5, 0.5, -2.0, 2.0, 0.5])
    np.testing.assert_allclose(pseudo_gradient(w, g, 1.0), [1.5, -0.5, -1.0, 1.0, 0.0])


def test_lbfgs_runs_on_one_blas_thread():
    """Every full-batch L-BFGS fit (ChainCRF, PL / CL, piecewise, Part & Clamp) limits BLAS to
    one thread while it runs, and restores it after."""
    from threadpoolctl import threadpool_info

    from pmap_sklearn._optim.lbfgs import minimise

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    seen = []

    def objective(w):
        seen.extend(blas_threads())
        return float(w @ w), 2.0 * w

    before = blas_threads()
    w, _, _ = minimise(objective, np.ones(3), name="test", max_iter=5, tol=1e-10, verbose=0)
    assert seen and set(seen) == {1}
    assert blas_threads() == before
    np.testing.assert_allclose(w, 0.0, atol=1e-8)
