"""From photos to superpixel graphs, and back from node labels and marginals to pixel maps.

Scene segmentation with a CRF over superpixels (Fulkerson, Vedaldi & Soatto 2009; Gould et al.
2008; Shotton et al. 2009): each photo is cut into SLIC superpixels (Achanta et al. 2012), each
superpixel described by cheap colour, texture, filter-bank and position statistics (and, with
``neighbour_context``, the mean of its neighbours' — the context that a per-node classifier
lacks), and touching superpixels become edges with contrast-sensitive features (Boykov & Jolly
2001). The node labels of a pixel labelling are the majority label of each superpixel, with
void pixels left out of the vote; :func:`to_pixels` paints node values back.
"""

from __future__ import annotations

import importlib
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy import ndimage, sparse
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context

from ._parallel import N_JOBS_CONSTRAINT
from ._utils import store_parameters
from ._validation import NumberInterval
from .samples import GraphSample

__all__ = ["SuperpixelGraphs", "superpixel_sample", "node_labels", "to_pixels"]

#: Lab channels' half ranges (L in 0..100, a and b in about -128..127).
LAB_SCALE = np.array([100.0, 128.0, 128.0])
#: The filter bank of ``filter_bank=True``: Gaussians on L, a, b; Laplacians of Gaussian and
#: first derivatives on L (a cheap version of the 17-filter bank of Winn, Criminisi & Minka
#: 2005, used by TextonBoost's features).
GAUSSIAN_SIGMAS = (1.0, 2.0, 4.0)
LOG_SIGMAS = (2.0, 4.0)
DERIVATIVE_SIGMAS = (2.0, 4.0)


def _skimage(module: str, what: str = "superpixel graphs"):
    """A scikit-image module, or an ImportError that names ``what`` needs it and the extra to
    install."""
    try:
        return importlib.import_module(f"skimage.{module}")
    except ImportError:
        raise ImportError(
            f"{what} need scikit-image: pip install 'pmap_sklearn[datasets]'"
        ) from None


def _as_rgb(image, index: int) -> np.ndarray:
    """A float RGB image in [0, 1] (grey images are repeated, an alpha channel dropped)."""
    array = np.asarray(image)
    if array.dtype.kind not in "biuf" or array.ndim not in (2, 3):
        raise ValueError(
            f"image {index}: expected an (H, W) or (H, W, 3) array of numbers, got "
            f"{array.dtype} of shape {array.shape}"
        )
    if array.ndim == 3 and array.shape[2] not in (3, 4):
        raise ValueError(f"image {index}: expected 3 (RGB) or 4 (RGBA) channels, got {array.shape}")
    if min(array.shape[:2]) < 2:
        raise ValueError(f"image {index}: need at least 2×2 pixels, got {array.shape[:2]}")
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=2)
    array = array[..., :3]
    if array.dtype.kind in "biu":
        array = array.astype(float) / _integer_top(array, index)
    if not np.isfinite(array).all():
        raise ValueError(f"image {index}: holds NaN or inf")
    if array.min() < 0 or array.max() > 1:
        raise ValueError(
            f"image {index}: float images must be in [0, 1], got values in "
            f"[{array.min():.3g}, {array.max():.3g}] (give uint8 images as they are)"
        )
    return np.ascontiguousarray(array, dtype=float)


def _integer_top(array, index: int) -> int:
    """The white of an integer image: 1 for bool, 255 for 8-bit types, 65535 for 16-bit types
    (a dark 16-bit frame is not 8-bit); other integer types are read as 8-bit and refuse
    values above 255."""
    if array.dtype == bool:
        return 1
    if array.dtype.itemsize == 2:
        return 65535
    if array.dtype.itemsize > 2 and array.max(initial=0) > 255:
        raise ValueError(
            f"image {index}: {array.dtype} values up to {array.max()}: integer images other than "
            "uint16 are read as 8-bit (0..255); give 16-bit photos as uint16, or floats in [0, 1]"
        )
    return 255


