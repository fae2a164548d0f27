"""Image grids: 4- or 8-connected pixels, a Potts weight (or table) per direction."""

from __future__ import annotations

import numpy as np

from .._backend import GridLayout
from .._docstrings import shared_docstring
from .._utils import store_parameters
from ..samples import GRID_OFFSETS, ParsedSample, grid_edges
from ._base import _finite
from ._edge_features import EdgeFeatureStructure

__all__ = ["GridStructure"]


@shared_docstring
class GridStructure(EdgeFeatureStructure):
    r"""Labelling of image grids.

    A sample is an image of shape (H, W) or (H, W, F); labels have shape (H, W). Each direction
    of the neighbourhood has its own Potts weight (e.g. horizontal and vertical). With the
    default solver, K = 2 is solved exactly by graph cuts (PyMaxflow's grid fast path) and
    K > 2 by α-expansion, with the Potts weights kept ``<= 0``.

    Parameters
    ----------
    connectivity : {4, 8}, default=4
        Neighbourhood of a pixel.
    contrast : bool, default=False
        Add, per direction, the contrast edge feature :math:`\exp (-\beta ||x_i - x_j||^2)` with the
        per-image :math:`\beta = 1 / (2 \operatorname{mean} ||x_i - x_j||^2)` (Boykov & Jolly;
        GrabCut).
    bias : bool, default=True
        Append a constant feature to every pixel.
    n_states : int, optional
        Number of labels K; inferred from the training labels when None.
    {{pairwise}}
    untied : bool, default=False
        One set of weights per pixel and per edge position instead of weights shared by all
        pixels and edges (Hazan & Urtasun 2010, §6): every image must have the fitted shape.
    {{edge_solver}}
    {{unary}}
    {{n_states_per_label}}
    symmetric_edge_features, antisymmetric_edge_features : list of int, optional
        Edge features (columns: per direction its constant feature, then its contrast
        feature with ``contrast=True``) whose K×K tables are symmetric, ``V = Vᵀ``, or
        antisymmetric, ``V = −Vᵀ`` (with ``pairwise="table"``; see :ref:`tied-tables`).
    """

    sample_kind = "grid"

    def __init__(
        self,
        connectivity: int = 4,
        *,
        contrast: bool = False,
        bias: bool = True,
        n_states: int | None = None,
        pairwise: str = "potts",
        untied: bool = False,
        solver="auto",
        unary: str = "linear",
        n_states_per_label=None,
        symmetric_edge_features=None,
        antisymmetric_edge_features=None,
    ):
        store_parameters(self, locals())

    def _fit(self, X, y):
        """Learn the dimensions and, with ``untied``, the image shape."""
        _refuse_chains_of_grey_images(X)
        self.image_shape_ = None
        if self.untied and len(X):
            shapes = sorted({tuple(np.shape(x)[:2]) for x in X})
            if len(shapes) > 1:
                raise ValueError(
                    f"untied=True needs images of one shape (a weight per pixel), got {shapes}"
                )
            self.image_shape_ = shapes[0]
        return super()._fit(X, y)

    # ---- untied weights: one set per pixel and per edge position ------------------------------
    @property
    def n_node_weight_sets_(self) -> int:
        if not self.untied:
            return 1
        height, width = self.image_shape_
        return height * width

    def _node_weight_sets(self, batch):
        return batch.positions if self.untied else None

    @property
    def n_edge_weight_sets_(self) -> int:
        if not self.untied:
            return 1
        height, width = self.image_shape_
        return sum((height - dr) * (width - abs(dc)) for dr, dc in self.offsets)

    def _edge_weight_sets(self, batch):
        return batch.edge_positions if self.untied else None

    @property
    def offsets(self) -> list[tuple[int, int]]:
        """The neighbour directions ``(dr, dc)``."""
        if self.connectivity not in GRID_OFFSETS:
            raise ValueError(f"connectivity must be 4 or 8, got {self.connectivity!r}")
        return list(GRID_OFFSETS[self.connectivity])

    def check_input(self, X, y, ignore_label=None):
        _refuse_chains_of_grey_images(X)  # as given: before samples of weight 0 are dropped
        return super().check_input(X, y, ignore_label)

    check_input.__doc__ = EdgeFeatureStructure.check_input.__doc__

    def prepare(self, X, index=None):
        _refuse_chains_of_grey_images(X)
        return super().prepare(X, index)

    prepare.__doc__ = EdgeFeatureStructure.prepare.__doc__

    def _parse_sample(self, x, index):
        image = _finite(x, "pixel features", index)
        if image.ndim == 2:
            image = image[:, :, None]
        expected = getattr(self, "image_shape_", None)
        if self.untied and expected is not None and image.shape[:2] != expected:
            raise ValueError(
                f"sample {index}: image of shape {image.shape[:2]}, but untied weights were "
                f"fitted to images of shape {expected}"
            )
        if image.ndim != 3 or image.shape[0] == 0 or image.shape[1] == 0:
            raise ValueError(
                f"sample {index}: expected an image of shape (H, W) or (H, W, F), got {np.shape(x)}"
            )
        height, width, n_features = image.shape
        flat = image.reshape(-1, n_features)
        per_kind = 1 + int(bool(self.contrast))
        edges, directions = grid_edges((height, width), self.connectivity, return_directions=True)
        # One constant feature per direction (and a contrast feature per direction).
        edge_features = np.zeros((len(edges), len(self.offsets) * per_kind))
        edge_features[np.arange(len(edges)), directions * per_kind] = 1.0
        if self.contrast:
            sq = ((flat[edges[:, 0]] - flat[edges[:, 1]]) ** 2).sum(axis=1)
            beta = 1.0 / (2.0 * sq.mean()) if sq.size and sq.mean() > 0 else 0.0
            edge_features[np.arange(len(edges)), directions * per_kind + 1] = np.exp(-beta * sq)
        sizes = np.ones(height * width)
        return ParsedSample(flat, edges, edge_features, sizes, (height, width), directions)

    def _node_count(self, x) -> int:
        """The pixels of one image."""
        try:
            shape = x.shape if hasattr(x, "shape") else np.shape(x)
            return max(1, int(shape[0]) * int(shape[1]))
        except (TypeError, ValueError, IndexError):
            return 1

    def _layout(self, batch):
        return GridLayout(tuple(batch.label_shapes), tuple(self.offsets), batch.edge_directions)


def _refuse_chains_of_grey_images(X) -> None:
    """Refuse what :class:`~pmap_sklearn.NodeTransformer` returned after reading 2-D samples
    as chains (D, F): a grid reads them as grey images (H, W), whose columns it transformed as
    separate features."""
    if getattr(X, "grey_images_read_as_chains", False):
        raise ValueError(
            "X comes from NodeTransformer(images=False), which read its 2-D samples as chains "
            "(D, F) and transformed each image column as a feature; GridStructure reads a 2-D "
            "sample as a grey image (H, W), one feature per pixel: use NodeTransformer(..., "
            "images=True), or give the images the shape (H, W, 1)"
        )
