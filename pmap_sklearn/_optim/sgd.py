"""The SGD engine of every stochastic learner: the perturb-and-MAP learners (Shpakova et al.
2018, Alg. 1-4; Shpakova 2019, §2.5 for the denoisers), contrastive divergence and the
continuous priors' AdaGrad.

It maximises ``(1/N) Σ_n ℓ(w, x_n, y_n) − (1/2) Σ_i α_i w_i²`` given a stochastic oracle that, for a
mini-batch of samples, returns ``Σ_batch ∇ℓ`` (one fresh perturbation per sample, drawn from the
generator it is handed) and a stochastic estimate of ``Σ_batch ℓ``. The model hands the engine
an oracle *factory*: ``make_oracle(order)`` gathers the samples in ``order`` once (once per
epoch), and its oracle takes the mini-batches as contiguous slices of that ordering, so no step
copies samples. The engine owns what does not depend on the model: the schedule and its
calibration, mini-batches, projection, iterate averaging, early stopping and progress messages.
The step sizes come from a step rule (:class:`Schedule` — scikit-learn's ``optimal``,
``constant`` and ``invscaling`` —, :class:`AdaGrad`, :class:`ProximalAdaGrad` or
:class:`Normalised`); a full-batch learner runs with ``shuffle=False`` and
``batch_size = n_samples`` (one step per epoch). An L1 term ``λ1 ‖w‖_1`` joins the L2 one by
the cumulative penalty of :class:`CumulativeL1`, with every step rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._progress import Progress
from .._state import FitState
from .._utils import SparseVector
from .._validation import NonFiniteError


@dataclass
class SGDState(FitState):
    """Everything needed to continue a run (``warm_start``): the fit state, the schedule's
    position and the average of the iterates."""

    average: np.ndarray | None = None
    t: int = 0  # updates done
    n_seen: int = 0  # samples seen
    evidence: float = 0.0  # units of evidence of the samples given to the run (alpha="auto")
    n_averaged: int = 0
    average_start: int | None = None  # samples seen when averaging starts (an int average)
    eta0: float | None = None  # initial step size (calibrated once, kept for warm starts)
    squares: np.ndarray | None = None  # ProximalAdaGrad's sums of squared gradients
    l1_total: np.ndarray | None = None  # CumulativeL1's penalties: due (per group of weights)
    l1_applied: np.ndarray | None = None  # and applied (per weight)
    loss_curve: list = field(default_factory=list)
    validation_scores: list = field(default_factory=list)

    @property
    def estimate(self) -> np.ndarray:
        """What the run returns: the averaged weights once averaging has started, the last
        iterate otherwise. With an L1 penalty, the average on the weights the last iterate
        keeps: an average of iterates is non-zero wherever one of them was, the cumulative
        penalty's last iterate has the sparsity of the L1 term (:class:`CumulativeL1`)."""
        if not self.n_averaged:
            return self.coef
        if self.l1_total is None:
            return self.average
        return np.where(self.coef != 0, self.average, 0.0)


#: ``oracle(part, w, rng) -> (Σ gradient of ℓ, Σ estimate of ℓ)`` over the samples ``part`` (a
#: slice, or indices) of the ordering the oracle was made for.
Oracle = Callable[[slice | np.ndarray, np.ndarray, np.random.Generator], tuple[np.ndarray, float]]
#: ``make_oracle(order) -> Oracle`` over the samples ``order``, in that order.
OracleFactory = Callable[[np.ndarray], Oracle]


class StepRule:
    """How big step ``t`` is: ``rate(t, gradient, w, alpha, batch)`` (a scalar or one rate per
    coordinate) for the ascent direction ``gradient / batch − α w``; with ``proximal``, the
    penalty is taken by its proximal step instead, ``w ← (w + rate · gradient / batch) /
    (1 + rate α)``."""

    proximal = False

    def rate(self, t: int, gradient, w, alpha, batch: int):
        raise NotImplementedError


@dataclass
class Schedule(StepRule):
    """scikit-learn's schedules (:func:`learning_rate`), times an optional per-coordinate
    ``scale`` (a diagonal preconditioner; 0 freezes a coordinate)."""

    name: str
    eta0: float
    power_t: float = 0.5
    alpha: float = 0.0  # the α of ``"optimal"`` (a scalar)
    scale: np.ndarray | None = None

    def rate(self, t, gradient, w, alpha, batch):
        eta = learning_rate(self.name, t, self.alpha, self.eta0, self.power_t)
        return eta if self.scale is None else eta * self.scale


