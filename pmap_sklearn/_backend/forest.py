"""Exact sum-product on a forest, level by level, for many models on one forest at once.

Part & Clamp (Pletscher & Ong) needs the partition function and the marginals of the same
forest — the graph left by removing a feedback vertex set — under many scores: every training
image and every clamped state. :class:`ForestPlan` roots each tree once (breadth-first from its
lowest node) and groups the nodes by depth; :meth:`ForestPlan.sum_product` then runs the upward
and downward passes over the depths, each step vectorised over the models and the nodes of one
depth, in the log domain (Pearl's two-pass schedule: exact on trees).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components


@dataclass
class ForestMarginals:
    """Output of :meth:`ForestPlan.sum_product` for B models.

    Attributes
    ----------
    log_partition : ndarray of shape (B,)
    node : ndarray of shape (B, n_nodes, K)
    edge : ndarray of shape (B, n_edges, K, K)
        Pairwise marginals in the orientation of ``edges`` (first end, second end).
    """

    log_partition: np.ndarray
    node: np.ndarray
    edge: np.ndarray


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(x - top), axis=axis))


class ForestPlan:
    """Rooted trees and depth levels of a forest.

    Parameters
    ----------
    n_nodes : int
    edges : ndarray of shape (E, 2)
        The forest's edges (no cycle).

    Raises
    ------
    ValueError
        If the edges contain a cycle.
    """

    def __init__(self, n_nodes: int, edges: np.ndarray):
        edges = np.asarray(edges, dtype=np.intp).reshape(-1, 2)
        self.n_nodes, self.edges = n_nodes, edges
        graph = csr_matrix(
            (np.arange(1, len(edges) + 1), (edges[:, 0], edges[:, 1])), shape=(n_nodes,) * 2
        )
        graph = graph + graph.T
        n_trees, tree = connected_components(graph, directed=False)
        if len(edges) != n_nodes - n_trees:
            raise ValueError("the edges contain a cycle: not a forest")
        parent = np.full(n_nodes, -1)
        depth = np.zeros(n_nodes, dtype=np.intp)
        roots = np.unique(tree, return_index=True)[1]
        for root in roots:
            order, predecessors = breadth_first_order(graph, root, directed=False)
            parent[order[1:]] = predecessors[order[1:]]
            for v in order[1:]:  # BFS order: a parent's depth is known before its children's
                depth[v] = depth[parent[v]] + 1
        self.roots, self.parent, self.depth = roots, parent, depth
        child = np.flatnonzero(parent >= 0)
        # the edge joining each non-root node to its parent, and whether the node is its first end
        edge_id = np.asarray(graph[child, parent[child]]).ravel() - 1
        self.parent_edge = np.full(n_nodes, -1)
        self.parent_edge[child] = edge_id
        self.is_first = np.zeros(n_nodes, dtype=bool)
        self.is_first[child] = edges[edge_id, 0] == child
        self.levels = [np.flatnonzero(depth == d) for d in range(1, depth.max(initial=0) + 1)]

    def _oriented(self, tables: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Tables (B, len(nodes), K_node, K_parent) of the edges to the parents of ``nodes``."""
        picked = tables[:, self.parent_edge[nodes]]
        flip = ~self.is_first[nodes]
        picked[:, flip] = np.swapaxes(picked[:, flip], -1, -2)
        return picked

    def sum_product(self, unary: np.ndarray, tables: np.ndarray) -> ForestMarginals:
        """Exact log-partition and marginals of B models on this forest.

        Parameters
        ----------
        unary : ndarray of shape (B, n_nodes, K)
        tables : ndarray of shape (B, n_edges, K, K)
            ``tables[b, e, a, c]``: score of ``edges[e]`` with its first end at a, second at c.

        Returns
        -------
        ForestMarginals
        """
        n_models, _, k = unary.shape
        inward = unary.copy()  # unary + messages from the children
        upward = np.zeros_like(unary)  # message of each node to its parent, over parent labels
        oriented = {}
        for nodes in reversed(self.levels):
            table = oriented[len(oriented)] = self._oriented(tables, nodes)
            message = _logsumexp(inward[:, nodes, :, None] + table, axis=2)
            upward[:, nodes] = message
            np.add.at(inward, (slice(None), self.parent[nodes]), message)
        log_z = _logsumexp(inward[:, self.roots], axis=2).sum(axis=1)
        downward = np.zeros_like(unary)  # message of each node's parent to it
        edge = np.empty((n_models, len(self.edges), k, k))
        for index, nodes in enumerate(self.levels):
            table = oriented[len(self.levels) - 1 - index]
            parents = self.parent[nodes]
            rest = inward[:, parents] + downward[:, parents] - upward[:, nodes]  # (B, n, K_p)
            downward[:, nodes] = _logsumexp(rest[:, :, None, :] + table, axis=3)
            joint = inward[:, nodes, :, None] + table + rest[:, :, None, :]
            joint = np.exp(
                joint - _logsumexp(joint.reshape(n_models, len(nodes), -1), 2)[..., None, None]
            )
            flip = ~self.is_first[nodes]
            joint[:, flip] = np.swapaxes(joint[:, flip], -1, -2)
            edge[:, self.parent_edge[nodes]] = joint
        belief = inward + downward
        node = np.exp(belief - _logsumexp(belief, axis=2)[..., None])
        return ForestMarginals(log_z, node, edge)
