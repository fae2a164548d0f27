"""Weizmann horses: superpixel graphs for segmentation, binary masks for denoising.

Each colour photo is resized to its mask's shape, cut into SLIC superpixels and described per
superpixel (colour, texture, position, size); superpixels that touch become graph edges. Node
labels are the majority of the mask; node sizes are pixel counts (for the size-weighted Hamming
loss). Features are computed in parallel over images and cached on disk with
``joblib.Memory``, so a second load takes seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ..superpixels import _sample, _skimage, _slic, to_pixels
from ._images import _cache_dir, _read, _select, _stamps, cached_map
from ._paths import candidate_roots

HORSE_URL = "the Weizmann Horse Database page (Borenstein & Ullman; files rgb/ and figure_ground/)"
N_IMAGES = 328
#: What needs scikit-image here, for its ImportError.
WHAT = "the Weizmann horse loaders"


def horse_split(n_images: int = N_IMAGES, seed: int = 0) -> Bunch:
    """The fixed split of the horse experiments over the sorted file names.

    The protocol of the benchmarks (Shpakova et al. 2018, §5): test, labelled and weakly
    labelled images.

    Parameters
    ----------
    n_images : int, default=328
        Number of images in the data set.
    seed : int, default=0
        Seed of the permutation.

    Returns
    -------
    split : Bunch
        Positions in the sorted file list: ``test`` = perm[:100], ``labeled`` =
        perm[100:150], ``weak`` = perm[150:], ``small`` = perm[100:105] (10 % of the
        labelled images) and ``perm`` itself.
    """
    perm = np.random.default_rng(seed).permutation(n_images)
    return Bunch(
        perm=perm, test=perm[:100], labeled=perm[100:150], weak=perm[150:], small=perm[100:105]
    )


def _horse_folder(path) -> Path:
    candidates = (
        [Path(path)]
        if path is not None
        else [root / "weizmann_horse" for root in candidate_roots()]
    )
    for folder in candidates:
        if (folder / "rgb").is_dir() and (folder / "figure_ground").is_dir():
            return folder
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"Weizmann horse data (folders rgb/ and figure_ground/) not found; tried: {tried}. "
        f"Pass path=..., or set $PMAP_SKLEARN_DATA to the data folder. The original can be "
        f"downloaded from {HORSE_URL}"
    )


def _mask_files(folder: Path) -> list[Path]:
    masks = sorted((folder / "figure_ground").glob("*.jpg"))
    if not masks:
        raise FileNotFoundError(f"no masks (*.jpg) in {folder / 'figure_ground'}")
    return masks


def _pairs(folder: Path) -> list[tuple[Path, Path]]:
    pairs = []
    for mask in _mask_files(folder):
        photo = folder / "rgb" / mask.name
        if not photo.is_file():
            raise FileNotFoundError(f"mask {mask} has no photo (expected {photo})")
        pairs.append((photo, mask))
    return pairs


def _read_mask_levels(file: Path) -> np.ndarray:
    """Grey levels (0-255) of a figure/ground mask (JPEG: threshold at 128)."""
    mask = _read(file)
    return mask[..., 0] if mask.ndim == 3 else mask


def _read_pair(photo: Path, mask_file: Path):
    """Photo resized to the mask's shape (float RGB in [0, 1]) and the binary mask."""
    color, transform = _skimage("color", WHAT), _skimage("transform", WHAT)
    mask = _read_mask_levels(mask_file)
    image = _read(photo)
    if image.ndim == 2:
        image = color.gray2rgb(image)
    image = transform.resize(image[..., :3], mask.shape, anti_aliasing=True)
    return image, (mask >= 128).astype(np.intp)


def superpixel_graph(image, mask, n_segments=150, compactness=10.0):
    """Superpixel graph of one photo.

    Parameters
    ----------
    image : ndarray of shape (H, W, 3)
        RGB in [0, 1].
    mask : ndarray of shape (H, W)
        Binary foreground mask.
    n_segments : int, default=150
        Approximate number of SLIC superpixels.
    compactness : float, default=10.0
        SLIC's balance of colour against space (higher: more square superpixels).

    Returns
    -------
    sample : GraphSample
        Node features (n_nodes, 55), edges, edge features (constant, colour contrast, shared
        boundary length), node sizes in pixels.
    labels : ndarray of shape (n_nodes,)
        Majority label of the mask.
    box_labels : ndarray of shape (n_nodes,)
        0 for superpixels wholly outside the mask's bounding box, -1 (unknown) otherwise.
    segments : ndarray of shape (H, W)
        Superpixel index of each pixel.
    """
    segments = _slic(image, n_segments, compactness)
    sample = _sample(image, segments, filter_bank=False, neighbour_context=False)
    n_nodes = sample.n_nodes
    labels = (np.bincount(segments.ravel(), mask.ravel(), n_nodes) >= sample.node_sizes / 2).astype(
        np.intp
    )
    box = np.zeros_like(mask, dtype=float)
    if mask.any():
        r, c = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        box[r[0] : r[-1] + 1, c[0] : c[-1] + 1] = 1.0
    touches_box = np.bincount(segments.ravel(), box.ravel(), minlength=n_nodes) > 0
    box_labels = np.where(touches_box, -1, 0).astype(np.intp)
    return sample, labels, box_labels, segments