@dataclass
class AdaGrad(StepRule):
    """``scale_i / sqrt(Σ_s g_{s,i}²)``, the sum over the steps so far (Duchi et al. 2011)."""

    scale: np.ndarray
    squares: np.ndarray | None = None

    def rate(self, t, gradient, w, alpha, batch):
        direction = gradient / batch - alpha * w
        self.squares = direction**2 + (0.0 if self.squares is None else self.squares)
        return self.scale / np.sqrt(self.squares + 1e-300)


@dataclass
class ProximalAdaGrad(StepRule):
    """AdaGrad for the penalised learners: one step size per row of ``width`` weights (the K
    weights of a node feature), ``η0 / sqrt(G_r)`` with ``G_r`` the sum over the steps so far
    of the mean square of the row's loss gradient ``g_s = gradient / batch``, and the L2 penalty
    by its proximal step — Duchi, Hazan & Singer (2011)'s composite mirror descent with a
    diagonal matrix, whose update for ``(α/2)‖w‖²`` is ``w ← (w + η g) / (1 + η α)``.

    A rare feature gets large steps and a frequent one small ones, which is what sparse token
    features need; one sum per row instead of per weight (the row-wise AdaGrad of large
    embedding tables) makes a lazy catch-up cost a row's, not its K weights'. A row that no
    gradient has reached keeps its values (rate 0). The other rows keep their rates between
    the steps that reach them, so their shrinkage is geometric and sparse steps apply it
    lazily (:class:`LazyAdaGrad`).

    Parameters
    ----------
    eta0 : float
    squares : ndarray of shape (n_weights // width,)
        The sums of mean squared loss gradients of the rows, updated in place (a fit state
        keeps them for warm starts).
    width : int, default=1
    """

    eta0: float
    squares: np.ndarray
    width: int = 1

    proximal = True

    def rate(self, t, gradient, w, alpha, batch):
        self.squares += np.mean((gradient / batch).reshape(-1, self.width) ** 2, axis=1)
        return np.repeat(self.rates(self.squares), self.width)

    def accumulate(self, gradient: SparseVector, batch: int) -> np.ndarray:
        """Add a sparse gradient's squares; return the new rates of its rows, ``(n_rows, 1)``."""
        self.squares[gradient.index] += np.mean((gradient.values / batch) ** 2, axis=1)
        return self.rates(self.squares[gradient.index])[:, None]

    def rates(self, squares: np.ndarray) -> np.ndarray:
        """The rates of rows with these sums of squares (0 where no gradient came)."""
        rates = np.zeros_like(squares)
        np.divide(self.eta0, np.sqrt(squares), out=rates, where=squares > 0)
        return rates


@dataclass
class Normalised(StepRule):
    """``η0 / sqrt(t + 1)`` along the unit direction (normalised subgradient steps)."""

    eta0: float

    def rate(self, t, gradient, w, alpha, batch):
        with np.errstate(over="ignore", invalid="ignore"):
            norm = float(np.linalg.norm(gradient / batch - alpha * w))
        if norm == 0:
            return 0.0
        return self.eta0 / np.sqrt(t + 1.0) / norm


