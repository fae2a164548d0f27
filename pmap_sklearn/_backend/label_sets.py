"""A solver whose models give no sample the labelling "every node 0": multi-label models of data
where every sample carries at least one label (:class:`NonEmptyLabelling`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._parallel import chunks_by_size
from .._utils import ranges
from .capabilities import PairwiseKind
from .potentials import Statistics
from .solver import Marginals, Solver


class NonEmptyLabelling(Solver):
    """Another solver's binary models with the all-zero labelling of every sample forbidden.

    The model is :math:`P(y \\mid x) \\propto \\exp f(y) \\, [y \\neq 0]`: the empty label
    set of a multi-label sample has probability zero. Every query is answered from the wrapped
    solver's:

    - MAP: the solver's MAP when it has a label; otherwise the best of the MAPs with one free
      node clamped to 1 (one clamped copy of the sample per node), exact when the solver's
      MAP is (the best non-empty labelling has some node at 1); with an approximate solver,
      the copies of the :attr:`n_candidates` nodes whose label alone scores best;
    - marginals and ``log Z``: those of the solver minus the empty labelling's share,
      :math:`p_0 = \\exp (f(0) - \\log Z)`: :math:`P(y_d = 0) \\to (P(y_d = 0) - p_0) /
      (1 - p_0)`, the other entries over :math:`1 - p_0`, :math:`\\log Z \\to \\log Z +
      \\log (1 - p_0)`; a clamp at 1 makes :math:`p_0 = 0`;
    - clamped maximisers and perturbed rounds: from this MAP (each problem from scratch).

    - k-best lists: the solver's ``k + 1`` best without the empty labelling, their
      probabilities over :math:`1 - p_0`.

    Exact events and edge marginals are not offered: the queries that would use them take
    draws of perturbed MAPs, which honour the constraint.

    Parameters
    ----------
    solver : Solver
        The solver of the unconstrained model (two labels per node).
    """

    #: With an approximate solver, the copies of an empty sample: its nodes whose label alone
    #: (the others at 0) scores best.
    n_candidates = 3

    def __init__(self, solver: Solver):
        self.solver = solver

    @property
    def name(self) -> str:
        """The wrapped solver's name."""
        return self.solver.name

    @property
    def capabilities(self):
        """The wrapped solver's, for binary models of table or Potts scores, without warm
        starts."""
        own = self.solver.capabilities
        return replace(
            own,
            max_states=2,
            pairwise=own.pairwise & {PairwiseKind.TABLES, PairwiseKind.POTTS},
            warm_start=False,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.solver!r})"

    def map(self, potentials, clamp=None, n_jobs=None, **options) -> np.ndarray:
        labels = self.solver.map(potentials, clamp, n_jobs=n_jobs, **options)
        p = potentials
        empty = np.flatnonzero(_is_empty(p, labels))
        if not len(empty):
            return labels
        # one copy of an empty sample per free node, that node clamped to 1: the best of them
        nodes = ranges(p.node_offsets, empty)
        if clamp is not None:
            nodes = nodes[np.asarray(clamp)[nodes] < 0]
        owners = p.node_sample[nodes]
        stuck = np.setdiff1d(empty, owners)
        if len(stuck):
            raise ValueError(
                f"sample {int(stuck[0])} has every label clamped to 0, but the model gives no "
                "sample an empty label set (MultiLabelStructure(allow_empty=False))"
            )
        if not self.solver.capabilities.map_quality.startswith("exact"):
            # an approximate MAP promises no optimum: the copies of the nodes whose label
            # alone scores best, not one per node
            nodes = _best_single_labels(p, nodes, owners, self.n_candidates)
            owners = p.node_sample[nodes]
        best = np.full(p.n_samples, -np.inf)
        for chunk in chunks_by_size(p.lengths[owners]):
            mine = owners[chunk]
            copies = p.take(mine)
            given = np.full(copies.n_nodes, -1, dtype=np.intp)
            if clamp is not None:
                given[:] = np.asarray(clamp)[ranges(p.node_offsets, mine)]
            given[copies.node_offsets[:-1] + nodes[chunk] - p.node_offsets[mine]] = 1
            found = self.solver.map(copies, given, n_jobs=n_jobs)
            scores = copies.score(found)
            order = np.lexsort((-scores, mine))  # by sample, its best copy first
            first = order[np.r_[True, mine[order][1:] != mine[order][:-1]]]
            better = first[scores[first] > best[mine[first]]]
            best[mine[better]] = scores[better]
            labels[ranges(p.node_offsets, mine[better])] = found[
                ranges(copies.node_offsets, better)
            ]
        return labels

    def marginals(self, potentials, clamp=None) -> Marginals:
        if not self.solver.has_marginals:
            return self.solver.marginals(potentials, clamp)  # its own error
        p = potentials
        kind = p.pairwise_kind
        if kind not in (PairwiseKind.TABLES, PairwiseKind.POTTS):
            raise ValueError(f"{type(self).__name__} takes table or Potts pairwise scores")
        found = self.solver.marginals(p, clamp)
        log_empty = _log_empty(p, clamp, found.log_partition)
        empty, rest = np.exp(log_empty), _rest(log_empty)
        node = found.statistics.unary.copy()
        node[:, 0] -= empty[p.node_sample]
        node = np.clip(node / rest[p.node_sample, None], 0.0, 1.0)
        pairwise = found.statistics.pairwise.copy()
        if kind is PairwiseKind.TABLES:  # the empty labelling has every pair at (0, 0)
            pairwise[:, 0, 0] -= empty[p.edge_sample]
            pairwise = np.clip(pairwise / rest[p.edge_sample, None, None], 0.0, 1.0)
        else:  # P(y_i != y_j): the empty labelling agrees everywhere
            pairwise = np.clip(pairwise / rest[p.edge_sample], 0.0, 1.0)
        return Marginals(Statistics(node, pairwise), found.log_partition + np.log(rest))

    def k_best(self, potentials, k: int, clamp=None):
        if not self.solver.capabilities.k_best:
            return self.solver.k_best(potentials, k, clamp)  # its own error
        p = potentials
        labels, log_p = self.solver.k_best(p, k + 1, clamp)
        # each sample's ranks without its empty labelling (at most one of them), in order
        empty = np.stack([_is_empty(p, row) for row in labels], axis=1)
        empty &= np.isfinite(log_p)
        ranks = np.argsort(empty, axis=1, kind="stable")[:, :k]  # (n_samples, k)
        kept = labels[ranks[p.node_sample].T, np.arange(p.n_nodes)]
        log_empty = _log_empty(p, clamp, self.solver._exact_log_partition(p, clamp))
        kept_log_p = np.take_along_axis(log_p, ranks, axis=1) - np.log(_rest(log_empty))[:, None]
        return kept, kept_log_p