def _photos(X, what: str = "X") -> list:
    """The photos of ``X`` as a list, refusing one photo given without a list (iterating it
    would read each pixel row as a photo)."""
    if isinstance(X, np.ndarray) and (X.ndim == 2 or (X.ndim == 3 and X.shape[2] in (3, 4))):
        raise ValueError(
            f"{what} is one {'grey' if X.ndim == 2 else 'colour'} photo of shape {X.shape}, not a "
            f"sequence of photos: pass [photo] (a stack of grey photos: a list of (H, W) arrays)"
        )
    try:
        return list(X)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of photos, got {type(X).__name__}") from None


def _consecutive(segments, shape, index: int) -> np.ndarray:
    """A superpixel map relabelled 0..n-1 (labels that do not occur are dropped)."""
    segments = np.asarray(segments)
    if segments.shape != shape or segments.dtype.kind not in "biu":
        raise ValueError(
            f"segments of image {index} must be an integer map of shape {shape}, got "
            f"{segments.dtype} of shape {segments.shape}"
        )
    _, consecutive = np.unique(segments, return_inverse=True)
    dtype = np.int16 if consecutive.max(initial=0) < 2**15 else np.int32
    return consecutive.reshape(shape).astype(dtype)


def _means(flat_segments, values, counts):
    """Per-superpixel means of ``values`` (pixels × channels): (n_nodes, channels)."""
    n_nodes = len(counts)
    sums = np.stack([np.bincount(flat_segments, v, minlength=n_nodes) for v in values.T], axis=1)
    return sums / counts[:, None]


def _histogram(flat_segments, codes, n_bins, n_nodes, weights=None):
    """Per-superpixel normalised histogram of integer ``codes`` in 0..n_bins-1."""
    flat = flat_segments * n_bins + codes.ravel()
    hist = np.bincount(flat, weights, minlength=n_nodes * n_bins).reshape(n_nodes, n_bins)
    return hist / np.maximum(hist.sum(axis=1, keepdims=True), 1e-12)


def _filter_bank(lab) -> np.ndarray:
    """Responses (pixels × filters) of :data:`GAUSSIAN_SIGMAS` etc. on the Lab image."""
    lightness = lab[..., 0] / LAB_SCALE[0]
    responses = [
        ndimage.gaussian_filter(lab[..., c] / LAB_SCALE[c], sigma)
        for sigma in GAUSSIAN_SIGMAS
        for c in range(3)
    ]
    responses += [np.abs(ndimage.gaussian_laplace(lightness, s)) * s**2 for s in LOG_SIGMAS]
    responses += [
        np.abs(ndimage.gaussian_filter(lightness, s, order=order)) * s
        for s in DERIVATIVE_SIGMAS
        for order in ((0, 1), (1, 0))
    ]
    return np.stack(responses, axis=-1).reshape(-1, len(responses))


def superpixel_sample(
    image, segments, *, filter_bank: bool = True, neighbour_context: bool = True
) -> GraphSample:
    """The superpixel graph of one photo for a given superpixel map.

    Parameters
    ----------
    image : array-like of shape (H, W, 3) or (H, W)
        RGB (or grey) photo: floats in [0, 1] or integers as read (8-bit types over 255, 16-bit
        types over 65535, wider integer types as 8-bit).
    segments : array-like of int of shape (H, W)
        Superpixel index of each pixel (any integers; relabelled 0..n-1).
    filter_bank : bool, default=True
        Add the mean responses of a filter bank (15 features): Gaussians (σ = 1, 2, 4) on the
        three Lab channels, Laplacians of Gaussian (σ = 2, 4) and x / y derivatives of Gaussian
        (σ = 2, 4) on lightness.
    neighbour_context : bool, default=True
        Append the boundary-weighted mean of the neighbours' features (doubles the width).

    Returns
    -------
    GraphSample
        Node features (n_nodes, F): Lab mean and standard deviation, Lab histograms (3 × 8
        bins), gradient-orientation histogram (8) and mean magnitude, uniform local binary
        patterns (10), position (row, column, their squares and product), relative size — 55
        features — then the filter bank and the neighbours' means. Edges join superpixels that
        touch (4-connected); edge features are ``[1, exp(−β‖Lab_i − Lab_j‖²), boundary length /
        its mean]`` with β the inverse of twice the mean squared distance (Boykov & Jolly
        2001). ``node_sizes`` are pixel counts and ``segments`` the relabelled map.
    """
    return _sample(
        _as_rgb(image, 0),
        _consecutive(segments, np.shape(image)[:2], 0),
        filter_bank,
        neighbour_context,
    )


