"""L-BFGS on a regularised objective, with the library's progress and non-finite checks."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ._progress import Progress
from ._utils import NonFiniteError


def minimise(objective, w0, *, name, max_iter, tol, verbose, bounds=None):
    """Minimise ``objective(w) -> (value, gradient)`` from ``w0`` with L-BFGS-B.

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
