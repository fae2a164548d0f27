"""One progress reporter for every iterative estimator, and its convergence warning."""

from __future__ import annotations

import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from ._utils import user_stacklevel

#: ``verbose`` in 1..2 prints the first FIRST_LINES iterations, then every ``max_iter / LINES``-th
#: and the last: about 15 lines whatever ``max_iter`` (``verbose >= 3``: every iteration).
FIRST_LINES, LINES = 3, 10


class Progress:
    """Prints ``[Name] epoch i/max_iter: loss …, elapsed …, ~… left`` after the first three
    iterations, every ``max_iter / 10``-th and the last (every one with ``verbose >= 3``).

    ``loss`` is always the quantity the estimator minimises (a negated log-likelihood or its
    bound, the S-SVM primal objective), so lower is better everywhere. ``verbose >= 2`` adds the
    estimator's details (step size, duality gap, validation score, …).

    Parameters
    ----------
    name : str
        The estimator's name.
    max_iter : int
    verbose : int
    unit : str, default="epoch"
        What one iteration is (``"epoch"``, ``"pass"``, ``"iteration"``).
    """

    def __init__(self, name: str, max_iter: int, verbose: int, unit: str = "epoch"):
        self.name, self.max_iter, self.verbose, self.unit = name, max_iter, int(verbose), unit
        self.started = time.perf_counter()
        self.every = max(1, -(-max_iter // LINES))  # ceil: at most LINES lines after the first
        self.pending = None  # the last iteration's line when it was not printed

    def update(self, iteration: int, loss: float, **details) -> None:
        """Report iteration ``iteration`` (1-based) with its ``loss``."""
        if not self.verbose:
            return
        elapsed = time.perf_counter() - self.started
        left = elapsed / iteration * (self.max_iter - iteration)
        line = f"[{self.name}] {self.unit} {iteration}/{self.max_iter}: loss {loss:.6g}"
        if self.verbose >= 2 and details:
            line += ", " + ", ".join(f"{key} {_format(value)}" for key, value in details.items())
        line = f"{line}, {elapsed:.2f} s elapsed, ~{left:.2f} s left"
        shown = (
            self.verbose >= 3
            or iteration <= FIRST_LINES
            or iteration % self.every == 0
            or iteration >= self.max_iter
        )
        self.pending = None if shown else line
        if shown:
            print(line, file=sys.stdout, flush=True)

    def finish(self, iterations: int, converged: bool | None, rule: str = "") -> None:
        """End of the fit: report convergence; warn when a stopping rule exists (``converged``
        is not None) and ``max_iter`` ended the fit first. The last iteration's line is
        printed if it was not."""
        if self.verbose and self.pending is not None:
            print(self.pending, file=sys.stdout, flush=True)
            self.pending = None
        if converged is False:
            warnings.warn(
                f"{self.name} did not converge: the stopping rule ({rule}) was not met in "
                f"max_iter={self.max_iter} {_plural(self.unit)}; raise max_iter",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        elif converged and self.verbose:
            print(f"[{self.name}] converged after {iterations} {_plural(self.unit)}", flush=True)


def _format(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _plural(unit: str) -> str:
    return unit + ("es" if unit.endswith("s") else "s")
