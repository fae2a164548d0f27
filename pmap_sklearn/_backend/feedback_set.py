"""Part & Clamp lower bounds of the log-partition function (Pletscher & Ong).

*Part* (Algorithm 1): a feedback vertex set F — a set of nodes that meets every cycle — grown
breadth- or depth-first. *Clamp* (eq. 7): for every state ``y_F`` of F the rest of the graph is
a forest, whose partition function ``Z(y_F)`` sum-product computes exactly, and

    log Σ_{y_F ∈ Y_F} Z(y_F) <= log Z,

with equality when ``Y_F`` holds every state of F. This module holds the two building blocks;
the Part & Clamp learners build on them, with the clamped forests of
:class:`~.forest.ForestSolver`.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy.special import logsumexp, softmax

from .._validation import check_generator
from .forest import ClampedDecomposition
from .messages import pairwise_statistics
from .potentials import Potentials, Statistics

FVS_ORDERS = ("bfs", "dfs")


def feedback_vertex_set(
    n_nodes: int, edges: np.ndarray, order: str = "bfs", random_state=None
) -> np.ndarray:
    """A feedback vertex set grown by visiting the graph breadth- or depth-first.

    Nodes are visited from node 0 of every connected component (then the lowest unvisited
    node). A visited node joins the forest unless two of its neighbours already in the forest
    lie in the same tree (a union-find test: joining would close a cycle); then it goes to F.
    This is the union-find form of Algorithm 1 of Pletscher & Ong, which gives the ratio
    ``|F| / |V|`` of about 1/3 (breadth-first) their text reports on grids.

    Parameters
    ----------
    n_nodes : int
        Number of nodes.
    edges : ndarray of shape (E, 2)
        Undirected edges.
    order : {"bfs", "dfs"}, default="bfs"
        Breadth-first (a queue) or depth-first (a stack) exploration.
    random_state : int, Generator or None, default=None
        None: start from the lowest node and queue neighbours in index order; otherwise the
        random start nodes and queue orders of Algorithm 1 (different decompositions).

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
    start_order = range(n_nodes)
    if random_state is not None:
        rng = check_generator(random_state)
        start_order = rng.permutation(n_nodes).tolist()
        for adjacent in neighbours:
            rng.shuffle(adjacent)
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
    for start in start_order:
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
    if potentials.n_samples != 1:
        raise ValueError("clamped_bound takes the potentials of one sample")
    states = np.atleast_2d(np.asarray(states, dtype=np.intp))
    if states.shape[1] != int(fvs.sum()):
        raise ValueError(f"states must have {int(fvs.sum())} columns (one per F node)")
    decomposition = ClampedDecomposition(potentials.n_nodes, potentials.edges, fvs)
    n_states = len(states)
    unary = np.broadcast_to(potentials.unary, (n_states,) + potentials.unary.shape)
    tables = np.broadcast_to(
        potentials.edge_tables(), (n_states, potentials.n_edges) + (potentials.n_states,) * 2
    )
    log_z, node, pair = decomposition.marginals(unary, tables, states)
    weight = softmax(log_z)
    node, pair = np.tensordot(weight, node, axes=1), np.tensordot(weight, pair, axes=1)
    statistics = Statistics(node, pairwise_statistics(pair, potentials.pairwise_kind))
    return float(logsumexp(log_z)), statistics