def _is_empty(potentials, labels: np.ndarray) -> np.ndarray:
    """(n_samples,) of bool: whether each sample's labelling of ``labels`` has every node 0."""
    return np.bincount(potentials.node_sample, labels, potentials.n_samples) == 0


def _log_empty(potentials, clamp, log_partition: np.ndarray) -> np.ndarray:
    """``log p0`` of every sample: the probability of its empty labelling in the model of
    log-partition ``log_partition`` (``-inf`` when a clamp holds a node at 1)."""
    p = potentials
    log_empty = p.score(np.zeros(p.n_nodes, dtype=np.intp)) - log_partition
    if clamp is not None:  # a node clamped to 1: the empty labelling is out already
        has_one = np.bincount(p.node_sample, np.asarray(clamp) == 1, p.n_samples) > 0
        log_empty[has_one] = -np.inf
    return log_empty


def _rest(log_empty: np.ndarray) -> np.ndarray:
    """``1 - p0`` of every sample (exact near 0), refusing a sample whose only labelling left
    is the empty one."""
    rest = -np.expm1(log_empty)
    if (rest <= 0).any():
        stuck = int(np.flatnonzero(rest <= 0)[0])
        raise ValueError(
            f"sample {stuck} has no labelling with a label (every label clamped to 0): the "
            "model gives no sample an empty label set (MultiLabelStructure(allow_empty=False))"
        )
    return rest


def _best_single_labels(potentials, nodes, owners, n_candidates: int) -> np.ndarray:
    """The ``n_candidates`` of ``nodes`` (free nodes, grouped by their sample ``owners``) whose
    labelling alone at 1 (every other node of the sample at 0) scores best in their sample."""
    p = potentials
    gain = p.unary[:, 1] - p.unary[:, 0]  # f(e_d) - f(0), from the node's own scores
    first, second = p.edges[:, 0], p.edges[:, 1]
    if p.pairwise_kind is PairwiseKind.TABLES:  # and its edges' changes from (0, 0)
        tables = p.pairwise
        gain = gain + np.bincount(first, tables[:, 1, 0] - tables[:, 0, 0], p.n_nodes)
        gain = gain + np.bincount(second, tables[:, 0, 1] - tables[:, 0, 0], p.n_nodes)
    else:  # Potts: each edge of the node now disagrees
        gain = gain + np.bincount(first, p.pairwise, p.n_nodes)
        gain = gain + np.bincount(second, p.pairwise, p.n_nodes)
    order = np.lexsort((-gain[nodes], owners))  # by sample, the best first
    ranked = nodes[order]
    start = np.searchsorted(owners[order], owners[order], side="left")
    return np.sort(ranked[np.arange(len(ranked)) - start < n_candidates])
