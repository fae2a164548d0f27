"""The L1 (elastic-net) penalty of the SGD engine: the cumulative penalty of Tsuruoka, Tsujii &
Ananiadou (2009) with every step rule, lazy and dense, and ``l1_ratio`` in the learners."""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import MarginalPerturbMAPCRF, MeanFieldCRF, PerturbMAPCRF
from pmap_sklearn._sgd import (
    CumulativeL1,
    LazyAdaGrad,
    LazyWeights,
    ProximalAdaGrad,
    Schedule,
    SGDState,
    _step,
    clip_l1,
    run_sgd,
)
from pmap_sklearn._utils import SparseVector
from pmap_sklearn.datasets import make_chain_data

from .helpers import _sparse_and_dense


def test_clipping_takes_what_each_weight_is_owed():
    """A weight is clipped by the penalty due minus the penalty applied, never past zero, and
    a weight at zero keeps what it was owed for the next gradient to overcome."""
    total = np.full(4, 0.5)
    applied = np.array([-0.2, 0.0, 0.3, 0.0])
    clipped, applied = clip_l1(np.array([1.0, 0.1, -1.0, 0.0]), total, applied)
    np.testing.assert_allclose(clipped, [0.7, 0.0, -0.8, 0.0])
    np.testing.assert_allclose(applied, [-0.5, -0.1, 0.5, 0.0])
    # the second weight went to zero with 0.4 still owed: a push of 0.3 stays at zero
    clipped, _ = clip_l1(np.array([0.3]), total[1:2], applied[1:2])
    assert clipped[0] == 0.0


def _random_sparse_steps(seed, n_rows, width, n_steps, n_reached=5, never=0):
    """Sparse gradients on random rows (not the last ``never``), some of their entries zero."""
    rng = np.random.default_rng(seed)
    for t in range(n_steps):
        rows = np.sort(rng.choice(n_rows - never, size=n_reached, replace=False))
        values = rng.normal(size=(n_reached, width)) * (rng.random((n_reached, width)) < 0.6)
        yield t, SparseVector(rows, values, n_rows * width)


def _dense_oracle(gradient: SparseVector):
    return functools.partial(lambda dense, *_: (dense, 0.0), gradient.toarray())


def _penalties(size, strength, n_groups):
    """Two fresh penalties, the penalty due kept for ``n_groups`` groups of weights."""
    return tuple(CumulativeL1(strength, np.zeros((n_groups, 1)), np.zeros(size)) for _ in range(2))


@pytest.mark.parametrize("alpha", [0.3, 0.0])
def test_lazy_adagrad_with_l1_matches_dense_steps(alpha):
    """LazyAdaGrad with the cumulative penalty (clipped where the gradient reaches, the other
    rows owed their rate's penalty lazily) gives the dense proximal AdaGrad steps' weights,
    penalties and average; exact zeros appear."""
    n_rows, width, batch, l1 = 30, 3, 2, 0.05
    start = np.random.default_rng(2).normal(size=n_rows * width)
    dense = start.copy()
    steps, dense_steps = (ProximalAdaGrad(0.7, np.zeros(n_rows), width) for _ in range(2))
    lazy_penalty, dense_penalty = _penalties(len(dense), l1, n_rows)  # due by row
    lazy = LazyAdaGrad(start.copy(), None, 0, width, steps, alpha, lazy_penalty)
    total, n_averaged = None, 0
    for t, gradient in _random_sparse_steps(0, n_rows, width, 80, never=5):
        lazy.catch_up(gradient.index)
        current = dense.reshape(-1, width)[gradient.index]
        np.testing.assert_allclose(lazy.rows[gradient.index], current, atol=1e-12)
        averaged = t >= 15
        lazy.step(gradient, steps.accumulate(gradient, batch), alpha, batch, lambda w: w, averaged)
        _step(
            _dense_oracle(gradient), slice(0, batch), dense, None, dense_steps, t, alpha,
            lambda w: w, dense_penalty,
        )  # fmt: skip
        if averaged:
            total = dense.copy() if total is None else total + dense
            n_averaged += 1
    lazy.settle()
    np.testing.assert_allclose(lazy.w, dense, atol=1e-12)
    np.testing.assert_allclose(lazy_penalty.total, dense_penalty.total)
    np.testing.assert_allclose(lazy_penalty.applied, dense_penalty.applied, atol=1e-12)
    np.testing.assert_allclose(lazy.average, total / n_averaged, atol=1e-12)
    assert np.array_equal(lazy.w == 0, dense == 0) and (dense == 0).sum() > 20
    # the rows no gradient reached have rate 0: owed nothing, unchanged
    np.testing.assert_array_equal(lazy.rows[-5:], start.reshape(-1, width)[-5:])
    assert not lazy_penalty.total[-5:].any()


