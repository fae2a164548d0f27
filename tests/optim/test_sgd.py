"""The SGD engine: schedules, step rules, lazy steps and the L1 penalty."""

import functools

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from pmap_sklearn._optim.sgd import (
    AdaGrad,
    CumulativeL1,
    LazyAdaGrad,
    LazyWeights,
    Normalised,
    ProximalAdaGrad,
    Schedule,
    SGDState,
    _step,
    clip_l1,
    learning_rate,
    run_sgd,
)
from pmap_sklearn._utils import SparseVector


def test_schedules():
    assert learning_rate("constant", 10, 0.1, 0.5, 0.5) == 0.5
    assert learning_rate("optimal", 0, 0.1, 0.5, 0.5) == pytest.approx(0.5)  # starts at eta0
    assert learning_rate("optimal", 100, 0.1, 0.5, 0.5) == pytest.approx(1 / (0.1 * (100 + 20)))
    assert learning_rate("invscaling", 3, 0.1, 0.5, 0.5) == pytest.approx(0.25)


def _quadratic_oracle(target, calls):
    """ℓ(w) = −‖w − target‖² / 2 per sample: its gradient sum over a mini-batch."""

    def make_oracle(order):
        calls.append(len(order))

        def oracle(part, w, rng):
            batch = part.stop - part.start
            return batch * (target - w), -0.5 * batch * float((w - target) @ (w - target))

        return oracle

    return make_oracle


def _run(steps, calls, target, *, n=4, max_iter=50, shuffle=True, project=None, average=False):
    state = SGDState(coef=np.zeros(len(target)))
    run_sgd(
        _quadratic_oracle(target, calls),
        state,
        n,
        rng=np.random.default_rng(0),
        alpha=0.0,
        batch_size=n,
        steps=steps,
        average=average,
        max_iter=max_iter,
        tol=None,
        n_iter_no_change=1,
        project=project or (lambda w: w),
        shuffle=shuffle,
    )
    return state


def test_every_step_rule_reaches_the_optimum_of_a_quadratic():
    target = np.array([1.0, -2.0, 0.5])
    for steps in (
        Schedule("constant", 0.5),
        Schedule("invscaling", 1.0, power_t=0.5),
        AdaGrad(np.full(3, 0.5)),
        Normalised(1.0),
    ):
        calls = []
        state = _run(steps, calls, target, max_iter=400)
        np.testing.assert_allclose(state.coef, target, atol=0.06, err_msg=repr(steps))
        assert state.loss_curve[-1] < 0.01 * state.loss_curve[0]


def test_step_rules_take_the_documented_steps():
    w, alpha = np.array([1.0, 0.0]), 0.5
    gradient = np.array([2.0, -4.0])  # a sum over a batch of 2: direction g/2 − α w
    direction = gradient / 2 - alpha * w
    assert Normalised(3.0).rate(8, gradient, w, alpha, 2) == pytest.approx(
        3.0 / 3.0 / np.linalg.norm(direction)
    )
    adagrad = AdaGrad(np.array([1.0, 2.0]))
    adagrad.rate(0, gradient, w, alpha, 2)
    np.testing.assert_allclose(
        adagrad.rate(1, gradient, w, alpha, 2), [1.0, 2.0] / np.sqrt(2 * direction**2)
    )
    assert Schedule("optimal", 0.5, alpha=0.1).rate(100, gradient, w, alpha, 2) == pytest.approx(
        learning_rate("optimal", 100, 0.1, 0.5, 0.5)
    )


def test_full_batch_runs_make_the_oracle_once_and_project():
    calls = []
    state = _run(
        Schedule("constant", 0.5),
        calls,
        np.array([1.0, -2.0]),
        shuffle=False,
        project=lambda w: np.maximum(w, 0.0, out=w),
        average=10 * 4,  # after 10 steps of 4 samples: the last 40 of 50 iterates
    )
    assert calls == [4]
    np.testing.assert_allclose(state.estimate, [1.0, 0.0], atol=1e-4)
    assert state.n_averaged == 40
    shuffled = []
    _run(Schedule("constant", 0.5), shuffled, np.array([1.0]), max_iter=3)
    assert shuffled == [4, 4, 4]


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


