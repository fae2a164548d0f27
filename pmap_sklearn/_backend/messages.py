"""Convex belief propagation with counting numbers (Hazan & Urtasun 2010, Theorem 1, Lemma 1).

For a batch of pairwise models with node scores ``θ_v`` (unary plus, when learning, the loss
``ℓ_v``) and edge tables ``θ_α``, the program of Theorem 1 in the messages ``λ_{v→α}`` is

    g(λ) = Σ_α τ_α ln Σ_{y_α} exp[(θ_α(y_α) + Σ_{v∈α} λ_{v→α}(y_v)) / τ_α]
         + Σ_v τ_v ln Σ_{y_v} exp[(θ_v(y_v) − Σ_{α∋v} λ_{v→α}(y_v)) / τ_v],

with temperatures ``τ = ε c`` (``c_α``, ``c_v`` the counting numbers; ``τ ln Σ exp(·/τ)`` is the
max at ``τ = 0``). ``g`` upper-bounds the soft-max ``max_b ⟨b, θ⟩ + ε Σ c H(b)`` over the local
polytope for every ``λ`` and equals it at the minimum; for ``ε, c_α, c_v ≥ 0`` it is convex.
Lemma 1 minimises ``g`` exactly over the messages of one node:

    μ_{α→v}(y_v) = τ_α ln Σ_{y_α∖y_v} exp[(θ_α + Σ_{u∈α∖v} λ_{u→α}) / τ_α],
    λ_{v→α} = (c_α / ĉ_v) (θ_v + Σ_{β∋v} μ_{β→v}) − μ_{α→v},      ĉ_v = c_v + Σ_{α∋v} c_α.

Nodes of one colour of a proper colouring share no edge, so updating a whole colour class at
once is the same block coordinate descent, vectorised over its edges. With Bethe counting
numbers (``c_α = 1``, ``c_v = 1 − deg v``) and ``ε = 1`` the fixed point on a tree or a chain
is exact sum-product: beliefs are the marginals and ``g`` the log-partition function.
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Real

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.special import logsumexp
from sklearn.utils import check_scalar

from .._utils import ranges
from .capabilities import Capabilities, PairwiseKind
from .potentials import Potentials, Statistics, finite_clamp_scores
from .solver import Marginals, Solver, check_count

#: the counting numbers by name: (edge number, node number or "1 - degree")
COUNTING_NUMBERS = ("auto", "convex", "bethe")


def _fold(x: np.ndarray, op) -> np.ndarray:
    """Reduce the first axis with a binary ufunc, slice by slice: numpy's reductions over a
    short axis (K or K² entries) are several times slower than K elementwise operations."""
    out = x[0].copy()
    for part in x[1:]:
        op(out, part, out=out)
    return out


def soft_max(x: np.ndarray, tau, axis) -> np.ndarray:
    """``τ ln Σ exp(x / τ)`` along ``axis`` (the max where ``τ = 0``; a soft min for ``τ < 0``).

    ``tau`` is a scalar or an array shaped like ``x`` reduced along ``axis``.
    """
    x = np.moveaxis(x, axis, 0)
    tau = np.asarray(tau, dtype=float)
    top = _fold(x, np.maximum)
    if not np.any(tau):
        return top
    # shift by the largest x / τ: the max for τ > 0, the min for τ < 0
    shift = top if np.all(tau >= 0) else np.where(tau < 0, _fold(x, np.minimum), top)
    safe = np.where(tau == 0, 1.0, tau)
    total = _fold(np.exp((x - shift) / safe), np.add)
    return np.where(tau == 0, top, safe * np.log(total) + shift)


def soft_argmax(x: np.ndarray, tau) -> np.ndarray:
    """The distribution ``∝ exp(x / τ)`` over the last axis (uniform over the maxima at τ = 0)."""
    tau = np.asarray(tau, dtype=float)[..., None]
    columns = np.moveaxis(x, -1, 0)
    top = _fold(columns, np.maximum)[..., None]
    hard = (x == top).astype(float)
    if np.any(tau):
        shift = (
            top
            if np.all(tau >= 0)
            else np.where(tau < 0, _fold(columns, np.minimum)[..., None], top)
        )
        soft = np.exp((x - shift) / np.where(tau == 0, 1.0, tau))
        hard = np.where(tau == 0, hard, soft)
    return hard / _fold(np.moveaxis(hard, -1, 0), np.add)[..., None]


def colour_nodes(n_nodes: int, edges: np.ndarray, priority: np.ndarray | None = None) -> np.ndarray:
    """A proper colouring (no edge joins two nodes of one colour), greedy by rounds.

    Each round colours the uncoloured nodes whose (fixed, pseudo-random) priority beats every
    uncoloured neighbour's — an independent set — with the smallest colour their neighbours do
    not use (Jones & Plassmann 1993), all in vectorised passes over the edges.

    Parameters
    ----------
    n_nodes : int
    edges : ndarray of shape (n_edges, 2)
    priority : ndarray of shape (n_nodes,), optional
        Priorities, distinct between neighbours (see :func:`sample_colours`); by default a
        fixed permutation of the nodes.

    Returns
    -------
    ndarray of shape (n_nodes,)
    """
    colour = np.full(n_nodes, -1, dtype=np.intp)
    if n_nodes == 0:
        return colour
    if priority is None:
        priority = np.random.default_rng(0).permutation(n_nodes)
    both = np.concatenate([edges, edges[:, ::-1]]) if len(edges) else np.empty((0, 2), np.intp)
    source, target = both[:, 0], both[:, 1]
    while (colour < 0).any():
        open_ = colour < 0
        live = open_[source] & open_[target]
        best = np.full(n_nodes, -1)
        np.maximum.at(best, source[live], priority[target[live]])
        chosen = open_ & (priority > best)
        n_colours = colour.max() + 2
        used = np.zeros((n_nodes, n_colours + 1), dtype=bool)
        done = colour[target] >= 0
        used[source[done], colour[target[done]]] = True
        colour[chosen] = np.argmin(used[chosen], axis=1)
    return colour


def sample_colours(potentials: Potentials) -> np.ndarray:
    """A proper colouring of every sample's graph, each sample coloured as it is alone.

    A sample's colouring, and so the order in which Gibbs updates, message-passing sweeps and
    sequential mean field visit its nodes, then does not depend on the other samples of its
    batch: its priorities are the permutation :func:`colour_nodes` draws for a sample of its
    size.

    Parameters
    ----------
    potentials : Potentials

    Returns
    -------
    ndarray of shape (n_nodes,)
        The colour of every node.
    """
    p = potentials
    priority = np.empty(p.n_nodes, dtype=np.intp)
    for size in np.unique(p.lengths):
        nodes = ranges(p.node_offsets, np.flatnonzero(p.lengths == size))
        permutation = np.random.default_rng(0).permutation(size)
        priority[nodes] = permutation[nodes - p.node_offsets[p.node_sample[nodes]]]
    return colour_nodes(p.n_nodes, p.edges, priority)


def _check_counting(kind) -> None:
    """Raise the ValueError of :func:`counting_numbers` for an invalid ``kind`` (on a one-node
    graph, before any model is seen)."""
    counting_numbers(kind, np.zeros(1), np.ones(1, bool))


def counting_numbers(kind, degree: np.ndarray, forest=None) -> tuple[float, np.ndarray]:
    """Edge counting number (a scalar) and node counting numbers (n_nodes,).

    ``"convex"``: ``c_α = c_v = 1`` (the choice of Hazan & Urtasun's experiments; convex);
    ``"bethe"``: ``c_α = 1, c_v = 1 − deg v`` (exact on trees; not convex on loopy graphs);
    ``"auto"``: Bethe numbers on the nodes of forests (chains, trees, edgeless samples), where
    they are exact and convex, and convex numbers on the nodes of loopy samples (``forest``
    says which, per node); a pair ``(c_α, c_v)`` of numbers.
    """
    if isinstance(kind, str):
        if kind == "convex":
            edge, node = 1.0, np.ones(len(degree))
        elif kind == "bethe":
            edge, node = 1.0, 1.0 - degree
        elif kind == "auto":
            if forest is None:
                raise ValueError("counting_numbers='auto' needs to know which nodes lie in forests")
            edge, node = 1.0, np.where(forest, 1.0 - degree, 1.0)
        else:
            raise ValueError(f"counting_numbers must be one of {COUNTING_NUMBERS} or a pair")
    else:
        try:
            edge, node_value = kind
        except (TypeError, ValueError):
            raise ValueError(
                f"counting_numbers must be one of {COUNTING_NUMBERS} or a pair (c_edge, c_node), "
                f"got {kind!r}"
            ) from None
        if not all(isinstance(v, Real) and np.isfinite(v) for v in (edge, node_value)):
            raise ValueError(f"counting numbers must be finite numbers, got {kind!r}")
        edge, node = float(edge), np.full(len(degree), float(node_value))
    if edge <= 0:
        raise ValueError(f"the edge counting number must be > 0, got {edge}")
    total = node + edge * degree
    if np.any(total <= 0):
        raise ValueError(
            "counting numbers with c_v + Σ_α c_α <= 0 at some node: use c_node > -c_edge · degree"
        )
    return edge, node.astype(float)


def in_forest(potentials: Potentials) -> np.ndarray:
    """Whether each node's sample is a forest (no cycle), per node (see :func:`forests`).

    Parameters
    ----------
    potentials : Potentials

    Returns
    -------
    ndarray of shape (n_nodes,) of bool
    """
    return forests(potentials)[potentials.node_sample]


def forests(potentials: Potentials) -> np.ndarray:
    """Whether each sample is a forest (no cycle): ``E_n = V_n − C_n`` with ``C_n`` its number
    of connected components.

    Parameters
    ----------
    potentials : Potentials

    Returns
    -------
    ndarray of shape (n_samples,) of bool
    """
    p = potentials
    graph = sparse.coo_matrix(
        (np.ones(p.n_edges), (p.edges[:, 0], p.edges[:, 1])), shape=(p.n_nodes, p.n_nodes)
    )
    _, component = connected_components(graph, directed=False)
    # components never cross samples: count each sample's distinct component labels
    first = np.zeros(p.n_nodes, dtype=bool)
    first[np.unique(component, return_index=True)[1]] = True
    n_components = np.bincount(p.node_sample, first, minlength=p.n_samples)
    return np.diff(p.edge_offsets) == p.lengths - n_components


class BeliefPropagation:
    """Messages, beliefs and the Theorem-1 objective of a batch of pairwise models.

    The graph bookkeeping (incidence, colouring) is built once; :meth:`set_scores` changes the
    scores and keeps the messages, so a learner warm-starts every θ step from the last
    messages (Hazan & Urtasun's interleaving of Lemmas 1 and 2).

    Parameters
    ----------
    potentials : Potentials
        The models (any K, pairwise terms of any kind and sign).
    epsilon : float
        ε >= 0: 1 is sum-product, 0 max-product.
    counting : {"auto", "convex", "bethe"} or (float, float), default="convex"
        Counting numbers (see :func:`counting_numbers`).
    """

    def __init__(self, potentials: Potentials, epsilon: float, counting="convex"):
        if not (isinstance(epsilon, Real) and np.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        p = potentials
        self.n_nodes, self.n_edges, self.n_states = p.n_nodes, p.n_edges, p.n_states
        self.node_sample, self.edge_sample, self.n_samples = (
            p.node_sample,
            p.edge_sample,
            p.n_samples,
        )
        self.edges = p.edges
        self.pairwise_kind = p.pairwise_kind
        self.epsilon = float(epsilon)
        source, target = p.edges[:, 0], p.edges[:, 1]
        degree = np.bincount(source, minlength=p.n_nodes) + np.bincount(target, minlength=p.n_nodes)
        self.degree = degree
        forest = in_forest(p) if isinstance(counting, str) and counting == "auto" else None
        self.edge_count, self.node_count = counting_numbers(counting, degree, forest)
        self.total_count = self.node_count + self.edge_count * degree  # ĉ_v
        self.edge_tau = self.epsilon * self.edge_count
        self.node_tau = self.epsilon * self.node_count
        self._to_source, self._to_target = p.edge_ends
        colour = sample_colours(p)
        self.n_colours = int(colour.max()) + 1 if p.n_nodes else 0
        self._classes = []
        for c in range(self.n_colours):
            nodes = np.flatnonzero(colour == c)
            out_edges = np.flatnonzero(colour[source] == c)
            in_edges = np.flatnonzero(colour[target] == c)
            self._classes.append(
                (
                    nodes,
                    out_edges,
                    in_edges,
                    self._to_source[nodes][:, out_edges],
                    self._to_target[nodes][:, in_edges],
                    # where each edge's end of this colour sits in ``nodes``
                    np.searchsorted(nodes, source[out_edges]),
                    np.searchsorted(nodes, target[in_edges]),
                    _runs(self.edge_sample[out_edges]),
                    _runs(self.edge_sample[in_edges]),
                )
            )
        self.source_messages = np.zeros((p.n_edges, p.n_states))  # λ_{i→(i,j)}
        self.target_messages = np.zeros((p.n_edges, p.n_states))  # λ_{j→(i,j)}
        self.set_scores(p.unary, p.edge_tables())

    def set_scores(self, node_scores: np.ndarray, edge_tables: np.ndarray) -> None:
        """New scores (n_nodes, K) and tables (E, K, K); the messages are kept."""
        self.node_scores = np.asarray(node_scores, dtype=float)
        self.edge_tables = np.ascontiguousarray(edge_tables, dtype=float)

    # ---- Lemma 1 ---------------------------------------------------------------------------
    def sweep(self, frozen: np.ndarray | None = None) -> np.ndarray:
        """One pass of Lemma 1 over every colour class.

        Parameters
        ----------
        frozen : ndarray of shape (n_samples,) of bool, optional
            Samples whose messages are kept as they are.

        Returns
        -------
        ndarray of shape (n_samples,)
            Every sample's largest message change (0 for the frozen ones).
        """
        change = np.zeros(self.n_samples)
        for (
            nodes,
            out_edges,
            in_edges,
            out_incidence,
            in_incidence,
            out_at,
            in_at,
            out_sample,
            in_sample,
        ) in self._classes:
            tables_out = self.edge_tables[out_edges]
            tables_in = self.edge_tables[in_edges]
            # μ to the source of an edge sums out its target, and vice versa
            to_source = soft_max(
                tables_out + self.target_messages[out_edges][:, None, :], self.edge_tau, axis=2
            )
            to_target = soft_max(
                tables_in + self.source_messages[in_edges][:, :, None], self.edge_tau, axis=1
            )
            incoming = out_incidence @ to_source + in_incidence @ to_target
            share = (self.node_scores[nodes] + incoming) / self.total_count[nodes, None]
            new_out = self.edge_count * share[out_at] - to_source
            new_in = self.edge_count * share[in_at] - to_target
            new_out -= new_out.max(axis=1, keepdims=True)  # footnote 1: normalised messages
            new_in -= new_in.max(axis=1, keepdims=True)
            for fresh, messages, edges, (sample, starts, owners) in (
                (new_out, self.source_messages, out_edges, out_sample),
                (new_in, self.target_messages, in_edges, in_sample),
            ):
                if not len(edges):
                    continue
                old = messages[edges]
                if frozen is not None:
                    keep = frozen[sample]
                    fresh[keep] = old[keep]
                moved = np.maximum.reduceat(np.abs(fresh - old).max(axis=1), starts)
                change[owners] = np.maximum(change[owners], moved)
                messages[edges] = fresh
        return change

    def run(self, max_sweeps: int = 200, tol: float = 1e-9) -> int:
        """Sweep until no message moves by more than ``tol``; returns the sweeps done.

        A sample whose messages have converged keeps them while the rest of its batch sweeps
        on, so that its result does not depend on the other samples of the batch.
        """
        converged = np.zeros(self.n_samples, dtype=bool)
        for sweep in range(1, max_sweeps + 1):
            converged |= self.sweep(converged) <= tol
            if converged.all():
                return sweep
        return max_sweeps

    # ---- the objective and beliefs ---------------------------------------------------------
    def _message_sums(self) -> np.ndarray:
        """``Σ_{α∋v} λ_{v→α}`` (n_nodes, K)."""
        return self._to_source @ self.source_messages + self._to_target @ self.target_messages

    def _edge_scores(self) -> np.ndarray:
        return (
            self.edge_tables + self.source_messages[:, :, None] + self.target_messages[:, None, :]
        )

    def objective(self) -> np.ndarray:
        """``g_n(λ)`` of every sample (n_samples,): an upper bound of the approximated
        soft-max, equal to it at the optimal messages."""
        node = soft_max(self.node_scores - self._message_sums(), self.node_tau, axis=1)
        scores = self._edge_scores().reshape(self.n_edges, self.n_states**2)
        edge = soft_max(scores, self.edge_tau, axis=1)
        return np.bincount(self.node_sample, node, minlength=self.n_samples) + np.bincount(
            self.edge_sample, edge, minlength=self.n_samples
        )

    def edge_beliefs(self) -> np.ndarray:
        """``b_α ∝ exp[(θ_α + Σ λ_{v→α}) / τ_α]``, shape (E, K, K)."""
        scores = self._edge_scores().reshape(self.n_edges, self.n_states**2)
        tau = np.full(self.n_edges, self.edge_tau)
        return soft_argmax(scores, tau).reshape(self.n_edges, self.n_states, self.n_states)

    def node_beliefs(self, edge_beliefs: np.ndarray | None = None) -> np.ndarray:
        """``b_v ∝ exp[(θ_v − Σ λ_{v→α}) / τ_v]``, shape (n_nodes, K). Where ``τ_v = 0`` with
        ``ε > 0`` (Bethe numbers at degree 1) the node belief is the mean of its edges'
        marginals, which it equals at the fixed point."""
        node = soft_argmax(self.node_scores - self._message_sums(), self.node_tau)
        flat = (self.node_tau == 0) & (self.epsilon > 0)
        if flat.any():
            if edge_beliefs is None:
                edge_beliefs = self.edge_beliefs()
            summed = self._to_source @ edge_beliefs.sum(axis=2)
            summed += self._to_target @ edge_beliefs.sum(axis=1)
            node[flat] = summed[flat] / self.degree[flat, None]
        return node

    def entropy(self, node_beliefs, edge_beliefs) -> np.ndarray:
        """``Σ_α c_α H(b_α) + Σ_v c_v H(b_v)`` of every sample (n_samples,)."""

        def h(b):
            return -np.sum(np.where(b > 0, b * np.log(np.where(b > 0, b, 1.0)), 0.0), axis=1)

        node = self.node_count * h(node_beliefs)
        edge = self.edge_count * h(edge_beliefs.reshape(self.n_edges, self.n_states**2))
        return np.bincount(self.node_sample, node, minlength=self.n_samples) + np.bincount(
            self.edge_sample, edge, minlength=self.n_samples
        )


def _runs(sample: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges' samples (sorted), where each sample's run of edges starts, and its sample."""
    starts = np.flatnonzero(np.r_[True, sample[1:] != sample[:-1]]) if len(sample) else sample
    return sample, starts, sample[starts]


def pairwise_statistics(edge_beliefs: np.ndarray, kind: str) -> np.ndarray:
    """Edge beliefs (E, K, K) as the pairwise statistics of potentials of ``kind``."""
    if kind is PairwiseKind.TABLES:
        return edge_beliefs
    if kind is PairwiseKind.SHARED:
        return edge_beliefs.sum(axis=0)
    # Potts: the mass off the diagonal, P(y_i != y_j) for beliefs
    return edge_beliefs.sum(axis=(1, 2)) - np.trace(edge_beliefs, axis1=1, axis2=2)


class MessagePassingSolver(Solver):
    """Convex belief propagation: approximate marginals and MAP for any K and any sign.

    ``marginals`` runs sum-product (ε = 1) and ``map`` max-product (ε = 0, the argmax of the
    node max-beliefs) with the given counting numbers. With ``"bethe"`` numbers both are exact
    on chains and trees; on loopy graphs the marginals are the convex free energy's beliefs and
    the MAP an approximation (no guarantee, unlike graph cuts).

    Parameters
    ----------
    counting_numbers : {"bethe", "convex", "auto"} or (float, float), default="bethe"
        Counting numbers of the entropy approximation (Hazan & Urtasun 2010, Theorem 1);
        ``"auto"``: Bethe on forest samples, convex on loopy ones.
    max_sweeps : int, default=500
        Passes of Lemma 1 over all nodes.
    tol : float, default=1e-9
        A sample stops when none of its messages moves by more than ``tol`` (its messages are
        then kept while the rest of its batch runs on: a sample gets the same result in any
        batch).
    """

    name = "message_passing"
    capabilities = Capabilities(
        marginals=True,
        beliefs=True,
        marginal_map=True,
        map_quality="approximate on loopy graphs; exact on forests with Bethe numbers",
    )

    def __init__(self, counting_numbers="bethe", max_sweeps: int = 500, tol: float = 1e-9):
        _check_counting(counting_numbers)
        self.counting_numbers = counting_numbers
        self.max_sweeps = check_count(max_sweeps, "max_sweeps")
        self.tol = check_scalar(tol, "tol", Real, min_val=0.0)
        if not np.isfinite(self.tol):
            raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")

    def __repr__(self) -> str:
        return f"MessagePassingSolver(counting_numbers={self.counting_numbers!r})"

    def beliefs(self, potentials: Potentials, epsilon: float) -> BeliefPropagation:
        """A belief session: messages on ``potentials`` that stay between score changes.

        Parameters
        ----------
        potentials : Potentials
            The models (their graph is fixed for the session; ``set_scores`` changes scores).
        epsilon : float
            ε >= 0: 1 is sum-product, 0 max-product.

        Returns
        -------
        BeliefPropagation
            With ``set_scores``, ``sweep``, ``run``, ``objective``, ``node_beliefs`` and
            ``edge_beliefs`` (Hazan & Urtasun 2010, Theorem 1 and Lemma 1).
        """
        self._check(potentials)
        return BeliefPropagation(potentials, epsilon, self.counting_numbers)

    def marginal_map(
        self,
        potentials: Potentials,
        max_nodes: np.ndarray,
        start: np.ndarray,
        n_iter: int = 30,
        damping: float = 0.5,
        smoothing: float = 1.0,
    ) -> np.ndarray:
        """Approximate marginal MAP: the best labels of ``max_nodes``, the others summed out.

        Hybrid loopy message passing (Jiang et al. 2011; the MAX-TIGHTEN of Pletscher & Ong,
        §5.2): a max node max-marginalises its messages, every other node sum-marginalises
        them; the messages are damped and start from a smoothed labelling (``smoothing`` nats
        towards ``start``, e.g. the MAP, as the paper recommends); the beliefs are rounded to
        labels at the end.

        Parameters
        ----------
        potentials : Potentials
            The models.
        max_nodes : ndarray of shape (n_nodes,) of bool
            The nodes to maximise over.
        start : ndarray of shape (n_nodes,)
            The labelling the messages start from (e.g. the MAP).
        n_iter : int, default=30
            Synchronous, damped passes over all edges.
        damping : float, default=0.5
            Weight of the previous message.
        smoothing : float, default=1.0
            Initial message towards ``start``.

        Returns
        -------
        ndarray of shape (n_nodes,)
            The rounded beliefs (those of ``max_nodes`` are the answer).
        """
        self._check(potentials)
        k, edges = potentials.n_states, potentials.edges
        tables = potentials.edge_tables()
        first, second = edges[:, 0], edges[:, 1]
        at_first, at_second = potentials.edge_ends
        to_second = smoothing * (np.arange(k) == start[second][:, None])  # first → second
        to_first = smoothing * (np.arange(k) == start[first][:, None])  # second → first
        for _ in range(n_iter):
            belief = potentials.unary + at_second @ to_second + at_first @ to_first
            out_first = (belief[first] - to_first)[:, :, None] + tables  # (E, K_first, K_second)
            out_second = (belief[second] - to_second)[:, None, :] + tables
            new_second = np.where(
                max_nodes[first][:, None], out_first.max(axis=1), logsumexp(out_first, axis=1)
            )
            new_first = np.where(
                max_nodes[second][:, None], out_second.max(axis=2), logsumexp(out_second, axis=2)
            )
            new_second -= new_second.max(axis=1, keepdims=True)
            new_first -= new_first.max(axis=1, keepdims=True)
            to_second = damping * to_second + (1 - damping) * new_second
            to_first = damping * to_first + (1 - damping) * new_first
        belief = potentials.unary + at_second @ to_second + at_first @ to_first
        return belief.argmax(axis=1)

    def _propagate(self, potentials, clamp, epsilon):
        self._check(potentials, clamp)
        if clamp is not None:
            unary = finite_clamp_scores(potentials, clamp)
            potentials = replace(potentials, unary=unary)
        bp = self.beliefs(potentials, epsilon)
        bp.run(self.max_sweeps, self.tol)
        return bp

    def map(self, potentials: Potentials, clamp=None, n_jobs=None) -> np.ndarray:
        """Approximate MAP labelling: the argmax of the max-product node beliefs.

        Parameters
        ----------
        potentials : Potentials
            The models.
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        n_jobs : int or None
            Unused: the passes are vectorised over the whole batch.

        Returns
        -------
        ndarray of shape (n_nodes,)
            A label per node.
        """
        bp = self._propagate(potentials, clamp, 0.0)
        return bp.node_scores.argmax(axis=1) if bp.n_edges == 0 else _decode(bp)

    def marginals(self, potentials: Potentials, clamp=None) -> Marginals:
        """Sum-product beliefs and the Theorem-1 log-partition approximation.

        Parameters
        ----------
        potentials : Potentials
            The models.
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.

        Returns
        -------
        Marginals
            Node beliefs, pairwise beliefs in the potentials' kind, and ``g(λ)`` per sample
            (exact log-partition on trees with Bethe numbers).
        """
        bp = self._propagate(potentials, clamp, 1.0)
        edge = bp.edge_beliefs()
        node = bp.node_beliefs(edge)
        pairwise = pairwise_statistics(edge, potentials.pairwise_kind)
        return Marginals(Statistics(node, pairwise), bp.objective())


def _decode(bp: BeliefPropagation) -> np.ndarray:
    """Argmax of the node max-beliefs ``θ_v + Σ_α μ_{α→v}`` (max-marginals on trees)."""
    to_source = soft_max(bp.edge_tables + bp.target_messages[:, None, :], 0.0, axis=2)
    to_target = soft_max(bp.edge_tables + bp.source_messages[:, :, None], 0.0, axis=1)
    belief = bp.node_scores + bp._to_source @ to_source + bp._to_target @ to_target
    return belief.argmax(axis=1)