@pytest.mark.parametrize("alpha", [0.2, 0.0])
def test_lazy_schedule_with_l1_matches_dense_steps(alpha):
    """LazyWeights with the cumulative penalty (one penalty due for all weights) against the
    dense steps, through rebases and a dense step past the regulariser's minimum."""
    n_rows, width, l1 = 30, 3, 0.05
    dense = np.random.default_rng(1).normal(size=n_rows * width)
    lazy_penalty, dense_penalty = _penalties(len(dense), l1, 1)  # one rate: one penalty due
    lazy = LazyWeights(dense.copy(), None, 0, width, lazy_penalty)
    lazy._LOWEST_LOG_DECAY = -2.0  # rebase often
    total, n_averaged = None, 0
    for t, gradient in _random_sparse_steps(1, n_rows, width, 60):
        lazy.catch_up(gradient.index)
        current = dense.reshape(-1, width)[gradient.index]
        np.testing.assert_allclose(lazy.rows[gradient.index], current, atol=1e-12)
        rate = 6.0 if t == 40 else 0.3  # 1 - rate * alpha < 0 once (with alpha > 0)
        averaged = t >= 10
        lazy.step(gradient, rate, alpha, 2, lambda w: w, averaged)
        steps = Schedule("constant", rate)
        _step(
            _dense_oracle(gradient), slice(0, 2), dense, None, steps, t, alpha, lambda w: w,
            dense_penalty,
        )  # fmt: skip
        if averaged:
            total = dense.copy() if total is None else total + dense
            n_averaged += 1
    lazy.settle()
    np.testing.assert_allclose(lazy.w, dense, atol=1e-12)
    np.testing.assert_allclose(lazy_penalty.total, dense_penalty.total)
    np.testing.assert_allclose(lazy.average, total / n_averaged, atol=1e-12)
    assert np.array_equal(lazy.w == 0, dense == 0) and (dense == 0).sum() > 20


