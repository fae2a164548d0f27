"""Part & Clamp lower bounds of the log-partition function (Pletscher & Ong).

*Part* (Algorithm 1): a feedback vertex set F — a set of nodes that meets every cycle — grown
breadth- or depth-first. *Clamp* (eq. 7): for every state ``y_F`` of F the rest of the graph is
a forest, whose partition function ``Z(y_F)`` sum-product computes exactly, and

    log Σ_{y_F ∈ Y_F} Z(y_F) <= log Z,

with equality when ``Y_F`` holds every state of F. This module holds the two building blocks;
the Part & Clamp learners build on them.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy.special import logsumexp, softmax

from .messages import BeliefPropagation, pairwise_statistics
from .potentials import Potentials, Statistics

FVS_ORDERS = ("bfs", "dfs")


def feedback_vertex_set(n_nodes: int, edges: np.ndarray, order: str = "bfs") -> np.ndarray:
    """A feedback vertex set grown by visiting the graph breadth- or depth-first.

    Nodes are visited from node 0 of every connected component (then the lowest unvisited
    node). A visited node joins the forest unless two of its neighbours already in the forest
    lie in the same tree (a union-find test: joining would close a cycle); then it goes to F.
    This is the union-find form of Algorithm 1 of Pletscher & Ong, which gives the |F|/|V| of
    about 1/3 (breadth-first) their text reports on grids.

    Parameters
    ----------
    n_nodes : int
        Number of nodes.
    edges : ndarray of shape (E, 2)
        Undirected edges.
    order : {"bfs", "dfs"}, default="bfs"
        Breadth-first (a queue) or depth-first (a stack) exploration.

    Returns
    -------
    ndarray of shape (n_nodes,) of bool
        True on the nodes of F; the others induce a forest.
    """
    if order not in FVS_ORDERS:
        raise ValueError(f"order must be one of {FVS_ORDERS}, got {order!r}")
    edges = np.asarray(edges, dtype=np.intp).reshape(-1, 2)
    both = np.concatenate([edges, edges[:, ::-1]])
    both = both[np.argsort(both[:, 0], kind="stable")]
    starts = np.searchsorted(both[:, 0], np.arange(n_nodes + 1))
    neighbours = [both[starts[v] : starts[v + 1], 1].tolist() for v in range(n_nodes)]
    parent = list(range(n_nodes))

    def root(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    in_fvs = np.zeros(n_nodes, dtype=bool)
    placed = np.zeros(n_nodes, dtype=bool)  # visited and put in the forest
    # breadth-first marks a node when it is queued; depth-first when it is taken from the stack
    queued = np.zeros(n_nodes, dtype=bool)
    visited = np.zeros(n_nodes, dtype=bool)
    for start in range(n_nodes):
        if visited[start]:
            continue
        frontier = deque([start])
        queued[start] = True
        while frontier:
            v = frontier.popleft() if order == "bfs" else frontier.pop()
            if visited[v]:
                continue
            visited[v] = True
            trees = [root(u) for u in neighbours[v] if placed[u]]
            if len(set(trees)) < len(trees):
                in_fvs[v] = True
            else:
                placed[v] = True
                for tree in trees:
                    parent[tree] = v
            for u in reversed(neighbours[v]) if order == "dfs" else neighbours[v]:
                if order == "dfs" and not visited[u] or not queued[u]:
                    queued[u] = True
                    frontier.append(u)
    return in_fvs


def clamped_forests(potentials: Potentials, fvs: np.ndarray, states: np.ndarray):
    """The forest models left by clamping F to each state, stacked as one batch.

    Parameters
    ----------
    potentials : Potentials
        One sample.
    fvs : ndarray of shape (n_nodes,) of bool
        The feedback vertex set.
    states : ndarray of shape (S, |F|)
        Labels of the F nodes (in node order), one row per clamped state.

    Returns
    -------
    forests : Potentials
        S samples: the free nodes, their scores with the edges to F folded in, and the edges
        between free nodes.
    constants : ndarray of shape (S,)
        The score of each state on F alone (its unary scores and the edges inside F).
    """
    if potentials.n_samples != 1:
        raise ValueError("clamped_forests takes the potentials of one sample")
    states = np.atleast_2d(np.asarray(states, dtype=np.intp))
    n_states, k = len(states), potentials.n_states
    free = np.flatnonzero(~fvs)
    clamped = np.flatnonzero(fvs)
    if states.shape[1] != len(clamped):
        raise ValueError(f"states must have {len(clamped)} columns (one per F node)")
    label = np.full((n_states, potentials.n_nodes), -1)
    label[:, clamped] = states
    tables = potentials.edge_tables()
    first, second = potentials.edges[:, 0], potentials.edges[:, 1]
    inside = fvs[first] & fvs[second]
    to_first = ~fvs[first] & fvs[second]  # the second end is clamped: fold into the first
    to_second = fvs[first] & ~fvs[second]
    constants = (
        potentials.unary[clamped, states].sum(axis=1) if len(clamped) else np.zeros(n_states)
    )
    constants = constants + tables[inside, label[:, first[inside]], label[:, second[inside]]].sum(
        axis=1
    )
    unary = np.broadcast_to(potentials.unary, (n_states,) + potentials.unary.shape).copy()
    # unary[s, i, a] += T_e[a, y_j(s)] for edges (i, j) with j clamped, and symmetrically
    np.add.at(
        unary,
        (slice(None), first[to_first]),
        tables[to_first, :, label[:, second[to_first]]],
    )
    np.add.at(
        unary,
        (slice(None), second[to_second]),
        tables[to_second][np.arange(to_second.sum()), label[:, first[to_second]], :],
    )
    index = np.full(potentials.n_nodes, -1)
    index[free] = np.arange(len(free))
    between = ~fvs[first] & ~fvs[second]
    local = index[potentials.edges[between]]
    n_free, n_edges = len(free), len(local)
    forests = Potentials(
        unary[:, free].reshape(-1, k),
        (local[None] + (np.arange(n_states) * n_free)[:, None, None]).reshape(-1, 2),
        np.tile(tables[between], (n_states, 1, 1)),
        np.arange(n_states + 1) * n_free,
        np.arange(n_states + 1) * n_edges,
    )
    return forests, constants


def clamped_bound(potentials: Potentials, fvs: np.ndarray, states: np.ndarray):
    """The Part & Clamp bound ``log Σ_{y_F ∈ Y_F} Z(y_F) <= log Z`` (eq. 7) and its gradient.

    Parameters
    ----------
    potentials : Potentials
        One sample.
    fvs : ndarray of shape (n_nodes,) of bool
        A feedback vertex set (see :func:`feedback_vertex_set`).
    states : ndarray of shape (S, |F|)
        The clamped states ``Y_F``.

    Returns
    -------
    bound : float
        ``log Σ_s Z(y_F = states[s])``.
    statistics : Statistics
        Its gradient with respect to the potentials: the expected sufficient statistics under
        the mixture of the clamped forests weighted by ``Z(s) / Σ Z`` (eqs. 16–17), node
        marginals (n_nodes, K) and pairwise ones in the potentials' kind.
    """
    forests, constants = clamped_forests(potentials, fvs, states)
    bp = BeliefPropagation(forests, 1.0, "bethe")  # exact sum-product on a forest
    bp.run(max_sweeps=10 * max(1, forests.n_nodes), tol=1e-12)
    log_z = constants + bp.objective()
    weight = softmax(log_z)
    n_states, k = len(log_z), potentials.n_states
    states = np.atleast_2d(np.asarray(states, dtype=np.intp))
    free, clamped = np.flatnonzero(~fvs), np.flatnonzero(fvs)
    edge_beliefs = bp.edge_beliefs()
    node_beliefs = bp.node_beliefs(edge_beliefs).reshape(n_states, len(free), k)
    node = np.zeros((n_states, potentials.n_nodes, k))
    node[:, free] = node_beliefs
    node[np.arange(n_states)[:, None], clamped[None, :], states] = 1.0
    # pairwise beliefs of every edge of the full model, per state
    first, second = potentials.edges[:, 0], potentials.edges[:, 1]
    # (S, E, K, K): an edge with a clamped end is the outer product of its ends' beliefs
    pair = np.einsum("sea,seb->seab", node[:, first], node[:, second])
    between = np.flatnonzero(~fvs[first] & ~fvs[second])
    pair[:, between] = edge_beliefs.reshape(n_states, len(between), k, k)
    node = np.tensordot(weight, node, axes=1)
    pair = np.tensordot(weight, pair, axes=1)
    statistics = Statistics(node, pairwise_statistics(pair, potentials.pairwise_kind))
    return float(logsumexp(log_z)), statistics
