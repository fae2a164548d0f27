"""The bounded search of the initial step size (``eta0="auto"``), as in Bottou's SGD code.

:func:`calibrate_eta0` runs a :class:`StepSearch`: candidate steps on a lattice ``start ·
factor**m``, each one SGD pass over a subsample judged on it (or on held-out samples), galloping
then bisection over ``m``, within a budget of oracle work.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._utils import SparseVector
from .._validation import NonFiniteError
from .sgd import OracleFactory, Schedule, SGDState, StepRule, _penalty, run_sgd

#: Candidate passes a search judged on its own samples sizes its subsample for under a budget,
#: and always affords on its smallest subsample: the six that walk from the start to a step 2⁴
#: away (from Polyak's step, three or four).
OWN_PASSES = 6
#: Candidate passes a search with held-out judging sizes its judged samples for, and the fewest
#: full-length passes it needs (the start and its two neighbours).
HELD_OUT_PASSES, MIN_PASSES = 4, 3
#: Judged samples a search with held-out judging keeps, at least.
MIN_JUDGED = 128
#: The first candidate where Polyak's step is larger (features of unit scale) or not defined.
DEFAULT_START = 0.1
#: Exponents of ``factor`` the step-size search spans (2**±1100 covers every double).
MAX_EXPONENT = 1100


def calibrate_eta0(
    make_oracle: OracleFactory,
    w: np.ndarray,
    n_samples: int,
    *,
    rng: np.random.Generator,
    alpha: float,
    batch_size: int,
    project: Callable[[np.ndarray], np.ndarray],
    average: bool = True,
    l1: float = 0.0,
    make_steps: Callable[[float], StepRule] = lambda eta: Schedule("constant", eta),
    n_calibration: int = 256,
    held_out: int = 0,
    factor: float = 2.0,
    start: float | None = None,
    budget: float | None = None,
    sizes: np.ndarray | None = None,
    min_work: float = 0.0,
) -> float:
    """Pick the initial step size on a subsample, as in Bottou's SGD code, within a budget.

    Each candidate runs one epoch of SGD from ``w`` over up to ``n_calibration`` samples, its
    steps from ``make_steps(eta)`` (constant steps by default; the L1 term ``l1`` too), then
    the regularised objective of the last (or, with ``average``, the averaged) iterate is
    estimated on them — or, with ``held_out``, on up to that many other samples (the
    subsample is split in proportion when the data has fewer). The pass's own samples reward
    the steps that memorise them: with sparse token features a large step fits their rare
    words at once and wins, while the samples it has not seen judge what the step generalises.
    Candidates and evaluations share their perturbations (common random numbers), so they are
    compared on equal terms.

    The step is searched among ``start · factor**m``: upwards first, downwards if a larger step
    does not improve; galloping then bisection over ``m`` find the maximum of a unimodal
    objective in O(log |m|) passes. Passes that diverge count as −∞. A step found downwards
    must also improve on ``w`` itself: where no pass does (a start at a local optimum, e.g. of
    a model with hidden states), ever smaller steps win by changing ever less, down to a step
    that does not learn; ``start`` is returned instead.

    Without a given ``start`` the search starts from the smaller of 0.1 (a step for features of
    unit scale) and Polyak's step ``(F* − F(w)) / ‖∇F(w)‖²`` (Polyak 1987, *Introduction to
    Optimization*, the subgradient method with a known optimal value) for the objective ``F``
    estimated at ``w`` on the judged samples (one evaluation of the oracle), with the
    likelihood's bound 0 for its maximum ``F*``: a step beyond it overshoots. It follows the
    scale of the features (~1/s² for features scaled by s) and, from the logistic start of the
    grids, lies within a factor 3 of the step found: three or four passes instead of 7–15 from
    0.1. Its lattice ``start · factor**m`` is anywhere, so the step found there is moved to the
    maximum of the parabola through the objectives at it and its two neighbours (by at most
    half a step of the lattice); a search from a given start or from 0.1 keeps its lattice.

    With a ``budget``, the oracle work of the whole search — every sample of every pass and
    evaluation, counted by its ``sizes`` (e.g. its nodes) — stays within it: the subsample
    shrinks (a random part of the drawn one) until the evaluation at ``w`` and six candidates
    fit (a walk from the start to a step 2⁴ away; a search for four stopped short of the step
    on small data), but keeps one mini-batch of ``batch_size`` samples to pass over (a step as
    noisy as the fit's: smaller ones choose smaller steps) and samples of ``min_work``; the
    budget grows to what the evaluation at ``w`` and six candidates cost on that subsample
    where it is smaller. With ``held_out``, the judged samples shrink instead, until four
    candidates fit or to 128, and the pass keeps its length (AdaGrad's passes of 512 sentences
    choose half the step of passes of 1,024); where even three candidates do not fit, the
    search returns its start. The search stops before an evaluation that would overrun the
    budget, returning the best step evaluated so far (the start if none was).

    Parameters
    ----------
    make_oracle : callable ``order -> oracle``
        The oracle factory of :func:`run_sgd`.
    w : ndarray
        The starting weights (not changed).
    n_samples : int
    rng : numpy Generator
        Draws the subsample and the perturbations' seeds.
    alpha, l1, batch_size, project, average :
        As in :func:`run_sgd` (``average`` as a bool: from the pass's start).
    make_steps : callable ``eta -> StepRule``
        The steps of a candidate pass.
    n_calibration : int, default=256
        Samples of a pass, at most.
    held_out : int, default=0
        Samples that judge the passes, at most (0: the pass's own samples judge).
    factor : float, default=2.0
        Ratio of two neighbouring candidates.
    start : float, optional
        The first candidate; by default the smaller of 0.1 and Polyak's step (0.1 where that
        is not defined: ``F(w) >= 0`` or a zero gradient).
    budget : float, optional
        The most oracle work the search may do, in the units of ``sizes``; by default no bound.
    sizes : ndarray of shape (n_samples,), optional
        The work of one sample in an oracle call (default: 1 each).
    min_work : float, default=0.0
        Under a budget, the work of the samples a pass goes over, at least (with the pass's
        own samples judging): the step chosen on few small samples is noisy.

    Returns
    -------
    eta0 : float
    """
    search = StepSearch(
        make_oracle,
        w,
        n_samples,
        rng=rng,
        alpha=alpha,
        batch_size=batch_size,
        project=project,
        average=average,
        l1=l1,
        make_steps=make_steps,
        n_calibration=n_calibration,
        held_out=held_out,
        factor=factor,
        start=start,
        budget=budget,
        sizes=sizes,
        min_work=min_work,
    )
    return search.run()


class _OutOfBudget(Exception):
    """The step-size search's next evaluation would overrun its budget."""


class StepSearch:
    """One search of :func:`calibrate_eta0` (see it for the parameters): the subsample and the
    budget are fixed at construction, :meth:`run` returns the step."""

    def __init__(
        self,
        make_oracle,
        w,
        n_samples,
        *,
        rng,
        alpha,
        batch_size,
        project,
        average,
        l1,
        make_steps,
        n_calibration,
        held_out,
        factor,
        start,
        budget,
        sizes,
        min_work,
    ):
        self.w, self.alpha, self.l1, self.factor, self.start = w, alpha, l1, factor, start
        self.batch_size, self.project, self.average = batch_size, project, average
        self.make_steps = make_steps
        index = rng.choice(n_samples, size=min(n_samples, n_calibration + held_out), replace=False)
        self.pass_seed, self.eval_seed = rng.integers(2**63, size=2)
        n_judged = min(round(len(index) * held_out / (n_calibration + held_out)), len(index) - 1)
        own = n_judged <= 0  # the pass's own samples judge
        judged, index = (index, index) if own else (index[:n_judged], index[n_judged:])
        sizes = np.ones(n_samples) if sizes is None else np.asarray(sizes, dtype=float)
        reference = start is None  # the evaluation at w comes first, for Polyak's step
        self.too_little_data = False
        if budget is not None and own:  # a candidate passes over its samples, judged on them
            least = max(batch_size, _prefix_within(sizes[index], min_work, 0) + 1)
            per_sample = (2 * OWN_PASSES + reference) * sizes[index]
            index = judged = index[: _prefix_within(per_sample, budget, min(least, len(index)))]
        elif budget is not None:  # the judged samples shrink, the pass keeps its length
            pass_work = HELD_OUT_PASSES * sizes[index].sum()
            per_sample = (HELD_OUT_PASSES + reference) * sizes[judged]
            judged = judged[: _prefix_within(per_sample, budget - pass_work, MIN_JUDGED)]
            minimum = (
                MIN_PASSES * sizes[index].sum() + (MIN_PASSES + reference) * sizes[judged].sum()
            )
            if minimum > budget:  # too little data to judge a full pass: the start
                self.too_little_data = True
                return
        self.index, self.judged = index, judged
        self.oracle = make_oracle(index)
        self.judge = self.oracle if own else make_oracle(judged)
        self.pass_work, self.judge_work = float(sizes[index].sum()), float(sizes[judged].sum())
        if budget is not None and own:  # the evaluation at w and six candidates always fit
            budget = max(
                budget,
                OWN_PASSES * (self.pass_work + self.judge_work) + reference * self.judge_work,
            )
        self.budget, self.spent = budget, 0.0
        self.at_w, self.values = [], {}

    def run(self) -> float:
        """The step found (see :func:`calibrate_eta0`)."""
        if self.too_little_data:
            return DEFAULT_START if self.start is None else float(self.start)
        # The lattice of a given start, or of 0.1, is kept (steps were chosen on it); Polyak's
        # step lies anywhere, and the parabola takes its lattice's offset out of the step found.
        refine = None
        try:
            if self.start is None:
                self.start = DEFAULT_START  # if the evaluation at w is beyond the budget
                self._objective_at_w()
                self.start = min(DEFAULT_START, _polyak_step(*self.at_w[0], self.alpha, self.w))
                refine = self._refined if self.start < DEFAULT_START else None
            found = self._search()
        except _OutOfBudget:  # the best step evaluated (the start if none was)
            values = self.values
            found = max(values, key=lambda k: (values[k], -abs(k)), default=0)
        if found is None:
            return float(self.start)
        return float(self.start * self.factor ** (found if refine is None else refine(found)))

    def _charge(self, work: float) -> None:
        if self.budget is not None and self.spent + work > self.budget:
            raise _OutOfBudget
        self.spent += work

    def _objective_after_pass(self, eta: float) -> float:
        state = SGDState(coef=self.w.copy())
        run_sgd(
            lambda order: self.oracle,  # the subsample in its drawn order
            state,
            len(self.index),
            rng=np.random.default_rng(self.pass_seed),
            alpha=self.alpha,
            batch_size=self.batch_size,
            steps=self.make_steps(eta),
            average=self.average,
            l1=self.l1,
            max_iter=1,
            tol=None,
            n_iter_no_change=1,
            project=self.project,
            shuffle=False,
        )
        return self._judged_objective(state.estimate)[0]  # judge what the run would return

    def _judged_objective(self, trial: np.ndarray):
        """The objective at ``trial`` on the judged samples and its gradient (ascent)."""
        gradient, value = self.judge(slice(None), trial, np.random.default_rng(self.eval_seed))
        if isinstance(gradient, SparseVector):
            gradient = gradient.toarray()
        n_judged = len(self.judged)
        with np.errstate(over="ignore", invalid="ignore"):
            return value / n_judged - _penalty(self.alpha, trial, self.l1), gradient / n_judged

    def _objective_at_w(self) -> float:
        if not self.at_w:
            self._charge(self.judge_work)
            self.at_w.append(self._judged_objective(self.w))
        return self.at_w[0][0]

    def _value(self, k: int) -> float:
        """The objective after a pass with step ``start · factor**k`` (−inf if it diverged)."""
        if k not in self.values:
            self._charge(self.pass_work + self.judge_work)  # the pass and its judgement
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    result = self._objective_after_pass(self.start * self.factor**k)
            except (NonFiniteError, OverflowError):
                result = -np.inf
            self.values[k] = result if np.isfinite(result) else -np.inf
        return self.values[k]

    def _search(self) -> int | None:
        """The exponent of the step found (None: the start, as no step improves on w)."""
        value = self._value
        for direction in (1, -1):
            if not value(direction) > value(0):
                continue
            # The objective still improves at m = low; galloping finds an m = high where it no
            # longer does, and bisection the first such m: a maximum of the (unimodal)
            # objective over the exponents, in O(log |m|) passes instead of |m|.
            low, high = 0, 1
            while value((high + 1) * direction) > value(high * direction):
                low, high = high, 2 * high
                if high > MAX_EXPONENT:
                    return low * direction
            while high - low > 1:
                middle = (low + high) // 2
                if value((middle + 1) * direction) > value(middle * direction):
                    low = middle
                else:
                    high = middle
            if direction < 0 and not value(-high) > self._objective_at_w():
                return None  # no pass improves on staying at w: smaller steps changed less
            return high * direction
        return 0

    def _refined(self, k: int) -> float:
        """``k`` moved to the maximum of the parabola through the objectives at ``k - 1``,
        ``k`` and ``k + 1`` (by at most half a step of the lattice), where all three are
        known."""
        around = [self.values.get(k + d, -np.inf) for d in (-1, 0, 1)]
        curvature = around[0] - 2 * around[1] + around[2]
        if not (np.isfinite(around).all() and curvature < 0):
            return k
        return k + float(np.clip(0.5 * (around[0] - around[2]) / curvature, -0.5, 0.5))


def _polyak_step(objective: float, gradient: np.ndarray, alpha, w: np.ndarray) -> float:
    """Polyak's step ``−F(w) / ‖∇F(w)‖²`` (``F* = 0``) of the regularised objective, or
    :data:`DEFAULT_START` where it is not a positive number."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        direction = gradient - alpha * w
        norm = float(np.linalg.norm(direction))
        step = (-objective / norm) / norm if norm > 0 else np.nan
    return step if np.isfinite(step) and step > 0 else DEFAULT_START


def _prefix_within(work: np.ndarray, budget: float, minimum: int) -> int:
    """How many leading samples of ``work`` (each one's share of the search's work) fit in
    ``budget``; at least ``minimum``."""
    return max(minimum, int(np.searchsorted(np.cumsum(work), budget, side="right")))