def _logistic_problem(n=200, n_features=8, seed=0):
    """Binary logistic regression with labels ±1: two informative features, the others
    noise (the L1 optimum sets them to zero)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _logistic_oracle(X, y):
    """``make_oracle`` of the mean log-likelihood of logistic regression (ℓ = −log(1 + e^{−y
    x·w}))."""

    def make_oracle(order):
        Xo, yo = X[order], y[order]

        def oracle(part, w, rng):
            margin = yo[part] * (Xo[part] @ w)
            gradient = Xo[part].T @ (yo[part] / (1.0 + np.exp(margin)))
            return gradient, -float(np.logaddexp(0.0, -margin).sum())

        return oracle

    return make_oracle


def _reference(X, y, alpha, l1_ratio):
    """The elastic-net logistic regression of scikit-learn (saga, to convergence): it
    minimises ``C Σ log-loss + r ‖w‖_1 + (1 − r)/2 ‖w‖²``, our objective with C = 1/(α n)."""
    model = LogisticRegression(
        l1_ratio=l1_ratio, C=1.0 / (alpha * len(y)), solver="saga", fit_intercept=False,
        tol=1e-12, max_iter=100_000,
    )  # fmt: skip
    return model.fit(X, y).coef_[0]


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5])
@pytest.mark.parametrize("rule", ["constant", "adagrad"])
def test_full_batch_l1_reaches_the_elastic_net_optimum(rule, l1_ratio):
    """Full-batch steps with the cumulative penalty converge to scikit-learn's elastic-net
    logistic regression, the noise features at exactly zero."""
    X, y = _logistic_problem()
    alpha = 0.05
    reference = _reference(X, y, alpha, l1_ratio)
    assert (reference[2:] == 0).sum() >= 4 and np.all(reference[:2] != 0)
    steps = Schedule("constant", 0.5) if rule == "constant" else ProximalAdaGrad(0.5, np.zeros(8))
    state = SGDState(coef=np.zeros(8))
    run_sgd(
        _logistic_oracle(X, y), state, len(y), rng=np.random.default_rng(0),
        alpha=alpha * (1 - l1_ratio), l1=alpha * l1_ratio, batch_size=len(y), steps=steps,
        average=False, max_iter=3000, tol=None, n_iter_no_change=1, project=lambda w: w,
        shuffle=False,
    )  # fmt: skip
    np.testing.assert_allclose(state.coef, reference, atol=2e-3)
    np.testing.assert_array_equal(state.coef == 0, reference == 0)
    assert state.loss_curve[-1] <= state.loss_curve[0]


def test_stochastic_l1_with_tail_averaging_is_sparse_and_near_the_optimum():
    """Mini-batch AdaGrad steps with the penalty and the average of the second half: the
    noise features stay at exactly zero in the average (every tail iterate had them at zero),
    the others near the optimum; the proximal L1 step alone leaves them non-zero."""
    X, y = _logistic_problem(n=400, seed=1)
    alpha, l1_ratio = 0.05, 1.0
    reference = _reference(X, y, alpha, l1_ratio)
    state = SGDState(coef=np.zeros(8))
    run_sgd(
        _logistic_oracle(X, y), state, len(y), rng=np.random.default_rng(0), alpha=0.0,
        l1=alpha, batch_size=10, steps=ProximalAdaGrad(0.3, np.zeros(8)), average=len(y) * 20,
        max_iter=40, tol=None, n_iter_no_change=1, project=lambda w: w,
    )  # fmt: skip
    np.testing.assert_array_equal(state.estimate == 0, reference == 0)
    np.testing.assert_allclose(state.estimate, reference, atol=0.03)


def _chains(n=60, seed=0):
    data = make_chain_data(n_samples=n, n_states=3, n_features=6, random_state=seed)
    return data.data, data.target


def test_l1_ratio_zero_is_the_l2_fit_and_l1_sparsifies():
    """``l1_ratio=0`` is the L2 fit (no L1 state); more L1 gives more exact zeros, in the
    tail-averaged weights the defaults return on sparse features, and the fit still fits."""
    chains, dense, tags = _sparse_and_dense(40)
    params = dict(random_state=0, max_iter=4, alpha=0.05, eta0=0.2)
    plain = PerturbMAPCRF(**params).fit(chains, tags)
    zero = PerturbMAPCRF(l1_ratio=0.0, **params).fit(chains, tags)
    np.testing.assert_array_equal(plain.coef_, zero.coef_)
    assert zero._state.l1_total is None
    fits = [PerturbMAPCRF(l1_ratio=r, **params).fit(chains, tags) for r in (0.5, 1.0)]
    zeros = [np.sum(fit.coef_ == 0) for fit in [plain, *fits]]
    assert zeros[0] < zeros[1] < zeros[2]
    assert fits[-1].sgd_settings_["average"] == 2 * len(tags)  # tail averaging
    # the average is kept on the last iterate's support
    state = fits[-1]._state
    np.testing.assert_array_equal(fits[-1].coef_, np.where(state.coef != 0, state.average, 0))
    assert fits[-1].score(chains, tags) > 0.9


@pytest.mark.parametrize("learning_rate", ["adagrad", "optimal", "invscaling"])
def test_sparse_features_fit_with_l1_exactly_like_dense(learning_rate):
    """With L1, the lazy sparse steps still give the dense steps' fit (the penalty reaches the
    weights of the non-zero gradient entries, in both)."""
    chains, dense, tags = _sparse_and_dense(40)
    params = dict(
        random_state=0, max_iter=3, tol=None, learning_rate=learning_rate, eta0=0.2,
        average=True, alpha=0.1, l1_ratio=0.7,
    )  # fmt: skip
    on_sparse = PerturbMAPCRF(**params).fit(chains, tags)
    on_dense = PerturbMAPCRF(**params).fit(dense, tags)
    np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)
    assert np.array_equal(on_sparse.coef_ == 0, on_dense.coef_ == 0)
    l2_fit = PerturbMAPCRF(**dict(params, l1_ratio=0.0)).fit(chains, tags)
    assert (on_sparse.coef_ == 0).sum() > (l2_fit.coef_ == 0).sum()


@pytest.mark.parametrize("sparse", [True, False])
def test_warm_start_continues_the_l1_state(sparse):
    """Two warm-started fits of 2 epochs are one fit of 4: the penalty due and applied carry
    over (through a pickle too)."""
    chains, dense, tags = _sparse_and_dense(30, seed=3)
    X = chains if sparse else dense
    params = dict(
        random_state=0, tol=None, eta0=0.2, average=False, alpha=0.02, l1_ratio=0.6,
        learning_rate="adagrad",
    )  # fmt: skip
    twice = PerturbMAPCRF(max_iter=2, warm_start=True, **params).fit(X, tags)
    twice = pickle.loads(pickle.dumps(twice))
    assert twice._state.l1_total.any()
    twice.fit(X, tags)
    once = PerturbMAPCRF(max_iter=4, warm_start=True, **params).fit(X, tags)
    np.testing.assert_allclose(twice.coef_, once.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(twice._state.l1_total, once._state.l1_total)
    # AdaGrad's penalty due is kept by row; a warm start with a schedule keeps it by weight
    width = once.structure_.weight_row_width_
    assert once._state.l1_total.shape == (once.coef_.size // width, 1)
    once.set_params(learning_rate="constant", max_iter=1).fit(X, tags)
    assert once._state.l1_total.shape == (once.coef_.size, 1) and (once.coef_ == 0).any()


@pytest.mark.parametrize("cls", [PerturbMAPCRF, MarginalPerturbMAPCRF, MeanFieldCRF])
def test_every_sgd_learner_takes_l1_ratio(cls):
    X, y = _chains(30)
    structure = "chain"
    fitted = cls(structure, l1_ratio=0.9, alpha=1.0, max_iter=3, random_state=0).fit(X, y)
    assert (fitted.coef_ == 0).any()
    with pytest.raises(InvalidParameterError, match="l1_ratio"):
        cls(structure, l1_ratio=1.5).fit(X, y)
