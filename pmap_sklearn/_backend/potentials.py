"""Potentials — what a structure hands a solver — and sufficient statistics in their space.

A batch of pairwise models ``f_n(y) = Σ_d unary[d, y_d] + Σ_(i,j) pairwise_ij(y_i, y_j)``, all
samples stacked: nodes ``node_offsets[n]:node_offsets[n + 1]`` and edges
``edge_offsets[n]:edge_offsets[n + 1]`` belong to sample n, edges hold global node indices. The
pairwise scores come in one of three kinds:

- ``"potts"``: ``pairwise`` of shape (E,), the score ``w_ij [y_i != y_j]`` of every edge;
- ``"shared"``: one (K, K) table ``T[y_i, y_j]`` for every edge (chains);
- ``"tables"``: one (K, K) table per edge, shape (E, K, K).

The score is linear in the *sufficient statistics* of a labelling: the one-hot rows of its
nodes and, per kind, the disagreement of every edge / the transition counts / the one-hot pair
of every edge. :class:`Statistics` holds them: for a labelling ``f(y) = ⟨φ(y), θ⟩``; their
expectation under a distribution is its marginals; a weighted difference
``Σ_q c_q [φ(y_q) − φ(y'_q)]`` is the gradient of ``Σ_q c_q [f(y_q) − f(y'_q)]`` with respect
to the potentials. A structure turns statistics into its joint feature map Ψ by the chain rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .._utils import StackedSamples, onehot, ranges
from .capabilities import PairwiseKind
from .constraints import TransitionConstraints

_KIND_BY_NDIM = {1: PairwiseKind.POTTS, 2: PairwiseKind.SHARED, 3: PairwiseKind.TABLES}


@dataclass(frozen=True, eq=False)
class ChainLayout:
    """Marks potentials whose edges join each sample's consecutive nodes ``(d, d + 1)``, in
    order (set by :class:`~pmap_sklearn.ChainStructure`; chain solvers then skip checking).

    Parameters
    ----------
    constraints : TransitionConstraints, optional
        The labellings the model forbids (solvers without the ``constraints`` capability
        refuse such potentials).
    """

    constraints: TransitionConstraints | None = None

    def subset(self, samples, edge_index) -> ChainLayout:
        return self

    def sample(self, i, edges) -> ChainLayout:
        return self


@dataclass(frozen=True, eq=False)
class GridLayout:
    """Where the nodes and edges of image samples sit on their pixel grids.

    Solvers with an image fast path (graph cuts) read it; others ignore it. Nodes are the pixels
    in row-major order; an edge of direction k joins ``(r, c)`` to ``(r + dr_k, c + dc_k)``.

    Parameters
    ----------
    shapes : tuple of (H, W)
        Image shape of each sample.
    offsets : tuple of (dr, dc)
        The neighbour directions.
    directions : ndarray of shape (E,)
        Direction index of each edge.
    """

    shapes: tuple
    offsets: tuple
    directions: np.ndarray

    def subset(self, samples, edge_index) -> GridLayout:
        return GridLayout(
            tuple(self.shapes[i] for i in samples), self.offsets, self.directions[edge_index]
        )

    def sample(self, i, edges: slice) -> GridLayout:
        return GridLayout((self.shapes[i],), self.offsets, self.directions[edges])


@dataclass(frozen=True, eq=False)
class Potentials(StackedSamples):
    """Unary and pairwise scores of a batch of pairwise models (see :ref:`solvers`).

    Parameters
    ----------
    unary : ndarray of shape (n_nodes, K)
        Score of each label at each node (all samples, one after the other).
    edges : ndarray of shape (E, 2), optional
        Global node indices; no edge when omitted.
    pairwise : ndarray of shape (E,), (K, K) or (E, K, K), optional
        Potts weights, a shared table or per-edge tables; zero Potts weights when omitted.
    node_offsets, edge_offsets : ndarray of shape (n_samples + 1,), optional
        Sample boundaries; one sample when omitted.
    layout : GridLayout or ChainLayout, optional
        How the nodes are laid out (pixel grids, chains), for solvers with a fast path.
    graph_checked : bool, default=False
        The graph is known to be valid (the estimators' own potentials, whose samples were
        checked when parsed): solvers then skip :meth:`check_graph`. Leave it False on
        potentials built by hand.

    Examples
    --------
    A binary model on a triangle with attractive Potts terms:

    >>> import numpy as np
    >>> from pmap_sklearn import Potentials
    >>> p = Potentials(np.array([[0.0, 1.0], [0.0, -1.0], [0.0, 0.5]]),
    ...                edges=[[0, 1], [1, 2], [0, 2]], pairwise=[-0.5, -0.5, -0.5])
    >>> p.pairwise_kind, p.n_states
    (<PairwiseKind.POTTS: 'potts'>, 2)
    >>> p.pairwise_kind == "potts"
    True
    >>> p.score(np.array([1, 1, 1]))
    array([0.5])
    """

    unary: np.ndarray
    edges: np.ndarray | None = None
    pairwise: np.ndarray | None = None
    node_offsets: np.ndarray | None = None
    edge_offsets: np.ndarray | None = None
    layout: GridLayout | ChainLayout | None = field(default=None, repr=False)
    # potentials cut from checked ones (a sample, a subset, new scores) stay checked
    graph_checked: bool = field(default=False, repr=False, kw_only=True)

    def __post_init__(self):
        for name in ("unary", "pairwise"):
            if np.iscomplexobj(getattr(self, name)):
                raise ValueError(f"{name} scores must be real numbers, got complex values")
        unary = np.asarray(self.unary, dtype=float)
        if unary.ndim != 2:
            raise ValueError(f"unary must have shape (n_nodes, K), got {unary.shape}")
        edges = np.zeros((0, 2), np.intp) if self.edges is None else np.asarray(self.edges)
        edges = np.zeros((0, 2), np.intp) if edges.size == 0 else edges
        if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
            raise ValueError(f"edges must be an int array of shape (E, 2), got {edges.shape}")
        pairwise = np.zeros(len(edges)) if self.pairwise is None else self.pairwise
        pairwise = np.asarray(pairwise, dtype=float)
        k, n_edges = unary.shape[1], len(edges)
        if pairwise.shape not in ((n_edges,), (k, k), (n_edges, k, k)):
            raise ValueError(
                f"pairwise must have shape ({n_edges},) (Potts weights), ({k}, {k}) (a shared "
                f"table) or ({n_edges}, {k}, {k}) (per-edge tables), got {pairwise.shape}"
            )
        node_offsets = self.node_offsets
        node_offsets = np.asarray(
            [0, len(unary)] if node_offsets is None else node_offsets, dtype=np.intp
        )
        edge_offsets = self.edge_offsets
        if edge_offsets is None:  # one sample, or samples without edges
            edge_offsets = [0, n_edges] if n_edges else np.zeros_like(node_offsets)
        edge_offsets = np.asarray(edge_offsets, dtype=np.intp)
        if (
            node_offsets.shape != edge_offsets.shape
            or node_offsets[-1] != len(unary)
            or edge_offsets[-1] != n_edges
        ):
            raise ValueError("node_offsets / edge_offsets do not match the nodes and edges")
        for name, value in [
            ("unary", unary),
            ("edges", edges.astype(np.intp, copy=False)),
            ("pairwise", pairwise),
            ("node_offsets", node_offsets),
            ("edge_offsets", edge_offsets),
        ]:
            object.__setattr__(self, name, value)

    # ---- shape ---------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return self.unary.shape[0]

    @property
    def n_states(self) -> int:
        return self.unary.shape[1]

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def pairwise_kind(self) -> str:
        """The :class:`~pmap_sklearn.solvers.PairwiseKind` of the scores (from the shape of
        ``pairwise``)."""
        return _KIND_BY_NDIM[self.pairwise.ndim]

    def _pairwise_of(self, edges) -> np.ndarray:
        """The pairwise scores of some edges (a slice or indices); a shared table stays one."""
        if self.pairwise_kind is PairwiseKind.SHARED:
            return self.pairwise
        if isinstance(edges, slice):
            return self.pairwise[edges]
        return np.take(self.pairwise, edges, axis=0)

    # ---- checks ----------------------------------------------------------------------------
    def check(self) -> Potentials:
        """Fully validate user-built potentials: the graph (:meth:`check_graph`) and finite
        scores.

        Returns
        -------
        Potentials
            ``self``.

        Raises
        ------
        ValueError
            Naming the problem (and the sample).
        """
        self.check_graph()
        if not np.isfinite(self.unary).all():
            raise ValueError("unary scores contain non-finite values (NaN or inf)")
        if not np.isfinite(self.pairwise).all():
            raise ValueError("pairwise scores contain non-finite values (NaN or inf)")
        return self

    def check_graph(self) -> Potentials:
        """Validate the graph in one vectorised pass: non-decreasing offsets, every edge
        inside its sample's nodes, no self-loop. Every solver calls it before any work
        (a no-op on potentials with ``graph_checked``).

        Returns
        -------
        Potentials
            ``self``.

        Raises
        ------
        ValueError
            Naming the edge, its sample and the problem.
        """
        if self.graph_checked:
            return self
        if np.any(np.diff(self.node_offsets) < 0) or np.any(np.diff(self.edge_offsets) < 0):
            raise ValueError("node_offsets and edge_offsets must be non-decreasing")
        if self.node_offsets[0] != 0 or self.edge_offsets[0] != 0:
            raise ValueError("node_offsets and edge_offsets must start at 0")
        if not self.n_edges:
            return self
        sample = self.edge_sample
        low, high = self.node_offsets[sample], self.node_offsets[sample + 1]
        outside = (self.edges < low[:, None]) | (self.edges >= high[:, None])
        if outside.any():
            edge = int(np.flatnonzero(outside.any(axis=1))[0])
            raise ValueError(
                f"edge {edge} {tuple(int(v) for v in self.edges[edge])} of sample "
                f"{int(sample[edge])} leaves the sample's nodes {int(low[edge])}.."
                f"{int(high[edge]) - 1} (negative, out of range, or in another sample)"
            )
        loops = np.flatnonzero(self.edges[:, 0] == self.edges[:, 1])
        if len(loops):
            edge = int(loops[0])
            raise ValueError(
                f"edge {edge} of sample {int(sample[edge])} is a self-loop on node "
                f"{int(self.edges[edge, 0])}"
            )
        return self

    # ---- derived potentials ---------------------------------------------------------------
    def add_unary(self, extra: np.ndarray) -> Potentials:
        """The same model with scores added to the unary scores.

        Parameters
        ----------
        extra : ndarray of shape (n_nodes, K)
            Added scores: a perturbation, or the loss of a loss-augmented MAP.

        Returns
        -------
        Potentials
            A new object; ``self`` is unchanged.
        """
        return replace(self, unary=self.unary + extra)

    def edge_tables(self) -> np.ndarray:
        """The pairwise scores as per-edge tables, whatever their kind.

        Returns
        -------
        ndarray of shape (E, K, K)
            ``[e, a, b]`` is the score of edge e's endpoints labelled a and b (a read-only
            broadcast view for a shared table).
        """
        k = self.n_states
        if self.pairwise_kind is PairwiseKind.TABLES:
            return self.pairwise
        if self.pairwise_kind is PairwiseKind.SHARED:
            return np.broadcast_to(self.pairwise, (self.n_edges, k, k))
        return self.pairwise[:, None, None] * (1.0 - np.eye(k))

    def as_potts(self) -> tuple[Potentials, np.ndarray]:
        """A binary model rewritten with Potts pairwise terms: ``(potentials, constant)``.

        Every binary table is ``T00 + (T10 − T00) y_i + (T01 − T00) y_j + c y_i y_j`` with
        ``c = T00 + T11 − T01 − T10``, and ``y_i y_j = (y_i + y_j − [y_i != y_j]) / 2``: the
        model equals unary terms plus Potts weights ``−c/2`` plus a constant per sample. The
        Potts weights are ``<= 0`` exactly when the score is supermodular (attractive).

        Returns
        -------
        potentials : Potentials
            The model with Potts pairwise weights.
        constant : ndarray of shape (n_samples,)
            What each sample's score differs by: ``f_n(y) = potts_n(y) + constant_n``.
        """
        if self.pairwise_kind is PairwiseKind.POTTS:
            return self, np.zeros(self.n_samples)
        if self.n_states != 2:
            raise ValueError(f"only binary models have a Potts form, got K = {self.n_states}")
        tables = self.edge_tables()
        t00, t01, t10, t11 = tables[:, 0, 0], tables[:, 0, 1], tables[:, 1, 0], tables[:, 1, 1]
        coupling = t00 + t11 - t01 - t10
        gain = np.bincount(self.edges[:, 0], t10 - t00 + coupling / 2, minlength=self.n_nodes)
        gain += np.bincount(self.edges[:, 1], t01 - t00 + coupling / 2, minlength=self.n_nodes)
        unary = self.unary.copy()
        unary[:, 1] += gain
        constant = np.bincount(self.edge_sample, t00, minlength=self.n_samples)
        return replace(self, unary=unary, pairwise=-coupling / 2), constant

    # ---- scores ---------------------------------------------------------------------------
    def score(self, labels: np.ndarray) -> np.ndarray:
        """The score ``f_n(y_n)`` of a labelling of every sample.

        Parameters
        ----------
        labels : ndarray of shape (n_nodes,)
            Labels of all nodes, samples one after the other.

        Returns
        -------
        ndarray of shape (n_samples,)
            Unary plus pairwise scores of each sample (``-inf`` for a labelling its
            :class:`TransitionConstraints` forbid).
        """
        labels = np.asarray(labels)
        unary = self.unary[np.arange(self.n_nodes), labels]
        total = np.bincount(self.node_sample, unary, minlength=self.n_samples)
        first, second = labels[self.edges[:, 0]], labels[self.edges[:, 1]]
        kind = self.pairwise_kind
        if kind is PairwiseKind.POTTS:
            pair = self.pairwise * (first != second)
        elif kind is PairwiseKind.SHARED:
            pair = self.pairwise[first, second]
        else:
            pair = self.pairwise[np.arange(self.n_edges), first, second]
        total += np.bincount(self.edge_sample, pair, minlength=self.n_samples)
        constraints = getattr(self.layout, "constraints", None)
        if constraints is not None:
            broken = ~constraints.allows(labels, self.node_offsets)
            total[np.unique(self.node_sample[broken])] = -np.inf
        return total

    # ---- samples --------------------------------------------------------------------------
    def sample(self, i: int) -> Potentials:
        """The potentials of one sample alone.

        Parameters
        ----------
        i : int
            Sample index.

        Returns
        -------
        Potentials
            One sample, node indices local to it (views, no copy).
        """
        nodes = slice(self.node_offsets[i], self.node_offsets[i + 1])
        edges = slice(self.edge_offsets[i], self.edge_offsets[i + 1])
        pairwise = self._pairwise_of(edges)
        layout = None if self.layout is None else self.layout.sample(i, edges)
        return self._cut(
            self.unary[nodes],
            self.edges[edges] - self.node_offsets[i],
            pairwise,
            np.array([0, nodes.stop - nodes.start], dtype=np.intp),
            np.array([0, edges.stop - edges.start], dtype=np.intp),
            layout,
        )

    def split(self) -> list[Potentials]:
        """The potentials of each sample alone.

        Returns
        -------
        list of Potentials
            One per sample, as given by :meth:`sample`.
        """
        return [self.sample(i) for i in range(self.n_samples)]

    def take(self, samples) -> Potentials:
        """The potentials of a subset of the samples.

        Parameters
        ----------
        samples : slice or array-like of int
            A slice of consecutive samples (views, no copy), or sample indices (gathered in
            that order; repeats allowed).

        Returns
        -------
        Potentials
            The selected samples, in order.
        """
        if isinstance(samples, slice):
            start, stop, _ = samples.indices(self.n_samples)
            stop = max(start, stop)
            nodes = slice(self.node_offsets[start], self.node_offsets[stop])
            edges = slice(self.edge_offsets[start], self.edge_offsets[stop])
            layout = self.layout
            if layout is not None:
                layout = layout.subset(range(start, stop), edges)
            return self._cut(
                self.unary[nodes],
                self.edges[edges] - nodes.start,
                self._pairwise_of(edges),
                self.node_offsets[start : stop + 1] - nodes.start,
                self.edge_offsets[start : stop + 1] - edges.start,
                layout,
            )
        samples = np.asarray(samples, dtype=np.intp)
        nodes = ranges(self.node_offsets, samples)
        edge_index = ranges(self.edge_offsets, samples)
        lengths = self.lengths[samples]
        n_edges = np.diff(self.edge_offsets)[samples]
        node_offsets = np.concatenate([[0], np.cumsum(lengths)])
        shift = np.repeat(node_offsets[:-1] - self.node_offsets[samples], n_edges)
        return self._cut(
            np.take(self.unary, nodes, axis=0),
            np.take(self.edges, edge_index, axis=0) + shift[:, None],
            self._pairwise_of(edge_index),
            node_offsets.astype(np.intp, copy=False),
            np.concatenate([[0], np.cumsum(n_edges)]).astype(np.intp, copy=False),
            None if self.layout is None else self.layout.subset(samples, edge_index),
        )

    def _cut(self, unary, edges, pairwise, node_offsets, edge_offsets, layout) -> Potentials:
        """Potentials cut from these ones (their validated arrays, sliced or gathered, in the
        dtypes :meth:`__post_init__` gives), built without its conversions and checks: solvers
        cut one sample at a time, and the checks cost more than the cut on small graphs."""
        cut = object.__new__(Potentials)
        fields = dict(
            unary=unary,
            edges=edges,
            pairwise=pairwise,
            node_offsets=node_offsets,
            edge_offsets=edge_offsets,
            layout=layout,
            graph_checked=self.graph_checked,
        )
        for name, value in fields.items():
            object.__setattr__(cut, name, value)
        return cut


@dataclass
class Statistics:
    """Sufficient statistics (or a weighted sum / difference / expectation of them) in the
    space of :class:`Potentials`.

    Parameters
    ----------
    unary : ndarray of shape (n_rows, K)
        Per-node one-hot rows (or marginals) of the nodes ``rows``.
    pairwise : ndarray
        Per the kind of the potentials: (E,) disagreements (``"potts"``), (K, K) transition
        counts summed over the edges (``"shared"``; (n_samples, K, K) when grouped by sample) or
        (E, K, K) one-hot pairs (``"tables"``).
    rows : ndarray of shape (n_rows,) or None
        The nodes ``unary`` refers to; None means every node, in order.
    """

    unary: np.ndarray
    pairwise: np.ndarray
    rows: np.ndarray | None = None

    @classmethod
    def zeros(cls, potentials: Potentials) -> Statistics:
        """All-zero statistics over every node and edge of some potentials.

        Parameters
        ----------
        potentials : Potentials
            The model whose nodes and edges the statistics cover.

        Returns
        -------
        Statistics
            Zeros shaped like ``potentials.unary`` and ``potentials.pairwise``.
        """
        return cls(np.zeros(potentials.unary.shape), np.zeros(potentials.pairwise.shape))

    def dot_unary(self, values: np.ndarray) -> float:
        """The inner product ``Σ_d Σ_k unary[d, k] values[d, k]`` with node values.

        Parameters
        ----------
        values : ndarray of shape (n_nodes, K)
            Values over every node, e.g. a perturbation (the product is then the perturbation
            part of a score difference).

        Returns
        -------
        float
            The inner product over the nodes ``rows``.
        """
        rows = slice(None) if self.rows is None else self.rows
        return float(np.sum(self.unary * values[rows]))

    @classmethod
    def concatenate(cls, parts: list[Statistics], kind: str) -> Statistics:
        """Statistics of consecutive samples put together.

        Parameters
        ----------
        parts : list of Statistics
            Statistics of consecutive samples, each over all its nodes (``rows`` None).
        kind : {"potts", "shared", "tables"}
            The pairwise kind of the potentials (shared transition counts are summed).

        Returns
        -------
        Statistics
            Over all the nodes and edges of the parts, in order.
        """
        unary = np.concatenate([p.unary for p in parts])
        if kind is PairwiseKind.SHARED:
            return cls(unary, sum(p.pairwise for p in parts))
        return cls(unary, np.concatenate([p.pairwise for p in parts]))


def pair_statistics(first, second, edge_index, weight, kind, n_states, n_edges, groups=None):
    """Pairwise statistics of the edges ``edge_index`` (None: every edge, in order) whose ends
    have labels ``first`` and ``second`` (``-1`` = unknown: the edge contributes nothing), each
    counted ``weight`` times (1 when None).

    Parameters
    ----------
    groups : tuple (group of each edge, n_groups), optional
        For ``"shared"`` tables: one (K, K) count table per group (e.g. per sample).
    """
    known = (first >= 0) & (second >= 0)
    if kind is PairwiseKind.POTTS:
        values = ((first != second) & known).astype(float)
        if weight is not None:
            values *= weight
        return values if edge_index is None else np.bincount(edge_index, values, minlength=n_edges)
    size = n_states * n_states
    code = first[known] * n_states + second[known]
    weight = None if weight is None else weight[known]
    if kind is PairwiseKind.SHARED:
        if groups is None:
            return np.bincount(code, weight, minlength=size).astype(float).reshape(n_states, -1)
        group, n_groups = groups
        code += group[known] * size
        counts = np.bincount(code, weight, minlength=n_groups * size).astype(float)
        return counts.reshape(n_groups, n_states, n_states)
    edge_index = np.arange(n_edges) if edge_index is None else edge_index
    code += edge_index[known] * size
    counts = np.bincount(code, weight, minlength=n_edges * size).astype(float)
    return counts.reshape(n_edges, n_states, n_states)


def label_statistics(
    labels, edges, n_states, kind, other=None, node_weight=None, edge_weight=None, groups=None
) -> Statistics:
    """``φ(y)`` of flat labels over a batch — or ``φ(y) − φ(y')`` with ``other`` — with nodes
    and edges weighted by ``node_weight`` / ``edge_weight`` (per node / per edge, optional).

    Nodes labelled ``-1`` contribute nothing. A difference only has unary rows where the two
    labellings differ (``rows`` of the result).
    """
    rows = slice(None) if other is None else np.flatnonzero(labels != other)
    unary = onehot(labels[rows], n_states)
    if other is not None:
        unary -= onehot(other[rows], n_states)
    if node_weight is not None:
        unary *= node_weight[rows][:, None]

    def pairwise_of(y):
        return pair_statistics(
            y[edges[:, 0]], y[edges[:, 1]], None, edge_weight, kind, n_states, len(edges), groups
        )

    pairwise = pairwise_of(labels)
    if other is not None:
        pairwise -= pairwise_of(other)
    return Statistics(unary, pairwise, None if other is None else rows)


def add_clamped_differences(
    statistics: Statistics, potentials: Potentials, map_labels, copies, labellings, weights
) -> None:
    """Add ``Σ_q weights[q] [φ(y_q) − φ(y*)]`` to ``statistics`` (in place).

    Query q's labelling ``y_q`` is one copy of sample ``copies[q]``: ``labellings`` holds the
    labels of the copies one after the other (the node layout of
    ``potentials.take(copies)``); ``y*`` = ``map_labels``. Only the nodes where a copy
    differs from ``y*``, and the edges touching them, are touched: the cost is linear in the
    size of the copies, whatever the number of samples in the batch.
    """
    p = potentials
    k = p.n_states
    nodes = ranges(p.node_offsets, copies)
    base = map_labels[nodes]
    node_weight = np.repeat(weights, p.lengths[copies])
    changed = labellings != base
    flat = np.concatenate(
        [nodes[changed] * k + labellings[changed], nodes[changed] * k + base[changed]]
    )
    signed = np.concatenate([node_weight[changed], -node_weight[changed]])
    statistics.unary += np.bincount(flat, signed, minlength=p.n_nodes * k).reshape(-1, k)
    n_edges = np.diff(p.edge_offsets)[copies]
    edge_index = ranges(p.edge_offsets, copies)
    edge_copy = np.repeat(np.arange(len(copies)), n_edges)
    # Where each edge end sits in the labels of the copies.
    lengths = p.lengths[copies]
    shift = np.cumsum(lengths) - lengths - p.node_offsets[copies]
    ends = np.take(p.edges, edge_index, axis=0) + shift[edge_copy][:, None]
    moved = changed[ends[:, 0]] | changed[ends[:, 1]]  # the other edges cancel
    edge_index, ends, edge_weight = edge_index[moved], ends[moved], weights[edge_copy[moved]]
    kind = p.pairwise_kind
    clamped = pair_statistics(
        labellings[ends[:, 0]], labellings[ends[:, 1]], edge_index, edge_weight, kind, k, p.n_edges
    )
    at_map = pair_statistics(
        map_labels[p.edges[edge_index, 0]],
        map_labels[p.edges[edge_index, 1]],
        edge_index,
        edge_weight,
        kind,
        k,
        p.n_edges,
    )
    statistics.pairwise += clamped - at_map


def incidence(edges: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Node → edge incidence in CSR form: the edges touching node d are
    ``edge_ids[starts[d]:starts[d + 1]]``."""
    ends = edges.ravel()
    order = np.argsort(ends, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(ends, minlength=n_nodes))])
    return starts, (order // 2).astype(np.intp)


#: Entries (queries × (nodes + edges)) of a block of clamped labellings up to which dense
#: products beat visiting the changed nodes (fewer numpy calls on small graphs).
DENSE_BLOCK = 1 << 16


def add_sample_differences(
    statistics: Statistics, potentials: Potentials, map_labels, labellings, weights, touching
) -> None:
    """:func:`add_clamped_differences` for copies of a one-sample model: ``labellings`` is a
    (Q, D) block (one row per query).

    With ``touching`` (the :func:`incidence` of the sample) only the (query, node) pairs that
    differ from ``y*`` and the edges touching them are visited: the cost is the comparison plus
    the size of the changes, as large images need. Without it (None), dense products over the
    block, which take fewer numpy calls on small graphs (below ``DENSE_BLOCK`` entries).
    """
    p = potentials
    k, kind = p.n_states, p.pairwise_kind
    if touching is None:
        total = weights.sum()
        for label in range(k):
            statistics.unary[:, label] += weights @ (labellings == label) - total * (
                map_labels == label
            )
        first, second = labellings[:, p.edges[:, 0]], labellings[:, p.edges[:, 1]]
        at_map = map_labels[p.edges[:, 0]], map_labels[p.edges[:, 1]]
        if kind is PairwiseKind.POTTS:
            statistics.pairwise += weights @ (first != second) - total * (at_map[0] != at_map[1])
            return
        clamped = pair_statistics(
            first.ravel(),
            second.ravel(),
            np.tile(np.arange(p.n_edges), len(weights)),
            np.repeat(weights, p.n_edges),
            kind,
            k,
            p.n_edges,
        )
        reference = pair_statistics(*at_map, None, None, kind, k, p.n_edges)
        statistics.pairwise += clamped - total * reference
        return
    query, node = np.nonzero(labellings != map_labels)
    add_sparse_differences(
        statistics, p, map_labels, query, node, labellings[query, node], weights, touching
    )


def add_sparse_differences(
    statistics: Statistics,
    potentials: Potentials,
    map_labels,
    query,
    node,
    label,
    weights,
    touching,
) -> None:
    """Add ``Σ_q weights[q] [φ(y_q) − φ(y*)]`` to ``statistics`` (in place), each ``y_q`` given
    by where it differs from ``y*`` = ``map_labels``: node ``node[c]`` has label ``label[c]`` in
    ``y_{query[c]}`` (one entry per changed node and query).

    Only the changed nodes and the edges touching them (``touching``: the :func:`incidence` of
    the potentials) are visited: the cost is the size of the changes.
    """
    p = potentials
    k, kind = p.n_states, p.pairwise_kind
    weight = weights[query]
    changed = np.concatenate([node * k + label, node * k + map_labels[node]])
    signed = np.concatenate([weight, -weight])
    statistics.unary += np.bincount(changed, signed, minlength=p.n_nodes * k).reshape(-1, k)
    starts, edge_ids = touching
    edge = edge_ids[ranges(starts, node)]
    visit = np.repeat(query, starts[node + 1] - starts[node])
    first, second = p.edges[edge, 0], p.edges[edge, 1]
    keys = query.astype(np.int64) * p.n_nodes + node
    order = np.argsort(keys)
    keys, label = keys[order], label[order]

    def in_copy(ends):
        """The labels of ``ends`` in the visiting query's labelling, and whether changed."""
        wanted = visit.astype(np.int64) * p.n_nodes + ends
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        hit = keys[at] == wanted
        return np.where(hit, label[at], map_labels[ends]), hit

    (first_label, first_changed), (second_label, second_changed) = in_copy(first), in_copy(second)
    # An edge whose two ends changed is reached from both: each visit counts half.
    weight = weights[visit] * np.where(first_changed & second_changed, 0.5, 1.0)
    statistics.pairwise += pair_statistics(
        first_label, second_label, edge, weight, kind, k, p.n_edges
    ) - pair_statistics(map_labels[first], map_labels[second], edge, weight, kind, k, p.n_edges)


def clamp_scores(unary: np.ndarray, clamp: np.ndarray) -> np.ndarray:
    """Node scores with ``-inf`` for every label a clamped node (``clamp >= 0``) may not take."""
    return np.where(clamp_mask(unary.shape, clamp), -np.inf, unary)


def clamp_mask(shape: tuple, clamp: np.ndarray) -> np.ndarray:
    """The (node, label) entries a clamp forbids: every label but its own at a clamped node
    (``clamp >= 0``); nothing at a free one (``-1``)."""
    fixed = clamp >= 0
    forbidden = np.zeros(shape, dtype=bool)
    forbidden[fixed] = True
    forbidden[np.flatnonzero(fixed), clamp[fixed]] = False
    return forbidden


def finite_clamp_scores(potentials: Potentials, clamp: np.ndarray) -> np.ndarray:
    """:func:`clamp_scores` of ``potentials.unary`` with a finite score instead of ``-inf``,
    for solvers whose arithmetic needs finite numbers (cuts, message passing).

    The forbidden labels score as in :func:`forbid_states`.
    """
    p = potentials
    return forbid_states(p.unary, clamp_mask(p.unary.shape, clamp), p.pairwise, p.n_edges)


def forbid_states(
    unary: np.ndarray, forbidden: np.ndarray, pairwise: np.ndarray, n_edges: int | None
) -> np.ndarray:
    """Node scores with the ``forbidden`` (node, label) entries at a finite score below every
    labelling that avoids them: ``−(2 S + 1000)`` with ``S`` a bound on the absolute score of
    any labelling (the absolute node scores summed, and each edge's largest absolute pairwise
    score).

    Set-valued clamps (a node restricted to some labels: the states of its visible label, the
    hidden states of a hidden node, a set of allowed labels) take this form, and so do
    single-label clamps for solvers whose arithmetic needs finite numbers
    (:func:`finite_clamp_scores`). A labelling with a forbidden entry scores below every
    labelling without one by at least 1000, so its probability under ``exp f`` is below
    ``e^-1000`` of theirs (zero in floating point).

    Parameters
    ----------
    unary : ndarray of shape (n_nodes, K)
    forbidden : ndarray of shape (n_nodes, K) of bool
    pairwise : ndarray of shape (E,), (K, K) or (E, K, K)
        The pairwise scores of the model (their size enters ``S``).
    n_edges : int or None
        The number of edges, which a shared (K, K) table scores once each; None when
        ``pairwise`` is per edge.

    Returns
    -------
    ndarray of shape (n_nodes, K)
        A copy of ``unary`` (``unary`` itself when nothing is forbidden).
    """
    if not forbidden.any():
        return unary
    scores = np.array(unary, dtype=float)
    pairwise = np.abs(np.asarray(pairwise, dtype=float))
    if pairwise.ndim == 2:  # one table shared by the edges
        if n_edges is None:
            raise ValueError("forbid_states needs n_edges with a shared (K, K) pairwise table")
        edge_bound = n_edges * (pairwise.max() if pairwise.size else 0.0)
    elif pairwise.ndim == 3:
        edge_bound = pairwise.max(axis=(1, 2), initial=0.0).sum()
    else:
        edge_bound = pairwise.sum()
    spread = np.abs(unary[np.isfinite(unary)]).sum() + edge_bound
    scores[forbidden] = -(2.0 * spread + 1e3)
    return scores
