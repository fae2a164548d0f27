"""L-BFGS for every full-batch learner, with the library's progress and non-finite checks.

Two entry points, for two kinds of objective:

- :func:`minimise`: a fixed objective (ChainCRF, pseudo-likelihood, Part & Clamp), by scipy's
  L-BFGS-B — its active-set handling of bounds keeps the graph-cut learners' pairwise weights
  attractive, which a plain L-BFGS step cannot;
- :class:`CurvatureMemory` and :func:`backtrack`: L-BFGS directions and an Armijo line search
  one step at a time, for an objective that changes between steps (EpsilonCRF moves its
  messages between weight steps, so no black-box optimiser sees one function).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ._parallel import single_blas_thread
from ._progress import Progress
from ._utils import NonFiniteError


def minimise(objective, w0, *, name, max_iter, tol, verbose, bounds=None):
    """Minimise ``objective(w) -> (value, gradient)`` from ``w0`` with L-BFGS-B, on one BLAS thread.

    One BLAS thread whatever ``n_jobs``: L-BFGS-B's vector updates and the objectives' small
    products leave a second thread waiting (on 2 cores: ChainCRF on 1,000 OCR words 7.0 s with
    two threads, 3.3 s with one; PiecewiseCRF on the horse graphs 1.34 s and 0.22 s), and a fit
    is then the same bit for bit with any ``n_jobs``.

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

    Returns
    -------
    w : ndarray
        The minimiser found.
    n_iter : int
        Iterations run.
    value : float
        The objective at ``w``.
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
        y = self.gradient_at(w_new) - gradient
        if s @ y > 1e-12 * (s @ s):
            self.pairs.append((s, y, 1.0 / (s @ y)))
            del self.pairs[: -self.size]
