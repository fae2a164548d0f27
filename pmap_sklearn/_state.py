"""The one fit state: what every learner's optimiser keeps between calls.

A learner's ``_new_state`` makes one and its optimiser updates it in place; ``fit`` copies it
on a warm start (so a failed fit changes nothing), reads ``estimate`` into ``coef_`` and
``n_iter`` into ``n_iter_``, and the estimator turns ``history`` into its fitted curves.
Optimisers with more to keep (SGD's schedule position and average, BCFW's dual blocks) extend
it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class FitState:
    """Weights, random stream, iterations and named histories of a fit.

    Parameters
    ----------
    coef : ndarray
        The current weights.
    rng : numpy.random.Generator, optional
        The fit's random stream, continued by warm starts.
    n_iter : int, default=0
        Iterations (epochs, rounds) of the last run.
    history : dict of str to list
        Per-iteration records by name (objective values, bounds, gaps, step sizes).
    """

    coef: np.ndarray
    rng: np.random.Generator | None = None
    n_iter: int = 0
    history: dict = field(default_factory=dict)

    @property
    def estimate(self) -> np.ndarray:
        """The weights the fit returns (subclasses may average)."""
        return self.coef

    def record(self, **values) -> None:
        """Append each value to its history."""
        for name, value in values.items():
            self.history.setdefault(name, []).append(value)

    def recorded(self, name: str) -> list:
        """The history of ``name`` (empty if never recorded)."""
        return list(self.history.get(name, []))
