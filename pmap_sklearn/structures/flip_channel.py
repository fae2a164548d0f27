"""The binary denoiser's model as a grid structure: a flip channel on a log-supermodular prior
(Shpakova & Bach 2016)."""

from __future__ import annotations

import numpy as np

from .grid import GridStructure

__all__ = ["FlipChannelGrid"]


class FlipChannelGrid(GridStructure):
    r"""The denoiser's model as a grid structure (binary labels, 4-connectivity, graph cuts).

    Node feature: the sign ``s_d = 1 - 2 z_d`` of the noisy pixel (0 gives the prior). Unary scores:
    0 for label 0, ``t_d + u s_d`` for label 1, with one field value ``t_d`` per pixel
    (``pixel_shape`` given) or one shared by all pixels. Pairwise: the Potts term of
    :class:`~pmap_sklearn.GridStructure`, one weight :math:`v = -\alpha` per direction. Weight
    layout ``w = [t (H·W values or 1), u, v_h, v_v]``.

    Parameters
    ----------
    pixel_shape : tuple of int, optional
        Image shape of a per-pixel field; None for a shared field.
    """

    def __init__(self, pixel_shape=None):
        super().__init__(connectivity=4, contrast=False, bias=False, n_states=2)
        self.pixel_shape = pixel_shape

    @property
    def n_field(self) -> int:
        return 1 if self.pixel_shape is None else int(np.prod(self.pixel_shape))

    @property
    def n_unary_weights_(self) -> int:
        return self.n_field + 1

    def unpack(self, w):
        return w[: self.n_unary_weights_], w[self.n_unary_weights_ :]

    def _field(self, batch, field):
        return field[batch.positions] if self.pixel_shape is not None else field[0]

    def _unary_potentials(self, batch, unary_weights):
        field, log_odds = unary_weights[:-1], unary_weights[-1]
        unary = np.zeros((batch.n_nodes, 2))
        unary[:, 1] = self._field(batch, field) + log_odds * batch.features[:, 0]
        return unary

    def _unary_joint_feature(self, batch, values, rows, per_sample):
        if per_sample:
            raise NotImplementedError("the denoiser needs no per-sample joint feature")
        index = np.arange(batch.n_nodes)[slice(None) if rows is None else rows]
        ones = values[:, 1]  # label 1 carries every unary weight
        if self.pixel_shape is None:
            field = np.array([ones.sum()])
        else:
            field = np.bincount(batch.positions[index], ones, minlength=self.n_field)
        return np.concatenate([field, [batch.features[index, 0] @ ones]])
