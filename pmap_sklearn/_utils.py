"""Small helpers shared by every layer (no import from the rest of the package)."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping
from functools import cache, cached_property
from pathlib import Path
from typing import NamedTuple

import joblib
import numpy as np
import sklearn
from scipy import sparse
from sklearn.utils._param_validation import Interval


class NumberInterval(Interval):
    """scikit-learn's ``Interval`` constraint without bools: ``True`` is an ``Integral`` to
    Python, but not a count, a size or a step size."""

    def is_satisfied_by(self, val):
        return not isinstance(val, bool | np.bool_) and super().is_satisfied_by(val)


class NonFiniteError(ValueError):
    """Scores, weights or an objective that overflowed or became NaN (the message says what to
    change: usually scale the features, regularise more or lower the step size)."""


class SparseVector(NamedTuple):
    """A vector of length ``size`` that is zero outside some rows of ``width`` consecutive
    weights: row ``index[i]`` (weights ``index[i] * width`` to ``index[i] * width + width - 1``)
    holds ``values[i]``, the rows distinct. A gradient of sparse features, which touches the
    weights of the features present only (one row of K weights per feature)."""

    index: np.ndarray  # (n_rows,) row numbers
    values: np.ndarray  # (n_rows, width)
    size: int

    def toarray(self) -> np.ndarray:
        dense = np.zeros(self.size)
        dense.reshape(-1, self.values.shape[1])[self.index] = self.values
        return dense

    def dot(self, w: np.ndarray) -> float:
        return float(
            np.einsum("ij,ij->", w.reshape(-1, self.values.shape[1])[self.index], self.values)
        )


class StackedSamples:
    """Sample bookkeeping of arrays that stack the nodes and edges of several samples: nodes
    ``node_offsets[i]:node_offsets[i + 1]`` and edges ``edge_offsets[i]:edge_offsets[i + 1]``
    belong to sample i."""

    node_offsets: np.ndarray
    edge_offsets: np.ndarray

    @property
    def n_samples(self) -> int:
        return len(self.node_offsets) - 1

    @cached_property
    def lengths(self) -> np.ndarray:
        """Number of nodes of each sample."""
        return np.diff(self.node_offsets)

    @cached_property
    def node_sample(self) -> np.ndarray:
        """Sample of each node."""
        return np.repeat(np.arange(self.n_samples), self.lengths)

    @cached_property
    def edge_sample(self) -> np.ndarray:
        """Sample of each edge."""
        return np.repeat(np.arange(self.n_samples), np.diff(self.edge_offsets))

    @cached_property
    def edge_ends(self) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
        """Node × edge 0/1 matrices of the first and the second end of every edge: ``first @
        values`` sums per-edge rows (E, K) into the first ends' nodes (n_nodes, K)."""
        n_edges = len(self.edges)
        columns = np.arange(n_edges)
        shape = (self.n_nodes, n_edges)
        return tuple(
            sparse.csr_matrix((np.ones(n_edges), (self.edges[:, end], columns)), shape=shape)
            for end in (0, 1)
        )


@cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, Windows, musl)."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Hand the heap memory a fit has freed back to the operating system.

    glibc keeps freed blocks below its mmap threshold in the process's heap, and the threshold
    rises (up to 32 MB) each time a larger array is freed, so a fit's temporaries stay resident
    after it returns: 115 of the 168 MB a treebank fit leaves behind. ``malloc_trim(0)`` returns
    them (it takes microseconds); elsewhere this does nothing.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _package_dir(module) -> str:
    return os.path.join(str(Path(module.__file__).resolve().parent), "")


