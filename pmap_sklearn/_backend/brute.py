"""Brute-force enumeration of all labellings: the reference every exact solver is tested on.

Only for tiny models (``K ** D`` labellings per sample, enumerated in chunks so that memory stays
small). Any number of labels and any pairwise kind. Samples that share a graph small enough
(multi-label samples: 2^6 labellings of six labels) are scored together: the labellings' one-hot
statistics form one table Φ (labellings × statistics), and the scores of S samples are one
matrix product ``θ Φᵀ`` of their stacked unary and pairwise scores θ; marginals are the
probabilities times Φ.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .capabilities import Capabilities, PairwiseKind
from .k_best import top_k
from .messages import pairwise_statistics
from .potentials import Potentials, Statistics, clamp_mask, clamp_scores, pair_statistics
from .shared_graphs import GraphCache, GraphGroup, graph_groups
from .solver import ExactEvents, Marginals, Solver, check_count

#: Labellings enumerated at once.
CHUNK = 1 << 16
#: Entries of the largest labelling table Φ of a graph, and of a block of scores (samples ×
#: labellings), of the batched path; larger models are enumerated sample by sample.
BATCHED_ENTRIES = 1 << 22


def labellings(n_nodes: int, n_states: int, start: int = 0, stop: int | None = None):
    """Labellings number ``start..stop-1`` in lexicographic order (node 0 most significant, as
    ``itertools.product`` and ``numpy.ravel_multi_index`` count), shape (stop - start, D)."""
    stop = n_states**n_nodes if stop is None else stop
    codes = np.arange(start, stop, dtype=np.int64)
    powers = n_states ** np.arange(n_nodes - 1, -1, -1, dtype=np.int64)
    return (codes[:, None] // powers) % n_states


def enumerate_scores(potentials: Potentials, chunk: int = CHUNK):
    """Yield ``(labellings, scores)`` chunks over every labelling of a one-sample model (``-inf``
    unary scores forbid labels)."""
    p = potentials
    n_nodes, k = p.unary.shape
    tables = p.edge_tables()
    edge_index = np.arange(p.n_edges)
    for start in range(0, k**n_nodes, chunk):
        y = labellings(n_nodes, k, start, min(start + chunk, k**n_nodes))
        scores = p.unary[np.arange(n_nodes), y].sum(axis=1)
        if p.n_edges:
            scores = scores + tables[edge_index, y[:, p.edges[:, 0]], y[:, p.edges[:, 1]]].sum(1)
        yield y, scores


def _labelling_table(n_nodes: int, edges: np.ndarray, n_states: int):
    """Every labelling of a graph (M, n) and its one-hot statistics Φ (M, n K + E K²): the
    label of each node, then the label pair of each edge, so that a model's scores are
    ``Φ @ θ`` with θ its unary scores then its tables, flattened."""
    k, n_edges = n_states, len(edges)
    y = labellings(n_nodes, k)
    columns = [np.arange(n_nodes) * k + y]
    if n_edges:
        pair = y[:, edges[:, 0]] * k + y[:, edges[:, 1]]
        columns.append(n_nodes * k + np.arange(n_edges) * k * k + pair)
    columns = np.concatenate(columns, axis=1)
    table = np.zeros((len(y), n_nodes * k + n_edges * k * k))
    table[np.arange(len(y))[:, None], columns] = 1.0
    return y, table


#: The labelling tables of the graphs solved last.
_table_of = GraphCache(_labelling_table)


class BruteForceSolver(ExactEvents, Solver):
    """Exact MAP and marginals of tiny models by enumerating every labelling.

    Parameters
    ----------
    max_labellings : int, default=2**24
        Largest ``K ** D`` of one sample it agrees to enumerate.
    """

    name = "brute_force"
    capabilities = Capabilities(marginals=True, k_best=True, map_quality="exact; tiny models only")

    def __init__(self, max_labellings: int = 1 << 24):
        self.max_labellings = check_count(max_labellings, "max_labellings")

    def _groups(self, potentials: Potentials, clamp):
        """The groups of samples with one graph, each with the batched path's labelling table
        (None where the table would be too large: enumerate sample by sample), after the
        checks."""
        self._check(potentials, clamp)
        k = potentials.n_states
        most = 0  # the most nodes whose k^n labellings it enumerates (exact integers)
        while k ** (most + 1) <= self.max_labellings and most < potentials.n_nodes:
            most += 1
        for i in np.flatnonzero(potentials.lengths > most)[:1]:
            raise ValueError(
                f"sample {i}: {k}^{potentials.lengths[i]} labellings are too many to "
                f"enumerate (at most {self.max_labellings})"
            )
        groups = []
        for group in graph_groups(potentials):
            n, n_edges = group.n_nodes, len(group.edges)
            size = k**n * (n * k + n_edges * k * k)
            small = k**n <= self.max_labellings and size <= BATCHED_ENTRIES
            groups.append((group, _table_of(n, group.edges, k) if small else None))
        return groups

    def _scores(self, potentials: Potentials, clamp, group: GraphGroup, table):
        """Blocks ``(samples, scores)`` of the group: the scores (S, M) of every labelling of
        the table, ``-inf`` for those a clamp forbids."""
        labels, phi = table
        k, n = potentials.n_states, group.n_nodes
        step = max(1, BATCHED_ENTRIES // len(labels))
        for start in range(0, len(group.samples), step):
            rows = slice(start, start + step)
            nodes = group.nodes[rows]
            unary = potentials.unary[nodes].reshape(len(nodes), n * k)
            tables = potentials.edge_tables()[group.edge_index[rows]]
            theta = np.concatenate([unary, tables.reshape(len(unary), -1)], axis=1)
            scores = theta @ phi.T
            if clamp is not None:
                forbidden = clamp_mask(potentials.unary.shape, clamp)[group.nodes[rows]]
                hits = forbidden.reshape(len(unary), -1).astype(float) @ phi[:, : n * k].T
                scores[hits > 0] = -np.inf
            yield rows, scores

    def _samples(self, potentials: Potentials, clamp, samples):
        """The samples one by one, clamped labels at ``-inf``, for the enumeration."""
        unary = potentials.unary if clamp is None else clamp_scores(potentials.unary, clamp)
        clamped = replace(potentials, unary=unary)
        for i in samples:
            yield i, clamped.sample(i)

    def map(self, potentials, clamp=None, n_jobs=None):
        groups = self._groups(potentials, clamp)  # the checks first
        out = np.zeros(potentials.n_nodes, dtype=np.intp)
        for group, table in groups:
            if table is not None:
                for rows, scores in self._scores(potentials, clamp, group, table):
                    out[group.nodes[rows]] = table[0][scores.argmax(axis=1)]
                continue
            for i, sample in self._samples(potentials, clamp, group.samples):
                best, best_score = None, -np.inf
                for y, scores in enumerate_scores(sample):
                    top = int(np.argmax(scores))
                    if best is None or scores[top] > best_score:
                        best, best_score = y[top], scores[top]
                out[potentials.node_offsets[i] : potentials.node_offsets[i + 1]] = best
        return out

    def log_partition(self, potentials, clamp=None) -> np.ndarray:
        """The log-partition function of every sample by enumeration (cheaper than marginals).

        Parameters
        ----------
        potentials : Potentials
            Tiny models (K^D labellings are enumerated per sample).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``log Σ_y exp f_n(y)`` over the labellings that respect the clamps.
        """
        groups = self._groups(potentials, clamp)
        out = np.zeros(potentials.n_samples)
        for group, table in groups:
            if table is not None:
                for rows, scores in self._scores(potentials, clamp, group, table):
                    out[group.samples[rows]] = np.logaddexp.reduce(scores, axis=1)
                continue
            for i, sample in self._samples(potentials, clamp, group.samples):
                parts = [np.logaddexp.reduce(scores) for _, scores in enumerate_scores(sample)]
                out[i] = np.logaddexp.reduce(parts)
        return out

    def k_best(self, potentials, k, clamp=None):
        """The ``k`` most probable labellings of every sample by enumeration, with their
        log-probabilities (see :meth:`Solver.k_best`).

        Parameters
        ----------
        potentials : Potentials
            Tiny models (K^D labellings are enumerated per sample).
        k : int
            Labellings per sample (>= 1).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.

        Returns
        -------
        labels : ndarray of shape (k, n_nodes)
        log_probabilities : ndarray of shape (n_samples, k)
            ``-inf`` where a sample has fewer than r + 1 labellings of positive probability.
        """
        groups = self._groups(potentials, clamp)
        k = check_count(k, "k")
        labels = np.zeros((k, potentials.n_nodes), dtype=np.intp)
        log_p = np.full((potentials.n_samples, k), -np.inf)
        for group, table in groups:
            if table is not None:
                for rows, scores in self._scores(potentials, clamp, group, table):
                    best, top = top_k(scores, k)
                    labels[: best.shape[1], group.nodes[rows]] = table[0][best.T]
                    log_z = np.logaddexp.reduce(scores, axis=1)
                    log_p[group.samples[rows], : best.shape[1]] = top - log_z[:, None]
                continue
            for i, sample in self._samples(potentials, clamp, group.samples):
                kept, top, log_z = np.zeros((0, sample.n_nodes), np.intp), np.zeros(0), -np.inf
                for y, scores in enumerate_scores(sample):  # the best so far, and this chunk
                    best, top = top_k(np.concatenate([top, scores]), k)
                    kept = np.concatenate([kept, y])[best]
                    log_z = np.logaddexp(log_z, np.logaddexp.reduce(scores))
                nodes = slice(potentials.node_offsets[i], potentials.node_offsets[i + 1])
                labels[: len(kept), nodes] = kept
                log_p[i, : len(top)] = top - log_z
        return labels, log_p

    def marginals(self, potentials, clamp=None):
        node, pair, log_z = self._enumerated_tables(potentials, clamp)
        kind = potentials.pairwise_kind
        return Marginals(Statistics(node, pairwise_statistics(pair, kind)), log_z)

    def edge_marginals(self, potentials, clamp=None) -> np.ndarray:
        """Exact pairwise marginals of every edge, ``P(y_i = a, y_j = b)``, by enumeration:
        the probabilities of the labellings summed by the label pair each gives the edge.

        Parameters
        ----------
        potentials : Potentials
            Tiny models (K^D labellings are enumerated per sample).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label: the marginals are conditional on it.

        Returns
        -------
        ndarray of shape (n_edges, K, K)
            In the orientation of ``potentials.edges`` (first end, second end); summed over
            ``b`` (``a``) they are the node marginals of the edge's first (second) node.
        """
        return self._enumerated_tables(potentials, clamp)[1]

    def _enumerated_tables(self, potentials, clamp):
        """The node marginals (n_nodes, K), the edge marginals (n_edges, K, K) and ``log Z``
        of every sample, by enumeration."""
        groups = self._groups(potentials, clamp)
        k = potentials.n_states
        node = np.zeros(potentials.unary.shape)
        pair = np.zeros((potentials.n_edges, k, k))
        log_z = np.zeros(potentials.n_samples)
        for group, table in groups:
            if table is not None:
                n = group.n_nodes
                for rows, scores in self._scores(potentials, clamp, group, table):
                    log_z[group.samples[rows]] = np.logaddexp.reduce(scores, axis=1)
                    weights = np.exp(scores - log_z[group.samples[rows], None])
                    expected = weights @ table[1]
                    node[group.nodes[rows]] = expected[:, : n * k].reshape(len(scores), n, k)
                    pair[group.edge_index[rows]] = expected[:, n * k :].reshape(
                        len(scores), len(group.edges), k, k
                    )
                continue
            for i, sample_node, sample_pair, sample_log_z in self._enumerated_marginals(
                potentials, clamp, group.samples
            ):
                node[potentials.node_offsets[i] : potentials.node_offsets[i + 1]] = sample_node
                pair[potentials.edge_offsets[i] : potentials.edge_offsets[i + 1]] = sample_pair
                log_z[i] = sample_log_z
        return node, pair, log_z

    def _enumerated_marginals(self, potentials, clamp, samples):
        """Per sample ``(i, node marginals, edge marginals (E, K, K), log Z)``, streaming over
        its labellings."""
        k = potentials.n_states
        for i, sample in self._samples(potentials, clamp, samples):
            # Streaming log-sum-exp: sums are kept relative to the largest score seen so far.
            shift, total = -np.inf, 0.0
            node = np.zeros(sample.unary.shape)
            pair = np.zeros((sample.n_edges, k, k))
            for y, scores in enumerate_scores(sample):
                top = scores.max()
                if not np.isfinite(top):
                    continue
                if top > shift:
                    rescale = np.exp(shift - top)
                    total, node, pair, shift = total * rescale, node * rescale, pair * rescale, top
                weight = np.exp(scores - shift)
                total += weight.sum()
                node += np.stack([weight @ (y == label) for label in range(k)], axis=1)
                first, second = y[:, sample.edges[:, 0]], y[:, sample.edges[:, 1]]
                pair += pair_statistics(
                    first.ravel(),
                    second.ravel(),
                    np.tile(np.arange(sample.n_edges), len(y)),
                    np.repeat(weight, sample.n_edges),
                    PairwiseKind.TABLES,
                    k,
                    sample.n_edges,
                )
            yield i, node / total, pair / total, shift + np.log(total)
