"""α-expansion and αβ-swap: multi-label MAP by sequences of binary minimum cuts.

From a labelling ``y``, a *move* lets every node choose between two labels ``p_i`` (``x_i = 0``)
and ``q_i`` (``x_i = 1``): an expansion on α offers ``p = y, q = α`` to every node; a swap of
α and β offers ``{α, β}`` to the nodes labelled α or β and nothing to the others (``p = q =
y``). The best move is a binary energy, minimised exactly by one cut when every edge's term is
submodular, ``V(p_i, q_j) + V(q_i, p_j) >= V(p_i, p_j) + V(q_i, q_j)`` — for every expansion
when the costs ``V = −scores`` satisfy ``V(a, c) + V(c, b) >= V(a, b) + V(c, c)`` (metrics,
Potts with non-negative costs), for every swap when ``V(a, b) + V(b, a) >= V(a, a) + V(b, b)``
(semi-metrics). Cycling over the labels until no move lowers the energy gives a local optimum
with respect to all moves; for Potts costs the expansion optimum is within a factor 2 of the
global one (Boykov, Veksler & Zabih 2001, Theorem 6.1).

All samples of a call make their moves together: each move of a chunk of samples (at most
``CHUNK_NODES`` nodes) is one max-flow over the nodes that can change, a sample drops out once a
whole cycle left it unchanged, and a move is kept only by the samples whose energy it lowers.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._parallel import CHUNK_NODES, chunks_by_size, map_samples
from .._utils import ranges
from .capabilities import Capabilities, PairwiseKind, PairwiseTerms
from .cut import GraphCutSolver
from .mincut import min_cut
from .potentials import Potentials, Statistics, add_sparse_differences, incidence
from .solver import ClampedSolution, Solver, check_count, check_labels, solved_queries
from .windows import adjacency, clamp_windows

#: The move sets, and the condition on the costs under which every move is a cut.
MOVES = {
    "expansion": "metric pairwise costs, V(a, c) + V(c, b) >= V(a, b) + V(c, c)",
    "swap": "semi-metric pairwise costs, V(a, b) + V(b, a) >= V(a, a) + V(b, b)",
}


class AlphaExpansionSolver(Solver):
    """Approximate multi-label MAP by α-expansion (or αβ-swap) moves, each one graph cut.

    Pairwise costs ``V = −scores`` must make every move submodular: Potts weights ``<= 0``
    (non-negative costs) or metric tables for expansions, semi-metric tables for swaps; a table
    that is neither is refused with an error naming ``message_passing``. The result is a local
    optimum for every move; with Potts costs, expansion's is within a factor 2 of the optimum
    (Boykov, Veksler & Zabih 2001). With ``K = 2`` it is the exact graph-cut MAP
    (:class:`GraphCutSolver`, dynamic cuts for the clamped maximisers).

    Many samples are solved together (one max-flow per move for a chunk of samples); clamped
    nodes keep their label through every move; ``map(..., init=labels)`` starts from a given
    labelling (a warm start, e.g. the previous step's MAP: the result is never worse than it),
    as do the clamped maximisers of ``clamped_maps`` (from the unclamped MAP).

    Parameters
    ----------
    moves : {"expansion", "swap"}, default="expansion"
        α-expansion (metrics, the factor-2 bound for Potts) or αβ-swap (semi-metrics; ``K (K −
        1) / 2`` moves per cycle instead of ``K``).
    max_cycles : int, default=20
        Cycles over the labels (or label pairs) before stopping; a sample stops earlier when a
        whole cycle leaves it unchanged.
    clamp_window : int or None, default=2
        How ``clamped_maps`` solves a clamp ``y_d = k`` (K > 2): on the nodes within
        ``clamp_window`` edges of ``d``, the others keeping their MAP labels, from the MAP;
        while the moves change a node on the window's border, again in a window twice as
        wide. The maximiser is a local optimum of the moves inside its window — a clamp
        rarely changes labels far from its node — at a cost that grows with the window, not
        with the sample (a copy of a 256² image per query is 65,536 nodes, a window of 2
        hops 13). None: every clamped problem on a whole copy of its sample.
    """

    name = "alpha_expansion"
    capabilities = Capabilities(
        terms=PairwiseTerms.METRIC,
        warm_start=True,
        map_quality="approximate: a local optimum of α-expansion moves, within a factor 2 of "
        "the optimum for Potts; exact for K = 2",
    )

    def __init__(self, moves: str = "expansion", max_cycles: int = 20, clamp_window=2):
        if moves not in MOVES:
            raise ValueError(f"moves must be one of {sorted(MOVES)}, got {moves!r}")
        self.moves = moves
        self.max_cycles = check_count(max_cycles, "max_cycles")
        self.clamp_window = (
            None if clamp_window is None else check_count(clamp_window, "clamp_window")
        )

    def __repr__(self) -> str:
        return (
            f"AlphaExpansionSolver(moves={self.moves!r}, max_cycles={self.max_cycles}, "
            f"clamp_window={self.clamp_window})"
        )

    def map(self, potentials: Potentials, clamp=None, n_jobs=None, init=None) -> np.ndarray:
        """Labelling of every sample that no move improves.

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        n_jobs : int, optional
            Processes for the chunks of samples (results do not depend on it).
        init : ndarray of shape (n_nodes,), optional
            The starting labelling (clamps override it); default: each node's best unary
            label.

        Returns
        -------
        ndarray of shape (n_nodes,)
        """
        self._check(potentials, clamp)
        p = potentials
        clamp = None if clamp is None else np.asarray(clamp, dtype=np.intp)
        init = None if init is None else check_labels(init, p, "init", free=False)
        if p.n_states <= 2:  # exact
            return GraphCutSolver().map(p, clamp, n_jobs=n_jobs)
        check_move_costs(p, self.moves)
        start = np.argmax(p.unary, axis=1) if init is None else init.copy()
        if clamp is not None:
            start = np.where(clamp >= 0, clamp, start)
        if p.n_edges == 0:  # independent nodes: each takes its best label
            free = np.argmax(p.unary, axis=1)
            return free if clamp is None else np.where(clamp >= 0, clamp, free)

        def job(chunk):
            nodes = slice(p.node_offsets[chunk.start], p.node_offsets[chunk.stop])
            given = None if clamp is None else clamp[nodes]
            return (p.take(chunk), start[nodes], given, self.moves, self.max_cycles)

        # one max-flow graph per chunk and move: chunks of CHUNK_NODES, or one per worker
        sizes = p.lengths * p.n_states
        labels = map_samples(_cycle_moves, job, sizes, n_jobs, CHUNK_NODES * p.n_states)
        return np.concatenate(labels) if labels else np.zeros(0, np.intp)

    def clamped_maps(self, potentials: Potentials, nodes, labels, weights, **kwargs):
        if potentials.n_states == 2:  # exact, and the dynamic cuts of graph cuts
            return GraphCutSolver().clamped_maps(potentials, nodes, labels, weights, **kwargs)
        return super().clamped_maps(potentials, nodes, labels, weights, **kwargs)

    def _incremental_clamped_maps(self, potentials, nodes, labels, weights, skip, n_jobs):
        """The clamped maximisers in windows around their nodes (``clamp_window``)."""
        if self.clamp_window is None:
            return self._copied_clamped_maps(potentials, nodes, labels, weights, skip, n_jobs)
        p = potentials
        map_labels = self.map(p, n_jobs=n_jobs)
        solved = solved_queries(map_labels, nodes, labels, skip)
        nodes, labels, weights = nodes[solved], labels[solved], weights[solved]
        statistics = Statistics.zeros(p)
        touching, neighbours = incidence(p.edges, p.n_nodes), adjacency(p)
        pending, hops = np.arange(len(nodes)), self.clamp_window
        while pending.size:
            retry = []
            for chunk in _query_chunks(p, neighbours, nodes[pending], hops):
                queries = pending[chunk]
                windows = clamp_windows(p, touching, neighbours, nodes[queries], map_labels, hops)
                clamp = np.full(len(windows.nodes), -1)
                clamp[windows.clamped] = labels[queries]
                start = map_labels[windows.nodes]
                found = self.map(windows.potentials, clamp, n_jobs=n_jobs, init=start)
                changed = found != start
                # a change on the border may continue outside: solve again, wider
                reached = np.bincount(
                    windows.window[changed & windows.border], minlength=len(queries)
                )
                retry.append(queries[reached > 0])
                keep = changed & (reached[windows.window] == 0)
                add_sparse_differences(
                    statistics,
                    p,
                    map_labels,
                    windows.window[keep],
                    windows.nodes[keep],
                    found[keep],
                    weights[queries],
                    touching,
                )
            pending, hops = np.concatenate(retry), 2 * hops
        return ClampedSolution(map_labels, solved, statistics)


def _query_chunks(p: Potentials, neighbours, nodes: np.ndarray, hops: int) -> list[slice]:
    """Chunks of the queries whose windows add up to about ``CHUNK_NODES`` nodes, bounded by
    the largest degree (a ball of ``hops`` edges) and by the sample's size."""
    degree, largest = int(np.diff(neighbours.indptr).max(initial=0)), int(p.lengths.max())
    ball, shell = 1, degree
    for _ in range(hops):
        ball, shell = min(ball + shell, largest), min(shell * max(degree - 1, 1), largest)
    sizes = np.minimum(p.lengths[p.node_sample[nodes]], ball)
    return chunks_by_size(sizes, CHUNK_NODES)


def _move_pair_costs(p: Potentials, first, second, edges=slice(None), ends=None):
    """``V_e`` of the edges ``edges`` at the four corners of a move: ``(first_i, first_j)``,
    ``(first_i, second_j)``, ``(second_i, first_j)``, ``(second_i, second_j)`` (``ends``: the
    edges' two end nodes, if already gathered)."""
    i, j = (p.edges[edges, 0], p.edges[edges, 1]) if ends is None else ends
    fi, fj, si, sj = first[i], first[j], second[i], second[j]
    ends = [(fi, fj), (fi, sj), (si, fj), (si, sj)]
    if p.pairwise_kind is PairwiseKind.POTTS:
        cost = -p.pairwise[edges]
        return [cost * (u != v) for u, v in ends]
    if p.pairwise_kind is PairwiseKind.SHARED:
        return [-p.pairwise[u, v] for u, v in ends]
    rows = np.arange(p.n_edges)[edges]
    return [-p.pairwise[rows, u, v] for u, v in ends]


def check_move_costs(p: Potentials, moves: str) -> None:
    """Raise a ValueError naming the first edge whose costs make a move non-submodular.

    Parameters
    ----------
    p : Potentials
    moves : {"expansion", "swap"}
    """
    if not p.n_edges:
        return
    tolerance = 1e-9 * (1.0 + np.abs(p.pairwise).max())
    if p.pairwise_kind is PairwiseKind.POTTS:
        slack = -p.pairwise[:, None]  # a Potts cost c >= 0 is a metric
    else:
        costs = -(p.pairwise[None] if p.pairwise_kind is PairwiseKind.SHARED else p.pairwise)
        k = p.n_states
        diagonal = np.diagonal(costs, axis1=1, axis2=2)
        if moves == "swap":
            slack = costs + costs.transpose(0, 2, 1) - diagonal[:, :, None] - diagonal[:, None, :]
            slack = slack.reshape(len(costs), -1)
        else:  # V(a, c) + V(c, b) − V(a, b) − V(c, c), one label c at a time
            slack = np.stack(
                [
                    (
                        costs[:, :, c, None]
                        + costs[:, None, c, :]
                        - costs
                        - diagonal[:, c, None, None]
                    ).min(axis=(1, 2))
                    for c in range(k)
                ],
                axis=1,
            )
    worst = slack.min(axis=1)
    bad = np.flatnonzero(worst < -tolerance)
    if bad.size:
        edge = int(bad[0])
        where = (
            "the shared table"
            if p.pairwise_kind is PairwiseKind.SHARED
            else (f"edge {edge} of sample {int(p.edge_sample[edge])}")
        )
        raise ValueError(
            f"{moves} moves need {MOVES[moves]} (V = −pairwise scores; Potts weights <= 0); "
            f"{where} violates it by {-worst[edge]:.3g}. Use solver='message_passing' for "
            "other multi-label models"
            + ("" if moves == "swap" else ", or moves='swap' for semi-metrics")
        )


def _cycle_moves(p: Potentials, labels: np.ndarray, clamp, moves: str, max_cycles: int):
    """Moves on one chunk of samples until each sample is unchanged for a whole cycle."""
    k = p.n_states
    labels = labels.copy()
    if moves == "expansion":
        cycle = [(alpha, None) for alpha in range(k)]
    else:
        cycle = [(a, b) for a in range(k) for b in range(a + 1, k)]
    free = np.ones(p.n_nodes, bool) if clamp is None else clamp < 0
    idle = np.zeros(p.n_samples, np.intp)  # moves since the sample last changed
    graph = _MoveGraph(p, labels)
    for _ in range(max_cycles):
        for alpha, beta in cycle:
            running = idle[p.node_sample] < len(cycle)
            if not running.any():
                return labels
            if beta is None:  # expansion: stay (first = y) or take α (second = α)
                nodes = graph.candidates(free & running & (labels != alpha), labels, alpha)
                first, second = labels, labels.copy()
                second[nodes] = alpha
            else:  # swap: the nodes labelled α or β choose between them
                nodes = np.flatnonzero(free & running & ((labels == alpha) | (labels == beta)))
                first, second = labels.copy(), labels.copy()
                first[nodes], second[nodes] = alpha, beta
            moved, better = _best_move(p, graph, labels, first, second, nodes)
            if better.any():  # the nodes of the samples the move improves take it
                kept = better[p.node_sample[nodes]]
                labels[nodes[kept]] = moved[kept]
                graph.relabel(labels, nodes[kept])
            idle = np.where(better, 0, idle + 1)
    return labels


class _MoveGraph:
    """The node → edge incidence of a chunk of samples, so that a move visits the nodes that
    can change and the edges touching them, not the whole chunk.

    It also says which nodes an expansion on α can move: a node whose unary score loses more
    by taking α (``loss``) than its edges can give back keeps its label in every optimal move
    — swap it back in a move that takes it and the energy falls — so it stays out of the cut.
    An edge gives back at most its range of scores (its Potts cost; max − min of a table),
    and a Potts edge gives anything back only if its other end ends at α: it is labelled α
    already, or may take it. From the free nodes, those whose reachable gain cannot make up
    their loss are dropped, ``_REFINEMENTS`` times (each round keeps every node an optimal
    move takes; one round is the cheapest on CamVid's superpixel graphs and on random Potts
    grids). The reach of every node is one sparse product of the edge ranges with the mask of
    the nodes that may end at α, and each node's loss a difference of two contiguous rows (the
    graph keeps each node's score at its label: :meth:`relabel`). The edges touching a move's
    nodes are gathered from the incidence; for more than ``_SPARSE_SHARE`` of the nodes, masks
    over all edges cost less.
    """

    #: Rounds of dropping nodes that only neighbours that may end at α could pay for.
    _REFINEMENTS = 1
    #: Above this share of the nodes, masks over all edges beat gathering the incidence.
    _SPARSE_SHARE = 0.1

    def __init__(self, p: Potentials, labels: np.ndarray):
        self.p = p
        if not p.n_edges:
            spread = np.zeros(0)
        elif p.pairwise_kind is PairwiseKind.POTTS:
            spread = np.abs(p.pairwise)
        elif p.pairwise_kind is PairwiseKind.SHARED:
            spread = np.full(p.n_edges, np.ptp(p.pairwise))
        else:
            spread = np.ptp(p.pairwise.reshape(p.n_edges, -1), axis=1)
        self.edge_spread = spread * (1.0 + 1e-9) + 1e-12  # a margin for rounding
        first, second = p.edges[:, 0], p.edges[:, 1]
        self.total = np.bincount(first, self.edge_spread, minlength=p.n_nodes)
        self.total += np.bincount(second, self.edge_spread, minlength=p.n_nodes)
        # no node can be left out when none loses more between any two labels than its reach
        self.can_prune = bool(np.any(np.ptp(p.unary, axis=1) > self.total)) if p.n_nodes else False
        self._incidence = None
        self._adjacency = None
        self.local = np.full(p.n_nodes, -1)  # a move's node → its position in the cut, or −1
        if self.can_prune:  # a move's unary losses from contiguous columns, not gathers
            self.by_label = np.ascontiguousarray(p.unary.T)
            self.current = p.unary[np.arange(p.n_nodes), labels]  # each node's, at its label

    def relabel(self, labels: np.ndarray, nodes: np.ndarray) -> None:
        """Tell the graph that ``nodes`` now have the labels ``labels[nodes]``."""
        if self.can_prune:
            self.current[nodes] = self.p.unary[nodes, labels[nodes]]

    @property
    def incidence(self):
        """``(starts, edge_ids, other, spread)``: the edges of node d are
        ``edge_ids[starts[d]:starts[d + 1]]``, with their other ends and ranges (built when
        first needed)."""
        if self._incidence is None:
            p = self.p
            starts, edge_ids = incidence(p.edges, p.n_nodes)  # one entry per edge end
            owner = np.repeat(np.arange(p.n_nodes), np.diff(starts))
            ends = p.edges[edge_ids]
            other = np.where(ends[:, 0] == owner, ends[:, 1], ends[:, 0])
            self._incidence = starts, edge_ids, other, self.edge_spread[edge_ids]
        return self._incidence

    @property
    def adjacency(self):
        """The incidence as a sparse (n_nodes, n_nodes) matrix of edge ranges: ``adjacency @
        v`` sums each node's edge ranges weighted by ``v`` at their other ends."""
        if self._adjacency is None:
            starts, _, other, spread = self.incidence
            n = self.p.n_nodes
            self._adjacency = sparse.csr_array((spread, other, starts), shape=(n, n))
        return self._adjacency

    def _sparse(self, nodes: np.ndarray) -> bool:
        return len(nodes) <= self._SPARSE_SHARE * self.p.n_nodes

    def _entries(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The incidence entries of ``nodes`` and, for each, the position of its node."""
        starts = self.incidence[0]
        degree = starts[nodes + 1] - starts[nodes]
        return ranges(starts, nodes), np.repeat(np.arange(len(nodes)), degree)

    def candidates(self, movable, labels, alpha) -> np.ndarray:
        """The nodes of ``movable`` that some optimal expansion on α may move."""
        if not self.can_prune:
            return np.flatnonzero(movable)
        loss = self.current - self.by_label[alpha]  # of taking α, every node
        nodes = np.flatnonzero(movable & (loss <= self.total))
        if self.p.pairwise_kind is not PairwiseKind.POTTS:
            return nodes
        loss = loss[nodes]
        at_alpha = labels == alpha
        for _ in range(self._REFINEMENTS):
            inside = at_alpha.copy()
            inside[nodes] = True
            if inside.all():  # every neighbour may end at α: nothing more to drop
                break
            reach = self.adjacency @ inside.astype(float)
            keep = loss <= reach[nodes]
            dropped = len(nodes) - np.count_nonzero(keep)
            nodes, loss = nodes[keep], loss[keep]
            if dropped <= 0.01 * len(keep):  # another round would drop little more
                break
        return nodes

    def touching(self, nodes: np.ndarray, moving: np.ndarray) -> np.ndarray:
        """The edges with an end in ``nodes`` (``moving`` their mask), each once."""
        if not self._sparse(nodes):
            touched = moving[self.p.edges[:, 0]] | moving[self.p.edges[:, 1]]
            return slice(None) if touched.all() else np.flatnonzero(touched)
        entries, position = self._entries(nodes)
        _, edge_ids, other, _ = self.incidence
        other = other[entries]
        once = ~moving[other] | (nodes[position] < other)  # both ends move: from the lower
        return edge_ids[entries[once]]


def _best_move(p: Potentials, graph: _MoveGraph, labels, first, second, nodes):
    """The minimum-energy move ``x`` of the nodes ``nodes`` (the others keep their labels):
    their labels ``where(x, second, first)``, and per sample whether it lowers the energy of
    ``labels`` (else the sample keeps them).

    Only these nodes and the edges that touch them take part: every other node keeps its
    label, so its terms are the same on both sides of the move."""
    no_change = labels[nodes], np.zeros(p.n_samples, bool)
    if not nodes.size:
        return no_change
    local = graph.local
    local[nodes] = np.arange(len(nodes))
    try:
        return _solve_move(p, graph, labels, first, second, nodes, local) or no_change
    finally:
        local[nodes] = -1  # the scratch map is all −1 between moves


def _solve_move(p, graph, labels, first, second, nodes, local):
    """:func:`_best_move` once ``local`` maps ``nodes`` to their positions (−1 elsewhere);
    None when no sample's energy falls."""
    touching = graph.touching(nodes, local >= 0)
    ends = p.edges[touching, 0], p.edges[touching, 1]
    i, j = local[ends[0]], local[ends[1]]  # -1: a fixed end
    # unary: x_i = 1 costs V_i(second) − V_i(first)
    linear = p.unary[nodes, first[nodes]] - p.unary[nodes, second[nodes]]
    a, b, c, d = _move_pair_costs(p, first, second, touching, ends)
    # E(x_i, x_j) = a + (c − a) x_i + (d − c) x_j + (b + c − a − d) [x_i = 0][x_j = 1]; an
    # edge with a fixed end has b + c − a − d = 0 and adds to its free end's unary term only
    tail, head = i >= 0, j >= 0
    linear += np.bincount(i[tail], (c - a)[tail], minlength=len(nodes))
    linear += np.bincount(j[head], (d - c)[head], minlength=len(nodes))
    capacity = np.where(tail & head, np.maximum(b + c - a - d, 0.0), 0.0)  # >= 0 up to rounding
    cut = capacity > 0
    x = min_cut(len(nodes), linear, i[cut], j[cut], capacity[cut])
    # the energy change of each sample, from the move's energy at x and at the labels
    now = labels[nodes] == second[nodes]  # the labels in move coordinates
    x_i, x_j = x[i] & tail, x[j] & head
    now_i, now_j = now[i] & tail, now[j] & head
    node_change = linear * (x.astype(float) - now)
    edge_change = capacity * ((~x_i & x_j).astype(float) - (~now_i & now_j))
    change, scale = _per_sample(
        p, p.node_sample[nodes], node_change, p.edge_sample[touching], edge_change
    )
    better = change < -1e-10 * (1.0 + scale)
    if not better.any():
        return None
    return np.where(x, second[nodes], first[nodes]), better


def _per_sample(p: Potentials, node_sample, node_values, edge_sample, edge_values):
    """Per sample: the sum of node and edge values, and the sum of their magnitudes."""
    if p.n_samples == 1:
        total = node_values.sum() + edge_values.sum()
        size = np.abs(node_values).sum() + np.abs(edge_values).sum()
        return np.array([total]), np.array([size])
    total = np.bincount(node_sample, node_values, minlength=p.n_samples)
    total += np.bincount(edge_sample, edge_values, minlength=p.n_samples)
    size = np.bincount(node_sample, np.abs(node_values), minlength=p.n_samples)
    size += np.bincount(edge_sample, np.abs(edge_values), minlength=p.n_samples)
    return total, size
