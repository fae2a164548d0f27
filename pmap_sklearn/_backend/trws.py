"""Sequential tree-reweighted message passing (TRW-S; Kolmogorov 2006), vectorised by levels.

TRW-S maximises ``f(y) = Σ_i θ_i(y_i) + Σ_(i,j) θ_ij(y_i, y_j)`` for any pairwise tables (any
K, any sign) by block-coordinate descent on the dual of the local-polytope relaxation: nodes
are visited in an order, forward then backward. A node ``i`` gathers its total ``θ̂_i = θ_i +
Σ_k m_{k→i}`` (its scores plus every incoming message) and sends to each neighbour ``j`` ahead
of it in the current direction

    m_{i→j}(y_j) = max_{y_i} [γ_i θ̂_i(y_i) − m_{j→i}(y_i) + θ_ij(y_i, y_j)],

with ``γ_i = 1 / max(#earlier neighbours, #later neighbours)`` (Kolmogorov 2006, Fig. 3, in
the max-sum form of the scores used here; the messages are not shifted: recomputed from the
totals at every visit, they stay within a few times the scores).

*Levels.* ``level(i) = 1 + max level(j)`` over the neighbours ``j`` earlier than ``i`` (0 when
none). Nodes of one level share no edge, and every message they read is final for the pass, so
a whole level — over every sample of the batch at once — is one vectorised (K, E_level, K)
max-plus product, and the sequential algorithm is reproduced exactly. A raster order on a grid
gives ``H + W − 1`` levels and long monotonic chains; a colouring order gives as many levels as
colours (two on a grid) but information travels a few edges per pass.

*Bound.* Every edge lies on one monotonic chain and node ``i`` on ``max(#earlier, #later)``
chains, each taking ``γ_i θ̂_i`` minus the messages along its own edges at ``i``; the chains'
scores add up to ``f`` for any messages. After a backward pass, going down a chain from its
last node, each backward message is exactly the chain's max-marginal so far, and the chain's
maximum is ``γ_f max θ̂_f`` at its first node ``f``: with ``#earlier(i)`` chains arriving at
``i`` and the others starting there,

    U = Σ_i (1 − #earlier(i) γ_i) max θ̂_i  >=  max_y f(y),

Kolmogorov's lower bound on the energy ``−f``. A labelling whose score reaches ``U`` is optimal.

*Labels.* Along the backward pass each node takes the label maximising its total with the
messages from its later neighbours replaced by the tables towards their labels, already chosen
(Kolmogorov 2006, §3.4, in the other direction: the labels then read the messages the bound
is computed from, and a chain is labelled optimally in one pass); the best labelling over the
passes is kept.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from numbers import Real

import numpy as np
from scipy import sparse
from sklearn.utils import check_scalar

from .capabilities import Capabilities, PairwiseKind
from .messages import forests, sample_colours
from .potentials import Potentials, finite_clamp_scores
from .solver import Solver, check_count, check_labels

#: The node orders of :class:`TRWSSolver`.
ORDERS = ("auto", "index", "colour")


@dataclass(frozen=True, eq=False)
class _Level:
    """What one level of a pass reads and writes (positions in the level-sorted nodes, slots of
    the message array: the forward message of the edge at forward position q in slot q, its
    backward message in slot ``E + q``, and a zero row ``2E``)."""

    nodes: slice
    incoming: np.ndarray  # slots of the messages into the level's nodes, node by node
    incoming_starts: np.ndarray  # where each node's slots start in ``incoming``
    forward: slice  # the forward edges the level sends (forward slots)
    forward_sender: np.ndarray  # their sender, within the level
    forward_reverse: slice  # the slots of the messages the other way
    forward_gamma: np.ndarray  # (E_level, 1): γ of each sender
    backward: slice  # the backward edges the level sends (backward positions)
    backward_sender: np.ndarray
    backward_reverse: np.ndarray  # the forward slots of the backward edges
    backward_gamma: np.ndarray
    forward_receiver: np.ndarray  # the later end of each forward edge (node position)
    labelled: np.ndarray  # the level's nodes that have a later neighbour, within the level
    labelled_starts: np.ndarray  # where their forward edges start within ``forward``


@dataclass(frozen=True, eq=False)
class LevelSchedule:
    """The levels of a node order on a batch of graphs, and the edges of both passes.

    Nodes are renumbered level by level (``order[position]`` is the original node); edges are
    laid out twice, by the level of their earlier end (forward) and of their later end
    (backward), each direction's edges of one level contiguous and grouped by sender.

    Parameters
    ----------
    order : ndarray of shape (n_nodes,)
    levels : list of _Level
    gamma : ndarray of shape (n_nodes,)
        ``1 / max(#earlier neighbours, #later neighbours, 1)``.
    start_share : ndarray of shape (n_nodes,)
        ``1 − #earlier neighbours · γ``: the share of the chains that start at the node.
    node_sample : ndarray of shape (n_nodes,)
    forward_edges, backward_edges : ndarray of shape (E,)
        The original edge at each position of the two layouts.
    forward_transposed, backward_transposed : ndarray of shape (E,) of bool
        Whether the original table reads ``[receiver, sender]`` (the edge's first end is the
        receiver).
    forward_ends : ndarray of shape (E, 2)
        Earlier and later end (node positions) of each forward position.
    loopy : ndarray of shape (n_samples,) of bool
        Whether each sample's graph has a cycle.
    incoming, incoming_starts : ndarray
        The slots of the messages into every node, node by node, and where each node's
        start (a node without edges reads the zero slot).
    """

    order: np.ndarray
    levels: list
    gamma: np.ndarray
    start_share: np.ndarray
    node_sample: np.ndarray
    forward_edges: np.ndarray
    backward_edges: np.ndarray
    forward_transposed: np.ndarray
    backward_transposed: np.ndarray
    forward_ends: np.ndarray
    loopy: np.ndarray
    incoming: np.ndarray
    incoming_starts: np.ndarray

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @classmethod
    def build(cls, potentials: Potentials, order: str) -> LevelSchedule:
        """The schedule of ``potentials``' graphs in the node order ``order``.

        Parameters
        ----------
        potentials : Potentials
        order : {"index", "colour"}
            ``"index"``: the nodes' own order (raster order on grids); ``"colour"``: the
            classes of a proper colouring (two on bipartite graphs), one after the other.

        Returns
        -------
        LevelSchedule
        """
        p = potentials
        n, n_edges = p.n_nodes, p.n_edges
        rank = np.arange(n)
        if order == "colour":
            rank = np.argsort(_colours(p) * n + rank, kind="stable")
            rank = np.argsort(rank)
        first, second = p.edges[:, 0], p.edges[:, 1]
        ahead = rank[first] < rank[second]  # the first end is the earlier one
        early = np.where(ahead, first, second)
        late = np.where(ahead, second, first)
        level = _levels(n, early, late)
        order_ = np.lexsort((rank, level))
        position = np.empty(n, dtype=np.intp)
        position[order_] = np.arange(n)
        n_levels = int(level.max(initial=-1)) + 1
        sorted_level = level[order_]
        node_starts = np.searchsorted(sorted_level, np.arange(n_levels + 1))
        n_earlier = np.bincount(late, minlength=n)[order_]
        n_later = np.bincount(early, minlength=n)[order_]
        gamma = 1.0 / np.maximum(np.maximum(n_earlier, n_later), 1)
        early, late = position[early], position[late]

        # forward: by earlier end (its level, then the node), backward: by later end
        f_by = np.lexsort((late, early))
        b_by = np.lexsort((early, late))
        f_at = np.empty(n_edges, dtype=np.intp)
        f_at[f_by] = np.arange(n_edges)
        b_at = np.empty(n_edges, dtype=np.intp)
        b_at[b_by] = np.arange(n_edges)
        f_send, f_receive = early[f_by], late[f_by]
        b_send = late[b_by]
        f_starts = np.searchsorted(f_send, node_starts)
        b_starts = np.searchsorted(b_send, node_starts)
        # every message into a node: forward slots by receiver, backward slots by receiver,
        # and the zero slot 2E for nodes without an edge (never an empty group)
        slots = np.concatenate([f_at, n_edges + f_at, np.full(n, 2 * n_edges)])
        receiver = np.concatenate([late, early, np.arange(n)])
        keep = np.ones(len(slots), dtype=bool)
        keep[2 * n_edges :] = (n_earlier + n_later) == 0
        slots, receiver = slots[keep], receiver[keep]
        by_receiver = np.argsort(receiver, kind="stable")
        slots = slots[by_receiver]
        slot_starts = np.searchsorted(receiver[by_receiver], np.arange(n + 1))

        levels = []
        for lv in range(n_levels):
            start, stop = node_starts[lv], node_starts[lv + 1]
            fw = slice(f_starts[lv], f_starts[lv + 1])
            bw = slice(b_starts[lv], b_starts[lv + 1])
            labelled, first_edge = np.unique(f_send[fw] - start, return_index=True)
            levels.append(
                _Level(
                    nodes=slice(start, stop),
                    incoming=slots[slot_starts[start] : slot_starts[stop]],
                    incoming_starts=slot_starts[start:stop] - slot_starts[start],
                    forward=fw,
                    forward_sender=f_send[fw] - start,
                    forward_reverse=slice(n_edges + fw.start, n_edges + fw.stop),
                    forward_gamma=gamma[f_send[fw], None],
                    backward=bw,
                    backward_sender=b_send[bw] - start,
                    backward_reverse=f_at[b_by[bw]],
                    backward_gamma=gamma[b_send[bw], None],
                    forward_receiver=f_receive[fw],
                    labelled=labelled,
                    labelled_starts=first_edge,
                )
            )
        return cls(
            order_,
            levels,
            gamma,
            1.0 - n_earlier * gamma,
            p.node_sample[order_],
            f_by,
            b_by,
            ~ahead[f_by],
            ahead[b_by],
            np.column_stack([f_send, f_receive]),
            ~forests(p),
            slots,
            slot_starts[:-1],
        )


#: The schedules of the graphs solved last (a learner solves the same graphs again and again:
#: every step of BCFW one sample, every step of SGD a few), at most this many, each of at most
#: ``CACHED_EDGES`` edges.
CACHED_SCHEDULES, CACHED_EDGES = 16, 1 << 16
_schedules: OrderedDict = OrderedDict()


def _schedule(potentials: Potentials, order: str) -> LevelSchedule:
    """:meth:`LevelSchedule.build`, through a small cache keyed by the graph."""
    p = potentials
    if p.n_edges > CACHED_EDGES:
        return LevelSchedule.build(p, order)
    key = (order, p.n_nodes, p.edges.tobytes(), p.node_offsets.tobytes())
    schedule = _schedules.get(key)
    if schedule is None:
        schedule = _schedules[key] = LevelSchedule.build(p, order)
        while len(_schedules) > CACHED_SCHEDULES:
            _schedules.popitem(last=False)
    else:
        _schedules.move_to_end(key)
    return schedule


def _levels(n: int, early: np.ndarray, late: np.ndarray) -> np.ndarray:
    """``level(i) = 1 + max level(j)`` over the edges ``j → i`` (0 without one): the longest
    directed path into each node, one edge further each round."""
    level = np.zeros(n, dtype=np.intp)
    while len(early):
        reached = level.copy()
        np.maximum.at(reached, late, level[early] + 1)
        if np.array_equal(reached, level):
            break
        level = reached
    return level


def _colours(potentials: Potentials) -> np.ndarray:
    """A proper colouring of the nodes, every sample coloured as it would be alone: the parity
    of the distance to the first node of the component in bipartite samples (grids: two
    colours), a greedy colouring in the others."""
    p = potentials
    n = p.n_nodes
    if not p.n_edges:
        return np.zeros(n, dtype=np.intp)
    first, second = p.edges[:, 0], p.edges[:, 1]
    graph = sparse.csr_matrix(
        (np.ones(2 * p.n_edges), (np.r_[first, second], np.r_[second, first])), shape=(n, n)
    )
    _, component = sparse.csgraph.connected_components(graph, directed=False)
    seen = np.zeros(n, dtype=bool)
    seen[np.unique(component, return_index=True)[1]] = True
    parity = np.zeros(n, dtype=np.intp)
    frontier, distance = seen.copy(), 0
    while frontier.any():  # breadth-first, every component at once
        distance += 1
        reached = (graph @ frontier.astype(float) > 0) & ~seen
        parity[reached] = distance % 2
        seen |= reached
        frontier = reached
    odd_cycle = np.zeros(p.n_samples, dtype=bool)
    odd_cycle[p.edge_sample[parity[first] == parity[second]]] = True
    if not odd_cycle.any():
        return parity
    return np.where(odd_cycle[p.node_sample], sample_colours(p), parity)


def _max_plus(h: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """``out[e, b] = max_a h[e, a] + tables[a, e, b]`` with label-major ``tables`` (K, E, K):
    a reduction over the outer axis, which numpy runs as elementwise maxima."""
    return np.maximum.reduce(h.T[:, :, None] + tables, axis=0)


def _max_potts(h: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`_max_plus` for Potts tables ``w [a != b]``: ``max(h[b], max_{a != b} h[a] + w)``
    in O(K)."""
    k = h.shape[1]
    rows = np.arange(len(h))
    top = h.argmax(axis=1)
    best = h[rows, top]
    masked = h.copy()
    masked[rows, top] = -np.inf
    second = masked.max(axis=1) if k > 1 else np.full(len(h), -np.inf)
    other = np.where(np.arange(k) == top[:, None], second[:, None], best[:, None])
    return np.maximum(h, other + weights[:, None])


class _Pairwise:
    """The pairwise scores of both passes, as ``[y_sender, edge, y_receiver]`` (label-major
    tables) or Potts weights, cut into the steps of the levels."""

    def __init__(self, potentials: Potentials, schedule: LevelSchedule):
        self.k = potentials.n_states
        self.potts = potentials.pairwise_kind is PairwiseKind.POTTS
        if self.potts:
            self.forward = potentials.pairwise[schedule.forward_edges]
            self.backward = potentials.pairwise[schedule.backward_edges]
            self.message = _max_potts
            return
        tables = potentials.edge_tables()
        self.forward = _label_major(tables, schedule.forward_edges, schedule.forward_transposed)
        self.backward = _label_major(tables, schedule.backward_edges, schedule.backward_transposed)
        self.message = _max_plus

    def of(self, scores: np.ndarray, edges: slice) -> np.ndarray:
        """The scores of a range of edge positions (a view)."""
        return scores[edges] if self.potts else scores[:, edges]

    def rows(self, edges: slice):
        """A function of the receivers' labels: the scores of the forward edges ``edges``
        over their senders' labels (the decoding's tables towards labelled neighbours)."""
        if self.potts:
            weights, labels = self.forward[edges, None], np.arange(self.k)
            return lambda given: weights * (labels != given[:, None])
        tables, index = self.forward, np.arange(edges.start, edges.stop)
        return lambda given: tables[:, index, given].T

    def score(self, sender: np.ndarray, receiver: np.ndarray) -> np.ndarray:
        """The forward edges' scores at the labels of their two ends."""
        if self.potts:
            return self.forward * (sender != receiver)
        return self.forward[sender, np.arange(len(sender)), receiver]


def _label_major(tables: np.ndarray, edges: np.ndarray, transposed: np.ndarray) -> np.ndarray:
    """``out[a, e, b]``: edge ``edges[e]``'s table at sender label a, receiver label b."""
    picked = np.array(tables[edges], dtype=float)
    if transposed.any():
        picked[transposed] = picked[transposed].transpose(0, 2, 1)
    return np.ascontiguousarray(picked.transpose(1, 0, 2))


@dataclass
class TRWSResult:
    """What :func:`trws` returns (nodes in their original order).

    Attributes
    ----------
    labels : ndarray of shape (n_nodes,)
        The best labelling found.
    score : ndarray of shape (n_samples,)
        Its score ``f_n(y)``.
    bound : ndarray of shape (n_samples,)
        The upper bound ``U_n >= max_y f_n(y)`` of the last backward pass.
    n_iter : int
        Forward-backward passes done.
    """

    labels: np.ndarray
    score: np.ndarray
    bound: np.ndarray
    n_iter: int


def trws(
    potentials: Potentials,
    schedule: LevelSchedule,
    max_iter: int,
    tol: float,
    patience: int,
    init: np.ndarray | None = None,
    trace: list | None = None,
) -> TRWSResult:
    """TRW-S passes on a batch until every sample is done: its labelling is within ``tol`` of
    its bound (optimal), or ``patience`` passes have not improved it.

    Parameters
    ----------
    potentials : Potentials
        Finite scores (clamps already folded into the unary scores).
    schedule : LevelSchedule
        Of the potentials' graphs.
    max_iter : int
        Forward-backward passes at most.
    tol : float
        A labelling within ``tol · (1 + |U|)`` of the bound ``U`` is optimal.
    patience : int
        Passes without a better labelling after which a sample is done.
    init : ndarray of shape (n_nodes,), optional
        A labelling to start the best one from (the result scores at least as much).
    trace : list, optional
        Appended ``(best scores, bounds)`` after every pass.

    Returns
    -------
    TRWSResult
    """
    p, s = potentials, schedule
    n, k = p.unary.shape
    n_edges, n_samples = p.n_edges, p.n_samples
    pairwise = _Pairwise(p, s)
    message = pairwise.message
    unary = p.unary[s.order]
    messages = np.zeros((2 * n_edges + 1, k))  # forward slots, backward slots, a zero row
    labels = np.zeros(n, dtype=np.intp)
    forward, backward = [], []  # what each level reads and writes, bound once
    for level in s.levels:
        own = unary[level.nodes]
        if level.forward.stop > level.forward.start:
            forward.append(
                (
                    level.incoming,
                    level.incoming_starts,
                    own,
                    level.forward,
                    level.forward_sender,
                    level.forward_gamma,
                    level.forward_reverse,
                    pairwise.of(pairwise.forward, level.forward),
                )
            )
        sends = level.backward.stop > level.backward.start
        backward.append(
            (
                level.nodes,
                level.incoming,
                level.incoming_starts,
                own,
                _labelled(level),
                level.labelled_starts,
                pairwise.rows(level.forward),
                level.forward_receiver,
                level.forward_reverse,
                n_edges + level.backward_reverse if sends else None,
                level.backward_sender,
                level.backward_gamma,
                level.backward_reverse,
                pairwise.of(pairwise.backward, level.backward),
            )
        )
    backward.reverse()
    node_sample = s.node_sample
    edge_sample = p.edge_sample[s.forward_edges]
    nodes = np.arange(n)
    early, late = s.forward_ends[:, 0], s.forward_ends[:, 1]

    def scores_of(y):
        pair = pairwise.score(y[early], y[late])
        return np.bincount(node_sample, unary[nodes, y], minlength=n_samples) + np.bincount(
            edge_sample, pair, minlength=n_samples
        )

    best_labels = np.zeros(n, dtype=np.intp)
    best = np.full(n_samples, -np.inf)
    if init is not None:
        best_labels = init[s.order].copy()
        best = scores_of(best_labels)
    bound = np.full(n_samples, np.inf)
    stale = np.zeros(n_samples, dtype=np.intp)
    done = np.zeros(n_samples, dtype=bool)
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        for incoming, starts, own, out, sender, gamma, reverse, tables in forward:
            total = np.add.reduceat(messages[incoming], starts, axis=0)  # send to later ends
            total += own
            h = gamma * total[sender]
            h -= messages[reverse]
            messages[out] = message(h, tables)
        for (
            at,
            incoming,
            starts,
            own,
            labelled,
            labelled_starts,
            rows_at,
            receiver,
            reverse_in,
            out,
            sender,
            gamma,
            reverse,
            tables,
        ) in backward:  # label each level, then send to the earlier ends
            total = np.add.reduceat(messages[incoming], starts, axis=0)
            total += own
            local = total
            if labelled is not None:  # the tables towards the labelled later neighbours
                rows = rows_at(labels[receiver]) - messages[reverse_in]
                towards = np.add.reduceat(rows, labelled_starts, axis=0)
                if labelled is _EVERY:
                    local = total + towards
                else:
                    local = total.copy()
                    local[labelled] += towards
            labels[at] = local.argmax(axis=1)
            if out is not None:
                h = gamma * total[sender]
                h -= messages[reverse]
                messages[out] = message(h, tables)
        # θ̂ at the end of the backward pass: the chains' maxima (messages unnormalised)
        total = np.add.reduceat(messages[s.incoming], s.incoming_starts, axis=0)
        total += unary
        # A sample once done keeps its labelling and bound: its result does not depend on
        # how long the other samples of its batch run.
        passed = np.bincount(node_sample, s.start_share * total.max(axis=1), minlength=n_samples)
        bound = np.where(done, bound, passed)
        found = scores_of(labels)
        better = (found > best) & ~done
        stale = np.where(better, 0, stale + 1)
        if better.any():
            take = better[node_sample]
            best_labels[take] = labels[take]
            best = np.where(better, found, best)
        if trace is not None:
            trace.append((best.copy(), bound.copy()))
        optimal = bound - best <= tol * (1.0 + np.abs(bound))
        done |= optimal | ((stale >= patience) & s.loopy)
        if done.all():
            break
    out_labels = np.empty(n, dtype=np.intp)
    out_labels[s.order] = best_labels
    return TRWSResult(out_labels, best, bound, n_iter)


#: ``patience="auto"`` per node order: passes without a better labelling before a sample stops.
AUTO_PATIENCE = {"index": 10, "colour": 40}

#: Marks a level whose every node has a later neighbour.
_EVERY = slice(None)


def _labelled(level: _Level):
    """The level's nodes with a later neighbour: None, :data:`_EVERY` or their indices."""
    if not len(level.labelled):
        return None
    if len(level.labelled) == level.nodes.stop - level.nodes.start:
        return _EVERY
    return level.labelled


class TRWSSolver(Solver):
    """Approximate MAP for any pairwise tables on any graph by sequential tree-reweighted
    message passing (TRW-S; Kolmogorov, "Convergent tree-reweighted message passing for energy
    minimization", PAMI 2006).

    Each pass visits the nodes forward then backward in a fixed order, level by level (a level:
    nodes whose earlier neighbours are all in earlier levels), every level one vectorised
    max-plus product over all samples of the batch. It keeps the best labelling decoded along
    the backward passes and an upper bound of the best score (Kolmogorov's lower bound of the
    energy); a sample is done when its labelling reaches the bound (it is then optimal) or,
    on a graph with cycles, when ``patience`` passes have not improved it (a forest runs until
    its labelling is certified optimal). Exact on forests (chains, trees); elsewhere the
    labelling of the local-polytope relaxation's messages, optimal where the bound is reached.

    Examples
    --------
    A triangle with tables of both signs, whose labelling reaches the bound:

    >>> import numpy as np
    >>> from pmap_sklearn.solvers import Potentials, TRWSSolver
    >>> table = np.array([[0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [1.0, -1.0, 0.0]])
    >>> p = Potentials(np.eye(3), [[0, 1], [1, 2], [2, 0]], np.stack([table] * 3))
    >>> result = TRWSSolver().solve(p)
    >>> result.labels, result.score, result.bound
    (array([0, 1, 2]), array([6.]), array([6.]))

    Parameters
    ----------
    order : {"auto", "index", "colour"}, default="auto"
        The node order. ``"index"``: the nodes' own order (raster on grids): long monotonic
        chains, few passes, one level per anti-diagonal; ``"colour"``: the classes of a
        colouring: as many levels as colours (two on grids) but more passes.
        ``"auto"``: ``"index"``.
    max_iter : int, default=100
        Forward-backward passes at most.
    patience : int or "auto", default="auto"
        Passes without a better labelling after which a sample stops. ``"auto"``: 10 in index
        order, 40 in colouring order, whose labellings keep improving over more passes (on
        the snakes of the general-tables benchmark, 10 passes there leave two thirds of the
        labellings at the best found, 40 as many as 10 do in index order).
    tol : float, default=1e-9
        A labelling within ``tol · (1 + |U|)`` of the bound ``U`` counts as optimal.
    """

    name = "trws"
    capabilities = Capabilities(
        warm_start=True,
        map_quality="approximate on loopy graphs (TRW-S: a labelling and a bound on the "
        "optimum); exact on forests",
    )

    def __init__(
        self, order: str = "auto", max_iter: int = 100, patience="auto", tol: float = 1e-9
    ):
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        self.order = order
        self.max_iter = check_count(max_iter, "max_iter")
        self.patience = patience if patience == "auto" else check_count(patience, "patience")
        self.tol = check_scalar(tol, "tol", Real, min_val=0.0)
        if not np.isfinite(self.tol):
            raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")

    def __repr__(self) -> str:
        return (
            f"TRWSSolver(order={self.order!r}, max_iter={self.max_iter}, "
            f"patience={self.patience!r}, tol={self.tol})"
        )

    def _order(self) -> str:
        return "index" if self.order == "auto" else self.order

    def _patience(self) -> int:
        if self.patience == "auto":
            return AUTO_PATIENCE[self._order()]
        return self.patience

    def solve(self, potentials: Potentials, clamp=None, init=None) -> TRWSResult:
        """The labelling, its score, the bound and the passes of every sample.

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        init : ndarray of shape (n_nodes,), optional
            A starting labelling (clamps override it): the result scores at least as much.

        Returns
        -------
        TRWSResult
            Scores and bounds of the clamped model (a clamp forbids the other labels by
            scores far below every allowed labelling).
        """
        self._check(potentials, clamp)
        p = potentials
        init = None if init is None else check_labels(init, p, "init", free=False)
        if clamp is not None:
            clamp = np.asarray(clamp, dtype=np.intp)
            p = replace(p, unary=finite_clamp_scores(p, clamp))
            if init is not None:
                init = np.where(clamp >= 0, clamp, init)
        schedule = _schedule(p, self._order())
        return trws(p, schedule, self.max_iter, self.tol, self._patience(), init)

    def map(self, potentials: Potentials, clamp=None, n_jobs=None, init=None) -> np.ndarray:
        """Approximate MAP labelling of every sample (exact on forests).

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        n_jobs : int, optional
            Unused: every pass is vectorised over the whole batch.
        init : ndarray of shape (n_nodes,), optional
            A starting labelling (clamps override it): the result scores at least as much.

        Returns
        -------
        ndarray of shape (n_nodes,)
        """
        return self.solve(potentials, clamp, init).labels
