"""The solvers behind the structures, and the types they exchange with them.

A structure turns samples and weights into :class:`Potentials`; a :class:`Solver` answers MAP,
clamped-MAP and (optionally) marginal queries on them. Nothing here knows about structures or
estimators. :mod:`pmap_sklearn.solvers` makes these names public.
"""

from .base import ClampedSolution, Marginals, Solver
from .brute import BruteForceSolver
from .chain import ChainSolver
from .cut import GraphCutSolver
from .ishikawa import IshikawaSolver
from .messages import MessagePassingSolver
from .potentials import ChainLayout, GridLayout, Potentials, Statistics

SOLVERS = {
    solver.name: solver
    for solver in (
        ChainSolver,
        GraphCutSolver,
        BruteForceSolver,
        MessagePassingSolver,
        IshikawaSolver,
    )
}

__all__ = [
    "Potentials",
    "GridLayout",
    "ChainLayout",
    "Statistics",
    "Solver",
    "ClampedSolution",
    "Marginals",
    "ChainSolver",
    "GraphCutSolver",
    "BruteForceSolver",
    "MessagePassingSolver",
    "IshikawaSolver",
    "SOLVERS",
    "check_solver",
]


def check_solver(solver) -> Solver:
    """A solver instance from its name (see ``SOLVERS``) or an instance."""
    if isinstance(solver, Solver):
        return solver
    if isinstance(solver, str) and solver in SOLVERS:
        return SOLVERS[solver]()
    raise ValueError(
        f"solver must be one of {sorted(SOLVERS)} or a Solver instance, got {solver!r}"
    )
