"""The solver protocol, for users who plug in their own MAP / marginal oracle.

A structure turns samples and weights into :class:`Potentials` and asks its solver
(``structure(solver=...)``, a name or an instance) for MAP labellings, single-node clamped
maximisers and, optionally, exact marginals. A new solver subclasses :class:`Solver` and
implements ``map``; :meth:`Solver.clamped_maps` then works from it, and ``marginals`` may be
added. See :mod:`pmap_sklearn._backend.base` for the protocol in full.
"""

from ._backend import (
    SOLVERS,
    BruteForceSolver,
    ChainLayout,
    ChainSolver,
    ClampedSolution,
    GraphCutSolver,
    GridLayout,
    Marginals,
    Potentials,
    Solver,
    Statistics,
)

__all__ = [
    "Solver",
    "Potentials",
    "GridLayout",
    "ChainLayout",
    "Statistics",
    "ClampedSolution",
    "Marginals",
    "ChainSolver",
    "GraphCutSolver",
    "BruteForceSolver",
    "SOLVERS",
]