@dataclass
class CumulativeL1:
    """The L1 term ``λ1 ‖w‖_1`` of the objective by the cumulative penalty of Tsuruoka, Tsujii &
    Ananiadou (2009, Fig. 2), with the rates of any step rule.

    Each step adds ``λ1 η_i`` (the step's rate at weight i) to ``total_i``, the penalty the
    weight could have received so far. Where the step's gradient is non-zero, after the
    gradient's step the weight is clipped towards zero by what it is still owed: ``w ← max(0,
    w − (total + applied))`` if positive, ``min(0, w + (total − applied))`` if negative,
    ``applied`` (signed) adding the change; a proximal step rule then divides by ``1 + η α``
    (owed this step's ``η λ1`` alone, a weight takes the elastic net's proximal step
    ``soft(w, η λ1) / (1 + η α)``). A weight the noisy gradients pushed away from zero is
    pulled back by the whole penalty it has missed, so the weights that only noise keeps
    alive stay at exactly zero — the plain proximal step (the L1 step "inside" AdaGrad)
    forgets a penalty that went past zero, and its iterates, and their average, keep every
    weight a recent gradient reached. Tsuruoka et al. apply the penalty to the features of the
    current sample only, which keeps a sparse step lazy; every weight is also clipped at the
    end of each epoch. An average of the iterates is non-zero wherever one of them was: with
    averaging, a run returns the average on the weights its last iterate keeps
    (:attr:`SGDState.estimate`).

    The penalty due depends on the rates alone, so it is kept once per group of weights that
    share their rates (:func:`_cumulative_l1`): one total for all with a scalar rate, one per
    row with :class:`ProximalAdaGrad`, one per weight otherwise.

    Parameters
    ----------
    strength : float
        λ1.
    total : ndarray of shape (n_groups, 1)
        The penalty due to each group of weights so far (the weights in order, in groups of
        ``n_weights // n_groups``), updated in place.
    applied : ndarray of shape (n_weights,)
        The penalty applied to each weight so far, updated in place. A fit state keeps both
        for warm starts.
    """

    strength: float
    total: np.ndarray
    applied: np.ndarray

    def accrue(self, rate) -> None:
        """Add the penalty due for a step of ``rate`` (a scalar, or one rate per weight, equal
        within a group)."""
        if np.ndim(rate):
            rate = rate.reshape(len(self.total), -1)[:, :1]
        self.total += self.strength * rate

    def clip(self, w: np.ndarray, where=slice(None)) -> None:
        """Clip ``w[where]`` in place by the penalty each weight is owed (``where``: a mask or
        an index of weights, by default all)."""
        shape = (len(self.total), len(w) // len(self.total))
        total = np.broadcast_to(self.total, shape).reshape(-1)[where]
        w[where], self.applied[where] = clip_l1(w[where], total, self.applied[where])


def clip_l1(values, total, applied):
    """The clipped ``values`` and their new ``applied`` penalties (see :class:`CumulativeL1`)."""
    clipped = np.where(
        values > 0,
        np.maximum(values - (total + applied), 0.0),
        np.minimum(values + (total - applied), 0.0),
    )
    return clipped, applied + (clipped - values)


def _cumulative_l1(l1: float, state: SGDState, steps: StepRule) -> CumulativeL1 | None:
    """The L1 penalty of a run (None without L1), continuing the state's. Its groups of weights
    sharing their rates: all of them for scalar rates, the rows of :class:`ProximalAdaGrad`,
    else each weight (and each weight too when a warm start changes the step rule's groups)."""
    if not l1:
        state.l1_total = state.l1_applied = None
        return None
    size = len(state.coef)
    if isinstance(steps, ProximalAdaGrad):
        n_groups = size // steps.width
    elif isinstance(steps, Normalised) or (isinstance(steps, Schedule) and steps.scale is None):
        n_groups = 1
    else:
        n_groups = size
    if state.l1_total is None or len(state.l1_applied) != size:
        state.l1_total, state.l1_applied = np.zeros((n_groups, 1)), np.zeros(size)
    elif len(state.l1_total) != n_groups:
        group = size // len(state.l1_total)
        state.l1_total = np.repeat(state.l1_total, group, axis=0)  # one per weight
    return CumulativeL1(l1, state.l1_total, state.l1_applied)


def dot(w: np.ndarray, gradient) -> float:
    """``w · gradient`` for a dense gradient or a :class:`SparseVector`."""
    if isinstance(gradient, SparseVector):
        return gradient.dot(w)
    return float(w @ gradient)


def _step(oracle: Oracle, part: slice, w, rng, steps, t, alpha, project, penalty=None):
    """One projected ascent step on ``(1/T) Σ_batch ℓ − (1/2) Σ α_i w_i²`` over the samples
    ``part``, in place, its size from the step rule ``steps`` (and the L1 term by ``penalty``,
    a :class:`CumulativeL1`, at the weights the gradient reaches). Returns ``Σ ℓ`` and the rate
    (a scalar, or one per coordinate)."""
    gradient, value = oracle(part, w, rng)
    if isinstance(gradient, SparseVector):
        gradient = gradient.toarray()
    batch = part.stop - part.start
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is checked by the caller
        rate = steps.rate(t, gradient, w, alpha, batch)
        if penalty is not None:
            penalty.accrue(rate)
        if steps.proximal:
            w += (rate / batch) * gradient
            if penalty is not None:  # the elastic net's proximal step: L1, then L2
                penalty.clip(w, gradient != 0)
            w /= 1.0 + rate * alpha
        else:
            w *= 1.0 - rate * alpha
            w += (rate / batch) * gradient
            if penalty is not None:
                penalty.clip(w, gradient != 0)
    project(w)
    return value, rate


def _lazy_step(oracle, part, lazy, rng, steps, t, alpha, project, averaged):
    """:func:`_step` with lazy sparse updates (:class:`LazyWeights`, :class:`LazyAdaGrad`): the
    weights the mini-batch reads are brought up to date first, and only the gradient's weights
    are updated now."""
    lazy.catch_up(oracle.support(part))
    gradient, value = oracle(part, lazy.w, rng)
    batch = part.stop - part.start
    if isinstance(lazy, LazyAdaGrad):
        rate = steps.accumulate(gradient, batch)
    else:
        rate = steps.rate(t, gradient, lazy.w, alpha, batch)
    lazy.step(gradient, rate, alpha, batch, project, averaged)
    return value, rate


def _penalty(alpha, w: np.ndarray, l1: float = 0.0) -> float:
    """``(1/2) Σ α_i w_i² + λ1 ‖w‖_1`` for a scalar or per-coordinate α."""
    with np.errstate(over="ignore"):  # an overflow is caught as a non-finite objective
        l1_term = l1 * float(np.abs(w).sum()) if l1 else 0.0
        if np.ndim(alpha) == 0:
            return 0.5 * alpha * float(w @ w) + l1_term
        return 0.5 * float(alpha @ (w * w)) + l1_term


class _LazyRows:
    """What the lazy sparse steps share: the weights by rows of ``width`` (the K weights of
    one feature), the running sum of the averaged iterates and the L1 penalty
    (:class:`CumulativeL1`, whose clipping is lazy by construction: a step clips the weights
    its gradient reaches; what the other rows are owed is caught up by rows)."""

    def __init__(
        self,
        w: np.ndarray,
        average: np.ndarray | None,
        n_averaged: int,
        width: int,
        penalty: CumulativeL1 | None = None,
    ):
        self.w = w
        self.rows = w.reshape(-1, width)
        self.total = None if average is None or n_averaged == 0 else average * n_averaged
        self.n_averaged = n_averaged if self.total is not None else 0
        self.touched = self.rows[:0]  # the rows the last step changed
        self.penalty = penalty
        if penalty is not None:  # by rows, like the weights
            self.l1_applied = penalty.applied.reshape(self.rows.shape)

    def _clip(self, gradient: SparseVector) -> None:
        """Clip the weights the gradient reaches (:class:`CumulativeL1`; their rows are
        current)."""
        index, reached = gradient.index, gradient.values != 0
        total = self.penalty.total
        if len(total) > 1:  # one per row
            total = total[index]
        rows, applied = self.rows[index], self.l1_applied[index]
        clipped, clipped_applied = clip_l1(rows, total, applied)
        self.rows[index] = np.where(reached, clipped, rows)
        self.l1_applied[index] = np.where(reached, clipped_applied, applied)

    def settle(self) -> None:
        raise NotImplementedError

    def _add_iterate(self, index) -> None:
        """The current iterate joins the average: the rows ``index`` now (the others are
        current, or join through the catch-up)."""
        if self.total is None:  # the average starts at this iterate
            self.settle()
            self.total, self.n_averaged = self.w.copy(), 1
            return
        self.total.reshape(self.rows.shape)[index] += self.rows[index]
        self.n_averaged += 1

    @property
    def average(self) -> np.ndarray | None:
        """The average of the iterates (call :meth:`settle` first)."""
        return None if self.total is None else self.total / self.n_averaged


class LazyWeights(_LazyRows):
    """Mini-batch SGD steps that cost the gradient's non-zeros, not the number of weights.

    With sparse features a step's gradient touches the weights of the features present in the
    mini-batch only, but the L2 shrinkage ``w ← (1 − η_t α) w`` and the running average of the
    iterates touch every weight. Both are applied lazily (the "just-in-time" updates of sparse
    SGD, as in Bottou's ``sgd`` and scikit-learn's ``SGDClassifier``): a weight left alone
    since step ``a`` is ``w_a exp(D_t − D_a)`` at step t, with ``D_t = Σ_{s<t} log(1 − η_s α)``,
    and the iterates it missed add ``w_a exp(−D_a) (E_t − E_a)`` to the average's sum, with
    ``E_t = Σ_{s≤t, averaged} exp(D_s)``. :meth:`catch_up` brings the weights a step reads up
    to date; :meth:`settle` brings every weight (and the average) up to date.
    """

    #: Rebase ``D`` (settle everything) before ``exp(−D)`` loses precision.
    _LOWEST_LOG_DECAY = -30.0

    def __init__(
        self, w: np.ndarray, average: np.ndarray | None, n_averaged: int, width: int, penalty=None
    ):
        super().__init__(w, average, n_averaged, width, penalty)
        self._rebase()

    def _rebase(self) -> None:
        self.last = np.zeros(len(self.rows), dtype=np.intp)  # step each row is current at
        self.log_decay = _Series()  # D_t
        self.summed = _Series()  # E_t

    def catch_up(self, index: np.ndarray | slice) -> None:
        """Bring the rows ``index`` to the current step."""
        now = len(self.log_decay) - 1
        since = self.last[index]
        log_decay = self.log_decay.values
        rows = self.rows[index]
        if self.total is not None:
            summed = self.summed.values
            missed = summed[now] - summed[since]
            total = self.total.reshape(self.rows.shape)
            total[index] += rows * (np.exp(-log_decay[since]) * missed)[:, None]
        self.rows[index] = rows * np.exp(log_decay[now] - log_decay[since])[:, None]
        self.last[index] = now

    def step(
        self, gradient: SparseVector, rate: float, alpha: float, batch: int, project, averaged: bool
    ) -> None:
        """``w ← (1 − rate α) w + (rate / batch) gradient``, then the L1 penalty and
        ``project``, the gradient's rows at once and the others lazily; ``averaged``: the new
        iterate joins the average. The rows of ``gradient`` (which must include those
        ``project`` changes) must be current."""
        shrink = 1.0 - rate * alpha
        if not shrink > 0.0:  # a step past the regulariser's minimum: settle, then step densely
            self.settle()
            self.w *= shrink
            index = slice(None)
        else:
            self.log_decay.append(self.log_decay.last + np.log(shrink))
            index = gradient.index
            self.rows[index] *= shrink
        self.rows[gradient.index] += (rate / batch) * gradient.values
        if self.penalty is not None:  # one rate for all: one penalty due, for all
            self.penalty.accrue(rate)
            self._clip(gradient)
        project(self.w)
        self.touched = self.rows[index]
        if isinstance(index, slice):
            self._rebase()  # every row is current at the new step
        else:
            self.last[index] = len(self.log_decay) - 1
        self._join_average(averaged, index)
        if self.log_decay.last < self._LOWEST_LOG_DECAY:
            self.settle()

    def _join_average(self, averaged: bool, index) -> None:
        """Add the current iterate to the average's sum (the rows ``index`` now, the others
        through ``E``)."""
        if len(self.summed) < len(self.log_decay):
            grow = averaged and self.total is not None
            self.summed.append(self.summed.last + (np.exp(self.log_decay.last) if grow else 0.0))
        if averaged:
            self._add_iterate(index)

    def settle(self) -> None:
        """Bring every row (and the average's sum) to the current step."""
        self.catch_up(slice(None))
        self._rebase()


class LazyAdaGrad(_LazyRows):
    """:class:`LazyWeights` for :class:`ProximalAdaGrad` steps.

    A row no gradient reaches keeps its rate ``η_r``, so each step multiplies it by the same
    ``ρ_r = 1 / (1 + η_r α)`` (the proximal step of the penalty alone): a row left alone for
    ``k`` steps is ``w ρ^k``, and the iterates it missed add ``w Σ_{j=1..k} ρ^j = w (1 − ρ^k) /
    (η_r α)`` (``w k`` where ``η_r α = 0``) to the average's sum. Once the average has started
    every step joins it.
    """

    def __init__(
        self, w, average, n_averaged: int, width: int, steps: ProximalAdaGrad, alpha, penalty=None
    ):
        super().__init__(w, average, n_averaged, width, penalty)
        self.now = 0  # steps taken
        self.last = np.zeros(len(self.rows), dtype=np.intp)  # step each row is current at
        # each row's η α (log ρ = −log(1 + η α)), as of the last step that reached it
        self.decay_rate = alpha * steps.rates(steps.squares)
        if penalty is not None:  # each row's η: the L1 penalty it is due per step and λ1
            self.rate = steps.rates(steps.squares)

    def catch_up(self, index: np.ndarray | slice) -> None:
        """Bring the rows ``index`` to the current step."""
        # ndarray.take gathers rows about twice as fast as fancy indexing
        take = (lambda a: a[index]) if isinstance(index, slice) else (lambda a: a.take(index, 0))
        missed, decay_rate = self.now - take(self.last), take(self.decay_rate)
        change = np.expm1(-missed * np.log1p(decay_rate))  # ρ^k − 1
        rows = take(self.rows)
        if self.total is not None:
            geometric = missed.astype(float)
            np.divide(change, -decay_rate, out=geometric, where=decay_rate > 0)
            total = self.total.reshape(self.rows.shape)
            total[index] = take(total) + rows * geometric[:, None]
        rows *= (1.0 + change)[:, None]
        self.rows[index] = rows
        if self.penalty is not None:  # the penalty due for the steps missed, at the row's rate
            due = (self.penalty.strength * missed) * take(self.rate)
            self.penalty.total[index] = take(self.penalty.total) + due[:, None]
        self.last[index] = self.now

    def step(self, gradient: SparseVector, rate, alpha, batch, project, averaged) -> None:
        """``w ← (w + rate · gradient / batch) / (1 + rate α)`` on the gradient's rows (``rate``:
        their new rates, ``(n_rows, 1)``; the other rows lazily), then the L1 penalty and
        ``project``; ``averaged``: the new iterate joins the average. The gradient's rows must
        be current."""
        index = gradient.index
        decay_rate = rate * alpha
        self.decay_rate[index] = decay_rate[:, 0]
        self.rows[index] += rate / batch * gradient.values
        if self.penalty is not None:  # the elastic net's proximal step: L1, then L2
            self.rate[index] = rate[:, 0]
            self.penalty.total[index] += self.penalty.strength * rate
            self._clip(gradient)
        self.rows[index] /= 1.0 + decay_rate
        project(self.w)
        self.now += 1
        self.last[index] = self.now
        self.touched = self.rows[index]
        if averaged:
            self._add_iterate(index)

    def settle(self) -> None:
        """Bring every row (and the average's sum) to the current step."""
        self.catch_up(slice(None))


class _Series:
    """A series ``s_0 = 0, s_1, …`` that grows by one value a step, in a numpy array doubled
    when full: reading it by step numbers costs the read, not the series' length."""

    def __init__(self):
        self._values = np.zeros(1024)
        self._length = 1

    def __len__(self) -> int:
        return self._length

    def append(self, value: float) -> None:
        if self._length == len(self._values):
            self._values = np.concatenate([self._values, np.zeros(len(self._values))])
        self._values[self._length] = value
        self._length += 1

    @property
    def last(self) -> float:
        return float(self._values[self._length - 1])

    @property
    def values(self) -> np.ndarray:
        return self._values[: self._length]


def lazy_when_sparse(oracle, structure, batch):
    """Let ``oracle`` take lazy sparse steps (:class:`LazyWeights`) when ``batch`` has sparse
    node features: ``oracle.support(part)`` names the rows of ``w`` a step on ``part`` reads
    and ``oracle.width`` their width; the oracle must then return
    :class:`~pmap_sklearn._utils.SparseVector` gradients within those rows."""
    if structure.has_sparse_features(batch):
        oracle.support = lambda part: structure.weight_support(batch.subset(part))
        oracle.width = structure.weight_row_width_
    return oracle


def _lazy_weights(oracle, steps, alpha, average_weights, state: SGDState, penalty=None):
    """The lazy sparse steps of an epoch (:class:`LazyWeights`, :class:`LazyAdaGrad`), or None
    when it takes dense ones."""
    if not (hasattr(oracle, "support") and np.ndim(alpha) == 0 and average_weights == "uniform"):
        return None
    coef, average, n_averaged, width = state.coef, state.average, state.n_averaged, oracle.width
    # the penalty due by row (AdaGrad's rates) or for all (a schedule's): the lazy steps' groups
    groups = None if penalty is None else len(penalty.total)
    if isinstance(steps, ProximalAdaGrad) and groups in (None, len(coef) // width):
        return LazyAdaGrad(coef, average, n_averaged, width, steps, alpha, penalty)
    if isinstance(steps, Schedule) and steps.scale is None and groups in (None, 1):
        return LazyWeights(coef, average, n_averaged, width, penalty)
    return None


def learning_rate(schedule: str, t: int, alpha: float, eta0: float, power_t: float) -> float:
    """Step size of update ``t`` (0-based).

    ``'optimal'``: ``1 / (α (t + t0))`` with ``t0 = 1 / (α η0)`` so that the first step is η0 (the
    paper's ``γ_h = 1/(λh)`` is ``η0 = 1/α``); ``'constant'``: η0; ``'invscaling'``:
    ``η0 / (t + 1)^power_t``.
    """
    if schedule == "optimal":
        return 1.0 / (alpha * (t + 1.0 / (alpha * eta0)))
    if schedule == "invscaling":
        return eta0 / (t + 1.0) ** power_t
    return eta0


#: What a learner's divergence error asks the user to change, unless the learner says otherwise.
DIVERGENCE_REMEDY = (
    "lower the step size (eta0, or eta0='auto'), scale the features or regularise more"
)


def run_epoch(
    oracle: Oracle,
    state: SGDState,
    n_samples: int,
    rng: np.random.Generator,
    steps: StepRule,
    penalty: CumulativeL1 | None,
    epoch: int,
    *,
    alpha,
    batch_size: int,
    start_average: int | None,
    average_weights: str,
    project,
    remedy: str,
):
    """One pass of :func:`run_sgd` over the ``n_samples`` samples of ``oracle`` (in the order it
    was made for), updating ``state`` in place; returns ``Σ ℓ`` over the pass and the last
    step's rate. ``epoch`` (0-based) is for messages; ``start_average``: the samples seen
    before averaging starts (None: no averaging)."""
    w = state.coef
    eta = 0.0
    objective = 0.0
    lazy = _lazy_weights(oracle, steps, alpha, average_weights, state, penalty)
    for begin in range(0, n_samples, batch_size):
        part = slice(begin, min(begin + batch_size, n_samples))
        averaged = start_average is not None and state.n_seen + part.stop - begin > start_average
        if lazy is not None:
            value, eta = _lazy_step(
                oracle, part, lazy, rng, steps, state.t, alpha, project, averaged
            )
        else:
            value, eta = _step(oracle, part, w, rng, steps, state.t, alpha, project, penalty)
        objective += value
        if not np.isfinite(lazy.touched if lazy is not None else w).all():
            raise NonFiniteError(
                f"SGD diverged in epoch {epoch + 1} (update {state.t + 1}): the weights are "
                f"no longer finite; {remedy}"
            )
        state.t += 1
        state.n_seen += part.stop - part.start
        if lazy is not None or not averaged:
            continue
        if state.average is None or state.n_averaged == 0:
            state.average = w.copy()
            state.n_averaged = 1
        else:
            state.n_averaged += 1
            if average_weights == "linear":  # weights ∝ h
                state.average += (w - state.average) * (2.0 / (state.n_averaged + 1))
            else:
                state.average += (w - state.average) / state.n_averaged
    if lazy is not None:
        lazy.settle()
        state.average, state.n_averaged = lazy.average, lazy.n_averaged
    if penalty is not None:  # every weight pays what it is owed
        penalty.clip(w)
    return objective, eta


def run_sgd(
    make_oracle: OracleFactory,
    state: SGDState,
    n_samples: int,
    *,
    rng: np.random.Generator,
    alpha: float | np.ndarray,
    batch_size: int,
    steps: StepRule,
    average: bool | int,
    max_iter: int,
    tol: float | None,
    n_iter_no_change: int,
    project: Callable[[np.ndarray], np.ndarray],
    l1: float = 0.0,
    validation_score: Callable[[np.ndarray], float] | None = None,
    verbose: int = 0,
    average_weights: str = "uniform",
    shuffle: bool = True,
    name: str = "SGD",
    remedy: str = DIVERGENCE_REMEDY,
    shards=None,
) -> SGDState:
    """Run epochs of projected mini-batch SGD ascent, updating ``state`` in place.

    Parameters
    ----------
    make_oracle : callable ``order -> oracle``
        Oracle factory, called once per epoch with the epoch's permutation of the samples; the
        oracle ``(part, w, rng) -> (gradient_sum, objective_sum)`` returns the sums over the
        mini-batch ``part`` (a slice of that permutation) of the stochastic gradient of ℓ
        (without the regulariser) and of the stochastic estimate of ℓ.
    state : SGDState
        Starting point (and schedule position, for warm starts).
    alpha : float or ndarray
        L2 strength, one for all coordinates or one per coordinate.
    l1 : float, default=0.0
        L1 strength λ1: the objective loses ``λ1 ‖w‖_1`` too, by the cumulative penalty
        (:class:`CumulativeL1`, kept in ``state`` for warm starts); the averaged weights are
        then returned on the last iterate's non-zero weights.
    steps : StepRule
        The step sizes (:class:`Schedule`, :class:`AdaGrad`, :class:`ProximalAdaGrad`,
        :class:`Normalised`).
    average : bool or int
        Polyak–Ruppert averaging of the iterates; an int starts it after that many samples.
    average_weights : {"uniform", "linear"}, default="uniform"
        Weights of the averaged iterates: equal, or proportional to the step number h (the
        average the ``1/√h`` rate of projected SGD is proved for).
    name : str
        The estimator's name in progress messages and warnings.
    tol, n_iter_no_change :
        Stop when the epoch objective (or the validation score, if ``validation_score`` is given)
        has not improved by ``tol`` for ``n_iter_no_change`` epochs. ``tol=None`` disables it.
    validation_score : callable ``w -> float``, optional
        Score (higher is better) of weights on held-out samples.
    verbose : int
        Progress of the epochs (see :class:`~pmap_sklearn._progress.Progress`); a
        ``ConvergenceWarning`` when ``tol`` is set and ``max_iter`` ends the run first.
    shuffle : bool, default=True
        Visit the samples in a new random order every epoch; False keeps their order and
        makes the oracle once (full-batch learners).
    remedy : str
        What the error tells the user to change when the weights or the objective stop being
        finite (in the estimator's own parameters).
    shards : :class:`~pmap_sklearn._optim.shards.Shards`, optional
        A data-parallel run (iterative parameter mixing): each epoch is one pass of
        :func:`run_epoch` per shard, one task each, and the state is the mix of theirs;
        ``make_oracle`` is then unused (each shard has its own).
    """
    start_average = 0 if average is True else (int(average) if average else None)
    best, no_improvement = -np.inf, 0
    state.n_iter = 0
    progress = Progress(name, max_iter, verbose)
    converged = None if tol is None else False
    oracle = None if shuffle else make_oracle(np.arange(n_samples))
    penalty = _cumulative_l1(l1, state, steps)
    steps_of_epoch = dict(
        alpha=alpha,
        batch_size=batch_size,
        start_average=start_average,
        average_weights=average_weights,
        project=project,
        remedy=remedy,
    )
    for epoch in range(max_iter):
        if shards is not None:  # each shard's pass one task, their states mixed
            objective, eta = shards.epoch(state, steps, rng, epoch, l1, steps_of_epoch)
        else:
            if shuffle:  # the last epoch's gathered samples go first: one copy of them at a time
                oracle = None
                oracle = make_oracle(rng.permutation(n_samples))
            objective, eta = run_epoch(
                oracle, state, n_samples, rng, steps, penalty, epoch, **steps_of_epoch
            )
        w = state.coef
        state.n_iter = epoch + 1
        regularised = objective / n_samples - _penalty(alpha, w, l1)
        if not np.isfinite(regularised):
            raise NonFiniteError(
                f"the objective of epoch {epoch + 1} is not finite ({regularised}): the weights "
                f"overflowed; {remedy}"
            )
        state.loss_curve.append(-regularised)
        current = regularised
        if validation_score is not None:
            current = validation_score(state.estimate)
            state.validation_scores.append(current)
        details = {"step size": float(np.mean(eta))}  # the last step's (mean) rate
        if validation_score is not None:
            details["validation score"] = current
        progress.update(epoch + 1, -regularised, **details)
        if tol is not None:
            if current > best + tol:
                no_improvement = 0
            else:
                no_improvement += 1
            best = max(best, current)
            if no_improvement >= n_iter_no_change:
                converged = True
                break
    rule = f"no gain above tol={tol} in n_iter_no_change={n_iter_no_change} epochs"
    progress.finish(state.n_iter, converged, rule)
    return state
