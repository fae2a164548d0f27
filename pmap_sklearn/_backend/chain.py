"""Exact inference on a batch of chains (Viterbi, forward-backward, max-marginals).

All functions take a padded batch: ``unary`` of shape (B, L, K) holds the node scores of B
chains of lengths ``lengths`` (B,), padded to the longest length L; ``transition`` (K, K) is the
score of ``(y_d, y_{d+1})`` shared by all edges (SPEC §1, chain). Entries beyond a chain's
length are ignored. The Python loops run over the L positions only; every step is vectorised
over chains and labels, so a mini-batch of words costs ~L numpy calls.
"""

from __future__ import annotations

import numpy as np


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """Stable log-sum-exp that tolerates rows of ``-inf`` (returns ``-inf`` there)."""
    m = a.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _active(lengths: np.ndarray, position: int) -> np.ndarray:
    """Mask (B, 1) of chains that still have a node at ``position``."""
    return (position < lengths)[:, None]


def viterbi(unary: np.ndarray, lengths: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """MAP labelling of every chain of the batch.

    Parameters
    ----------
    unary : ndarray of shape (B, L, K)
        Node scores (``-inf`` forbids a label, which is how nodes are clamped).
    lengths : ndarray of shape (B,)
        Number of nodes of each chain (>= 1).
    transition : ndarray of shape (K, K)
        Pairwise score of consecutive labels.

    Returns
    -------
    labels : ndarray of shape (B, L)
        ``argmax_y f(y)`` for each chain; padded positions repeat the last label.
    """
    n_chains, n_pos, n_states = unary.shape
    rows = np.arange(n_chains)
    identity = np.arange(n_states)
    delta = unary[:, 0].copy()
    pointers = np.empty((n_chains, n_pos, n_states), dtype=np.intp)
    pointers[:, 0] = identity
    incoming = np.ascontiguousarray(transition.T)  # reduce over the last, contiguous axis
    for pos in range(1, n_pos):
        candidates = delta[:, None, :] + incoming  # (B, K_next, K_prev)
        best = candidates.argmax(axis=2)
        new = np.take_along_axis(candidates, best[:, :, None], axis=2)[:, :, 0] + unary[:, pos]
        active = _active(lengths, pos)
        delta = np.where(active, new, delta)
        pointers[:, pos] = np.where(active, best, identity)
    labels = np.empty((n_chains, n_pos), dtype=np.intp)
    labels[:, -1] = delta.argmax(axis=1)
    for pos in range(n_pos - 1, 0, -1):
        labels[:, pos - 1] = pointers[rows, pos, labels[:, pos]]
    return labels


def _forward_backward(unary, lengths, transition, reduce):
    """Forward and backward messages in the (max, +) or (logsumexp, +) semiring.

    ``alpha[b, d, k]`` is the best (or log-summed) score of the nodes ``0..d`` with ``y_d = k``;
    ``beta[b, d, k]`` that of the nodes after d given ``y_d = k`` (0 at and beyond the last node).
    """
    n_chains, n_pos, n_states = unary.shape
    alpha = np.empty_like(unary, dtype=float)
    beta = np.zeros_like(unary, dtype=float)
    alpha[:, 0] = unary[:, 0]
    for pos in range(1, n_pos):
        new = reduce(alpha[:, pos - 1, :, None] + transition, 1) + unary[:, pos]
        alpha[:, pos] = np.where(_active(lengths, pos), new, alpha[:, pos - 1])
    for pos in range(n_pos - 2, -1, -1):
        new = reduce(transition + (unary[:, pos + 1] + beta[:, pos + 1])[:, None, :], 2)
        beta[:, pos] = np.where(_active(lengths, pos + 1), new, 0.0)
    return alpha, beta


def forward_backward(unary: np.ndarray, lengths: np.ndarray, transition: np.ndarray):
    """Log-partition, node marginals and summed edge marginals of every chain.

    Returns
    -------
    log_z : ndarray of shape (B,)
        ``A(x) = log sum_y exp f(y)``.
    node_marginals : ndarray of shape (B, L, K)
        ``P(y_d = k)``; zero on padded positions.
    transition_marginals : ndarray of shape (B, K, K)
        ``sum_d P(y_d = i, y_{d+1} = j)``: the expected transition counts of each chain.
    """
    n_chains, n_pos, _ = unary.shape
    alpha, beta = _forward_backward(unary, lengths, transition, _logsumexp)
    rows = np.arange(n_chains)
    log_z = _logsumexp(alpha[rows, lengths - 1], axis=1)
    mask = np.arange(n_pos)[None, :] < lengths[:, None]
    node = np.exp(alpha + beta - log_z[:, None, None]) * mask[:, :, None]
    # P(y_d = i, y_{d+1} = j) ∝ alpha_d(i) T(i, j) u_{d+1}(j) beta_{d+1}(j), summed over d.
    pair_log = (
        alpha[:, :-1, :, None]
        + transition
        + (unary[:, 1:] + beta[:, 1:])[:, :, None, :]
        - log_z[:, None, None, None]
    )
    pair = np.exp(pair_log) * mask[:, 1:, None, None]
    return log_z, node, pair.sum(axis=1)


def max_marginals(unary: np.ndarray, lengths: np.ndarray, transition: np.ndarray) -> np.ndarray:
    """``mm[b, d, k] = max_{y: y_d = k} f(y)`` for every node and label, in one pass.

    Padded positions hold ``-inf``.
    """
    alpha, beta = _forward_backward(unary, lengths, transition, lambda a, axis: a.max(axis=axis))
    mask = np.arange(unary.shape[1])[None, :, None] < lengths[:, None, None]
    return np.where(mask, alpha + beta, -np.inf)


def clamped_maximizers(
    unary: np.ndarray, lengths: np.ndarray, transition: np.ndarray, clamp_labels: np.ndarray
) -> np.ndarray:
    """All single-node clamped MAP labellings from one forward and one backward max pass.

    For every chain b and node d, returns ``argmax_{y: y_d = clamp_labels[b, d]} f(y)``: the left
    part is read off the forward back-pointers, the right part off the backward pointers.

    Parameters
    ----------
    clamp_labels : ndarray of shape (B, L)
        Label each node is clamped to (padded positions are ignored).

    Returns
    -------
    labels : ndarray of shape (B, L, L)
        ``labels[b, d]`` is the maximiser with node d clamped (padded rows/columns are garbage).
    """
    n_chains, n_pos, n_states = unary.shape
    fwd = np.empty((n_chains, n_pos, n_states), dtype=np.intp)  # best y_{d-1} given y_d
    bwd = np.empty((n_chains, n_pos, n_states), dtype=np.intp)  # best y_{d+1} given y_d
    alpha = unary[:, 0].copy()
    incoming = np.ascontiguousarray(transition.T)
    for pos in range(1, n_pos):
        candidates = alpha[:, None, :] + incoming  # (B, K_next, K_prev)
        fwd[:, pos] = candidates.argmax(axis=2)
        best = np.take_along_axis(candidates, fwd[:, pos][:, :, None], axis=2)[:, :, 0]
        alpha = best + unary[:, pos]
    beta = np.zeros((n_chains, n_states))
    for pos in range(n_pos - 2, -1, -1):
        active = _active(lengths, pos + 1)
        candidates = transition + (unary[:, pos + 1] + beta)[:, None, :]
        bwd[:, pos] = candidates.argmax(axis=2)
        best = np.take_along_axis(candidates, bwd[:, pos][:, :, None], axis=2)[..., 0]
        beta = np.where(active, best, 0.0)
    rows = np.arange(n_chains)[:, None]
    clamped = np.arange(n_pos)[None, :]  # which node is clamped, broadcast over chains
    labels = np.zeros((n_chains, n_pos, n_pos), dtype=np.intp)  # zeros: valid indices
    labels[:, np.arange(n_pos), np.arange(n_pos)] = clamp_labels
    for pos in range(n_pos - 1, 0, -1):  # left of the clamp: follow forward pointers
        left = pos <= clamped
        prev = fwd[rows, pos, labels[:, :, pos]]
        labels[:, :, pos - 1] = np.where(left, prev, labels[:, :, pos - 1])
    for pos in range(n_pos - 1):  # right of the clamp: follow backward pointers
        right = pos >= clamped
        nxt = bwd[rows, pos, labels[:, :, pos]]
        labels[:, :, pos + 1] = np.where(right, nxt, labels[:, :, pos + 1])
    return labels
