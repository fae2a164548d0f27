"""The solvers behind the structures, and the types they exchange with them.

A structure turns samples and weights into :class:`Potentials`; a :class:`Solver` answers MAP,
clamped-MAP and (optionally) marginal queries on them, and declares what it handles as
:class:`Capabilities`. Nothing here knows about structures or estimators.

:mod:`pmap_sklearn.solvers` makes the names of ``__all__`` public; the names imported
``as`` themselves are the internal building blocks the estimators use. Modules outside
``_backend`` import from this package, never from its submodules (a ruff rule, TID251).
"""

from .brute import BruteForceSolver
from .capabilities import Capabilities, GraphKind, PairwiseKind, PairwiseTerms, Requirements
from .capabilities import missing as missing
from .constraints import TransitionConstraints
from .cut import GraphCutSolver
from .expansion import AlphaExpansionSolver
from .feedback_set import feedback_vertex_set
from .forest import ForestSolver
from .gibbs import GIBBS_SWEEPS as GIBBS_SWEEPS
from .gibbs import GibbsChains as GibbsChains
from .gibbs import GibbsSampler, GibbsSession
from .gibbs import conditional_probabilities as conditional_probabilities
from .gibbs import conditional_scores as conditional_scores
from .group_prox import prox_group_max as prox_group_max
from .ishikawa import GroupMaxPotentials, IshikawaSolver
from .level_tree import forest_shaped as forest_shaped
from .level_tree import packed_layout as packed_layout
from .local_search import LocalSearchSolver
from .mean_field import MeanFieldModel as MeanFieldModel
from .mean_field import MeanFieldSolver
from .mean_field import unrolled as unrolled
from .messages import COUNTING_NUMBERS as COUNTING_NUMBERS
from .messages import BeliefPropagation as BeliefPropagation
from .messages import MessagePassingSolver
from .messages import colour_nodes as colour_nodes
from .messages import counting_numbers as counting_numbers
from .messages import pairwise_statistics as pairwise_statistics
from .messages import sample_colours as sample_colours
from .potentials import ChainLayout, GridLayout, Potentials, Statistics
from .potentials import forbid_states as forbid_states
from .potentials import label_statistics as label_statistics
from .sampling import sample_labellings as sample_labellings
from .solver import ClampedSolution, Marginals, Solver
from .solver import weighted_marginals as weighted_marginals
from .trws import TRWSSolver
from .viterbi import ChainSolver

SOLVERS = {
    solver.name: solver
    for solver in (
        ChainSolver,
        GraphCutSolver,
        AlphaExpansionSolver,
        MessagePassingSolver,
        TRWSSolver,
        MeanFieldSolver,
        LocalSearchSolver,
        IshikawaSolver,
        ForestSolver,
        BruteForceSolver,
    )
}

__all__ = [
    "Potentials",
    "GridLayout",
    "ChainLayout",
    "TransitionConstraints",
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
    "AlphaExpansionSolver",
    "BruteForceSolver",
    "MessagePassingSolver",
    "TRWSSolver",
    "MeanFieldSolver",
    "LocalSearchSolver",
    "IshikawaSolver",
    "GroupMaxPotentials",
    "ForestSolver",
    "SOLVERS",
    "check_solver",
    "check_capabilities",
    "solvers_for",
    "GibbsSampler",
    "GibbsSession",
    "feedback_vertex_set",
]


def check_solver(solver) -> Solver:
    """A solver instance from its name (see ``SOLVERS``) or an instance.

    Parameters
    ----------
    solver : str or Solver

    Returns
    -------
    Solver
    """
    if isinstance(solver, Solver):
        return solver
    if isinstance(solver, str) and solver in SOLVERS:
        return SOLVERS[solver]()
    raise ValueError(
        f"solver must be one of {sorted(SOLVERS)} or a Solver instance, got {solver!r}"
    )


def solvers_for(need: Requirements) -> list[str]:
    """The names of the registered solvers that handle ``need``.

    Parameters
    ----------
    need : Requirements

    Returns
    -------
    list of str
        In the registry's order.
    """
    return [name for name, solver in SOLVERS.items() if not missing(solver.capabilities, need)]


def check_capabilities(solver: Solver, need: Requirements, who: str) -> None:
    """Check, before any work, that ``solver`` handles what ``who`` will ask of it.

    Parameters
    ----------
    solver : Solver
    need : Requirements
        The models (K, pairwise kind and terms, graph) and the queries (clamps, marginals).
    who : str
        The structure or estimator that asks, for the message.

    Raises
    ------
    ValueError
        Saying what the solver lacks and naming the registered solvers that can do it.
    """
    gaps = missing(solver.capabilities, need)
    if not gaps:
        return
    able = solvers_for(need)
    if able:
        hint = "Use " + " or ".join(
            f"solver={name!r} ({SOLVERS[name].capabilities.map_quality})" for name in able
        )
    else:
        hint = "no registered solver handles this combination"
    raise ValueError(
        f"{who} cannot use the {solver.name} solver: it " + "; it ".join(gaps) + f". {hint}."
    )
