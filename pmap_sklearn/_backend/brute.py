"""Brute-force enumeration of all labellings: the reference the exact oracles are tested on.

Only for tiny models (``K ** D`` labellings). A model is given in the general pairwise form:
``f(y) = sum_d unary[d, y_d] + sum_e pairwise[e, y_i, y_j]`` over ``edges[e] = (i, j)``.
"""

from __future__ import annotations

import itertools

import numpy as np

MAX_LABELLINGS = 2_000_000


def enumerate_scores(unary: np.ndarray, edges: np.ndarray, pairwise: np.ndarray):
    """Every labelling with its score.

    Returns
    -------
    labellings : ndarray of shape (K ** D, D)
    scores : ndarray of shape (K ** D,)
    """
    n_nodes, n_states = unary.shape
    if n_states**n_nodes > MAX_LABELLINGS:
        raise ValueError(f"{n_states}^{n_nodes} labellings are too many to enumerate")
    labellings = np.array(list(itertools.product(range(n_states), repeat=n_nodes)), dtype=np.intp)
    labellings = labellings.reshape(-1, n_nodes)
    scores = unary[np.arange(n_nodes), labellings].sum(axis=1)
    if len(edges):
        e = np.arange(len(edges))
        scores = scores + pairwise[e, labellings[:, edges[:, 0]], labellings[:, edges[:, 1]]].sum(1)
    return labellings, scores


def brute_map(unary, edges, pairwise, clamp=None):
    """``argmax_y f(y)``, optionally over the labellings that agree with ``clamp`` (-1 = free)."""
    labellings, scores = enumerate_scores(unary, edges, pairwise)
    if clamp is not None:
        fixed = clamp >= 0
        allowed = (labellings[:, fixed] == clamp[fixed]).all(axis=1)
        scores = np.where(allowed, scores, -np.inf)
    best = np.argmax(scores)
    return labellings[best], scores[best]


def brute_log_partition(unary, edges, pairwise) -> float:
    """``A = log sum_y exp f(y)``."""
    _, scores = enumerate_scores(unary, edges, pairwise)
    top = scores.max()
    return float(top + np.log(np.exp(scores - top).sum()))


def brute_marginals(unary, edges, pairwise):
    """Node marginals ``P(y_d = k)`` of shape (D, K)."""
    labellings, scores = enumerate_scores(unary, edges, pairwise)
    prob = np.exp(scores - scores.max())
    prob /= prob.sum()
    n_nodes, n_states = unary.shape
    out = np.zeros((n_nodes, n_states))
    for k in range(n_states):
        out[:, k] = prob @ (labellings == k)
    return out
