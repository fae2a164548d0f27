"""Overlapping patches of whole images: extraction and averaging (cycle spinning).

A patch model denoises an image by estimating every patch on a grid of positions (stride
``s``, the last row and column of positions always included so every pixel is covered) and
averaging the estimates of each pixel (Coifman & Donoho 1995): with stride 1 this removes the
block artefacts of a model fitted on tiles.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.utils.validation import check_array


def patch_starts(length: int, size: int, stride: int) -> np.ndarray:
    """Start positions ``0, s, 2s, …`` along one axis, plus ``length − size`` to cover the end."""
    starts = np.arange(0, length - size + 1, stride)
    return starts if starts[-1] == length - size else np.append(starts, length - size)


def check_images(X, patch_shape, name: str = "X") -> tuple[list, str]:
    """Images as a list of finite 2-D float arrays at least one patch large.

    Returns the list and the container kind (``"image"`` for one 2-D array, ``"stack"`` for a
    3-D array, ``"list"`` otherwise) so results can be returned in the same form.
    """
    if isinstance(X, np.ndarray) and X.ndim in (2, 3):
        if X.ndim == 3 and X.shape[-1] in (3, 4) and min(X.shape[:2]) > 4:
            raise ValueError(
                f"{name} has shape {X.shape}: a colour image? The denoiser works on grey "
                f"images: convert it (e.g. skimage.color.rgb2gray) or denoise each channel as "
                f"an image of its own (np.moveaxis({name}, -1, 0)); a 3-D array is a stack "
                f"(n_images, height, width) (pass narrow images as a list)"
            )
        kind, images = ("image", [X]) if X.ndim == 2 else ("stack", list(X))
    elif isinstance(X, list | tuple):
        kind, images = "list", list(X)
    else:
        raise ValueError(
            f"with patch_size set, {name} must be one 2-D image, a 3-D stack of images or a list "
            f"of 2-D images, got {type(X).__name__} of shape {np.shape(X)}"
        )
    if not images:
        raise ValueError(f"{name} holds no image")
    checked = []
    for i, image in enumerate(images):
        image = check_array(image, dtype=float, input_name=f"{name}[{i}]")
        if image.shape[0] < patch_shape[0] or image.shape[1] < patch_shape[1]:
            raise ValueError(
                f"{name}[{i}] has shape {image.shape}, smaller than one patch {patch_shape}"
            )
        checked.append(image)
    return checked, kind


def pack(images: list, kind: str):
    """The inverse of :func:`check_images`'s unpacking."""
    if kind == "image":
        return images[0]
    return np.stack(images) if kind == "stack" else images


def image_patches(image, patch_shape, stride, rows=None) -> np.ndarray:
    """The patches of an image on the stride grid (optionally only some rows of positions).

    Returns an array of shape (n_rows, n_cols, height, width) (a copy).
    """
    windows = sliding_window_view(image, patch_shape)
    top = patch_starts(image.shape[0], patch_shape[0], stride)
    left = patch_starts(image.shape[1], patch_shape[1], stride)
    top = top if rows is None else top[rows]
    return windows[top][:, left]


def row_blocks(image_shape, patch_shape, stride, patches_per_block: int) -> Iterator[slice]:
    """Slices of rows of patch positions holding about ``patches_per_block`` patches each."""
    n_top = len(patch_starts(image_shape[0], patch_shape[0], stride))
    n_left = len(patch_starts(image_shape[1], patch_shape[1], stride))
    per_block = max(1, patches_per_block // n_left)
    for start in range(0, n_top, per_block):
        yield slice(start, min(start + per_block, n_top))


def add_patches(total, count, estimates, image_shape, patch_shape, stride, rows) -> None:
    """Add the patch estimates of some rows of positions into ``total`` (and 1 into ``count``).

    One strided addition per offset inside the patch (``height × width`` of them), none per
    patch.
    """
    top = patch_starts(image_shape[0], patch_shape[0], stride)[rows]
    left = patch_starts(image_shape[1], patch_shape[1], stride)
    for di in range(patch_shape[0]):
        for dj in range(patch_shape[1]):
            index = np.ix_(top + di, left + dj)
            total[index] += estimates[:, :, di, dj]
            count[index] += 1.0
