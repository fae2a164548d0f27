"""Exact inference on a batch of chains: Viterbi, clamped maximisers, forward-backward, and
:class:`ChainSolver`, the solver of chain-shaped potentials built on them.

The max-product kernels take a padded batch: ``unary`` of shape (B, L, K) holds the node scores
of B chains of lengths ``lengths`` (B,), padded to the longest length L; ``transition`` (K, K) is
the score of ``(y_d, y_{d+1})`` shared by all edges. Entries beyond a chain's length are
ignored. The Python loops run over the L positions only; every step is vectorised over chains
and labels, so a mini-batch of words costs ~L numpy calls per pass. Viterbi and forward-backward
pack the nodes position by position instead (no padding), so that one loop over the positions
serves a whole corpus of chains in memory proportional to its nodes (:func:`viterbi`,
:func:`packed_forward_backward`).

Maximisers are traced from the max-product messages: the back-pointer of a node is recomputed
(a (B, K) argmax) only for the label actually traced, instead of storing (B, L, K) pointers.
"""

from __future__ import annotations

import numpy as np

from .._parallel import chunks_by_size
from .._utils import ranges
from .capabilities import Capabilities, GraphKind, PairwiseKind
from .k_best import list_viterbi
from .potentials import (
    ChainLayout,
    Potentials,
    Statistics,
    add_clamped_differences,
    clamp_scores,
)
from .solver import (
    ClampedSolution,
    ExactEvents,
    Marginals,
    Solver,
    check_count,
    solved_queries,
)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """Stable log-sum-exp that tolerates rows of ``-inf`` (returns ``-inf`` there)."""
    m = a.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _max_step(previous: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """``out[j, b] = max_i previous[i, b] + transition[i, j]`` (max-product message)."""
    return (previous[:, None, :] + transition[:, :, None]).max(axis=0)


def _logsumexp_step(previous: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """``out[j, b] = log Σ_i exp(previous[i, b] + transition[i, j])`` (sum-product message),
    shifted by the largest term of each sum: exact at any score range."""
    return _logsumexp(previous[:, None, :] + transition[:, :, None], axis=0)


def _node_positions(lengths: np.ndarray):
    """Of the nodes of consecutive chains: the chain of each, its position in that chain, and
    each chain's first node."""
    starts = np.cumsum(lengths) - lengths
    chain = np.repeat(np.arange(len(lengths)), lengths)
    return chain, np.arange(len(chain)) - starts[chain], starts


def _longest_first(lengths: np.ndarray, n_pos: int):
    """Chains sorted longest first: the ``order``, its ``inverse`` and ``reaching[d]``, the
    number of chains longer than d — a prefix of the sorted chains, so each position of a
    label-major (L, K, B) layout touches only the chains that reach it."""
    order = np.argsort(-lengths, kind="stable")
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    shorter = np.cumsum(np.bincount(lengths, minlength=n_pos)[:n_pos])  # chains of length <= d
    return order, inverse, len(lengths) - shorter


def _messages(unary, lengths, transition, step, backward=True):
    """Forward and backward messages in the (max, +) or (logsumexp, +) semiring
    (``step`` = :func:`_max_step` or :func:`_logsumexp_step`).

    ``alpha[b, d, k]`` is the best (or log-summed) score of the nodes ``0..d`` with ``y_d = k``;
    ``beta[b, d, k]`` that of the nodes after d given ``y_d = k`` (0 at and beyond the last
    node); both are 0 beyond a chain's length. The chains are processed longest first, so each
    position only touches the chains that reach it (no work on padding), in a label-major
    (L, K, B) layout whose per-position slices are contiguous.
    """
    order, inverse, reaching = _longest_first(lengths, unary.shape[1])
    # Label-major (L, K, B) layout: the slice of a position is contiguous.
    unary_t = np.ascontiguousarray(unary[order].transpose(1, 2, 0))
    alpha = np.zeros(unary_t.shape)
    alpha[0] = unary_t[0]
    for pos in range(1, unary.shape[1]):
        n = reaching[pos]
        alpha[pos, :, :n] = step(alpha[pos - 1, :, :n], transition) + unary_t[pos, :, :n]
    alpha = alpha.transpose(2, 0, 1)[inverse]
    if not backward:
        return alpha, None
    beta = np.zeros(unary_t.shape)
    outgoing = np.ascontiguousarray(transition.T)  # (K_next, K_d)
    for pos in range(unary.shape[1] - 2, -1, -1):
        n = reaching[pos + 1]
        beta[pos, :, :n] = step(unary_t[pos + 1, :, :n] + beta[pos + 1, :, :n], outgoing)
    return alpha, beta.transpose(2, 0, 1)[inverse]


def viterbi(unary: np.ndarray, lengths: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """MAP labelling of every chain of a batch of consecutive chains.

    The chains are sorted longest first and their nodes packed position by position in a
    label-major (K, n_nodes) array: the nodes of position d are a contiguous block of columns
    whose first ones continue the block of d − 1 (the chains that reach d are a prefix of the
    sorted chains), as in :func:`packed_forward_backward`. The forward pass and the trace-back
    touch at each position only the chains that reach it, and the messages take K × n_nodes
    floats whatever the spread of the lengths (no padding to the longest chain).

    Parameters
    ----------
    unary : ndarray of shape (n_nodes, K)
        Node scores of the chains one after the other (``-inf`` forbids a label, which is how
        nodes are clamped).
    lengths : ndarray of shape (B,)
        Number of nodes of each chain (>= 1).
    transition : ndarray of shape (K, K)
        Pairwise score of consecutive labels.

    Returns
    -------
    labels : ndarray of shape (n_nodes,)
        ``argmax_y f(y)`` of each chain, node by node.
    """
    n_pos = int(lengths.max())
    _, inverse, reaching = _longest_first(lengths, n_pos)
    offsets = np.concatenate([[0], np.cumsum(reaching)])
    chain, position, starts = _node_positions(lengths)
    columns = offsets.take(position) + inverse[chain]  # node → packed column
    offsets, reaching = offsets.tolist(), reaching.tolist()
    alpha = np.empty((unary.shape[1], len(unary)))
    alpha[:, columns] = unary.T
    for pos in range(1, n_pos):  # alpha_d = u_d + max_i (alpha_{d-1}(i) + T(i, .))
        start, n = offsets[pos], reaching[pos]
        before = offsets[pos - 1]
        alpha[:, start : start + n] += _max_step(alpha[:, before : before + n], transition)
    # Trace back: each chain's last node takes its best label, and every other node the best
    # predecessor ``argmax_k alpha[pos, k] + T[k, y_{pos+1}]`` of its next node's label.
    labels = np.empty(len(unary), dtype=np.intp)
    last = columns[(starts + lengths - 1)[lengths > 0]]
    labels[last] = alpha[:, last].argmax(axis=0)
    for pos in range(n_pos - 2, -1, -1):
        start, inner, following = offsets[pos], reaching[pos + 1], offsets[pos + 1]
        scores = alpha[:, start : start + inner] + transition.take(
            labels[following : following + inner], 1
        )
        labels[start : start + inner] = scores.argmax(axis=0)
    return labels[columns]


def clamped_maximizers(alpha, beta, unary, lengths, transition, map_labels, chains, nodes, labels):
    """Single-node clamped MAP labellings traced from the max-product messages of
    :func:`max_product_messages` (no Viterbi per clamp).

    The maximiser with node d clamped to k is traced left of d through the best predecessors
    under the forward messages and right of d through the best successors under the backward
    messages (Shpakova et al. 2018, §4: all clamped maximisers of a chain from one pass). A
    predecessor (successor) depends only on the current label, so once a trace meets the MAP
    labelling it follows it: each trace stops there, and the loop runs as many steps as the
    longest stretch where a clamped maximiser differs from the MAP, not the chain length.

    Parameters
    ----------
    alpha, beta : ndarray of shape (B, L, K)
        Forward and backward max-product messages.
    unary, lengths, transition :
        As in :func:`viterbi`.
    map_labels : ndarray of shape (B, L)
        The MAP labelling of each chain.
    chains, nodes, labels : ndarray of shape (Q,)
        Query q clamps node ``nodes[q]`` of chain ``chains[q]`` to ``labels[q]``.

    Returns
    -------
    clamped : ndarray of shape (Q, L)
        ``argmax_{y: y_d = k} f(y)`` of each query's chain (columns beyond its length unused).
    """
    clamped = map_labels[chains]
    clamped[np.arange(len(chains)), nodes] = labels
    differs = labels != map_labels[chains, nodes]
    incoming = np.ascontiguousarray(transition.T)  # row j: scores of (k -> j)
    for step in (-1, 1):
        position = nodes.copy()
        end = 0 if step < 0 else lengths[chains] - 1
        active = np.flatnonzero(differs & (position != end))
        while len(active):
            at, chain = position[active], chains[active]
            current = clamped[active, at]
            if step < 0:  # best predecessor: argmax_k alpha[d-1, k] + T[k, y_d]
                scores = alpha[chain, at - 1] + incoming[current]
            else:  # best successor: argmax_k T[y_d, k] + u[d+1, k] + beta[d+1, k]
                scores = transition[current] + unary[chain, at + 1] + beta[chain, at + 1]
            chosen = scores.argmax(axis=1)
            at = at + step
            clamped[active, at] = chosen
            position[active] = at
            ended = at == (0 if step < 0 else end[active])
            active = active[~(ended | (chosen == map_labels[chain, at]))]
    return clamped


def max_product_messages(unary, lengths, transition):
    """Forward and backward max-product messages ``(alpha, beta)``, each (B, L, K); the MAP
    labelling is ``(alpha + beta).argmax(-1)`` (the maximiser is unique almost surely under
    continuous perturbations)."""
    return _messages(unary, lengths, transition, _max_step)


#: Largest score range (nats) within one step for which the scaled forward-backward is used.
_SCALED_MAX_SPREAD = 600.0
#: Node scores (nodes × labels) of one group of :func:`packed_forward_backward`: its five
#: packed arrays take 8 bytes × this each, 2 MB, which stay in the caches between the steps of
#: a group (a fifth faster than groups eight times larger on the tagging corpora).
PACKED_ENTRIES = 2**18


def _packed_layout(lengths: np.ndarray):
    """The packed position-major layout of chains given longest first: ``reaching[d]`` (the
    chains that reach position d), the first row ``offsets[d]`` of each position's block, and
    ``rows``, the packed row of each node of the chains one after the other (node d of chain b
    is row ``offsets[d] + b``)."""
    reaching = _longest_first(lengths, lengths[0])[2]
    offsets = np.concatenate([[0], np.cumsum(reaching)])
    chain, position, _ = _node_positions(lengths)
    return reaching, offsets, offsets[position] + chain


def packed_forward_backward(
    unary: np.ndarray,
    lengths: np.ndarray,
    transition: np.ndarray,
    chain_weight=None,
    packed: bool = False,
):
    """Log-partition, node marginals and summed edge marginals of chains given longest first,
    by the scaled forward-backward of HMMs in a packed position-major layout.

    The recursion runs in the exp domain with one normaliser per position (one exponential
    per score instead of one per message entry and step): with ``U_d = exp(u_d − max u_d)``
    and ``E = exp(T − max T)``, ``a_d ∝ (a_{d-1} E) ∘ U_d`` normalised by ``c_d`` (so
    ``a_d = P(y_d | nodes 0..d)``), ``b_{d-1} = E (U_d ∘ b_d) / c_d``, node marginals
    ``a_d ∘ b_d``, summed pair marginals ``E ∘ Σ_d a_{d-1}ᵀ (U_d ∘ b_d / c_d)`` and ``log Z
    = Σ_d (log c_d + max u_d) + (D − 1) max T`` (Rabiner 1989, §V.A). Every entry is at least
    ``exp(−spread) / K²`` of the largest one, with spread the range of a node's finite scores
    plus the range of T: the caller sends chains with a spread over ~600 nats, which could
    underflow, to :func:`log_forward_backward`.

    Row ``offsets[d] + b`` of the packed arrays is node d of chain b (:func:`_packed_layout`);
    the chains that reach d are a prefix of the sorted chains, so the nodes of position d are
    a contiguous block whose first rows continue the block of d − 1, and each step is one
    matrix product over every chain of the group (the Python loop runs over the positions
    once per group). The exponentials are taken once, in place; each step writes into the
    packed arrays (no temporary the size of a block) and the pair marginals are summed in
    the backward loop, from the blocks it has at hand.

    Parameters
    ----------
    unary : ndarray of shape (n_nodes, K)
        Node scores, chains one after the other (``-inf``: a label clamped out); with
        ``packed``, in the packed layout instead.
    lengths : ndarray of shape (B,)
        Chain lengths, non-increasing.
    transition : ndarray of shape (K, K)
    chain_weight : ndarray of shape (B,), optional
        A weight per chain for the summed transition marginals (1 when None).
    packed : bool, default=False
        Whether ``unary`` is in the packed layout, and the node marginals are wanted in it
        (the solver gathers its nodes into it once, and scatters the marginals back once).

    Returns
    -------
    log_z : ndarray of shape (B,)
        ``A(x) = log sum_y exp f(y)``.
    node_marginals : ndarray of shape (n_nodes, K)
        ``P(y_d = k)``, in the order of ``unary``.
    transition_marginals : ndarray of shape (K, K)
        ``sum_d P(y_d = i, y_{d+1} = j)`` summed over the chains (each times its
        ``chain_weight``): the expected transition counts.
    """
    reaching, offsets, rows = _packed_layout(lengths)
    if packed:
        potentials = np.array(unary, dtype=float)
    else:
        potentials = np.empty_like(unary, dtype=float)
        potentials[rows] = unary
    n_nodes, n_states = potentials.shape
    shift = potentials.max(axis=1)
    with np.errstate(invalid="ignore"):  # -inf - finite: a clamped-out label, exp → 0
        potentials -= shift[:, None]
    np.exp(potentials, out=potentials)  # U_d
    top = transition.max()
    matrix = np.exp(transition - top)  # E(i, j)
    ones = np.ones(n_states)
    alpha = np.empty_like(potentials)
    norm = np.empty(n_nodes)
    first = slice(0, reaching[0])
    np.matmul(potentials[first], ones, out=norm[first])
    np.divide(potentials[first], norm[first, None], out=alpha[first])
    for d in range(1, len(reaching)):  # a_d ∝ (a_{d-1} E) ∘ U_d
        here = slice(offsets[d], offsets[d + 1])
        before = slice(offsets[d - 1], offsets[d - 1] + reaching[d])  # the same chains at d − 1
        message = np.matmul(alpha[before], matrix, out=alpha[here])
        message *= potentials[here]
        np.matmul(message, ones, out=norm[here])  # the row sums, by one product
        message /= norm[here, None]
    potentials /= norm[:, None]  # U_d / c_d, then U_d ∘ b_d / c_d: the evidence from d on
    beta = np.empty_like(potentials)
    beta[offsets[lengths - 1] + np.arange(len(lengths))] = 1.0  # each chain's last node
    backward = matrix.T
    pair = np.zeros((n_states, n_states))
    for d in range(len(reaching) - 1, 0, -1):
        here = slice(offsets[d], offsets[d + 1])
        before = slice(offsets[d - 1], offsets[d - 1] + reaching[d])
        evidence = potentials[here]
        evidence *= beta[here]
        np.matmul(evidence, backward, out=beta[before])
        start = alpha[before]  # (chain b of the block is row b: chains longest first)
        if chain_weight is not None:  # each edge's term times its chain's weight
            start = start * chain_weight[: reaching[d], None]
        pair += start.T @ evidence  # Σ a_{d-1}(i) evidence_d(j), E(i, j) below
    pair *= matrix
    chain = np.arange(n_nodes) - np.repeat(offsets[:-1], reaching)
    log_z = np.bincount(chain, np.log(norm) + shift, minlength=len(lengths))
    log_z += (lengths - 1) * top
    alpha *= beta
    return log_z, alpha if packed else alpha[rows], pair


def log_forward_backward(unary, lengths, transition):
    """Log-partition, node marginals and edge marginals of a padded batch of chains with
    log-domain messages: exact at any score range (for chains whose scores spread too wide
    for :func:`packed_forward_backward`, so written for robustness rather than speed).

    Returns
    -------
    log_z : ndarray of shape (B,)
    node_marginals : ndarray of shape (B, L, K)
        ``P(y_d = k)``; zero on padded positions.
    transition_marginals : ndarray of shape (B, K, K)
        The expected transition counts of each chain.
    """
    n_chains, n_pos, _ = unary.shape
    alpha, beta = _messages(unary, lengths, transition, _logsumexp_step)
    rows = np.arange(n_chains)
    log_z = _logsumexp(alpha[rows, lengths - 1], axis=1)
    mask = np.arange(n_pos)[None, :] < lengths[:, None]
    # Every exponent below is a log-probability (<= 0) on the chains' positions; padded
    # positions are masked out.
    with np.errstate(over="ignore", invalid="ignore"):
        node = np.where(mask[:, :, None], np.exp(alpha + beta - log_z[:, None, None]), 0.0)
        log_pair = _log_pair_marginals(alpha, beta, unary, transition, log_z)
        pair = np.where(mask[:, 1:, None, None], np.exp(log_pair), 0.0).sum(axis=1)
    return log_z, node, pair


def _log_pair_marginals(alpha, beta, unary, transition, log_z):
    """``log P(y_d = i, y_{d+1} = j) = alpha_d(i) + T(i, j) + u_{d+1}(j) + beta_{d+1}(j) − A``
    of a padded batch from its log-domain messages, shape (B, L − 1, K, K) (meaningless
    beyond each chain's last edge)."""
    return (
        alpha[:, :-1, :, None]
        + transition
        + (unary[:, 1:] + beta[:, 1:])[:, :, None, :]
        - log_z[:, None, None, None]
    )


def forward_filtering_backward_sampling(unary, lengths, transition, n_draws, rng, alpha=None):
    """Exact joint draws from chain CRFs: forward filtering, backward sampling (Carter & Kohn
    1994; the sampling counterpart of forward-backward).

    The log-domain forward messages give ``P(y_{L-1})`` at the last node and, backwards,
    ``P(y_d | y_{d+1}) ∝ exp(alpha_d(y_d) + T(y_d, y_{d+1}))``; each draw is a Gumbel-max over
    those log-probabilities, all chains and draws of a position at once.

    Parameters
    ----------
    unary : ndarray of shape (B, L, K)
        Padded node scores (``-inf`` for a label a node may not take).
    lengths : ndarray of shape (B,)
    transition : ndarray of shape (K, K)
    n_draws : int
    rng : numpy.random.Generator
    alpha : ndarray of shape (B, L, K), optional
        The log-domain forward messages, when the caller has them already.

    Returns
    -------
    ndarray of shape (n_draws, B, L)
        The labels of each draw; 0 beyond a chain's length.
    """
    n_chains, n_pos, n_states = unary.shape
    if alpha is None:
        alpha, _ = _messages(unary, lengths, transition, _logsumexp_step, backward=False)
    labels = np.zeros((n_draws, n_chains, n_pos), dtype=np.intp)
    for pos in range(n_pos - 1, -1, -1):
        last = lengths - 1 == pos  # chains whose last node is here
        inner = lengths - 1 > pos
        if not (last.any() or inner.any()):
            continue
        logits = np.broadcast_to(alpha[:, pos], (n_draws, n_chains, n_states)).copy()
        # P(y_d | y_{d+1}) ∝ exp(alpha_d(y_d) + T(y_d, y_{d+1})) on the chains that go on
        if inner.any():
            logits[:, inner] += transition.T[labels[:, inner, pos + 1]]
        logits[:, ~(last | inner)] = 0.0  # chains shorter than pos + 1: ignored
        labels[:, :, pos] = (logits + rng.gumbel(size=logits.shape)).argmax(axis=2)
    labels[:, np.arange(n_pos)[None, :] >= lengths[:, None]] = 0
    return labels


def span_log_probabilities(unary, lengths, transition, labels, spans, before, after):
    """Exact log-probabilities that chains take given labels on spans, with the labels just
    before and after each span outside given sets (constrained forward-backward).

    ``log P = log Σ_{k ∉ before} exp(alpha_{s-1}(k) + T(k, l_s)) + score of l_s..l_{e-1}
    + log Σ_{k ∉ after} exp(T(l_{e-1}, k) + u_e(k) + beta_e(k)) − log Z``, the first term
    ``u_s(l_s)`` alone at a chain's start and the last term 0 at its end.

    Parameters
    ----------
    unary : ndarray of shape (B, L, K)
        Padded node scores.
    lengths : ndarray of shape (B,)
    transition : ndarray of shape (K, K)
    labels : ndarray of shape (B, L)
        The labels the spans must take (read on the spans only).
    spans : ndarray of shape (S, 3)
        ``(chain, start, end)`` of each span, ``end`` one past its last node.
    before, after : ndarray of shape (S, K) of bool
        The labels forbidden just before and just after each span.

    Returns
    -------
    ndarray of shape (S,)
    """
    alpha, beta = _messages(unary, lengths, transition, _logsumexp_step)
    rows = np.arange(len(lengths))
    log_z = _logsumexp(alpha[rows, lengths - 1], axis=1)
    chain, start, end = spans.T
    # the labelling's score along each chain: u_0(l_0), then T(l_{d-1}, l_d) + u_d(l_d)
    increments = np.take_along_axis(unary, labels[:, :, None], axis=2)[:, :, 0]
    increments[:, 1:] += transition[labels[:, :-1], labels[:, 1:]]
    path = np.cumsum(increments, axis=1)
    first = labels[chain, start]
    inside = path[chain, end - 1] - path[chain, start] + unary[chain, start, first]
    with np.errstate(divide="ignore", invalid="ignore"):
        opening = alpha[chain, np.maximum(start - 1, 0)] + transition[:, first].T
        opening = np.where(start > 0, _logsumexp(np.where(before, -np.inf, opening), 1), 0.0)
        inner = end < lengths[chain]
        following = np.minimum(end, unary.shape[1] - 1)
        closing = (
            transition[labels[chain, end - 1]] + unary[chain, following] + beta[chain, following]
        )
        closing = np.where(inner, _logsumexp(np.where(after, -np.inf, closing), 1), 0.0)
    return opening + inside + closing - log_z[chain]


class ChainSolver(ExactEvents, Solver):
    """Exact inference on chains with a shared transition table (any number of labels).

    MAP by Viterbi; all single-node clamped maximisers from one forward and one backward
    max-product pass (traced in bounded chunks); marginals and ``log Z`` by forward-backward.
    Potentials must be chain-shaped: the edges of each sample join its consecutive nodes
    ``(d, d + 1)``, in order, with one ``"shared"`` (K, K) table.
    """

    name = "viterbi"
    capabilities = Capabilities(
        pairwise=frozenset({PairwiseKind.SHARED}),
        graphs=GraphKind.CHAIN,
        marginals=True,
        constraints=True,
        infinite_scores=True,
        k_best=True,
    )

    def _check(self, potentials: Potentials, clamp=None) -> None:
        super()._check(potentials, clamp)
        p = potentials
        if p.pairwise_kind is not PairwiseKind.SHARED:
            raise ValueError(
                f"the viterbi solver needs one shared (K, K) transition table, got "
                f"{p.pairwise_kind!r} pairwise scores"
            )
        if isinstance(p.layout, ChainLayout):
            return
        last = p.node_offsets[1:][np.diff(p.node_offsets) > 0] - 1  # of non-empty chains
        first = np.delete(np.arange(p.n_nodes), last)
        if p.n_edges != len(first) or not (
            np.array_equal(p.edges[:, 0], first) and np.array_equal(p.edges[:, 1], first + 1)
        ):
            raise ValueError(
                "the viterbi solver needs chain-shaped potentials (each sample's edges join its "
                "consecutive nodes, in order); use a graph solver for other graphs"
            )

    def _scores(self, potentials: Potentials, clamp=None):
        """The node scores (``-inf`` for the labels a clamped node may not take and those the
        model's :class:`TransitionConstraints` forbid at a chain's ends) and the transition
        table (``-inf`` at the forbidden transitions)."""
        unary, transition = potentials.unary, potentials.pairwise
        if clamp is not None:
            unary = clamp_scores(unary, clamp)
        constraints = getattr(potentials.layout, "constraints", None)
        if constraints is not None:
            unary = constraints.node_scores(unary, potentials.node_offsets)
            transition = constraints.transition_scores(transition)
        return unary, transition

    def _padded(self, potentials: Potentials, clamp=None):
        """:meth:`_scores` with the node scores as a padded (B, L, K) array, and each node's
        position in its chain."""
        unary, transition = self._scores(potentials, clamp)
        return (*pad(unary, potentials.lengths), transition)

    @staticmethod
    def _check_feasible(log_z, samples=None) -> None:
        """Raise if a chain has no labelling of positive probability (``log_z = -inf``: its
        constraints and clamps leave none); ``samples``: the chains of ``log_z`` (all by
        default)."""
        infeasible = np.flatnonzero(~(log_z > -np.inf))
        if len(infeasible):
            first = infeasible[0] if samples is None else samples[infeasible[0]]
            raise ValueError(
                f"sample {int(first)}: no labelling obeys the model's transition constraints "
                "and the labels it is clamped to"
            )

    def map(self, potentials, clamp=None, n_jobs=None):
        self._check(potentials, clamp)
        if potentials.n_nodes == 0:
            return np.zeros(0, dtype=np.intp)
        unary, transition = self._scores(potentials, clamp)
        labels = viterbi(unary, potentials.lengths, transition)
        self._check_allowed(potentials, clamp, unary, labels)
        return labels

    def perturbed_rounds(self, potentials, perturbations, clamp=None):
        """The labellings of :meth:`map` of every round's perturbed model, from one Viterbi
        pass over the rounds' chains stacked as one batch: one loop over the positions for
        all the rounds, which is what a round of a few short chains costs.

        Parameters
        ----------
        potentials : Potentials
            Chain models (a shared K×K transition table).
        perturbations : ndarray of shape (R, n_nodes, K)
            Each round's addition to the unary scores (finite).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.

        Returns
        -------
        labels : ndarray of shape (R, n_nodes)
        """
        self._check(potentials, clamp)
        n_rounds = len(perturbations)
        if potentials.n_nodes == 0:
            return np.zeros((n_rounds, 0), dtype=np.intp)
        unary, transition = self._scores(potentials, clamp)  # -inf stays -inf when perturbed
        stacked = (unary + perturbations).reshape(-1, unary.shape[1])
        labels = viterbi(stacked, np.tile(potentials.lengths, n_rounds), transition)
        labels = labels.reshape(n_rounds, -1)
        # a finite perturbation changes no chain's allowed labellings: the first round tells
        self._check_allowed(potentials, clamp, unary, labels[0])
        return labels

    def _check_allowed(self, potentials, clamp, unary, labels) -> None:
        """Raise if the Viterbi labelling of a chain breaks its constraints or clamps: Viterbi
        keeps to the allowed labellings where there is one, so that chain has none."""
        constraints = getattr(potentials.layout, "constraints", None)
        if constraints is not None and (clamp is not None or not constraints.every_length):
            scores = unary[np.arange(len(labels)), labels]
            broken = ~np.isfinite(scores) | ~constraints.allows(labels, potentials.node_offsets)
            if broken.any():  # the first chain with a broken label has no allowed labelling
                self._check_feasible(np.array([-np.inf]), potentials.node_sample[broken])

    _incremental_sets = True

    def _incremental_clamped_maps(
        self, potentials, nodes, labels, weights, skip, n_jobs, sets=None
    ):
        """All clamped maximisers from one max-product pass, traced in bounded chunks; a
        set-valued clamp takes the label of its set whose max-marginal is largest (the best
        labelling with the node in the set has the node at that label)."""
        p = potentials
        padded, position, transition = self._padded(p)
        alpha, beta = max_product_messages(padded, p.lengths, transition)
        max_marginals = alpha + beta
        map_padded = max_marginals.argmax(axis=2)
        map_labels = map_padded[p.node_sample, position]
        if sets is not None:
            at = max_marginals[p.node_sample[nodes], position[nodes]]
            labels = np.where(sets[labels], at, -np.inf).argmax(axis=1)
        solved = solved_queries(map_labels, nodes, labels, skip)
        nodes, labels, weights = nodes[solved], labels[solved], weights[solved]
        chains = p.node_sample[nodes]
        statistics = Statistics.zeros(p)
        # Each traced labelling spans the padded length: chunk the queries on that size.
        for chunk in chunks_by_size(np.full(len(chains), padded.shape[1])):
            clamped = clamped_maximizers(
                alpha,
                beta,
                padded,
                p.lengths,
                transition,
                map_padded,
                chains[chunk],
                position[nodes[chunk]],
                labels[chunk],
            )
            valid = np.arange(padded.shape[1]) < p.lengths[chains[chunk]][:, None]
            add_clamped_differences(
                statistics, p, map_labels, chains[chunk], clamped[valid], weights[chunk]
            )
        return ClampedSolution(map_labels, solved, statistics)

    def k_best(self, potentials, k, clamp=None):
        """The ``k`` most probable labellings of every chain by list Viterbi
        (:func:`~pmap_sklearn._backend.k_best.list_viterbi`), with their log-probabilities
        ``f(y) − log Z`` (forward-backward).

        Parameters
        ----------
        potentials : Potentials
        k : int
            Labellings per chain (>= 1).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label: the labellings keep it and their
            probabilities are conditional on it.

        Returns
        -------
        labels : ndarray of shape (k, n_nodes)
            Row r: the labelling of rank r of every chain (the MAP first).
        log_probabilities : ndarray of shape (n_samples, k)
            Non-increasing along a row; ``-inf`` where a chain has fewer than r + 1 labellings
            its constraints and clamps allow (a chain without nodes has one, the empty one).
        """
        self._check(potentials, clamp)
        k = check_count(k, "k")
        p = potentials
        labels = np.zeros((k, p.n_nodes), dtype=np.intp)
        log_p = np.full((p.n_samples, k), -np.inf)
        log_p[:, 0] = 0.0  # chains without nodes: the empty labelling
        filled = np.flatnonzero(p.lengths > 0)
        if len(filled):
            unary, transition = self._scores(p, clamp)
            labels, scores = list_viterbi(unary, p.lengths[filled], transition, k)
            chains = p if len(filled) == p.n_samples else p.take(filled)  # same nodes
            with np.errstate(invalid="ignore", divide="ignore"):
                log_z = self._forward_backward(chains, clamp).log_partition
            self._check_feasible(log_z, filled)
            log_p[filled] = scores - log_z[:, None]
        return labels, log_p

    def marginals(self, potentials, clamp=None, chunk=256):
        """Exact marginals and log-partition of every chain by forward-backward.

        Parameters
        ----------
        potentials : Potentials
            Chain models (a shared K×K transition table).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.
        chunk : int, default=256
            Chains processed at a time by the log-domain recursion (chains whose scores
            spread too wide for the scaled one; the others go through
            :func:`packed_forward_backward` in groups of :data:`PACKED_ENTRIES` scores).

        Returns
        -------
        Marginals
            Node marginals, the expected transition counts summed over the batch, and the
            log-partition of every chain.
        """
        marginals = self._forward_backward(potentials, clamp, chunk)
        self._check_feasible(marginals.log_partition)
        return marginals

    def log_partition(self, potentials, clamp=None) -> np.ndarray:
        """``log Z`` of every chain (``-inf`` where the constraints and the clamp leave no
        labelling: an impossible event).

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._forward_backward(potentials, clamp).log_partition

    def edge_marginals(self, potentials, clamp=None, chunk=256) -> np.ndarray:
        """Exact pairwise marginals of every edge, ``P(y_d = a, y_{d+1} = b)``, by log-domain
        forward-backward: ``alpha_d(a) + T(a, b) + u_{d+1}(b) + beta_{d+1}(b) - log Z``.

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label: the marginals are conditional on it.
        chunk : int, default=256
            Chains processed at a time.

        Returns
        -------
        ndarray of shape (n_edges, K, K)
            Summed over ``b`` (``a``) they are the node marginals of the edge's first
            (second) node.
        """
        self._check(potentials, clamp)
        p = potentials
        out = np.zeros((p.n_edges, p.n_states, p.n_states))
        unary, transition = self._scores(p, clamp)
        for begin in range(0, p.n_samples, chunk):
            chains = np.arange(begin, min(begin + chunk, p.n_samples))
            chains = chains[p.lengths[chains] > 1]
            if not len(chains):
                continue
            lengths = p.lengths[chains]
            padded, _ = pad(unary[ranges(p.node_offsets, chains)], lengths)
            alpha, beta = _messages(padded, lengths, transition, _logsumexp_step)
            log_z = _logsumexp(alpha[np.arange(len(chains)), lengths - 1], axis=1)
            self._check_feasible(log_z, chains)
            with np.errstate(invalid="ignore"):  # -inf - -inf on padding: masked below
                log_pair = _log_pair_marginals(alpha, beta, padded, transition, log_z)
            inside = np.arange(padded.shape[1] - 1) < (lengths - 1)[:, None]
            out[ranges(p.edge_offsets, chains)] = np.exp(log_pair[inside])
        return out

    def weighted_marginals(self, potentials, sample_weight, clamp=None, chunk=256) -> Marginals:
        """:meth:`marginals` with the expected statistics of each chain weighted by its
        ``sample_weight`` (node marginals times their chain's weight, the expected transition
        counts summed with the chains' weights), in the same passes; the log-partitions stay
        per chain, unweighted.

        Parameters
        ----------
        potentials : Potentials
        sample_weight : ndarray of shape (n_samples,)
        clamp : ndarray of shape (n_nodes,), optional
        chunk : int, default=256

        Returns
        -------
        Marginals
        """
        marginals = self._forward_backward(potentials, clamp, chunk, sample_weight)
        self._check_feasible(marginals.log_partition)
        return marginals

    def _forward_backward(self, potentials, clamp=None, chunk=256, sample_weight=None):
        """:meth:`marginals` without the check that every chain has a labelling (with
        ``sample_weight``, that of :meth:`weighted_marginals`)."""
        self._check(potentials, clamp)
        p = potentials
        unary, transition = self._scores(p, clamp)
        node = np.empty_like(unary)
        pair = np.zeros((p.n_states, p.n_states))

        def weight_of(chains):
            return None if sample_weight is None else np.asarray(sample_weight, float)[chains]

        log_z = np.empty(p.n_samples)
        # Chains whose scores spread too wide for the scaled recursion take the log domain
        # (the spread of the unclamped scores bounds that of the labels a clamp leaves; a
        # forbidden transition is a zero of the scaled recursion, not a score to span).
        allowed = np.isfinite(transition)
        pair_spread = np.ptp(p.pairwise[allowed])
        low = p.unary.min(initial=np.inf)
        if low == -np.inf:  # (-inf: a label of probability zero, not a score to span)
            low = p.unary.min(initial=np.inf, where=p.unary > -np.inf)
        with np.errstate(invalid="ignore"):  # the range of every score bounds each node's
            overall = p.unary.max(initial=-np.inf) - low
        if overall + pair_spread < _SCALED_MAX_SPREAD:
            wide_chain = np.zeros(p.n_samples, dtype=bool)
        else:
            with np.errstate(invalid="ignore"):  # (label-major: the ranges of rows are 3× faster)
                columns = np.ascontiguousarray(p.unary.T)
                low = np.where(columns > -np.inf, columns, np.inf).min(axis=0)
                spread = columns.max(axis=0) - low + pair_spread
            wide = ~(spread < _SCALED_MAX_SPREAD)
            wide_chain = np.bincount(p.node_sample, wide, minlength=p.n_samples) > 0
        # The others longest first, in groups of at most PACKED_ENTRIES node scores.
        order = np.argsort(-p.lengths, kind="stable")
        order = order[~wide_chain[order]]
        sizes = p.lengths[order] * p.n_states
        for group in chunks_by_size(sizes, PACKED_ENTRIES):
            chains = order[group]
            lengths = p.lengths[chains]
            nodes = np.empty(lengths.sum(), dtype=np.intp)  # packed row → node
            nodes[_packed_layout(lengths)[2]] = ranges(p.node_offsets, chains)
            log_z[chains], node[nodes], group_pair = packed_forward_backward(
                unary[nodes], lengths, transition, weight_of(chains), packed=True
            )
            pair += group_pair
        wide_chains = np.flatnonzero(wide_chain)
        for begin in range(0, len(wide_chains), chunk):
            chains = wide_chains[begin : begin + chunk]
            nodes = ranges(p.node_offsets, chains)
            lengths = p.lengths[chains]
            padded, position = pad(unary[nodes], lengths)
            log_z[chains], node_padded, chain_pair = log_forward_backward(
                padded, lengths, transition
            )
            node[nodes] = node_padded[np.repeat(np.arange(len(chains)), lengths), position]
            weights = weight_of(chains)
            pair += (
                chain_pair.sum(axis=0) if weights is None else np.tensordot(weights, chain_pair, 1)
            )
        if sample_weight is not None:
            node *= np.asarray(sample_weight, dtype=float)[p.node_sample, None]
        return Marginals(Statistics(node, pair), log_z)

    def sample(self, potentials, n_draws, rng, clamp=None) -> np.ndarray:
        """Exact joint draws from every chain's distribution by forward filtering, backward
        sampling (:func:`forward_filtering_backward_sampling`).

        Parameters
        ----------
        potentials : Potentials
        n_draws : int
        rng : numpy.random.Generator
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label: the draws are conditional on it.

        Returns
        -------
        ndarray of shape (n_draws, n_nodes)
        """
        self._check(potentials, clamp)
        p = potentials
        if p.n_nodes == 0:
            return np.zeros((n_draws, 0), dtype=np.intp)
        padded, position, transition = self._padded(p, clamp)
        alpha, _ = _messages(padded, p.lengths, transition, _logsumexp_step, backward=False)
        if np.isneginf(padded).any():  # clamps or constraints: every chain must keep a labelling
            self._check_feasible(_logsumexp(alpha[np.arange(p.n_samples), p.lengths - 1], 1))
        labels = forward_filtering_backward_sampling(
            padded, p.lengths, transition, n_draws, rng, alpha=alpha
        )
        return labels[:, p.node_sample, position]

    def span_log_probabilities(self, potentials, labels, spans, before, after) -> np.ndarray:
        """Exact log-probabilities that chains take the given labels on spans, with the labels
        just before and after each span outside given sets
        (:func:`span_log_probabilities`, on the padded batch).

        Parameters
        ----------
        potentials : Potentials
        labels : ndarray of shape (n_nodes,)
            The labels the spans must take (read on the spans only).
        spans : ndarray of shape (S, 3)
            ``(sample, start, end)`` of each span, positions in its sample, ``end`` one past
            its last node.
        before, after : ndarray of shape (S, K) of bool
            The labels forbidden just before and just after each span.

        Returns
        -------
        ndarray of shape (S,)
        """
        self._check(potentials)
        padded, position, transition = self._padded(potentials)
        padded_labels = np.zeros(padded.shape[:2], dtype=np.intp)
        padded_labels[potentials.node_sample, position] = labels
        return span_log_probabilities(
            padded, potentials.lengths, transition, padded_labels, spans, before, after
        )


def pad(node_values: np.ndarray, lengths: np.ndarray, fill: float = 0.0):
    """Values of consecutive chains (n_nodes, ...) as a padded (B, L, ...) array, and the
    position of each node in its chain."""
    chain, position, _ = _node_positions(lengths)
    out = np.full((len(lengths), lengths.max()) + node_values.shape[1:], fill)
    out[chain, position] = node_values
    return out, position
