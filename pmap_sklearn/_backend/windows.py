"""Windows around clamped nodes: single-node clamped problems restricted to nearby nodes.

A clamp ``y_d = k`` applied to the MAP ``y*`` mostly changes labels near ``d``. The window of
a query is the set of nodes within ``hops`` edges of ``d``; the nodes outside it keep their
labels in ``y*``, so each edge leaving the window becomes a unary score of its inside end
(the pairwise score against the outside end's label). The windows of many queries form one
batch of small models — one "sample" per window — that any solver maximises with the clamp
and a warm start from ``y*``.

A window's *border* are its nodes with an edge leaving it: a maximiser that changes a border
node may want to change more beyond it, so the caller re-solves that query in a larger window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from .._utils import ranges
from .capabilities import PairwiseKind
from .potentials import Potentials


@dataclass
class ClampWindows:
    """The windows of some clamp queries, as one batch of models.

    Parameters
    ----------
    potentials : Potentials
        One sample per window: the window's nodes in increasing global order, the edges
        between them, and the edges leaving it folded into the unary scores.
    nodes : ndarray of shape (n_window_nodes,)
        The global node of each window node.
    border : ndarray of shape (n_window_nodes,) of bool
        Whether a window node has an edge leaving its window.
    clamped : ndarray of shape (n_windows,)
        The window node of each query's clamped node.
    """

    potentials: Potentials
    nodes: np.ndarray
    border: np.ndarray
    clamped: np.ndarray

    @property
    def window(self) -> np.ndarray:
        """The window (query) of each window node."""
        return self.potentials.node_sample


def adjacency(potentials: Potentials) -> sparse.csr_matrix:
    """The symmetric node adjacency of all samples, (n_nodes, n_nodes), for :func:`reach`."""
    n = potentials.n_nodes
    i, j = potentials.edges[:, 0], potentials.edges[:, 1]
    ones = np.ones(2 * len(i), np.float32)
    return sparse.csr_matrix((ones, (np.r_[i, j], np.r_[j, i])), shape=(n, n))


def reach(neighbours: sparse.csr_matrix, nodes: np.ndarray, hops: int) -> sparse.csr_matrix:
    """Row q: the nodes within ``hops`` edges of ``nodes[q]``, (Q, n_nodes), sorted indices."""
    q, n = len(nodes), neighbours.shape[0]
    rows = sparse.csr_matrix((np.ones(q, np.float32), (np.arange(q), nodes)), shape=(q, n))
    for _ in range(hops):
        grown = rows + rows @ neighbours
        if grown.nnz == rows.nnz:  # every window is its whole connected component
            break
        rows = grown
        rows.data[:] = 1.0  # path counts grow exponentially with the hops: keep 0 / 1
    rows.sort_indices()
    return rows


def clamp_windows(
    potentials: Potentials,
    touching,
    neighbours: sparse.csr_matrix,
    nodes: np.ndarray,
    map_labels: np.ndarray,
    hops: int,
) -> ClampWindows:
    """The windows of the clamps at ``nodes``, conditioned on ``map_labels`` outside.

    Parameters
    ----------
    potentials : Potentials
    touching : tuple
        The :func:`~pmap_sklearn._backend.potentials.incidence` of ``potentials``.
    neighbours : sparse matrix
        The :func:`adjacency` of ``potentials``.
    nodes : ndarray of shape (Q,)
        The clamped node of each query.
    map_labels : ndarray of shape (n_nodes,)
        The labels of the nodes outside the windows.
    hops : int
        The radius of the windows.

    Returns
    -------
    ClampWindows
    """
    p, n, k = potentials, potentials.n_nodes, potentials.n_states
    rows = reach(neighbours, nodes, hops)
    members, offsets = rows.indices.astype(np.intp), rows.indptr.astype(np.intp)
    window = np.repeat(np.arange(len(nodes)), np.diff(offsets))
    # Visit every edge from each of its ends inside a window: twice for an edge inside it,
    # once for an edge leaving it.
    starts, edge_ids = touching
    counts = starts[members + 1] - starts[members]
    position = np.repeat(np.arange(len(members)), counts)  # the visiting window node
    edge = edge_ids[ranges(starts, members)]
    key = window[position] * max(p.n_edges, 1) + edge
    order = np.argsort(key, kind="stable")
    key, position, edge = key[order], position[order], edge[order]
    first_visit = np.ones(len(key), bool)
    first_visit[1:] = key[1:] != key[:-1]
    twice = np.zeros(len(key), bool)  # the first of two visits: an inside edge
    twice[:-1] = ~first_visit[1:]
    inside = np.flatnonzero(first_visit & twice)
    leaving = np.flatnonzero(first_visit & ~twice)

    # inside edges, with their ends in the edge's own order
    a, b = position[inside], position[inside + 1]
    a_first = members[a] == p.edges[edge[inside], 0]
    ends = np.stack([np.where(a_first, a, b), np.where(a_first, b, a)], axis=1)
    edge_offsets = np.r_[0, np.cumsum(np.bincount(window[a], minlength=len(nodes)))]

    # leaving edges: the pairwise score against the outside end's label in map_labels
    unary = p.unary[members]
    at, out_edge = position[leaving], edge[leaving]
    inner_first = members[at] == p.edges[out_edge, 0]
    outer = np.where(inner_first, p.edges[out_edge, 1], p.edges[out_edge, 0])
    fixed = map_labels[outer]
    kind = p.pairwise_kind
    if kind is PairwiseKind.POTTS:
        scores = p.pairwise[out_edge, None] * (np.arange(k) != fixed[:, None])
    else:  # the row (or column) of the outside end's label in each edge's table
        tables = p.edge_tables()
        scores = np.where(
            inner_first[:, None], tables[out_edge, :, fixed], tables[out_edge, fixed, :]
        )
    np.add.at(unary, at, scores)
    border = np.zeros(len(members), bool)
    border[at] = True

    windowed = Potentials(unary, ends, p._pairwise_of(edge[inside]), offsets, edge_offsets)
    clamped = np.searchsorted(window * n + members, np.arange(len(nodes)) * n + nodes)
    return ClampWindows(windowed, members, border, clamped)
