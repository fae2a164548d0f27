r"""The joint feature map Ψ: sufficient statistics of labellings (or marginals) in weight space.

:math:`f(y | x) = w \cdot \Psi (x, y)`; every gradient the learners take is a weighted
difference of Ψ (or of its expectation), and :class:`JointFeature` maps the solvers'
:class:`~pmap_sklearn.solvers.Statistics` to it, laid out like ``w`` — dense, per sample, or as
a :class:`SparseVector` over the weight rows that sparse node features touch (what the SGD
learners' lazy updates take). A mixin of :class:`~pmap_sklearn.structures.BaseStructure`.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._backend import Statistics, label_statistics
from .._utils import SparseVector, ranges
from ..samples import SampleBatch


class JointFeature:
    """Ψ and its sparse form (a mixin of ``BaseStructure``, which provides the weight layout:
    ``unpack``, ``n_unary_weights_``, ``size_``, the weight sets and ``_pairwise_joint_feature``).
    """

    def joint_feature_of(
        self, batch, statistics: Statistics, per_sample: bool = False, compact: bool = False
    ):
        r"""Map sufficient statistics to the joint feature space Ψ.

        :math:`\sum_n \Psi (x_n, y_n)` for the statistics of labellings, :math:`\sum_n E[\Psi (x_n,
        y)]` for marginals, a gradient for a weighted difference of either.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        statistics : Statistics
            Node and pairwise statistics (e.g. a solver's ``ClampedSolution.statistics``).
        per_sample : bool, default=False
            Whether the statistics are grouped by sample (as built by
            :meth:`joint_feature_per_sample`), giving one row per sample.
        compact : bool, default=False
            With sparse node features, return a :class:`SparseVector` over the weights the
            statistics touch (what the SGD learners' lazy updates take).

        Returns
        -------
        ndarray of shape (n_weights,) or (n_samples, n_weights), or SparseVector
            The image in Ψ space, laid out like ``w``.
        """
        if compact and not per_sample and self.has_sparse_features(batch):
            return self._compact_joint_feature(batch, statistics)
        if per_sample and batch.n_samples == 1:  # one row: the sum (no selector to build)
            return self.joint_feature_of(batch, statistics)[None, :]
        unary = self._unary_joint_feature(batch, statistics.unary, statistics.rows, per_sample)
        pairwise = self._pairwise_joint_feature(batch, statistics.pairwise, per_sample)
        return np.hstack([unary, pairwise]) if per_sample else np.concatenate([unary, pairwise])

    def has_sparse_features(self, batch) -> bool:
        """Whether the unary weights are read through sparse node features (one shared set):
        then gradients can be :class:`SparseVector` and SGD updates lazy.

        Parameters
        ----------
        batch : SampleBatch

        Returns
        -------
        bool
        """
        return sparse.issparse(batch.features) and self._node_weight_sets(batch) is None

    def _compact_joint_feature(self, batch, statistics: Statistics) -> SparseVector:
        """The joint feature as a :class:`SparseVector` over rows of :attr:`weight_row_width_`
        weights: the unary rows of the features present in the statistics' nodes and every
        pairwise row.

        Read from the CSR arrays directly: each non-zero ``x_{d,f}`` of a node adds
        ``x_{d,f} · statistics.unary[d]`` to feature f's row, summed by one ``bincount`` (a
        mini-batch's gradient costs its non-zeros, with no sparse-matrix construction)."""
        features, k, starts = batch.features, self.n_states_, batch.features.indptr
        rows = np.arange(features.shape[0]) if statistics.rows is None else statistics.rows
        nonzeros = ranges(starts, rows)
        node = np.repeat(np.arange(len(rows)), starts[rows + 1] - starts[rows])  # into unary
        columns, local = np.unique(features.indices[nonzeros], return_inverse=True)
        contributions = features.data[nonzeros, None] * statistics.unary[node]
        code = local.reshape(-1, 1) * k + np.arange(k)
        unary = np.bincount(code.ravel(), contributions.ravel(), minlength=len(columns) * k)
        pairwise = self._pairwise_joint_feature(batch, statistics.pairwise, False)
        width = self.weight_row_width_
        return SparseVector(
            self._support_rows(columns),
            np.concatenate([unary.reshape(-1, width), pairwise.reshape(-1, width)]),
            self.size_,
        )

    @property
    def weight_row_width_(self) -> int:
        """Width of the rows of ``w`` that sparse gradients and lazy updates work on: K (one
        row per node feature) when the pairwise weights fill whole rows, else 1."""
        k = self.n_states_
        if self.unary == "scaled":
            return 1
        return k if self._n_pairwise_weights() % k == 0 else 1

    def _support_rows(self, columns: np.ndarray) -> np.ndarray:
        """Rows of ``w`` holding the unary weights of the node features ``columns``, then every
        pairwise row."""
        k, width = self.n_states_, self.weight_row_width_
        unary = columns if width == k else (columns[:, None] * k + np.arange(k)).ravel()
        pairwise = np.arange(self.n_unary_weights_ // width, self.size_ // width)
        return np.concatenate([unary, pairwise])

    def weight_support(self, batch) -> np.ndarray | None:
        """The rows of ``w`` the potentials of ``batch`` read, when the node features are sparse.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.

        Returns
        -------
        ndarray of int or None
            Rows of ``w.reshape(-1, weight_row_width_)``: the unary weights of the node features
            present in the batch and every pairwise weight; None when the features are dense
            (every weight is read).
        """
        if not self.has_sparse_features(batch):
            return None
        return self._support_rows(_present_columns(batch.features))

    def _unary_joint_feature(self, batch, values, rows, per_sample):
        """``Σ_d φ(x_d) ⊗ values_d`` over the nodes ``rows`` (all when None), flattened like W;
        with ``unary="scaled"``, ``[Σ_d Σ_k x_d[k] values_d[k], Σ_d values_d]``."""
        rows = slice(None) if rows is None else rows
        features = batch.features[rows]
        if self.unary == "scaled":
            parts = [(features[:, : self.n_states_] * values).sum(axis=1, keepdims=True)]
            if self.bias:
                parts.append(values)
            per_node = np.hstack(parts)
            if not per_sample:
                return per_node.sum(axis=0)
            samples = batch.node_sample[np.arange(batch.n_nodes)[rows]]
            summed = np.zeros((batch.n_samples, per_node.shape[1]))
            np.add.at(summed, samples, per_node)
            return summed
        sets = self._node_weight_sets(batch)
        if sets is not None:
            return _sum_by_set(
                features[:, :, None] * values[:, None, :],
                sets[rows],
                batch.node_sample[rows],
                self.n_node_weight_sets_,
                batch.n_samples,
                per_sample,
            )
        if not per_sample:
            return (features.T @ values).ravel()
        n, k = batch.n_samples, self.n_states_
        index = np.arange(batch.n_nodes)[rows]
        # Row n·K + k of the selector sums the features of sample n's nodes weighted by their
        # values[:, k]: the unary block (F, K) of every sample in one sparse product.
        selector = sparse.csr_matrix(
            (
                values.ravel(),
                (
                    (batch.node_sample[index, None] * k + np.arange(k)).ravel(),
                    np.repeat(np.arange(len(index)), k),
                ),
            ),
            shape=(n * k, len(index)),
        )
        unary = selector @ features
        if sparse.issparse(unary):
            unary = unary.toarray()
        unary = unary.reshape(n, k, -1).transpose(0, 2, 1)
        return unary.reshape(n, -1)

    def _statistics(
        self, batch, labels, other=None, sample_weight=None, per_sample=False, node_weight=None
    ):
        edge_weight = None
        if node_weight is not None:  # an edge weighs the mean of its two nodes
            node_weight = np.asarray(node_weight, dtype=float)
            edge_weight = 0.5 * node_weight[batch.edges].sum(axis=1)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=float)
            per_node, per_edge = sample_weight[batch.node_sample], sample_weight[batch.edge_sample]
            node_weight = per_node if node_weight is None else node_weight * per_node
            edge_weight = per_edge if edge_weight is None else edge_weight * per_edge
        groups = (batch.edge_sample, batch.n_samples) if per_sample else None
        return label_statistics(
            labels,
            batch.edges,
            self.n_states_,
            self.pairwise_kind,
            other,
            node_weight,
            edge_weight,
            groups,
        )

    def joint_feature(self, batch: SampleBatch, labels: np.ndarray, sample_weight=None):
        r"""Joint feature :math:`\sum_n c_n \Psi (x_n, y_n)` of labellings over the batch.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        labels : ndarray of shape (n_nodes,)
            Label codes of all nodes; nodes labelled -1 contribute nothing.
        sample_weight : array-like of shape (n_samples,), optional
            The weights ``c_n`` (1 when None).

        Returns
        -------
        ndarray of shape (n_weights,)
            The weighted sum, laid out like ``w``.
        """
        return self.joint_feature_of(batch, self._statistics(batch, labels, None, sample_weight))

    def joint_feature_difference(
        self,
        batch,
        labels,
        other_labels,
        sample_weight=None,
        compact: bool = False,
        node_weight=None,
    ):
        """Joint feature difference ``Σ_n c_n [Ψ(x_n, y_n) − Ψ(x_n, y'_n)]`` in one pass.

        The shape of every SGD gradient; only the nodes whose labels differ are touched.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        labels, other_labels : ndarray of shape (n_nodes,)
            Label codes ``y`` and ``y'`` of all nodes.
        sample_weight : array-like of shape (n_samples,), optional
            The weights ``c_n`` (1 when None).
        compact : bool, default=False
            See :meth:`joint_feature_of`.
        node_weight : array-like of shape (n_nodes,), optional
            A weight per node on its unary statistics; each edge's weighs the mean of its two
            nodes' (times ``c_n`` when both are given).

        Returns
        -------
        ndarray of shape (n_weights,), or SparseVector
            The weighted difference, laid out like ``w``.
        """
        statistics = self._statistics(
            batch, labels, other_labels, sample_weight, node_weight=node_weight
        )
        return self.joint_feature_of(batch, statistics, compact=compact)

    def joint_feature_per_sample(self, batch: SampleBatch, labels, other_labels=None):
        r"""Joint feature of every sample, in one vectorised pass.

        Parameters
        ----------
        batch : SampleBatch
            The prepared samples.
        labels : ndarray of shape (n_nodes,)
            Label codes ``y`` of all nodes.
        other_labels : ndarray of shape (n_nodes,), optional
            Label codes ``y'``: the rows are then the differences ``Ψ(x_n, y_n) − Ψ(x_n, y'_n)``.

        Returns
        -------
        ndarray of shape (n_samples, n_weights)
            :math:`\Psi (x_n, y_n)` (or the difference) of each sample.
        """
        statistics = self._statistics(batch, labels, other_labels, per_sample=True)
        return self.joint_feature_of(batch, statistics, per_sample=True)


def _sum_by_set(values, sets, samples, n_sets, n_samples, per_sample):
    """Sum per-node (or per-edge) blocks by weight set (and by sample with ``per_sample``),
    flattened like untied weights."""
    if len(sets) == n_samples * n_sets:  # every set of every sample, in order
        out = values.reshape((n_samples, n_sets) + values.shape[1:])
        return out.reshape(n_samples, -1) if per_sample else out.sum(axis=0).ravel()
    shape = (n_samples, n_sets) if per_sample else (n_sets,)
    out = np.zeros(shape + values.shape[1:])
    np.add.at(out, (samples, sets) if per_sample else sets, values)
    return out.reshape(n_samples, -1) if per_sample else out.ravel()


def _present_columns(matrix) -> np.ndarray:
    """The sorted columns of a CSR matrix that hold an entry: a mask over the columns when they
    are few enough for one (faster than sorting the entries), ``np.unique`` otherwise."""
    indices = matrix.indices[matrix.indptr[0] : matrix.indptr[-1]]
    if matrix.shape[1] > 64 * max(len(indices), 1):
        return np.unique(indices)
    present = np.zeros(matrix.shape[1], dtype=bool)
    present[indices] = True
    return np.flatnonzero(present)