def test_lazy_weights_match_dense_steps():
    """LazyWeights against the dense update, rows read at random, the average starting mid-way,
    a rebase forced by strong shrinkage and a dense step past the regulariser."""
    rng = np.random.default_rng(1)
    n_rows, width, alpha = 30, 3, 0.2
    dense = rng.normal(size=n_rows * width)
    lazy = LazyWeights(dense.copy(), None, 0, width)
    lazy._LOWEST_LOG_DECAY = -2.0  # rebase often
    total, n_averaged = None, 0
    for t in range(60):
        rows = np.sort(rng.choice(n_rows, size=5, replace=False))
        lazy.catch_up(rows)
        np.testing.assert_allclose(lazy.rows[rows], dense.reshape(-1, width)[rows])
        values = rng.normal(size=(len(rows), width))
        rate = 6.0 if t == 40 else 0.3  # 1 - rate * alpha < 0 once
        averaged = t >= 10
        lazy.step(SparseVector(rows, values, len(dense)), rate, alpha, 2, lambda w: w, averaged)
        dense *= 1 - rate * alpha
        dense.reshape(-1, width)[rows] += rate / 2 * values
        if averaged:
            total = dense.copy() if total is None else total + dense
            n_averaged += 1
    lazy.settle()
    np.testing.assert_allclose(lazy.w, dense)
    np.testing.assert_allclose(lazy.average, total / n_averaged)
    assert lazy.n_averaged == n_averaged


def test_lazy_adagrad_matches_dense_steps():
    """LazyAdaGrad against the dense proximal AdaGrad update: rows read at random, rows no
    gradient has reached yet (rate 0: they keep their values), a start from non-zero weights
    and the average starting mid-way."""
    rng = np.random.default_rng(2)
    n_rows, width, alpha, batch = 30, 3, 0.3, 2
    dense = rng.normal(size=n_rows * width)
    steps = ProximalAdaGrad(0.7, np.zeros(n_rows), width)
    dense_steps = ProximalAdaGrad(0.7, np.zeros(n_rows), width)
    lazy = LazyAdaGrad(dense.copy(), None, 0, width, steps, alpha)
    total, n_averaged = None, 0
    for t in range(80):
        rows = np.sort(rng.choice(n_rows - 5, size=5, replace=False))  # the last 5: never
        lazy.catch_up(rows)
        np.testing.assert_allclose(lazy.rows[rows], dense.reshape(-1, width)[rows])
        values = rng.normal(size=(len(rows), width))
        gradient = SparseVector(rows, values, len(dense))
        averaged = t >= 15
        lazy.step(gradient, steps.accumulate(gradient, batch), alpha, batch, lambda w: w, averaged)
        oracle = functools.partial(
            lambda dense_gradient, *_: (dense_gradient, 0.0), gradient.toarray()
        )
        _step(oracle, slice(0, batch), dense, None, dense_steps, t, alpha, lambda w: w)
        if averaged:
            total = dense.copy() if total is None else total + dense
            n_averaged += 1
    np.testing.assert_allclose(steps.squares, dense_steps.squares)
    lazy.settle()
    np.testing.assert_allclose(lazy.w, dense)
    np.testing.assert_allclose(lazy.average, total / n_averaged)
    assert lazy.n_averaged == n_averaged
    # the rows no gradient reached kept their starting values, the others shrank
    start = np.random.default_rng(2).normal(size=n_rows * width).reshape(-1, width)
    np.testing.assert_array_equal(lazy.rows[-5:], start[-5:])
    assert not np.allclose(lazy.rows[:-5], start[:-5])
