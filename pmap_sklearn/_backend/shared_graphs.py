"""Samples that share one graph, solved as one batch.

In multi-label classification every sample has the same label graph; the clamped copies of a
sample (the marginal learner's clamped maximisers) share its graph too. A solver whose set-up
is per graph — rooting a forest, listing the labellings of a tiny model — does it once per
group of samples with identical graphs and solves the group's models at once, with unary
scores of shape (S, n, K) and tables of shape (S, E, K, K): loops over groups, never over
samples, so the per-call overheads of thousands of six-node models disappear.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .potentials import Potentials

#: Per-graph set-ups kept by :class:`GraphCache` (rooted forests, labelling tables).
CACHED_GRAPHS = 32


@dataclass(frozen=True, eq=False)
class GraphGroup:
    """Samples of a batch of potentials with the same graph.

    Attributes
    ----------
    samples : ndarray of shape (S,)
        The samples, in increasing order.
    n_nodes : int
        Nodes of each sample (n).
    edges : ndarray of shape (E, 2)
        Their edges, in local node indices (the same for every sample of the group).
    nodes : ndarray of shape (S, n)
        Global index of each sample's nodes.
    edge_index : ndarray of shape (S, E)
        Global index of each sample's edges.
    """

    samples: np.ndarray
    n_nodes: int
    edges: np.ndarray
    nodes: np.ndarray
    edge_index: np.ndarray

    def unary(self, potentials: Potentials, scores: np.ndarray | None = None) -> np.ndarray:
        """The unary scores (S, n, K) of the group (``scores`` instead of the potentials'
        unary scores when given, e.g. clamped ones)."""
        scores = potentials.unary if scores is None else scores
        return scores[self.nodes]

    def tables(self, potentials: Potentials) -> np.ndarray:
        """The pairwise scores of the group as tables (S, E, K, K)."""
        return potentials.edge_tables()[self.edge_index]


def graph_groups(potentials: Potentials) -> list[GraphGroup]:
    """Group the samples of ``potentials`` by graph (same number of nodes, same local edges in
    the same order).

    Parameters
    ----------
    potentials : Potentials

    Returns
    -------
    list of GraphGroup
        In the order of each group's first sample.
    """
    lengths = potentials.lengths
    n_edges = np.diff(potentials.edge_offsets)
    local = potentials.edges - potentials.node_offsets[potentials.edge_sample][:, None]
    n_samples = potentials.n_samples
    if n_samples and (lengths == lengths[0]).all() and (n_edges == n_edges[0]).all():
        # the usual case (multi-label, clamped copies): one comparison with the first sample
        per_sample = local.reshape(n_samples, n_edges[0], 2)
        if (per_sample == per_sample[:1]).all():
            return [_group(potentials, np.arange(n_samples), per_sample[0])]
    keys: dict = {}
    for i in range(n_samples):  # a loop over samples: graphs of many shapes
        edges = local[potentials.edge_offsets[i] : potentials.edge_offsets[i + 1]]
        keys.setdefault((int(lengths[i]), edges.tobytes()), []).append(i)
    groups = []
    for members in keys.values():
        first = members[0]
        edges = local[potentials.edge_offsets[first] : potentials.edge_offsets[first + 1]]
        groups.append(_group(potentials, np.asarray(members, dtype=np.intp), edges))
    return groups


def _group(potentials: Potentials, samples: np.ndarray, edges: np.ndarray) -> GraphGroup:
    n_nodes = int(potentials.lengths[samples[0]])
    nodes = potentials.node_offsets[samples][:, None] + np.arange(n_nodes)
    edge_index = potentials.edge_offsets[samples][:, None] + np.arange(len(edges))
    return GraphGroup(samples, n_nodes, np.array(edges, dtype=np.intp), nodes, edge_index)


class GraphCache:
    """The last few per-graph set-ups of a solver, by graph (least recently used dropped).

    Parameters
    ----------
    build : callable
        ``build(n_nodes, edges, *extra)``: the set-up of a graph.
    size : int, default=CACHED_GRAPHS
    """

    def __init__(self, build, size: int = CACHED_GRAPHS):
        self.build, self.size = build, size
        self._items: OrderedDict = OrderedDict()

    def __call__(self, n_nodes: int, edges: np.ndarray, *extra):
        key = (n_nodes, edges.shape, edges.tobytes(), extra)
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = self.build(n_nodes, edges, *extra)
        self._items[key] = value
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return value
