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

from .._utils import ranges
from .capabilities import Capabilities, GraphKind
from .messages import pairwise_statistics
from .potentials import Potentials, Statistics, clamp_scores
from .shared_graphs import GraphCache, graph_groups
from .solver import ExactEvents, Marginals, Solver


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
        edge_id = np.zeros(0, dtype=np.intp)  # (scipy's fancy indexing fails on no child)
        if child.size:
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

    def max_product(self, unary: np.ndarray, tables: np.ndarray) -> np.ndarray:
        """Exact MAP labellings of B models on this forest (Viterbi on trees).

        Parameters
        ----------
        unary : ndarray of shape (B, n_nodes, K)
        tables : ndarray of shape (B, n_edges, K, K)

        Returns
        -------
        ndarray of shape (B, n_nodes) of int
        """
        n_models = unary.shape[0]
        inward = unary.copy()  # unary + max-messages from the children
        best = np.zeros(unary.shape, dtype=np.intp)  # each node's best label per parent label
        rows = np.arange(n_models)[:, None]
        for nodes in reversed(self.levels):
            scores = inward[:, nodes, :, None] + self._oriented(tables, nodes)  # (B, n, K, K_p)
            best[:, nodes] = scores.argmax(axis=2)
            np.add.at(inward, (slice(None), self.parent[nodes]), scores.max(axis=2))
        labels = np.zeros((n_models, self.n_nodes), dtype=np.intp)
        labels[:, self.roots] = inward[:, self.roots].argmax(axis=2)
        for nodes in self.levels:  # parents are decoded before their children
            labels[:, nodes] = best[rows, nodes, labels[:, self.parent[nodes]]]
        return labels


class ClampedDecomposition:
    """One feedback vertex set of a graph, and the forests its clamped states leave.

    The forest (the graph without F) is rooted once (:class:`ForestPlan`); every model
    on this graph — every image of one shape, every clamped state — then folds its edges to F
    into the unary scores of the free nodes and runs one exact sum-product pass, all models at
    once.

    Parameters
    ----------
    n_nodes : int
    edges : ndarray of shape (E, 2)
    fvs : ndarray of shape (n_nodes,) of bool
        A feedback vertex set of the graph.
    """

    def __init__(self, n_nodes: int, edges: np.ndarray, fvs: np.ndarray):
        self.n_nodes, self.edges, self.fvs = n_nodes, np.asarray(edges, dtype=np.intp), fvs
        self.free, self.clamped = np.flatnonzero(~fvs), np.flatnonzero(fvs)
        first, second = self.edges[:, 0], self.edges[:, 1]
        self.between = np.flatnonzero(~fvs[first] & ~fvs[second])
        self.inside = np.flatnonzero(fvs[first] & fvs[second])
        self.to_first = np.flatnonzero(~fvs[first] & fvs[second])  # fold into the first end
        self.to_second = np.flatnonzero(fvs[first] & ~fvs[second])
        local = np.full(n_nodes, -1)
        local[self.free] = np.arange(len(self.free))
        self.local = local
        self.plan = ForestPlan(len(self.free), local[self.edges[self.between]])

    def _fold(self, unary, tables, states):
        """The scores of the free nodes with the edges to F folded in, the constant part of
        the score (F's unary terms and the edges inside F), and every node's label on F."""
        n_models = unary.shape[0]
        rows = np.arange(n_models)[:, None]
        label = np.zeros((n_models, self.n_nodes), dtype=np.intp)
        label[:, self.clamped] = states
        first, second = self.edges[:, 0], self.edges[:, 1]
        constant = unary[rows, self.clamped, states].sum(axis=1)
        e = self.inside
        constant += tables[rows, e, label[:, first[e]], label[:, second[e]]].sum(axis=1)
        free_unary = unary[:, self.free].copy()
        e = self.to_first  # add T_e[:, y_j] to the first end
        np.add.at(
            free_unary,
            (slice(None), self.local[first[e]]),
            tables[rows, e, :, label[:, second[e]]],
        )
        e = self.to_second  # add T_e[y_i, :] to the second end
        np.add.at(
            free_unary, (slice(None), self.local[second[e]]), tables[rows, e, label[:, first[e]]]
        )
        return free_unary, constant, label

    def map(self, unary: np.ndarray, tables: np.ndarray, states: np.ndarray) -> np.ndarray:
        """MAP labellings of B (model, state) pairs, F held at the states.

        Parameters
        ----------
        unary : ndarray of shape (B, n_nodes, K)
        tables : ndarray of shape (B, E, K, K)
        states : ndarray of shape (B, |F|)

        Returns
        -------
        ndarray of shape (B, n_nodes) of int
        """
        free_unary, _, label = self._fold(unary, tables, states)
        label[:, self.free] = self.plan.max_product(free_unary, tables[:, self.between])
        return label

    def marginals(self, unary: np.ndarray, tables: np.ndarray, states: np.ndarray):
        """Exact clamped log-partitions and marginals of B (model, state) pairs.

        Parameters
        ----------
        unary : ndarray of shape (B, n_nodes, K)
        tables : ndarray of shape (B, E, K, K)
        states : ndarray of shape (B, |F|)
            The labels of the F nodes of each pair.

        Returns
        -------
        log_z : ndarray of shape (B,)
            ``log Z(y_F)``: the log-sum over the free nodes of exp of the full score.
        node : ndarray of shape (B, n_nodes, K)
            Marginals given the clamped state (one-hot on F).
        pair : ndarray of shape (B, E, K, K)
            Pairwise marginals given the clamped state.
        """
        n_models, _, k = unary.shape
        rows = np.arange(n_models)[:, None]
        first, second = self.edges[:, 0], self.edges[:, 1]
        free_unary, constant, _ = self._fold(unary, tables, states)
        forest = self.plan.sum_product(free_unary, tables[:, self.between])
        node = np.zeros((n_models, self.n_nodes, k))
        node[:, self.free] = forest.node
        node[rows, self.clamped, states] = 1.0
        pair = np.einsum("bea,bec->beac", node[:, first], node[:, second])
        pair[:, self.between] = forest.edge
        return constant + forest.log_partition, node, pair


