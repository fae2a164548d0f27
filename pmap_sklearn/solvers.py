"""The solver protocol, for users who plug in their own MAP / marginal oracle.

A structure turns samples and weights into :class:`Potentials` and asks its solver
(``structure(solver=...)``, a name or an instance) for MAP labellings, single-node clamped
maximisers and, optionally, exact marginals or belief sessions; a :class:`GibbsSampler` draws
samples for contrastive divergence. A new solver subclasses :class:`Solver`, declares
its :class:`Capabilities` and implements ``map``; :meth:`Solver.clamped_maps` then works from
it, and ``marginals`` may be added.
"""

from ._backend import (
    SOLVERS,
    BruteForceSolver,
    Capabilities,
    ChainLayout,
    ChainSolver,
    ClampedSolution,
    GibbsSampler,
    GibbsSession,
    GraphCutSolver,
    GraphKind,
    GridLayout,
    IshikawaSolver,
    Marginals,
    MessagePassingSolver,
    PairwiseKind,
    PairwiseTerms,
    Potentials,
    Requirements,
    Solver,
    Statistics,
    check_capabilities,
    check_solver,
    solvers_for,
)

__all__ = [
    "Potentials",
    "GridLayout",
    "ChainLayout",
    "Statistics",
    "Solver",
    "Capabilities",
    "Requirements",
    "PairwiseKind",
    "PairwiseTerms",
    "GraphKind",
    "ClampedSolution",
    "Marginals",
    "ChainSolver",
    "GraphCutSolver",
    "BruteForceSolver",
    "MessagePassingSolver",
    "IshikawaSolver",
    "SOLVERS",
    "check_solver",
    "check_capabilities",
    "solvers_for",
    "GibbsSampler",
    "GibbsSession",
]