# this package, and the libraries between a user's call and its code: scikit-learn's fit
# wrappers and meta-estimators (GridSearchCV, cross_validate, Pipeline), joblib's Parallel
_LIBRARY_DIRS = tuple(
    _package_dir(module) for module in (sys.modules[__package__], sklearn, joblib)
)


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` of the calling function point at the
    user's call: the first frame outside this package and the libraries that call into it
    (scikit-learn, joblib), however deep the warning is raised. Python 3.12's
    ``skip_file_prefixes`` does this; this computes it for older versions.

    Call it as an argument: ``warnings.warn(message, Category, stacklevel=user_stacklevel())``.
    """
    frame, level = sys._getframe(1), 1  # level 1: the function calling warnings.warn
    while frame is not None and _in_library(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


@cache
def _in_library(filename: str) -> bool:
    return not filename.startswith("<") and str(Path(filename).resolve()).startswith(_LIBRARY_DIRS)


def check_generator(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def onehot(labels: np.ndarray, n_states: int) -> np.ndarray:
    """One-hot rows (len(labels), n_states) of int labels; a label ``-1`` (unknown) gives a row
    of zeros."""
    rows = np.zeros((len(labels), n_states))
    known = labels >= 0
    rows[np.flatnonzero(known), labels[known]] = 1.0
    return rows


def ranges(offsets: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(offsets[i], offsets[i + 1])`` for i in ``index``, vectorised."""
    starts, stops = offsets[index], offsets[index + 1]
    counts = stops - starts
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return np.arange(counts.sum()) + shift


def as_finite_array(value, what: str) -> np.ndarray:
    """``value`` as a float array, or a ValueError naming ``what`` if it is not numeric or
    holds NaN / inf."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric ({exc}){_feature_hint(value)}") from None
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contain non-finite values (NaN or inf)")
    return array


def check_probabilities(value, what: str, *, atol: float = 1e-6) -> np.ndarray:
    """``value`` as a float array whose last axis holds probability distributions (entries in
    [0, 1], rows summing to 1 within ``atol``), or a ValueError naming ``what`` and the first
    row that is not one (logits, scores or counts are not probabilities: take their softmax,
    or ``predict_proba`` / ``predict_marginals``)."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{what} must be an array of probabilities with one column per class ({exc}); "
            "rows of different lengths are not"
        ) from None
    if array.ndim == 0 or array.shape[-1] == 0:
        raise ValueError(f"{what} must have one column per class, got shape {array.shape}")
    rows = array.reshape(-1, array.shape[-1])
    if not np.isfinite(rows).all():
        raise ValueError(f"{what} holds NaN or inf: probabilities are finite numbers in [0, 1]")
    outside = (rows < 0) | (rows > 1)
    if outside.any():
        raise ValueError(
            f"{what} holds {float(rows[outside][0])!r}, outside [0, 1]: give probabilities, not "
            "scores or logits (their softmax is a distribution)"
        )
    off = np.flatnonzero(np.abs(rows.sum(axis=1) - 1.0) > atol)
    if len(off):
        raise ValueError(
            f"{what}: row {off[0]} sums to {rows[off[0]].sum():.6g}, not 1: each row must be "
            "a distribution over the classes"
        )
    return array


def _feature_hint(value) -> str:
    """What to do when the features are per-token dicts or words (crfsuite's input)."""
    first = value
    while isinstance(first, list | tuple) and first:
        first = first[0]
    if isinstance(first, Mapping | str):
        kind = "feature dicts" if isinstance(first, Mapping) else "strings"
        return (
            f"; these are {kind}: turn token feature dicts (or words, with token_features) "
            "into sparse chains with SequenceVectorizer, e.g. "
            "make_pipeline(SequenceVectorizer(), PerturbMAPCRF())"
        )
    return ""


def as_finite_features(value, what: str):
    """Node features as a float array, or as a float CSR matrix when ``value`` is sparse; a
    ValueError naming ``what`` if they are not numeric or hold NaN / inf."""
    if not sparse.issparse(value):
        return as_finite_array(value, what)
    if value.format == "csr" and value.dtype == np.float64 and value.ndim == 2:
        matrix = value  # only read: no copy
    else:
        try:
            matrix = sparse.csr_matrix(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be numeric ({exc})") from None
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError(f"{what} contain non-finite values (NaN or inf)")
    return matrix


def stack_rows(blocks):
    """Row-stack node feature blocks: a CSR matrix if any block is sparse, else an array.

    CSR blocks of one dtype are stacked from their arrays in one pass (scipy's ``vstack`` goes
    through a per-block conversion: 0.3 s for the 12,544 sentences of a treebank)."""
    if not any(sparse.issparse(b) for b in blocks):
        return np.concatenate(blocks)
    if not all(sparse.issparse(b) and b.format == "csr" for b in blocks) or (
        len({(b.dtype, b.shape[1]) for b in blocks}) > 1
    ):
        return sparse.vstack(blocks, format="csr")
    counts = np.array([b.indptr[-1] for b in blocks])
    shift = np.repeat(np.cumsum(counts) - counts, [b.shape[0] for b in blocks])
    indptr = np.concatenate([[0], np.concatenate([b.indptr[1:] for b in blocks]) + shift])
    return sparse.csr_matrix(
        (
            np.concatenate([b.data[: b.indptr[-1]] for b in blocks]),
            np.concatenate([b.indices[: b.indptr[-1]] for b in blocks]),
            indptr,
        ),
        shape=(len(indptr) - 1, blocks[0].shape[1]),
    )


def append_ones_column(matrix):
    """A CSR matrix with a column of ones appended (the bias feature), built from its arrays:
    each row's non-zeros, then a 1 in the new last column."""
    rows_end, nonzeros = matrix.indptr[1:], matrix.indptr[-1]
    return sparse.csr_matrix(
        (
            np.insert(matrix.data[:nonzeros], rows_end, 1.0),
            np.insert(matrix.indices[:nonzeros], rows_end, matrix.shape[1]),
            matrix.indptr + np.arange(matrix.shape[0] + 1),
        ),
        shape=(matrix.shape[0], matrix.shape[1] + 1),
    )


def check_edges(edges, n_nodes: int, where: str) -> np.ndarray:
    """Validated undirected edges: int array (E, 2) of node indices in ``0..n_nodes-1``, no
    self-loop. ``where`` names the sample in the messages (e.g. ``"sample 3"``)."""
    edges = np.asarray(edges)
    if edges.size == 0:
        return np.zeros((0, 2), dtype=np.intp)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"{where}: edges must have shape (E, 2), got {edges.shape}")
    if not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(f"{where}: edges must be integer node indices, got dtype {edges.dtype}")
    if edges.min() < 0 or edges.max() >= n_nodes:
        raise ValueError(
            f"{where}: edge endpoint out of range 0..{n_nodes - 1} "
            f"(found {edges.min()}..{edges.max()})"
        )
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if len(loops):
        raise ValueError(f"{where}: edge {loops[0]} is a self-loop {tuple(edges[loops[0]])}")
    return edges.astype(np.intp)


def check_binary_images(images, what: str) -> list[np.ndarray]:
    """A list of 2-D {0, 1} integer arrays, or a clear error naming the bad image."""
    if isinstance(images, np.ndarray) and images.ndim == 2:
        raise ValueError(f"{what} must be a sequence of images (n_images, H, W), got one image")
    try:
        n_images = len(images)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of 2-D binary images") from None
    if n_images == 0:
        raise ValueError(f"{what} is empty")
    checked = []
    for i, image in enumerate(images):
        array = np.asarray(image)
        if array.ndim != 2 or 0 in array.shape:
            raise ValueError(f"{what}[{i}]: expected a 2-D image (H, W), got shape {array.shape}")
        if array.dtype == bool:
            array = array.astype(np.int8)
        elif not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"{what}[{i}]: expected numbers, got dtype {array.dtype}")
        else:
            bad = (array != 0) & (array != 1)
            if bad.any():
                raise ValueError(
                    f"{what}[{i}] must be binary (0/1); found the value {array[bad][0]!r}"
                )
            array = array.astype(np.int8)
        checked.append(array)
    return checked


def like_input(images: list[np.ndarray], original):
    """Stack the outputs into an array when the input was an array, else return a list."""
    if isinstance(original, np.ndarray):
        return np.stack(images)
    return images