class ForestSolver(ExactEvents, Solver):
    """Exact MAP and marginals of models that are forests once their clamped nodes are
    removed: chains and trees, or any graph with a feedback vertex set clamped (Part & Clamp).

    Samples whose own graph is a forest are grouped by graph (multi-label samples all share
    one): each group's forest is rooted once and its samples are solved together, a clamp
    forbidding the other labels of its node. A sample whose graph has cycles has its clamped
    nodes' edges folded into the scores of their free neighbours, and the forest left is
    solved on its own. Both run max-product (MAP) or sum-product (marginals, ``log Z``) level
    by level (Pearl's two-pass schedule). :meth:`session` keeps the rooted forest of one graph
    and one clamped node set for many scores and states.
    """

    name = "forest"
    capabilities = Capabilities(
        graphs=GraphKind.FOREST,
        marginals=True,
        map_quality="exact; forests once the clamped nodes are removed",
    )

    def session(self, n_nodes: int, edges: np.ndarray, clamped: np.ndarray):
        """The rooted forest of a graph without its ``clamped`` nodes, for many models.

        Parameters
        ----------
        n_nodes : int
        edges : ndarray of shape (E, 2)
        clamped : ndarray of shape (n_nodes,) of bool
            Nodes whose removal leaves a forest (e.g. a feedback vertex set).

        Returns
        -------
        ClampedDecomposition
            With ``map`` and ``marginals`` of B (model, clamped state) pairs at once.
        """
        return ClampedDecomposition(n_nodes, edges, np.asarray(clamped, dtype=bool))

    def _samples(self, potentials: Potentials, clamp, numbers=None):
        """Per sample: its nodes and edges, its session, and its scores and clamped state as
        one model (``numbers``: each sample's number in the caller's batch, for errors)."""
        self._check(potentials, clamp)
        tables = potentials.edge_tables()
        for i in range(potentials.n_samples):
            nodes = slice(potentials.node_offsets[i], potentials.node_offsets[i + 1])
            edges = slice(potentials.edge_offsets[i], potentials.edge_offsets[i + 1])
            given = np.full(nodes.stop - nodes.start, -1) if clamp is None else clamp[nodes]
            try:
                session = self.session(
                    nodes.stop - nodes.start, potentials.edges[edges] - nodes.start, given >= 0
                )
            except ValueError:
                number = i if numbers is None else int(numbers[i])
                raise ValueError(
                    f"sample {number} has a cycle once its clamped nodes are removed: the forest "
                    "solver needs forests (use solver='message_passing', or clamp a feedback "
                    "vertex set)"
                ) from None
            yield (
                nodes,
                edges,
                session,
                potentials.unary[None, nodes],
                tables[None, edges],
                given[given >= 0][None],
            )

    def _forest_groups(self, potentials: Potentials, clamp):
        """The groups of samples whose own graph is a forest, each with its rooted plan and
        the unary scores with the clamps as forbidden labels (``-inf``), and the samples whose
        graph has cycles (solved one by one, their clamped nodes removed)."""
        self._check(potentials, clamp)
        unary = potentials.unary if clamp is None else clamp_scores(potentials.unary, clamp)
        groups, loopy = [], []
        for group in graph_groups(potentials):
            plan = _plan(group.n_nodes, group.edges)
            if plan is None:
                loopy.append(group.samples)
            else:
                groups.append((group, plan, group.unary(potentials, unary)))
        loopy = np.sort(np.concatenate(loopy)) if loopy else np.zeros(0, dtype=np.intp)
        return groups, loopy

    def map(self, potentials, clamp=None, n_jobs=None):
        labels = np.zeros(potentials.n_nodes, dtype=np.intp)
        groups, loopy = self._forest_groups(potentials, clamp)
        for group, plan, unary in groups:  # every sample of a forest group at once
            labels[group.nodes] = plan.max_product(unary, group.tables(potentials))
        if len(loopy):
            part = potentials.take(loopy)
            given = None if clamp is None else clamp[_nodes_of(potentials, loopy)]
            out = np.zeros(part.n_nodes, dtype=np.intp)
            for nodes, _, session, *scores in self._samples(part, given, loopy):
                out[nodes] = session.map(*scores)[0]
            labels[_nodes_of(potentials, loopy)] = out
        return labels

    def marginals(self, potentials, clamp=None):
        node, pair, log_z = self._sum_product(potentials, clamp)
        statistics = Statistics(node, pairwise_statistics(pair, potentials.pairwise_kind))
        return Marginals(statistics, log_z)

    def edge_marginals(self, potentials, clamp=None) -> np.ndarray:
        """Exact pairwise marginals of every edge, ``P(y_i = a, y_j = b)``, by sum-product.

        Parameters
        ----------
        potentials : Potentials
            Forests once the clamped nodes are removed.
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label: the marginals are conditional on it.

        Returns
        -------
        ndarray of shape (n_edges, K, K)
            In the orientation of ``potentials.edges`` (first end, second end); summed over
            ``b`` (``a``) they are the node marginals of the edge's first (second) node.
        """
        return self._sum_product(potentials, clamp)[1]

    def _sum_product(self, potentials, clamp):
        """The node marginals (n_nodes, K), the edge marginals (n_edges, K, K) and ``log Z``
        of every sample."""
        node = np.zeros(potentials.unary.shape)
        pair = np.zeros((potentials.n_edges,) + (potentials.n_states,) * 2)
        log_z = np.zeros(potentials.n_samples)
        groups, loopy = self._forest_groups(potentials, clamp)
        for group, plan, unary in groups:
            result = plan.sum_product(unary, group.tables(potentials))
            node[group.nodes], pair[group.edge_index] = result.node, result.edge
            log_z[group.samples] = result.log_partition
        if len(loopy):
            part = potentials.take(loopy)
            nodes_of, edges_of = _nodes_of(potentials, loopy), _edges_of(potentials, loopy)
            given = None if clamp is None else clamp[nodes_of]
            for i, (nodes, edges, session, *scores) in enumerate(self._samples(part, given, loopy)):
                sample_log_z, sample_node, sample_pair = session.marginals(*scores)
                log_z[loopy[i]] = sample_log_z[0]
                node[nodes_of[nodes]], pair[edges_of[edges]] = sample_node[0], sample_pair[0]
        return node, pair, log_z


def _nodes_of(potentials: Potentials, samples: np.ndarray) -> np.ndarray:
    return ranges(potentials.node_offsets, samples)


def _edges_of(potentials: Potentials, samples: np.ndarray) -> np.ndarray:
    return ranges(potentials.edge_offsets, samples)


def _forest_plan(n_nodes: int, edges: np.ndarray) -> ForestPlan | None:
    """The rooted forest of a graph, or None when the graph has a cycle."""
    try:
        return ForestPlan(n_nodes, edges)
    except ValueError:
        return None


#: Rooted forests of the graphs solved last (multi-label batches share one graph).
_plan = GraphCache(_forest_plan)
