"""The orthonormal 2-D Haar transform of square patches, and the groups of the priors: pixel
pairs of a grid, parent–child pairs of the Haar quad-tree."""

from __future__ import annotations

import functools

import numpy as np

from ..samples import grid_edges


def _haar_side(shape) -> bool:
    """Whether patches of ``shape`` take the 2-D Haar transform: square, of side 2^L."""
    return len(shape) == 2 and shape[0] == shape[1] and not shape[0] & (shape[0] - 1)


def haar2d(images: np.ndarray) -> np.ndarray:
    """Orthonormal 2-D Haar transform of square images of side 2^L, all levels.

    Parameters
    ----------
    images : ndarray of shape (n, s, s)

    Returns
    -------
    ndarray of shape (n, s, s)
        The coefficients in the pyramid layout: the DC term at ``[0, 0]``, the details of
        scale ``m`` in the blocks ``[:m, m:2m]``, ``[m:2m, :m]`` and ``[m:2m, m:2m]``; the parent
        of coefficient ``(r, c)`` in the quad-tree is ``(r // 2, c // 2)``.
    """
    out = np.array(images, dtype=float)
    size = out.shape[-1]
    while size > 1:
        block = out[:, :size, :size]
        rows = np.concatenate(
            [block[:, 0::2] + block[:, 1::2], block[:, 0::2] - block[:, 1::2]], axis=1
        )
        cols = np.concatenate(
            [rows[:, :, 0::2] + rows[:, :, 1::2], rows[:, :, 0::2] - rows[:, :, 1::2]], axis=2
        )
        out[:, :size, :size] = cols / 2.0
        size //= 2
    return out


def inverse_haar2d(coefficients: np.ndarray) -> np.ndarray:
    """Inverse of :func:`haar2d`."""
    out = np.array(coefficients, dtype=float)
    full, size = out.shape[-1], 2
    while size <= full:
        half = size // 2
        block = out[:, :size, :size]
        cols = np.empty_like(block)
        cols[:, :, 0::2] = block[:, :, :half] + block[:, :, half:]
        cols[:, :, 1::2] = block[:, :, :half] - block[:, :, half:]
        rows = np.empty_like(cols)
        rows[:, 0::2] = cols[:, :half] + cols[:, half:]
        rows[:, 1::2] = cols[:, :half] - cols[:, half:]
        out[:, :size, :size] = rows / 2.0
        size *= 2
    return out


@functools.cache
def _haar_matrix(side: int) -> np.ndarray:
    r"""``H`` with ``haar2d(x) = x H`` on flattened ``side × side`` images (orthonormal: the
    inverse is :math:`H^\top`); one matrix product is several times faster than the butterflies."""
    n = side * side
    matrix = haar2d(np.eye(n).reshape(n, side, side)).reshape(n, n)
    matrix.setflags(write=False)
    return matrix


def grid_groups(shape) -> list:
    """Singletons and the 4-neighbour pairs of a pixel grid (row-major indices)."""
    n_pixels = int(np.prod(shape))
    return [np.array([i]) for i in range(n_pixels)] + list(grid_edges(shape))


def tree_groups(side: int) -> list:
    """Singletons and the parent–child pairs of the Haar quad-tree of a ``side × side`` patch."""
    r, c = np.divmod(np.arange(side * side), side)
    parent = (r // 2) * side + c // 2
    children = np.flatnonzero(np.arange(side * side) != 0)
    pairs = np.column_stack([parent[children], children])
    return [np.array([i]) for i in range(side * side)] + list(pairs)
