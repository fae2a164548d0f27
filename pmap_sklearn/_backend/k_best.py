"""The k highest-scoring labellings of a batch of chains: the list Viterbi algorithm.

The parallel list Viterbi algorithm (Seshadri & Sundberg 1994, "List Viterbi decoding
algorithms with applications", IEEE Trans. Commun. 42) keeps, for every position d and label
j, the k best scores of the labellings of the nodes ``0..d`` that end in ``y_d = j``: those of
position d + 1 are the k best of their K·k extensions by one transition, so the k best
labellings of a chain are the k best entries of its last position, traced back through the
(previous label, rank) of each. The Python loops run over the positions only; every step is
vectorised over chains, labels and ranks, in the longest-first layout of
:func:`~pmap_sklearn._backend.viterbi.viterbi` (each position touches only the chains that
reach it).
"""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int):
    """The indices of the ``k`` largest entries of the last axis of ``scores``, largest first
    (all of them, sorted, when there are fewer), and those entries."""
    size = scores.shape[-1]
    if size > k:  # the k largest are the last k after a partition at size - k
        keep = np.argpartition(scores, size - k, axis=-1)[..., size - k :]
    else:
        keep = np.broadcast_to(np.arange(scores.shape[-1]), scores.shape).copy()
    values = np.take_along_axis(scores, keep, axis=-1)
    order = np.argsort(-values, axis=-1, kind="stable")
    return np.take_along_axis(keep, order, axis=-1), np.take_along_axis(values, order, axis=-1)


def list_viterbi(unary: np.ndarray, lengths: np.ndarray, transition: np.ndarray, k: int):
    """The ``k`` highest-scoring labellings of every chain of a batch of consecutive chains.

    Parameters
    ----------
    unary : ndarray of shape (n_nodes, K)
        Node scores of the chains one after the other (``-inf`` forbids a label: clamps,
        constraints at a chain's ends).
    lengths : ndarray of shape (B,)
        Number of nodes of each chain (>= 1).
    transition : ndarray of shape (K, K)
        Pairwise score of consecutive labels (``-inf`` forbids a transition).
    k : int
        Labellings per chain (>= 1).

    Returns
    -------
    labels : ndarray of shape (k, n_nodes)
        Row r: the labelling of rank r of every chain, node by node (the best first).
    scores : ndarray of shape (B, k)
        The score ``f(y)`` of each, non-increasing along a row; ``-inf`` where the chain has
        fewer than r + 1 labellings of finite score (the labels of those rows are then
        meaningless). Labellings of equal score come in no particular order.
    """
    from .viterbi import _longest_first, _node_positions

    n_chains, n_states = len(lengths), unary.shape[1]
    n_pos = int(lengths.max())
    _, inverse, reaching = _longest_first(lengths, n_pos)
    reaching = reaching.tolist() + [0]
    chain, position, _ = _node_positions(lengths)
    # (L, B, K) with the chains longest first: the chains of a position are a prefix
    scores = np.zeros((n_pos, n_chains, n_states))
    scores[position, inverse[chain]] = unary
    # delta[b, j, r]: the r-th best score of the labellings of nodes 0..d ending in j
    delta = np.full((n_chains, n_states, k), -np.inf)
    delta[:, :, 0] = scores[0]
    last = np.empty((n_chains, n_states, k))  # delta at each chain's last node
    # pointer[d, b, j, r]: the (label, rank) at d - 1 of that labelling, as label * k + rank
    pointer = np.zeros((n_pos, n_chains, n_states, k), dtype=np.int32)
    # extended[b, j, i * k + r] = delta[b, i, r] + T[i, j]
    step = transition.T[None, :, :, None]
    for pos in range(1, n_pos):
        n = reaching[pos]
        last[n : reaching[pos - 1]] = delta[n : reaching[pos - 1]]  # chains that end at d - 1
        extended = (delta[:n, None, :, :] + step).reshape(n, n_states, n_states * k)
        pointer[pos, :n], best = top_k(extended, k)
        delta = best + scores[pos, :n, :, None]
    last[: reaching[n_pos - 1]] = delta
    # The k best of each chain's last node, then traced back position by position.
    end, total = top_k(last.reshape(n_chains, n_states * k), k)
    current, rank = end // k, end % k
    traced = np.empty((n_pos, n_chains, k), dtype=np.intp)
    for pos in range(n_pos - 1, -1, -1):
        n, inner = reaching[pos], reaching[pos + 1]
        if inner:  # chains that go on: the predecessor of their label at d + 1
            ahead = pointer[pos + 1, np.arange(inner)[:, None], current[:inner], rank[:inner]]
            current[:inner], rank[:inner] = ahead // k, ahead % k
        traced[pos, :n] = current[:n]
    labels = traced[position, inverse[chain]].T  # (k, n_nodes)
    return np.ascontiguousarray(labels), total[inverse]
