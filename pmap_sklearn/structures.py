"""Graph structures: sample parsing, joint feature map Ψ, potentials and MAP dispatch.

A structure turns samples into one flat :class:`SampleBatch` (all nodes stacked, one global edge
list) so that Ψ(x, y), the potentials of a weight vector and the oracle calls are vectorised over
the whole batch. Labels travel as one flat int array over the stacked nodes (``-1`` = unknown).

Weight layout (SPEC §1): ``w = [W.ravel(), v]`` with ``W`` of shape (n_node_features, K) (the
node features include a bias column when ``bias=True``) and ``v`` the pairwise weights: the K×K
transition scores on chains, the cut weights (one per edge feature, kept ``<= 0``) on loopy
binary graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator

from ._backend import chain as chain_oracle
from ._backend import cut as cut_oracle
from ._parallel import map_jobs

__all__ = [
    "GraphSample",
    "SampleBatch",
    "ChainStructure",
    "GridStructure",
    "GraphStructure",
    "check_structure",
]


@dataclass(frozen=True)
class GraphSample:
    """One sample on a general graph (e.g. superpixels of an image).

    Parameters
    ----------
    node_features : array-like of shape (D, F)
        Features of the nodes.
    edges : array-like of shape (E, 2)
        Undirected edges as pairs of node indices (no self-loops).
    edge_features : array-like of shape (E, G), optional
        Non-negative edge features; a single constant 1 per edge when omitted.
    node_sizes : array-like of shape (D,), optional
        Size of each node (pixels of a superpixel), used by size-weighted losses; 1 when omitted.
    """

    node_features: np.ndarray
    edges: np.ndarray
    edge_features: np.ndarray | None = None
    node_sizes: np.ndarray | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.node_features)


def _ranges(offsets: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(offsets[i], offsets[i + 1])`` for i in ``index``, vectorised."""
    starts, stops = offsets[index], offsets[index + 1]
    counts = stops - starts
    total = counts.sum()
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return np.arange(total) + shift