def _load_one(photo: str, mask: str, n_segments: int, compactness: float, stamps: tuple):
    """Superpixel graph of one photo; ``stamps`` (size and modification time of both files)
    only key the cache, so that a changed image is recomputed."""
    image, binary = _read_pair(Path(photo), Path(mask))
    return superpixel_graph(image, binary, n_segments, compactness)


def load_weizmann_horses(
    path=None,
    n_segments: int = 150,
    compactness: float = 10.0,
    indices=None,
    cache=True,
    n_jobs=None,
) -> Bunch:
    """Superpixel graphs of the 328 Weizmann horse photos with their labels.

    Parameters
    ----------
    path : str or Path, optional
        Folder holding ``rgb/`` and ``figure_ground/``; by default
        ``$PMAP_SKLEARN_DATA/weizmann_horse`` then ``../shared/data/weizmann_horse``.
    n_segments : int, default=150
        SLIC's target number of superpixels (>= 1).
    compactness : float, default=10.0
        SLIC's compactness (> 0).
    indices : sequence of int, optional
        Load only these images (positions in the sorted file list, as in :func:`horse_split`).
    cache : bool or path, default=True
        Cache the per-image results with ``joblib.Memory`` (``True``: ``$PMAP_SKLEARN_CACHE``
        or ``~/.cache/pmap_sklearn``), keyed by the files' sizes and modification times. When
        some images are not cached yet, progress goes to standard error.
    n_jobs : int, optional
        Processes over images.

    Returns
    -------
    data : Bunch
        ``data``: list of :class:`GraphSample`; ``target``: node labels (majority of the mask);
        ``box_target``: bounding-box partial labels (0 outside the box, -1 inside);
        ``segments``: (H, W) superpixel maps; ``filenames``: photo files (sorted).
        Use :func:`horse_split` for the fixed split and :func:`paint` to show node values.

    Raises
    ------
    FileNotFoundError
        Missing folders (naming every place tried) or a mask without its photo.
    ValueError
        An unreadable image (naming the file), an index out of range, bad SLIC parameters.
    ImportError
        scikit-image is missing (``pip install 'pmap_sklearn[datasets]'``).
    """
    if isinstance(n_segments, bool) or not isinstance(n_segments, int | np.integer):
        raise ValueError(f"n_segments must be an int >= 1, got {n_segments!r}")
    if n_segments < 1:
        raise ValueError(f"n_segments must be an int >= 1, got {n_segments}")
    if not compactness > 0:
        raise ValueError(f"compactness must be > 0, got {compactness!r}")
    folder = _horse_folder(path)
    pairs = _select(_pairs(folder), indices, "horse images")
    jobs = [
        (str(photo), str(mask), int(n_segments), float(compactness), _stamps(photo, mask))
        for photo, mask in pairs
    ]
    results = cached_map(_load_one, jobs, _cache_dir(cache), n_jobs, "superpixel features")
    return Bunch(
        data=[r[0] for r in results],
        target=[r[1] for r in results],
        box_target=[r[2] for r in results],
        segments=[r[3] for r in results],
        filenames=[str(photo) for photo, _ in pairs],
    )


def paint(segments: np.ndarray, node_values: np.ndarray) -> np.ndarray:
    """Pixel image of per-node values (labels or marginals), as
    :func:`~pmap_sklearn.superpixels.to_pixels`.

    Parameters
    ----------
    segments : ndarray of shape (H, W)
        Superpixel index of each pixel (from :func:`superpixel_graph`).
    node_values : array-like of shape (n_nodes, ...)
        A value (or a row of values) per superpixel.

    Returns
    -------
    ndarray of shape (H, W, ...)
        ``node_values[segments]``.
    """
    return to_pixels(segments, node_values)


def _read_mask(file: Path, size) -> np.ndarray:
    small = _skimage("transform", WHAT).resize(
        _read_mask_levels(file).astype(float) / 255.0, size, anti_aliasing=True
    )
    return (small >= 0.5).astype(np.int8)


def load_weizmann_horse_masks(path=None, size=(50, 50), indices=None) -> Bunch:
    """Binary horse silhouettes for denoising (thesis chapter 2): every mask downscaled to ``size``.

    Parameters
    ----------
    path : str or Path, optional
        Folder holding ``figure_ground/`` (and ``rgb/``), found as in
        :func:`load_weizmann_horses`.
    size : (int, int), default=(50, 50)
        Output shape (the aspect ratio is not kept, as in the thesis).
    indices : sequence of int, optional
        Positions in the sorted file list (see :func:`horse_split`).

    Returns
    -------
    data : Bunch
        ``images``: int8 array of shape ``(n_images, *size)`` with 1 = horse;
        ``filenames``: mask files.
    """
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"size must be two positive ints, got {size}")
    masks = _select(_mask_files(_horse_folder(path)), indices, "horse masks")
    return Bunch(
        images=np.stack([_read_mask(m, size) for m in masks]),
        filenames=[str(m) for m in masks],
    )
