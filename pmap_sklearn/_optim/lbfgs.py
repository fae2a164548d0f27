"""L-BFGS for every full-batch learner, with the library's progress and non-finite checks.

Two entry points, for two kinds of objective:

- :func:`minimise`: a fixed objective (ChainCRF, pseudo-likelihood, Part & Clamp), by scipy's
  L-BFGS-B — its active-set handling of bounds keeps the graph-cut learners' pairwise weights
  attractive, which a plain L-BFGS step cannot — or, with an L1 penalty (``l1 > 0``: the
  elastic net's L1 part), by OWL-QN (:func:`owlqn`; scipy has none);
- :class:`CurvatureMemory` and :func:`backtrack`: L-BFGS directions and an Armijo line search
  one step at a time, for an objective that changes between steps (EpsilonCRF moves its
  messages between weight steps, so no black-box optimiser sees one function).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from .._parallel import single_blas_thread
from .._progress import Progress
from .._validation import NonFiniteError


def minimise(objective, w0, *, name, max_iter, tol, verbose, bounds=None, l1=0.0):
    """Minimise ``objective(w) -> (value, gradient)`` from ``w0`` with L-BFGS-B, on one BLAS thread.

    One BLAS thread whatever ``n_jobs``: L-BFGS-B's vector updates and the objectives' small
    products leave a second thread waiting (a fit is about twice as fast on one thread, see
    docs/results/defaults.md), and a fit is then the same bit for bit with any ``n_jobs``.

    Parameters
    ----------
    objective : callable
        Returns the value and the gradient at ``w``.
    w0 : ndarray
        Start.
    name : str
        The estimator's name, for progress and warnings.
    max_iter : int
        Iteration budget.
    tol : float
        Tolerance on the projected gradient.
    verbose : int
        Progress reports.
    bounds : list of (low, high) or None
        Box constraints per coordinate (None: unconstrained).
    l1 : float or ndarray, default=0.0
        Strength of an L1 penalty ``Σ_i l1_i |w_i|`` added to the objective (a scalar, or one
        value per coordinate, 0 where a weight is not penalised). Non-zero: the fit runs
        :func:`owlqn` instead of L-BFGS-B (without bounds); zero: L-BFGS-B exactly as without
        the argument.

    Returns
    -------
    w : ndarray
        The minimiser found.
    n_iter : int
        Iterations run.
    value : float
        The objective at ``w`` (with the L1 penalty).
    """

    def checked(w):
        value, gradient = objective(w)
        if not (np.isfinite(value) and np.isfinite(gradient).all()):
            raise NonFiniteError(
                f"the {name} objective or its gradient is not finite (features too large): "
                "scale the features (e.g. with NodeTransformer(StandardScaler())) or "
                "regularise more"
            )
        return value, gradient

    progress = Progress(name, max_iter, verbose, unit="iteration")
    l1 = np.asarray(l1, dtype=float)
    if np.any(l1 != 0):
        if bounds is not None:
            raise ValueError(
                f"{name}: an L1 penalty (l1_ratio > 0) cannot be combined with bounds on the "
                "weights (attractive pairwise terms for graph cuts): use l1_ratio=0"
            )
        if not (np.all(np.isfinite(l1)) and np.all(l1 >= 0)):
            raise ValueError("l1 must be finite and >= 0")
        with single_blas_thread():
            w, n_iter, value, converged = owlqn(
                checked, w0, l1, max_iter=max_iter, tol=tol, progress=progress
            )
        progress.finish(n_iter, converged, f"pseudo-gradient < tol={tol}")
        return w, n_iter, value
    iteration = iter(range(1, max_iter + 1))

    def report(intermediate_result):
        progress.update(next(iteration), intermediate_result.fun)

    with single_blas_thread():
        result = minimize(
            checked,
            w0,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options=dict(maxiter=max_iter, gtol=tol),
            callback=report,
        )
    # status 1: the iteration budget ran out before the gradient tolerance was met
    progress.finish(result.nit, result.status != 1, f"projected gradient < tol={tol}")
    return result.x, int(result.nit), float(result.fun)


def backtrack(objective, w, value, gradient, direction, shrink=0.5, max_halvings=60):
    """Armijo backtracking along a descent direction from η = 1: the first η with
    ``objective(w + η d) <= value + η g·d / 4``; returns the new weights and η."""
    slope = gradient @ direction
    step = 1.0
    for _ in range(max_halvings):
        candidate = w + step * direction
        if objective(candidate) <= value + 0.25 * step * slope:
            return candidate, step
        step *= shrink
    return w, 0.0


class CurvatureMemory:
    """L-BFGS directions (Nocedal & Wright 2006, Alg. 7.4), one step at a time.

    ``gradient_at(w)`` gives the gradient that makes the curvature pairs; for EpsilonCRF it is
    taken at the messages of the accepted step, so the direction is a quasi-Newton step on the
    current block of the joint program (Hazan & Urtasun 2010, Lemma 2). The direction falls
    back to the steepest descent whenever it is not a descent direction.
    """

    def __init__(self, gradient_at, size: int = 10):
        self.gradient_at, self.size, self.pairs = gradient_at, size, []
        self.last_gradient = None

    def direction(self, gradient):
        self.last_gradient = gradient
        q = gradient.copy()
        coefficients = []
        for s, y, rho in reversed(self.pairs):
            a = rho * (s @ q)
            coefficients.append(a)
            q -= a * y
        if self.pairs:
            s, y, _ = self.pairs[-1]
            q *= (s @ y) / (y @ y)
        for (s, y, rho), a in zip(self.pairs, reversed(coefficients), strict=True):
            q += s * (a - rho * (y @ q))
        direction = -q
        if gradient @ direction >= -1e-12 * (gradient @ gradient):
            self.pairs.clear()
            direction = -gradient
        return direction

    def update(self, s, gradient, w_new):
        if not np.any(s):
            self.pairs.clear()
            return
        self.add_pair(s, self.gradient_at(w_new) - gradient)

    def add_pair(self, s, y):
        """Keep the curvature pair ``(s, y)`` (step, change of gradient) if ``s·y > 0``."""
        if s @ y > 1e-12 * (s @ s):
            self.pairs.append((s, y, 1.0 / (s @ y)))
            del self.pairs[: -self.size]


#: OWL-QN stops when the last :data:`PERIOD` iterations lowered the objective by less than this,
#: relative to its size: L-BFGS-B's precision (``factr = 1e7`` times the machine epsilon) over
#: liblbfgs's window (one OWL-QN iteration can gain little while the next gains much: the
#: direction loses the components that disagree in sign with the steepest descent).
FTOL = 1e7 * np.finfo(float).eps
PERIOD = 10
#: Armijo constant of the projected line search (Andrew & Gao 2007, Alg. 2).
ARMIJO = 1e-4


def pseudo_gradient(w, gradient, l1):
    """The pseudo-gradient of ``loss(w) + Σ_i l1_i |w_i|`` (Andrew & Gao 2007, eq. 4): the
    gradient of the penalised objective where ``w_i ≠ 0``; at ``w_i = 0`` the one-sided
    derivative that descends, or 0 when neither side does (``|g_i| <= l1_i``)."""
    right, left = gradient + l1, gradient - l1
    at_zero = np.where(right < 0, right, np.where(left > 0, left, 0.0))
    return np.where(w > 0, right, np.where(w < 0, left, at_zero))


def owlqn(objective, w0, l1, *, max_iter, tol, progress, memory=10):
    """Minimise ``loss(w) + Σ_i l1_i |w_i|`` by OWL-QN (Andrew & Gao, "Scalable training of
    L1-regularized log-linear models", ICML 2007, Alg. 1), crfsuite's L1 method.

    Each iteration is an L-BFGS step (Nocedal & Wright 2006, Alg. 7.4; the curvature pairs
    from the smooth loss's gradients) on the pseudo-gradient (:func:`pseudo_gradient`); the
    direction loses its components that disagree in sign with the steepest descent, and the
    backtracking line search projects each trial point onto the orthant of the current point
    (a coordinate that would cross zero stays at zero) — so weights become exactly zero.

    Stops when the largest pseudo-gradient entry is at most ``tol`` (L-BFGS-B's test on the
    projected gradient), when the last :data:`PERIOD` iterations lowered the objective by less
    than :data:`FTOL` relative to its size (L-BFGS-B's other test, over liblbfgs's window), or
    when the line search finds no decrease.

    Parameters
    ----------
    objective : callable
        ``loss(w) -> (value, gradient)`` of the smooth part.
    w0 : ndarray
        Start.
    l1 : float or ndarray
        Non-negative L1 strength (scalar or per coordinate).
    max_iter : int
    tol : float
    progress : Progress
    memory : int, default=10
        Curvature pairs kept (L-BFGS-B's default).

    Returns
    -------
    w : ndarray
    n_iter : int
    value : float
        ``loss(w) + Σ_i l1_i |w_i|``.
    converged : bool
        Whether a stopping rule ended the run (else ``max_iter``).
    """

    def penalised(w):
        value, gradient = objective(w)
        return value + float(np.sum(l1 * np.abs(w))), gradient

    w = np.array(w0, dtype=float)
    value, gradient = penalised(w)
    curvature = CurvatureMemory(None, size=memory)
    n_iter, converged, history = 0, False, [value]
    for n_iter in range(1, max_iter + 1):
        steepest = pseudo_gradient(w, gradient, l1)
        if np.max(np.abs(steepest), initial=0.0) <= tol:
            n_iter, converged = n_iter - 1, True
            break
        direction = curvature.direction(steepest)
        direction[direction * steepest >= 0] = 0.0  # keep the components that descend
        orthant = np.where(w != 0, np.sign(w), -np.sign(steepest))
        # the first step has unit length (liblbfgs's start), later ones the quasi-Newton step
        step = 1.0 if curvature.pairs else 1.0 / max(np.linalg.norm(direction), 1e-300)
        for _ in range(60):
            trial = w + step * direction
            trial[np.sign(trial) != orthant] = 0.0
            trial_value, trial_gradient = penalised(trial)
            if trial_value <= value + ARMIJO * (steepest @ (trial - w)):
                break
            step *= 0.5
        else:  # no decrease along the direction: as far as the precision allows
            n_iter, converged = n_iter - 1, True
            break
        curvature.add_pair(trial - w, trial_gradient - gradient)
        w, value, gradient = trial, trial_value, trial_gradient
        progress.update(n_iter, value)
        history.append(value)
        before = history[max(len(history) - 1 - PERIOD, 0)]
        if n_iter >= PERIOD and before - value <= FTOL * max(abs(before), abs(value), 1.0):
            converged = True
            break
    return w, n_iter, value, converged