@dataclass
class SampleBatch:
    """Samples stacked into flat arrays (the vectorised view every structure works on).

    Attributes
    ----------
    features : ndarray of shape (n_nodes, n_node_features)
        Node features of all samples, bias column included.
    node_offsets : ndarray of shape (n_samples + 1,)
        Nodes of sample i are ``node_offsets[i]:node_offsets[i + 1]``.
    node_sizes : ndarray of shape (n_nodes,)
    edges : ndarray of shape (n_edges, 2)
        Edges in global node indices.
    edge_offsets : ndarray of shape (n_samples + 1,)
    edge_features : ndarray of shape (n_edges, G)
    label_shapes : list of tuple
        Shape of each sample's label array (``(D,)`` or ``(H, W)``).
    edge_directions : ndarray of shape (n_edges,) or None
        On grids, the index of each edge's direction (for the grid fast path of the cut).
    """

    features: np.ndarray
    node_offsets: np.ndarray
    node_sizes: np.ndarray
    edges: np.ndarray
    edge_offsets: np.ndarray
    edge_features: np.ndarray
    label_shapes: list
    edge_directions: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return len(self.node_offsets) - 1

    @property
    def n_nodes(self) -> int:
        return int(self.node_offsets[-1])

    @cached_property
    def lengths(self) -> np.ndarray:
        """Number of nodes of each sample."""
        return np.diff(self.node_offsets)

    @cached_property
    def node_sample(self) -> np.ndarray:
        """Index of the sample each node belongs to."""
        return np.repeat(np.arange(self.n_samples), self.lengths)

    @cached_property
    def edge_sample(self) -> np.ndarray:
        """Index of the sample each edge belongs to."""
        return np.repeat(np.arange(self.n_samples), np.diff(self.edge_offsets))

    def nodes_of(self, i: int) -> slice:
        return slice(self.node_offsets[i], self.node_offsets[i + 1])

    def edges_of(self, i: int) -> slice:
        return slice(self.edge_offsets[i], self.edge_offsets[i + 1])

    def node_index(self, index) -> np.ndarray | slice:
        """Indices of the nodes of the samples ``index`` (in that order); a slice of samples
        gives the slice of their nodes, so that indexing with it makes no copy."""
        if isinstance(index, slice):
            start, stop, _ = index.indices(self.n_samples)
            return slice(self.node_offsets[start], self.node_offsets[max(start, stop)])
        return _ranges(self.node_offsets, np.asarray(index, dtype=np.intp))

    def subset(self, index) -> SampleBatch:
        """The batch of the samples ``index`` (in that order), vectorised.

        A slice of samples (step 1) is cut without gathering: features, sizes and edge features
        are views, which is how the SGD learners take contiguous mini-batches of a batch
        permuted once per epoch.
        """
        if isinstance(index, slice):
            return self._contiguous(index)
        index = np.asarray(index, dtype=np.intp)
        nodes = self.node_index(index)
        edges = _ranges(self.edge_offsets, index)
        node_offsets = np.concatenate([[0], np.cumsum(self.lengths[index])])
        edge_offsets = np.concatenate([[0], np.cumsum(np.diff(self.edge_offsets)[index])])
        # Move each edge from its old node numbering to the new one.
        shift = np.repeat(node_offsets[:-1] - self.node_offsets[index], np.diff(edge_offsets))
        return SampleBatch(
            features=self.features[nodes],
            node_offsets=node_offsets,
            node_sizes=self.node_sizes[nodes],
            edges=self.edges[edges] + shift[:, None],
            edge_offsets=edge_offsets,
            edge_features=self.edge_features[edges],
            label_shapes=[self.label_shapes[i] for i in index],
            edge_directions=None if self.edge_directions is None else self.edge_directions[edges],
        )

    def _contiguous(self, index: slice) -> SampleBatch:
        start, stop, step = index.indices(self.n_samples)
        if step != 1:
            raise ValueError(f"a slice of samples must have step 1, got {step}")
        stop = max(start, stop)
        first, last = self.node_offsets[start], self.node_offsets[stop]
        edges = slice(self.edge_offsets[start], self.edge_offsets[stop])
        return SampleBatch(
            features=self.features[first:last],
            node_offsets=self.node_offsets[start : stop + 1] - first,
            node_sizes=self.node_sizes[first:last],
            edges=self.edges[edges] - first,
            edge_offsets=self.edge_offsets[start : stop + 1] - edges.start,
            edge_features=self.edge_features[edges],
            label_shapes=self.label_shapes[start:stop],
            edge_directions=None if self.edge_directions is None else self.edge_directions[edges],
        )

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Cut a node-aligned array (labels or marginals) into per-sample arrays."""
        return [
            flat[self.nodes_of(i)].reshape(shape + flat.shape[1:])
            for i, shape in enumerate(self.label_shapes)
        ]


class _Parsed(NamedTuple):
    """One validated sample in flat form."""

    features: np.ndarray  # (D, F)
    edges: np.ndarray  # (E, 2) local node indices
    edge_features: np.ndarray  # (E, G)
    sizes: np.ndarray  # (D,)
    shape: tuple  # shape of the label array
    directions: np.ndarray | None = None  # grid only: direction index of each edge


def _as_float_array(value, what: str, index: int) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample {index}: {what} must be numeric ({exc})") from None
    if not np.all(np.isfinite(array)):
        raise ValueError(f"sample {index}: {what} contain non-finite values (NaN or inf)")
    return array


class _BaseStructure(BaseEstimator):
    """Shared machinery; subclasses parse samples and define the pairwise part."""

    #: name of the MAP oracle the structure dispatches to
    oracle: str = ""
    #: True if the graph may have cycles (then K = 2 and the cut oracle is used)
    loopy: bool = True

    # ---- fitting: learn the dimensions -------------------------------------------------
    def fit(self, X, y=None):
        """Learn the number of node features (and labels from ``y``) from training samples."""
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        first = self._parse_sample(X[0], 0)
        self.n_features_in_ = first.features.shape[1]
        self.n_edge_features_ = first.edge_features.shape[1]
        self.n_states_ = self._infer_n_states(y)
        return self

    def _infer_n_states(self, y) -> int:
        n_states = getattr(self, "n_states", None)
        if self.loopy:
            n_states = 2
        if n_states is None:
            if y is None:
                raise ValueError("n_states is None and no labels y were given to infer it from")
            known = [np.asarray(yi).ravel() for yi in y]
            top = max((int(np.max(k)) for k in known if k.size), default=-1)
            n_states = max(top + 1, 2)
        return int(n_states)

    @property
    def n_node_features_(self) -> int:
        return self.n_features_in_ + int(self.bias)

    @property
    def n_unary_weights_(self) -> int:
        return self.n_node_features_ * self.n_states_

    @property
    def size_(self) -> int:
        """Length of the weight vector ``w``."""
        return self.n_unary_weights_ + self._n_pairwise_weights()

    def unpack(self, w: np.ndarray):
        """Split ``w`` into the unary weights (n_node_features, K) and the pairwise weights."""
        unary = w[: self.n_unary_weights_].reshape(self.n_node_features_, self.n_states_)
        return unary, w[self.n_unary_weights_ :]

    def project(self, w: np.ndarray) -> np.ndarray:
        """Project ``w`` (in place) onto the constraint set; identity by default."""
        return w

    # ---- samples -------------------------------------------------------------------------
    def prepare(self, X) -> SampleBatch:
        """Validate samples and stack them into a :class:`SampleBatch`.

        Raises
        ------
        ValueError
            Naming the index of the first bad sample and its problem.
        """
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        parsed = [self._parse_sample(X[i], i) for i in range(len(X))]
        for i, p in enumerate(parsed):
            if p.features.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"sample {i} has {p.features.shape[1]} node features, "
                    f"expected {self.n_features_in_} (as in the training samples)"
                )
            if p.edge_features.shape[1] != self.n_edge_features_:
                raise ValueError(
                    f"sample {i} has {p.edge_features.shape[1]} edge features, "
                    f"expected {self.n_edge_features_}"
                )
        n_edges = [len(p.edges) for p in parsed]
        node_offsets = np.concatenate([[0], np.cumsum([len(p.features) for p in parsed])])
        edge_offsets = np.concatenate([[0], np.cumsum(n_edges)])
        features = np.concatenate([p.features for p in parsed])
        if self.bias:
            features = np.hstack([features, np.ones((len(features), 1))])
        shift = np.repeat(node_offsets[:-1], n_edges)
        edges = np.concatenate([p.edges for p in parsed]).reshape(-1, 2) + shift[:, None]
        directions = None
        if parsed[0].directions is not None:
            directions = np.concatenate([p.directions for p in parsed])
        return SampleBatch(
            features=np.ascontiguousarray(features),
            node_offsets=node_offsets.astype(np.intp),
            node_sizes=np.concatenate([p.sizes for p in parsed]),
            edges=edges.astype(np.intp),
            edge_offsets=edge_offsets.astype(np.intp),
            edge_features=np.concatenate([p.edge_features for p in parsed]),
            label_shapes=[p.shape for p in parsed],
            edge_directions=directions,
        )

    def prepare_labels(self, batch: SampleBatch, y, allow_unknown: bool = False) -> np.ndarray:
        """Validate ``y`` against the batch and return one flat int array over its nodes.

        Parameters
        ----------
        allow_unknown : bool
            Whether ``-1`` (unknown label) is accepted.
        """
        if len(y) != batch.n_samples:
            raise ValueError(f"X has {batch.n_samples} samples but y has {len(y)} label arrays")
        low = -1 if allow_unknown else 0
        flat = []
        for i, yi in enumerate(y):
            yi = np.asarray(yi)
            expected = batch.lengths[i]
            if yi.size != expected or (yi.ndim > 1 and yi.shape != batch.label_shapes[i]):
                raise ValueError(
                    f"sample {i}: y has shape {yi.shape}, expected {batch.label_shapes[i]} "
                    f"(one label per node)"
                )
            if yi.size and not np.issubdtype(yi.dtype, np.integer):
                if not (np.issubdtype(yi.dtype, np.number) and np.all(yi == np.round(yi))):
                    raise ValueError(f"sample {i}: labels must be integers, got dtype {yi.dtype}")
            yi = yi.ravel().astype(np.intp)
            if yi.size and (yi.min() < low or yi.max() >= self.n_states_):
                bad = yi[(yi < low) | (yi >= self.n_states_)][0]
                allowed = f"{low}..{self.n_states_ - 1}"
                hint = ""
                if self.loopy and bad >= 2:
                    hint = (
                        f"; {type(self).__name__} is binary (K = 2, solved exactly by graph "
                        "cuts): K > 2 on a loopy graph is not supported"
                    )
                elif bad == -1:
                    hint = "; -1 (unknown) is not accepted here"
                raise ValueError(f"sample {i}: label {bad} out of range {allowed}{hint}")
            flat.append(yi)
        return np.concatenate(flat)

    def _check_edges(self, edges, n_nodes: int, index: int) -> np.ndarray:
        edges = np.asarray(edges)
        if edges.size == 0:
            return np.zeros((0, 2), dtype=np.intp)
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise ValueError(f"sample {index}: edges must have shape (E, 2), got {edges.shape}")
        if not np.issubdtype(edges.dtype, np.integer):
            raise ValueError(f"sample {index}: edges must be integer node indices")
        if edges.min() < 0 or edges.max() >= n_nodes:
            raise ValueError(
                f"sample {index}: edge endpoint out of range 0..{n_nodes - 1} "
                f"(found {edges.min()}..{edges.max()})"
            )
        if np.any(edges[:, 0] == edges[:, 1]):
            loop = int(np.flatnonzero(edges[:, 0] == edges[:, 1])[0])
            raise ValueError(f"sample {index}: edge {loop} is a self-loop {tuple(edges[loop])}")
        return edges.astype(np.intp)

    # ---- joint feature map Ψ -----------------------------------------------------------------
    def joint_feature(self, batch: SampleBatch, labels: np.ndarray, sample_weight=None):
        """``Σ_n c_n Ψ(x_n, y_n)`` over the batch (``c_n = 1`` unless ``sample_weight``);
        nodes with label -1 contribute nothing."""
        return self.joint_feature_difference(batch, labels, None, sample_weight)

    def joint_feature_difference(self, batch, labels, other_labels, sample_weight=None):
        """``Σ_n c_n [Ψ(x_n, y_n) − Ψ(x_n, y'_n)]`` in one pass (``y'`` = ``other_labels``, or
        nothing when None): the shape of every SGD gradient."""
        # Only the nodes whose labels differ contribute to the unary part of a difference.
        rows = slice(None) if other_labels is None else np.flatnonzero(labels != other_labels)
        onehot = self._onehot(labels[rows])
        if other_labels is not None:
            onehot -= self._onehot(other_labels[rows])
        edge_weight = None
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=float)
            onehot *= sample_weight[batch.node_sample[rows]][:, None]
            edge_weight = sample_weight[batch.edge_sample]
        pairwise = self._pairwise_feature(batch, labels, edge_weight)
        if other_labels is not None:
            pairwise -= self._pairwise_feature(batch, other_labels, edge_weight)
        return np.concatenate([(batch.features[rows].T @ onehot).ravel(), pairwise])

    def joint_feature_per_sample(self, batch: SampleBatch, labels, other_labels=None):
        """``Ψ(x_n, y_n)`` of every sample — or, with ``other_labels``, the differences
        ``Ψ(x_n, y_n) − Ψ(x_n, y'_n)`` — shape (n_samples, size_), in one vectorised pass."""
        n, k = batch.n_samples, self.n_states_
        rows = (
            np.arange(batch.n_nodes)
            if other_labels is None
            else np.flatnonzero(labels != other_labels)
        )
        onehot = self._onehot(labels[rows])
        if other_labels is not None:
            onehot -= self._onehot(other_labels[rows])
        # Row n·K + k of the selector sums the features of sample n's nodes weighted by their
        # onehot[:, k]: the unary block (F, K) of every sample in one sparse product.
        selector = sparse.csr_matrix(
            (
                onehot.ravel(),
                (
                    (batch.node_sample[rows, None] * k + np.arange(k)).ravel(),
                    np.repeat(np.arange(len(rows)), k),
                ),
            ),
            shape=(n * k, len(rows)),
        )
        unary = (selector @ batch.features[rows]).reshape(n, k, -1).transpose(0, 2, 1)
        groups = (batch.edge_sample, n)
        pairwise = self._pairwise_feature(batch, labels, groups=groups)
        if other_labels is not None:
            pairwise -= self._pairwise_feature(batch, other_labels, groups=groups)
        return np.hstack([unary.reshape(n, -1), pairwise])

    def expected_joint_feature(self, batch, node_marginals, pairwise_marginals) -> np.ndarray:
        """``Σ_n E[Ψ(x_n, y)]`` under node marginals (n_nodes, K) and the structure's pairwise
        marginals (see :meth:`marginals`)."""
        unary = (batch.features.T @ node_marginals).ravel()
        return np.concatenate([unary, self._expected_pairwise_feature(batch, pairwise_marginals)])

    def _pairwise_feature(self, batch, labels, edge_weight=None, groups=None):
        first, second = labels[batch.edges[:, 0]], labels[batch.edges[:, 1]]
        return self._pairwise_from_ends(batch, first, second, slice(None), edge_weight, groups)

    def clamped_joint_feature_difference(self, batch, map_labels, copies, clamped, weight):
        """``Σ_q c_q [Ψ(x_{s_q}, y*_{B,q}) − Ψ(x_{s_q}, y*_A)]`` for the output of
        :meth:`clamped_maps`, without copying the samples: only the nodes where a clamped
        maximiser differs from ``y*_A``, and the edges of the copies, are touched.

        Parameters
        ----------
        map_labels : ndarray of shape (n_nodes,)
        copies : ndarray of shape (Q,)
            Sample of each clamped maximiser.
        clamped : ndarray
            Flat labels of the copies (in the layout of ``batch.subset(copies)``).
        weight : ndarray of shape (Q,)
        """
        nodes = batch.node_index(copies)
        base = map_labels[nodes]
        node_weight = np.repeat(weight, batch.lengths[copies])
        changed = clamped != base
        k = self.n_states_
        flat = np.concatenate(
            [nodes[changed] * k + clamped[changed], nodes[changed] * k + base[changed]]
        )
        signed = np.concatenate([node_weight[changed], -node_weight[changed]])
        delta = np.bincount(flat, signed, minlength=batch.n_nodes * k).reshape(-1, k)
        n_edges = np.diff(batch.edge_offsets)[copies]
        edges = _ranges(batch.edge_offsets, copies)
        edge_copy = np.repeat(np.arange(len(copies)), n_edges)
        # Where each edge end sits in the flat labels of the copies.
        shift = (
            np.cumsum(batch.lengths[copies]) - batch.lengths[copies] - batch.node_offsets[copies]
        )
        ends = batch.edges[edges] + shift[edge_copy][:, None]
        moved = changed[ends[:, 0]] | changed[ends[:, 1]]  # other edges cancel
        edges, ends, edge_weight = edges[moved], ends[moved], weight[edge_copy[moved]]
        pairwise = self._pairwise_from_ends(
            batch, clamped[ends[:, 0]], clamped[ends[:, 1]], edges, edge_weight
        ) - self._pairwise_from_ends(
            batch,
            map_labels[batch.edges[edges, 0]],
            map_labels[batch.edges[edges, 1]],
            edges,
            edge_weight,
        )
        return np.concatenate([(batch.features.T @ delta).ravel(), pairwise])

    def _onehot(self, labels: np.ndarray) -> np.ndarray:
        onehot = np.zeros((len(labels), self.n_states_))
        known = labels >= 0
        onehot[np.flatnonzero(known), labels[known]] = 1.0
        return onehot

    def node_scores(self, batch: SampleBatch, w: np.ndarray, noise=None) -> np.ndarray:
        """Unary scores (n_nodes, K) = node features @ W (+ perturbation)."""
        unary = batch.features @ self.unpack(w)[0]
        return unary if noise is None else unary + noise

    def score(self, batch: SampleBatch, w: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """``f(y_n | x_n) = w · Ψ(x_n, y_n)`` of every sample, shape (n_samples,)."""
        unary = self.node_scores(batch, w)[np.arange(batch.n_nodes), labels]
        total = np.bincount(batch.node_sample, unary, minlength=batch.n_samples)
        pairwise = self._edge_scores(batch, w, labels)
        return total + np.bincount(batch.edge_sample, pairwise, minlength=batch.n_samples)

    def dense_model(self, batch: SampleBatch, w: np.ndarray, index: int, noise=None):
        """Sample ``index`` in the general pairwise form used by the brute-force oracle:
        ``(unary (D, K), edges (E, 2), pairwise (E, K, K))``."""
        nodes, edge_slice = batch.nodes_of(index), batch.edges_of(index)
        noise_i = None if noise is None else noise[nodes]
        unary = self.node_scores(batch.subset([index]), w, noise_i)
        edges = batch.edges[edge_slice] - batch.node_offsets[index]
        return unary, edges, self._pairwise_tables(batch, w, edge_slice)

    # ---- inference ------------------------------------------------------------------------
    def map(self, batch, w, noise=None, clamp=None, n_jobs=None) -> np.ndarray:
        """MAP labelling of every sample: ``argmax_y f(y|x) + Σ_d noise_d(y_d)``.

        Parameters
        ----------
        batch : SampleBatch
        w : ndarray of shape (size_,)
        noise : ndarray of shape (n_nodes, K), optional
            Perturbation added to the unary scores.
        clamp : ndarray of shape (n_nodes,), optional
            Labels the nodes are forced to, ``-1`` for free nodes.
        n_jobs : int, optional
            Processes for the per-sample oracle calls (graph cuts); chains are solved in one
            vectorised call.

        Returns
        -------
        labels : ndarray of shape (n_nodes,)
        """
        raise NotImplementedError

    def clamped_maps(
        self, batch, w, noise, nodes, labels, dynamic=True, skip_agreeing=False, n_jobs=None
    ):
        """The MAP labelling ``y*_A`` and, per query, the MAP with one node clamped.

        Query q asks for ``argmax_{y: y_d = k} f(y|x) + Σ_s noise_s(y_s)`` on the sample of node
        ``d = nodes[q]`` with ``k = labels[q]`` (the ``y*_B`` of SPEC §2).

        Parameters
        ----------
        nodes : ndarray of shape (Q,)
            Flat node indices, sorted in increasing order.
        labels : ndarray of shape (Q,)
        dynamic : bool, default=True
            Solve the clamps from the unclamped solve (max-product pointers on chains, dynamic
            graph cuts on the residual graph on loopy structures); False solves each clamped
            problem from scratch. Both give the same maximisers.
        skip_agreeing : bool, default=False
            Gumbel reduction: do not solve queries whose label already is the MAP's label at
            that node (their maximiser is ``y*_A`` itself).

        Returns
        -------
        map_labels : ndarray of shape (n_nodes,)
        solved : ndarray of shape (Q,) of bool
            The queries that were solved.
        copies : ndarray of shape (n_solved,)
            Sample of each solved query.
        clamped : ndarray
            Flat labels over ``batch.subset(copies)``: the solved queries' labellings, in order.
        """
        nodes = np.asarray(nodes, dtype=np.intp)
        labels = np.asarray(labels, dtype=np.intp)
        if np.any(np.diff(nodes) < 0):
            raise ValueError("clamped_maps needs the query nodes in increasing order")
        if dynamic:
            map_labels, solved, clamped = self._dynamic_clamped_maps(
                batch, w, noise, nodes, labels, skip_agreeing, n_jobs
            )
            return map_labels, solved, batch.node_sample[nodes[solved]], clamped
        map_labels = self.map(batch, w, noise, n_jobs=n_jobs)
        solved = np.ones(len(nodes), dtype=bool)
        if skip_agreeing:
            solved = map_labels[nodes] != labels
        nodes, labels = nodes[solved], labels[solved]
        copies = batch.node_sample[nodes]
        if len(nodes) == 0:
            return map_labels, solved, copies, np.zeros(0, dtype=np.intp)
        replicated = batch.subset(copies)
        clamp = np.full(replicated.n_nodes, -1)
        clamp[replicated.node_offsets[:-1] + nodes - batch.node_offsets[copies]] = labels
        replicated_noise = None if noise is None else noise[batch.node_index(copies)]
        clamped = self.map(replicated, w, replicated_noise, clamp, n_jobs=n_jobs)
        return map_labels, solved, copies, clamped


class ChainStructure(_BaseStructure):
    """Linear chains (sequences) with any number of labels, solved exactly by Viterbi.

    A sample is an array of shape (D, F): the features of its D nodes in order. The pairwise
    part of Ψ counts the transitions ``(y_d, y_{d+1})`` (K×K unconstrained weights).

    Parameters
    ----------
    n_states : int, optional
        Number of labels K; inferred from the training labels (max + 1) when None.
    bias : bool, default=True
        Append a constant feature to every node (a per-label bias).
    """

    oracle = "viterbi"
    loopy = False

    def __init__(self, n_states: int | None = None, bias: bool = True):
        self.n_states = n_states
        self.bias = bias

    def _parse_sample(self, x, index):
        if isinstance(x, GraphSample):
            raise ValueError(f"sample {index}: ChainStructure takes (D, F) arrays, not GraphSample")
        features = _as_float_array(x, "node features", index)
        if features.ndim != 2 or features.shape[0] == 0:
            raise ValueError(
                f"sample {index}: expected a 2-D array (n_nodes, n_features) with at least one "
                f"node, got shape {features.shape}"
            )
        n = features.shape[0]
        edges = np.column_stack([np.arange(n - 1), np.arange(1, n)])
        return _Parsed(features, edges, np.ones((n - 1, 0)), np.ones(n), (n,))

    def _n_pairwise_weights(self) -> int:
        return self.n_states_**2

    def transition(self, w: np.ndarray) -> np.ndarray:
        return self.unpack(w)[1].reshape(self.n_states_, self.n_states_)

    def _pairwise_from_ends(self, batch, first, second, edge_rows, edge_weight, groups=None):
        """Transition counts of the edges whose end labels are ``first``/``second``; with
        ``groups = (group of each edge, n_groups)`` one row of counts per group."""
        known = (first >= 0) & (second >= 0)
        size = self.n_states_**2
        code = first[known] * self.n_states_ + second[known]
        weight = None if edge_weight is None else edge_weight[known]
        if groups is None:
            return np.bincount(code, weight, minlength=size).astype(float)
        group, n_groups = groups
        code += group[known] * size
        counts = np.bincount(code, weight, minlength=n_groups * size)
        return counts.reshape(n_groups, size).astype(float)

    def _expected_pairwise_feature(self, batch, pairwise_marginals):
        return np.asarray(pairwise_marginals).reshape(-1, self.n_states_**2).sum(axis=0)

    def _edge_scores(self, batch, w, labels):
        return self.transition(w)[labels[batch.edges[:, 0]], labels[batch.edges[:, 1]]]

    def _pairwise_tables(self, batch, w, edge_slice):
        n_edges = edge_slice.stop - edge_slice.start
        return np.broadcast_to(self.transition(w), (n_edges,) + (self.n_states_,) * 2)

    def padded(self, batch: SampleBatch, node_values: np.ndarray, fill: float = 0.0):
        """Scatter node-aligned values (n_nodes, K) into a padded (B, L, K) array; also returns
        each node's position in its chain."""
        return _pad(node_values, batch.lengths, fill)

    def _unary(self, batch, w, noise, clamp):
        """Node scores (n_nodes, K), ``-inf`` for the labels a clamped node may not take."""
        unary = self.node_scores(batch, w, noise)
        if clamp is not None:
            fixed = clamp >= 0
            forbidden = np.zeros_like(unary, dtype=bool)
            forbidden[fixed] = True
            forbidden[np.flatnonzero(fixed), clamp[fixed]] = False
            unary = np.where(forbidden, -np.inf, unary)
        return unary

    def _padded_unary(self, batch, w, noise, clamp):
        return self.padded(batch, self._unary(batch, w, noise, clamp))

    def map(self, batch, w, noise=None, clamp=None, n_jobs=None):
        padded, position = self._padded_unary(batch, w, noise, clamp)
        labels = chain_oracle.viterbi(padded, batch.lengths, self.transition(w))
        return labels[batch.node_sample, position]

    def _dynamic_clamped_maps(self, batch, w, noise, nodes, labels, skip_agreeing, n_jobs):
        padded, position = self._padded_unary(batch, w, noise, None)
        chains = batch.node_sample[nodes]
        map_padded, solved, clamped = chain_oracle.viterbi_with_clamps(
            padded,
            batch.lengths,
            self.transition(w),
            chains,
            position[nodes],
            labels,
            skip_agreeing,
        )
        lengths = batch.lengths[chains[solved]]
        query = np.repeat(np.arange(len(lengths)), lengths)
        within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return map_padded[batch.node_sample, position], solved, clamped[query, within]

    def marginals(self, batch, w, clamp=None, chunk=256):
        """Exact node marginals (n_nodes, K), expected transition counts (B, K, K) and log Z.

        With ``clamp`` (flat labels, ``-1`` = free) the sums run over the labellings that agree
        with the clamped nodes (conditional marginals and the clamped log-partition). The node
        scores are computed once; forward-backward runs on ``chunk`` chains at a time (small
        padded arrays stay in cache).
        """
        unary = self._unary(batch, w, None, clamp)
        node = np.empty_like(unary)
        pair = np.empty((batch.n_samples, self.n_states_, self.n_states_))
        log_z = np.empty(batch.n_samples)
        transition = self.transition(w)
        for begin in range(0, batch.n_samples, chunk):
            end = min(begin + chunk, batch.n_samples)
            nodes = slice(batch.node_offsets[begin], batch.node_offsets[end])
            lengths = batch.lengths[begin:end]
            padded, position = _pad(unary[nodes], lengths)
            log_z[begin:end], node_padded, pair[begin:end] = chain_oracle.forward_backward(
                padded, lengths, transition
            )
            node[nodes] = node_padded[np.repeat(np.arange(end - begin), lengths), position]
        return node, pair, log_z


def _pad(node_values: np.ndarray, lengths: np.ndarray, fill: float = 0.0):
    """Values of consecutive chains (n_nodes, ...) as a padded (B, L, ...) array, and the
    position of each node in its chain."""
    starts = np.cumsum(lengths) - lengths
    chain = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(len(node_values)) - starts[chain]
    out = np.full((len(lengths), lengths.max()) + node_values.shape[1:], fill)
    out[chain, position] = node_values
    return out, position


class _CutStructure(_BaseStructure):
    """Binary (K = 2) structures with Potts cut terms, solved exactly by graph cuts."""

    oracle = "graph_cut"
    loopy = True

    def _n_pairwise_weights(self) -> int:
        return self.n_edge_features_

    def project(self, w):
        """Keep the cut weights ``v <= 0`` so the score stays supermodular (SPEC §1)."""
        pairwise = w[self.n_unary_weights_ :]
        np.minimum(pairwise, 0.0, out=pairwise)
        return w

    def _disagree(self, batch, labels):
        return (labels[batch.edges[:, 0]] != labels[batch.edges[:, 1]]).astype(float)

    def _pairwise_from_ends(self, batch, first, second, edge_rows, edge_weight, groups=None):
        """``Σ_e ψ_e [first_e != second_e]`` over the edges ``edge_rows`` of the batch; with
        ``groups = (group of each edge, n_groups)`` one row per group."""
        cut = ((first != second) & (first >= 0) & (second >= 0)).astype(float)
        if edge_weight is not None:
            cut *= edge_weight
        if groups is None:
            return batch.edge_features[edge_rows].T @ cut
        group, n_groups = groups
        selector = sparse.csr_matrix(
            (cut, (group, np.arange(len(cut)))), shape=(n_groups, len(cut))
        )
        return selector @ batch.edge_features[edge_rows]

    def _expected_pairwise_feature(self, batch, pairwise_marginals):
        return batch.edge_features.T @ np.asarray(pairwise_marginals, dtype=float)

    def edge_weights(self, batch, w) -> np.ndarray:
        """Score ``v · ψ_ij <= 0`` of every edge when its ends disagree."""
        return batch.edge_features @ self.unpack(w)[1]

    def _edge_scores(self, batch, w, labels):
        return self.edge_weights(batch, w) * self._disagree(batch, labels)

    def _pairwise_tables(self, batch, w, edge_slice):
        weights = self.edge_weights(batch, w)[edge_slice]
        return weights[:, None, None] * (1.0 - np.eye(2))

    def _problems(self, batch, w, noise, clamp):
        unary = self.node_scores(batch, w, noise)
        edge_weights = self.edge_weights(batch, w)
        return [self._problem(batch, i, unary, edge_weights, clamp) for i in range(batch.n_samples)]

    def map(self, batch, w, noise=None, clamp=None, n_jobs=None):
        problems = self._problems(batch, w, noise, clamp)
        solved = map_jobs(self._solve, [(p,) for p in problems], n_jobs)
        return np.concatenate([labels.ravel() for labels in solved])

    def _dynamic_clamped_maps(self, batch, w, noise, nodes, labels, skip_agreeing, n_jobs):
        problems = self._problems(batch, w, noise, None)
        bounds = np.searchsorted(batch.node_sample[nodes], np.arange(batch.n_samples + 1))
        jobs = [
            (self._cut_kind, p[:3], nodes[a:b] - batch.node_offsets[i], labels[a:b], skip_agreeing)
            for i, (p, a, b) in enumerate(zip(problems, bounds[:-1], bounds[1:], strict=True))
        ]
        results = map_jobs(cut_oracle.dynamic_clamped_maps, jobs, n_jobs)
        map_labels = np.concatenate([r[0] for r in results])
        solved = np.concatenate([r[1] for r in results])
        clamped = np.concatenate([r[2].ravel() for r in results])
        return map_labels, solved, clamped


class GraphStructure(_CutStructure):
    """Binary labelling of general graphs (superpixels), solved exactly by graph cuts.

    A sample is a :class:`GraphSample` (or a tuple ``(node_features, edges[, edge_features[,
    node_sizes]])``). The pairwise part of Ψ is ``Σ_(i,j) ψ_ij [y_i != y_j]`` with the edge
    features ``ψ_ij >= 0``; their weights are kept ``<= 0``.

    Parameters
    ----------
    bias : bool, default=True
        Append a constant feature to every node.
    """

    def __init__(self, bias: bool = True):
        self.bias = bias

    def _parse_sample(self, x, index):
        if isinstance(x, tuple | list) and not isinstance(x, GraphSample):
            x = GraphSample(*x)
        if not isinstance(x, GraphSample):
            raise ValueError(
                f"sample {index}: GraphStructure takes GraphSample objects "
                f"(node_features, edges, ...), got {type(x).__name__}"
            )
        features = _as_float_array(x.node_features, "node features", index)
        if features.ndim != 2 or features.shape[0] == 0:
            raise ValueError(
                f"sample {index}: node_features must have shape (n_nodes, n_features), "
                f"got {features.shape}"
            )
        n = features.shape[0]
        edges = self._check_edges(x.edges, n, index)
        if x.edge_features is None:
            edge_features = np.ones((len(edges), 1))
        else:
            edge_features = _as_float_array(x.edge_features, "edge features", index)
            if edge_features.ndim == 1:
                edge_features = edge_features[:, None]
            if edge_features.ndim != 2 or edge_features.shape[0] != len(edges):
                raise ValueError(
                    f"sample {index}: edge_features must have shape (E, G) with E = "
                    f"{len(edges)} edges, got {edge_features.shape}"
                )
            if edge_features.size and edge_features.min() < 0:
                raise ValueError(f"sample {index}: edge features must be >= 0 (cut weights)")
        sizes = np.ones(n)
        if x.node_sizes is not None:
            sizes = _as_float_array(x.node_sizes, "node sizes", index).ravel()
            if sizes.shape != (n,) or sizes.min() <= 0:
                raise ValueError(f"sample {index}: node_sizes must be {n} positive numbers")
        return _Parsed(features, edges, edge_features, sizes, (n,))

    _cut_kind = "graph"

    def _problem(self, batch, i, unary, edge_weights, clamp):
        nodes, edges = batch.nodes_of(i), batch.edges_of(i)
        return (
            unary[nodes],
            batch.edges[edges] - batch.node_offsets[i],
            edge_weights[edges],
            None if clamp is None else clamp[nodes],
        )

    def _solve(self, problem):
        return cut_oracle.graph_cut_map(*problem)


class GridStructure(_CutStructure):
    """Binary labelling of image grids, solved exactly by graph cuts (grid fast path).

    A sample is an image of shape (H, W) or (H, W, F); labels have shape (H, W). Each direction
    of the neighbourhood has its own cut weight (e.g. horizontal and vertical).

    Parameters
    ----------
    connectivity : {4, 8}, default=4
        Neighbourhood of a pixel.
    contrast : bool, default=False
        Add, per direction, the contrast edge feature ``exp(-β ||x_i - x_j||²)`` with the
        per-image ``β = 1 / (2 mean ||x_i - x_j||²)`` (Boykov & Jolly; GrabCut).
    bias : bool, default=True
        Append a constant feature to every pixel.
    """

    def __init__(self, connectivity: int = 4, contrast: bool = False, bias: bool = True):
        self.connectivity = connectivity
        self.contrast = contrast
        self.bias = bias

    @property
    def offsets(self) -> list[tuple[int, int]]:
        if self.connectivity not in (4, 8):
            raise ValueError(f"connectivity must be 4 or 8, got {self.connectivity!r}")
        base = [(0, 1), (1, 0)]
        return base if self.connectivity == 4 else base + [(1, 1), (1, -1)]

    def _parse_sample(self, x, index):
        image = _as_float_array(x, "pixel features", index)
        if image.ndim == 2:
            image = image[:, :, None]
        if image.ndim != 3 or image.shape[0] == 0 or image.shape[1] == 0:
            raise ValueError(
                f"sample {index}: expected an image of shape (H, W) or (H, W, F), got {np.shape(x)}"
            )
        height, width, n_features = image.shape
        ids = np.arange(height * width).reshape(height, width)
        flat = image.reshape(-1, n_features)
        per_kind = 1 + int(bool(self.contrast))
        edges, directions = [], []
        for k, (dr, dc) in enumerate(self.offsets):
            src = ids[: height - dr, max(0, -dc) : width - max(0, dc)].ravel()
            edges.append(np.column_stack([src, src + dr * width + dc]))
            directions.append(np.full(len(src), k))
        edges, directions = np.concatenate(edges), np.concatenate(directions)
        # One constant feature per direction (and a contrast feature per direction).
        edge_features = np.zeros((len(edges), len(self.offsets) * per_kind))
        edge_features[np.arange(len(edges)), directions * per_kind] = 1.0
        if self.contrast:
            sq = ((flat[edges[:, 0]] - flat[edges[:, 1]]) ** 2).sum(axis=1)
            beta = 1.0 / (2.0 * sq.mean()) if sq.size and sq.mean() > 0 else 0.0
            edge_features[np.arange(len(edges)), directions * per_kind + 1] = np.exp(-beta * sq)
        sizes = np.ones(height * width)
        return _Parsed(flat, edges, edge_features, sizes, (height, width), directions)

    _cut_kind = "grid"

    def _problem(self, batch, i, unary, edge_weights, clamp):
        nodes, edges = batch.nodes_of(i), batch.edges_of(i)
        height, width = batch.label_shapes[i]
        grid_weights = np.zeros((len(self.offsets), height * width))
        local_src = batch.edges[edges, 0] - batch.node_offsets[i]
        grid_weights[batch.edge_directions[edges], local_src] = edge_weights[edges]
        return (
            unary[nodes].reshape(height, width, 2),
            self.offsets,
            grid_weights.reshape(-1, height, width),
            None if clamp is None else clamp[nodes].reshape(height, width),
        )

    def _solve(self, problem):
        return cut_oracle.grid_cut_map(*problem)


_STRUCTURES = {"chain": ChainStructure, "grid": GridStructure, "graph": GraphStructure}


def check_structure(structure) -> _BaseStructure:
    """Resolve ``"chain" | "grid" | "graph"`` or a structure instance to a fresh instance."""
    if isinstance(structure, str):
        if structure not in _STRUCTURES:
            raise ValueError(
                f"structure must be one of {sorted(_STRUCTURES)} or a structure instance, "
                f"got {structure!r}"
            )
        return _STRUCTURES[structure]()
    if isinstance(structure, _BaseStructure):
        from sklearn.base import clone

        return clone(structure)
    raise ValueError(
        f"structure must be one of {sorted(_STRUCTURES)} or a structure instance, "
        f"got {type(structure).__name__}"
    )
