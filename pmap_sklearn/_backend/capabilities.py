"""What a solver handles, as data, and the one check of a model against it.

Every solver declares :class:`Capabilities`: the largest number of labels, the pairwise kinds
(shapes of the scores) and pairwise terms (which functions) it solves, the graphs, and whether
it takes clamps and computes marginals. A structure says what its models are and an estimator
what it will ask (:class:`Requirements`); :func:`missing` compares the two before any work, and
the error names the registered solvers that can do it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum


class _Named(str, Enum):
    """An enumeration whose members are their string values (``Member == "value"``)."""

    def __str__(self) -> str:
        return self.value


class PairwiseKind(_Named):
    """The shape of the pairwise scores of :class:`~pmap_sklearn.Potentials`.

    Members compare equal to their value (``PairwiseKind.POTTS == "potts"``).
    """

    #: ``pairwise`` of shape (E,): the score ``w_ij [y_i != y_j]`` of every edge
    POTTS = "potts"
    #: one (K, K) table shared by every edge (chains)
    SHARED = "shared"
    #: one (K, K) table per edge, shape (E, K, K)
    TABLES = "tables"


class PairwiseTerms(_Named):
    """Which pairwise functions a solver is correct for, from the most to the least general."""

    #: any table, any sign
    ANY = "any"
    #: binary and attractive (supermodular score); structures project their weights onto it
    ATTRACTIVE = "attractive"
    #: metric costs ``V = −scores`` (Potts weights <= 0 for any K; binary attractive tables):
    #: what α-expansion moves need; structures keep attractive weights in it
    METRIC = "metric"
    #: tables concave in the label difference ``y_i − y_j`` (convex costs; ordered labels)
    CONVEX_DIFFERENCE = "convex_difference"


class GraphKind(_Named):
    """The graphs of a family of models."""

    #: each sample's edges join its consecutive nodes ``(d, d + 1)``, in order
    CHAIN = "chain"
    #: no cycle once the clamped nodes are removed (chains and trees are forests)
    FOREST = "forest"
    #: any graph, cycles included
    ANY = "any"


@dataclass(frozen=True)
class Capabilities:
    """What a solver handles (a class attribute of every :class:`~pmap_sklearn.solvers.Solver`).

    Parameters
    ----------
    max_states : int or None, default=None
        The largest number of labels K it solves (None: any).
    pairwise : frozenset of PairwiseKind, default=all kinds
        The shapes of pairwise scores it takes.
    terms : PairwiseTerms, default=PairwiseTerms.ANY
        The pairwise functions it is correct for.
    graphs : GraphKind, default=GraphKind.ANY
        The graphs it solves.
    clamps : bool, default=True
        Whether ``map`` honours a ``clamp`` (nodes forced to labels): needed by the marginal
        learners' clamped maximisers and by learners that fill in unknown (-1) labels.
    marginals : bool, default=False
        Whether it computes node marginals and the log-partition function.
    beliefs : bool, default=False
        Whether it opens belief sessions (``beliefs(potentials, epsilon)``): messages kept
        between weight steps, for learners that interleave message and weight updates.
    marginal_map : bool, default=False
        Whether it answers marginal-MAP queries (``marginal_map(potentials, max_nodes,
        start)``: the best labels of some nodes with the others summed out).
    warm_start : bool, default=False
        Whether ``map`` takes ``init=`` (a starting labelling, e.g. the previous MAP).
    group_max : bool, default=False
        Whether ``map`` also maximises level models with group-maximum terms
        (:class:`~pmap_sklearn.solvers.GroupMaxPotentials`, the continuous priors).
    constraints : bool, default=False
        Whether it honours the forbidden transitions and first / last labels of a chain
        (:class:`~pmap_sklearn.solvers.TransitionConstraints` on the potentials' layout) in
        every query: those labellings get probability zero.
    infinite_scores : bool, default=False
        Whether it takes ``-inf`` node scores as labels of probability zero, exactly, in every
        query (a restriction to sets of labels then needs no finite stand-in).
    k_best : bool, default=False
        Whether it lists the k most probable labellings of every sample exactly, with their
        probabilities (``k_best(potentials, k, clamp)``: list Viterbi on chains, enumeration).
    map_quality : str, default="exact"
        How good its MAP is, in words (shown in the capabilities table of the user guide).
    """

    max_states: int | None = None
    pairwise: frozenset = frozenset(PairwiseKind)
    terms: PairwiseTerms = PairwiseTerms.ANY
    graphs: GraphKind = GraphKind.ANY
    clamps: bool = True
    marginals: bool = False
    beliefs: bool = False
    marginal_map: bool = False
    warm_start: bool = False
    group_max: bool = False
    constraints: bool = False
    infinite_scores: bool = False
    k_best: bool = False
    map_quality: str = "exact"

    def row(self) -> dict:
        """The capabilities as strings, for tables.

        Returns
        -------
        dict of str to str
            One entry per field.
        """
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update({k: "yes" if v else "no" for k, v in out.items() if isinstance(v, bool)})
        out["max_states"] = "any" if self.max_states is None else str(self.max_states)
        out["pairwise"] = ", ".join(k.value for k in PairwiseKind if k in self.pairwise)
        return {name: str(value) for name, value in out.items()}


@dataclass(frozen=True)
class Requirements:
    """What a family of models and the estimator that learns it need from a solver.

    Parameters
    ----------
    n_states : int
        K.
    pairwise : PairwiseKind
        The shape of the pairwise scores the structure builds.
    terms : frozenset of PairwiseTerms
        The pairwise functions the structure can keep its models in: every structure builds
        ``ANY``; one whose weights can be projected onto attractive terms adds ``ATTRACTIVE``.
    graph : GraphKind
        ``CHAIN`` when every model is a chain, else ``ANY``.
    clamps : bool, default=False
        The estimator will clamp nodes.
    marginals : bool, default=False
        The estimator will ask for marginals.
    beliefs : bool, default=False
        The estimator will open belief sessions.
    marginal_map : bool, default=False
        The estimator will ask marginal-MAP queries.
    group_max : bool, default=False
        The estimator will ask MAPs of group-maximum level models.
    constraints : bool, default=False
        The models forbid some transitions or first / last labels.
    k_best : bool, default=False
        The estimator will ask for the k most probable labellings.
    """

    n_states: int
    pairwise: PairwiseKind
    terms: frozenset = frozenset({PairwiseTerms.ANY})
    graph: GraphKind = GraphKind.ANY
    clamps: bool = False
    marginals: bool = False
    beliefs: bool = False
    marginal_map: bool = False
    group_max: bool = False
    constraints: bool = False
    k_best: bool = False


_TERMS_IN_WORDS = {
    PairwiseTerms.ANY: "any pairwise terms",
    PairwiseTerms.ATTRACTIVE: "attractive binary pairwise terms",
    PairwiseTerms.METRIC: "metric pairwise costs (Potts weights <= 0)",
    PairwiseTerms.CONVEX_DIFFERENCE: "pairwise costs convex in the label difference",
}


#: The graph kinds from the narrowest: a solver of one kind solves the kinds before it.
_GRAPHS = (GraphKind.CHAIN, GraphKind.FOREST, GraphKind.ANY)
#: The queries an estimator may make (flags of both dataclasses), and a solver that can't.
_QUERIES = {
    "clamps": "takes no clamps",
    "marginals": "computes no marginals",
    "beliefs": "opens no belief sessions",
    "marginal_map": "answers no marginal-MAP queries",
    "group_max": "solves no group-maximum models",
    "constraints": "honours no transition constraints",
    "k_best": "lists no k-best labellings",
}


def missing(capabilities: Capabilities, need: Requirements) -> list[str]:
    """What a solver with ``capabilities`` lacks for ``need``, in words (empty: nothing).

    Parameters
    ----------
    capabilities : Capabilities
    need : Requirements

    Returns
    -------
    list of str
        One phrase per missing capability.
    """
    gaps = []
    if capabilities.max_states is not None and need.n_states > capabilities.max_states:
        gaps.append(f"handles at most {capabilities.max_states} labels, got K = {need.n_states}")
    if need.pairwise not in capabilities.pairwise:
        kinds = ", ".join(sorted(k.value for k in capabilities.pairwise))
        gaps.append(f"takes {kinds} pairwise scores, not {need.pairwise.value}")
    if capabilities.terms not in need.terms:
        gaps.append(f"needs {_TERMS_IN_WORDS[capabilities.terms]}, which the model can't keep")
    if _GRAPHS.index(need.graph) > _GRAPHS.index(capabilities.graphs):
        gaps.append(f"solves {capabilities.graphs.value}s only")
    for query, lack in _QUERIES.items():
        if getattr(need, query) and not getattr(capabilities, query):
            gaps.append(lack)
    return gaps