def _sample(image, segments, filter_bank, neighbour_context) -> GraphSample:
    color, feature, filters = _skimage("color"), _skimage("feature"), _skimage("filters")
    height, width = segments.shape
    flat = segments.ravel().astype(np.intp)
    n_nodes = int(flat.max()) + 1
    counts = np.bincount(flat, minlength=n_nodes).astype(float)

    lab = color.rgb2lab(image)
    lab_pixels = lab.reshape(-1, 3)
    lab_mean = _means(flat, lab_pixels, counts)
    lab_std = np.sqrt(np.maximum(_means(flat, lab_pixels**2, counts) - lab_mean**2, 0))
    bins = np.clip(((lab + [0, 128, 128]) / (2 * LAB_SCALE) * [16, 8, 8]).astype(int), 0, 7)
    colour_hist = [_histogram(flat, bins[..., c], 8, n_nodes) for c in range(3)]

    gray = color.rgb2gray(image)
    gy, gx = filters.sobel_h(gray), filters.sobel_v(gray)
    magnitude = np.hypot(gx, gy)
    orientation = np.clip(((np.arctan2(gy, gx) % np.pi) / np.pi * 8).astype(int), 0, 7)
    gradient_hist = _histogram(flat, orientation, 8, n_nodes, magnitude.ravel())
    gradient_mean = _means(flat, magnitude.reshape(-1, 1), counts)
    lbp = feature.local_binary_pattern((gray * 255).astype(np.uint8), 8, 1, "uniform")
    texture_hist = _histogram(flat, lbp.astype(int), 10, n_nodes)

    rows, cols = np.mgrid[:height, :width]
    centre = _means(flat, np.column_stack([rows.ravel() / height, cols.ravel() / width]), counts)
    cy, cx = centre[:, 0], centre[:, 1]
    blocks = [
        lab_mean / LAB_SCALE,
        lab_std / LAB_SCALE,
        *colour_hist,
        gradient_hist,
        gradient_mean,
        texture_hist,
        np.column_stack([cy, cx, cy**2, cx**2, cy * cx]),
        (counts / counts.sum())[:, None],
    ]
    if filter_bank:
        blocks.append(_means(flat, _filter_bank(lab), counts))
    features = np.column_stack(blocks)

    # Superpixel adjacency: 4-neighbouring pixels in different superpixels.
    first = np.concatenate([segments[:, :-1].ravel(), segments[:-1, :].ravel()]).astype(np.intp)
    second = np.concatenate([segments[:, 1:].ravel(), segments[1:, :].ravel()]).astype(np.intp)
    touching = first != second
    low = np.minimum(first[touching], second[touching])
    high = np.maximum(first[touching], second[touching])
    codes, boundary = np.unique(low * n_nodes + high, return_counts=True)
    edges = np.column_stack([codes // n_nodes, codes % n_nodes]).astype(np.intp)
    if neighbour_context:
        adjacency = sparse.coo_matrix(
            (
                np.concatenate([boundary, boundary]).astype(float),
                (
                    np.concatenate([edges[:, 0], edges[:, 1]]),
                    np.concatenate([edges[:, 1], edges[:, 0]]),
                ),
            ),
            shape=(n_nodes, n_nodes),
        ).tocsr()
        degree = np.asarray(adjacency.sum(axis=1)).ravel()
        context = adjacency @ features / np.maximum(degree, 1)[:, None]
        context[degree == 0] = features[degree == 0]  # one superpixel: its own features
        features = np.column_stack([features, context])
    colour_distance = ((lab_mean[edges[:, 0]] - lab_mean[edges[:, 1]]) ** 2).sum(axis=1)
    mean_distance = colour_distance.mean() if len(edges) else 0.0
    beta = 1.0 / (2.0 * mean_distance) if mean_distance > 0 else 0.0
    edge_features = np.column_stack(
        [
            np.ones(len(edges)),
            np.exp(-beta * colour_distance),
            boundary / boundary.mean() if len(edges) else boundary.astype(float),
        ]
    )
    return GraphSample(features, edges, edge_features, counts, segments)


def _slic(image, n_segments, compactness) -> np.ndarray:
    segments = _skimage("segmentation").slic(
        image, n_segments=n_segments, compactness=compactness, start_label=0
    )
    return _consecutive(segments, image.shape[:2], 0)


def _transform_one(image, segments, index, params) -> GraphSample:
    image = _as_rgb(image, index)
    if segments is None:
        segments = _slic(image, params["n_segments"], params["compactness"])
    else:
        segments = _consecutive(segments, image.shape[:2], index)
    return _sample(image, segments, params["filter_bank"], params["neighbour_context"])


class SuperpixelGraphs(TransformerMixin, BaseEstimator):
    """Turn photos into superpixel graphs: the input of a CRF on :class:`GraphStructure`.

    Stateless: each photo is cut into SLIC superpixels (or the segmentation given to
    :meth:`transform`) and described by :func:`superpixel_sample`. Use :func:`node_labels` for
    the node labels of pixel labellings and :func:`to_pixels` to paint node labels or
    marginals back.

    Parameters
    ----------
    n_segments : int, default=1000
        SLIC's target number of superpixels per photo (on 480×360 road scenes, 1000 leave a
        ceiling of about 94 % pixel accuracy for a perfect node labelling).
    compactness : float, default=10.0
        SLIC's balance of colour against space (higher: more square superpixels). Where colours
        change at nearly every pixel (noise, fine texture) SLIC at 10 merges its fragments
        into a few superpixels, and :meth:`transform` warns when it makes fewer than a quarter
        of ``n_segments``: raise it (e.g. to 100) there.
    filter_bank : bool, default=True
        Add 15 filter-bank responses (see :func:`superpixel_sample`).
    neighbour_context : bool, default=True
        Append the neighbours' mean features.
    n_jobs : int, optional
        Processes over photos (joblib).

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn.superpixels import SuperpixelGraphs, to_pixels
    >>> photo = np.random.default_rng(0).random((4, 6, 3)).repeat(10, axis=0).repeat(10, axis=1)
    >>> graph = SuperpixelGraphs(n_segments=20).transform([photo])[0]  # 24 patches of colour
    >>> graph.node_features.shape[1], to_pixels(graph, np.arange(graph.n_nodes)).shape
    (140, (40, 60))
    """

    _parameter_constraints: dict = {
        "n_segments": [NumberInterval(Integral, 1, None, closed="left")],
        "compactness": [NumberInterval(Real, 0, None, closed="neither")],
        "filter_bank": ["boolean"],
        "neighbour_context": ["boolean"],
        "n_jobs": N_JOBS_CONSTRAINT,
    }

    def __init__(
        self,
        n_segments: int = 1000,
        compactness: float = 10.0,
        *,
        filter_bank: bool = True,
        neighbour_context: bool = True,
        n_jobs=None,
    ):
        store_parameters(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # X is a sequence of photos
        tags.requires_fit = False
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check the parameters and the photos (the transformer learns nothing).

        Parameters
        ----------
        X : sequence of array-like of shape (H, W, 3) or (H, W)
            Photos.
        y : ignored

        Returns
        -------
        self : object
        """
        for i, image in enumerate(_photos(X)):
            _as_rgb(image, i)
        return self

    def transform(self, X, segments=None):
        """Superpixel graphs of photos.

        Parameters
        ----------
        X : sequence of array-like of shape (H, W, 3) or (H, W)
            Photos (floats in [0, 1] or integers as read: 8-bit types over 255, 16-bit types
            over 65535, wider integer types as 8-bit).
        segments : sequence of int arrays of shape (H, W), optional
            Superpixel maps to use instead of SLIC's (any segmentation), one per photo.

        Returns
        -------
        list of GraphSample
            One per photo, with ``segments`` set (see :func:`superpixel_sample`).
        """
        self._validate_params()
        X = _photos(X)
        if segments is None:
            segments = [None] * len(X)
        else:
            if isinstance(segments, np.ndarray) and segments.ndim == 2:
                raise ValueError(
                    f"segments is one superpixel map of shape {segments.shape}, not one per "
                    "photo: pass [segments]"
                )
            segments = list(segments)
            if len(segments) != len(X):
                raise ValueError(f"{len(X)} photos but {len(segments)} segment maps")
        params = self.get_params()
        pairs = enumerate(zip(X, segments, strict=True))
        if self.n_jobs in (None, 1) or len(X) < 2:
            graphs = [_transform_one(x, s, i, params) for i, (x, s) in pairs]
        else:
            graphs = list(
                Parallel(n_jobs=self.n_jobs)(
                    delayed(_transform_one)(x, s, i, params) for i, (x, s) in pairs
                )
            )
        cut = [i for i, s in enumerate(segments) if s is None]  # by SLIC, here
        self._warn_few_superpixels([graphs[i].n_nodes for i in cut], cut)
        return graphs

    def _warn_few_superpixels(self, counts, photos) -> None:
        """Warn about the photos SLIC cut into far fewer superpixels than ``n_segments``
        (counted here, not in the workers, whose warnings would be lost)."""
        few = [(i, n) for i, n in zip(photos, counts, strict=True) if n < self.n_segments / 4]
        if few and self.n_segments > 1:
            first, n = few[0]
            warnings.warn(
                f"SLIC cut {len(few)} photo{'s' if len(few) > 1 else ''} into far fewer "
                f"superpixels than n_segments={self.n_segments} (photo {first}: {n} "
                f"superpixel{'s' if n > 1 else ''}): SLIC follows colour, and where colours "
                "change at nearly every pixel (texture, noise, dithering) it merges its "
                "fragments into few superpixels. Raise compactness (e.g. 100: space outweighs "
                f"colour; now {self.compactness}), lower n_segments to what the photos hold, "
                "or pass segments of your own",
                UserWarning,
                stacklevel=3,
            )


def _segments_of(graph_or_segments) -> np.ndarray:
    if isinstance(graph_or_segments, GraphSample):
        if graph_or_segments.segments is None:
            raise ValueError(
                "this GraphSample has no segments map: build it with SuperpixelGraphs or "
                "superpixel_sample, or pass the (H, W) superpixel map itself"
            )
        return np.asarray(graph_or_segments.segments)
    segments = np.asarray(graph_or_segments)
    if segments.ndim != 2 or segments.dtype.kind not in "iu":
        raise ValueError(
            f"expected a GraphSample or an (H, W) integer superpixel map, got "
            f"{segments.dtype} of shape {segments.shape}"
        )
    if segments.size and segments.min() < 0:
        raise ValueError(
            f"the superpixel map holds the negative id {segments.min()}: superpixel ids are "
            "0..n_nodes-1 (relabel the map, e.g. np.unique(segments, return_inverse=True))"
        )
    present = np.unique(segments)
    if len(present) and len(present) != present[-1] + 1:  # ids that label no pixel
        n_absent = int(present[-1]) + 1 - len(present)
        candidates = np.arange(min(len(present) + 5, int(present[-1]) + 1))
        first = np.setdiff1d(candidates, present)[:5]  # the first absent ids
        shown = ", ".join(map(str, first)) + (", ..." if n_absent > 5 else "")
        raise ValueError(
            f"the superpixel map's ids run to {present[-1]} but {n_absent} of "
            f"them label no pixel ({shown}): superpixel ids are 0..n_nodes-1, one per node, "
            "and an absent id would be a node with no pixel; relabel the map as "
            "superpixel_sample numbers its nodes, np.unique(segments, return_inverse=True)[1]"
            ".reshape(segments.shape)"
        )
    return segments


def node_labels(graph, label_image, *, void=None) -> np.ndarray:
    """The node labels of a pixel labelling: each superpixel's majority label.

    Parameters
    ----------
    graph : GraphSample or ndarray of int of shape (H, W)
        A superpixel graph (with ``segments``) or the superpixel map, its ids ``0..n-1``
        with every id labelling some pixel.
    label_image : array-like of int of shape (H, W)
        Pixel labels, integers >= 0 (and ``void``, which may be negative).
    void : int, optional
        A pixel label that does not vote (e.g. CamVid's 11, "unlabelled", or -1); superpixels
        with only void pixels get it.

    Returns
    -------
    ndarray of shape (n_nodes,)
        The most frequent non-void label of each superpixel (ties: the smallest label).
    """
    segments = _segments_of(graph)
    labels = np.asarray(label_image)
    if labels.shape != segments.shape or labels.dtype.kind not in "biu":
        raise ValueError(
            f"label_image must be an integer map of shape {segments.shape}, got {labels.dtype} "
            f"of shape {labels.shape}"
        )
    if void is not None and (isinstance(void, bool) or not isinstance(void, Integral)):
        raise ValueError(f"void must be an int label or None, got {void!r}")
    labels = labels.astype(np.int64).ravel()
    voting = np.ones(labels.shape, bool) if void is None else labels != void
    if voting.any() and labels[voting].min() < 0:
        raise ValueError(
            f"label_image holds negative labels ({labels[voting].min()}); labels are >= 0 "
            "(a negative void label is given as void=...)"
        )
    n_nodes = int(segments.max()) + 1
    # votes over the labels present only (a label of 2**31 - 1 asks for no more memory)
    present, codes = np.unique(labels[voting], return_inverse=True)
    n_labels = max(len(present), 1)
    votes = np.bincount(
        segments.ravel().astype(np.intp)[voting] * n_labels + codes.ravel(),
        minlength=n_nodes * n_labels,
    ).reshape(n_nodes, n_labels)
    result = present[votes.argmax(axis=1)] if len(present) else np.zeros(n_nodes, np.int64)
    if void is not None:
        result[votes.sum(axis=1) == 0] = void
    return result.astype(np.intp)


def to_pixels(graph, node_values) -> np.ndarray:
    """Paint per-node values (labels, or rows of marginals) onto the pixels.

    Parameters
    ----------
    graph : GraphSample or ndarray of int of shape (H, W)
        A superpixel graph (with ``segments``) or the superpixel map.
    node_values : array-like of shape (n_nodes, ...)
        One value (or row of values) per superpixel.

    Returns
    -------
    ndarray of shape (H, W, ...)
        ``node_values[segments]``.
    """
    segments = _segments_of(graph)
    values = np.asarray(node_values)
    n_nodes = int(segments.max()) + 1
    if values.ndim == 0 or len(values) != n_nodes:
        raise ValueError(
            f"node_values must have one entry per superpixel ({n_nodes}), got shape {values.shape}"
        )
    return values[segments]
