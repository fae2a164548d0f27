"""Small helpers shared by every layer (no import from the rest of the package)."""

from __future__ import annotations

import ctypes
import os
import sys
from functools import cache, cached_property
from pathlib import Path
from typing import NamedTuple

import joblib
import numpy as np
import sklearn
from scipy import sparse


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


def stack_rows(blocks):
    """Row-stack node feature blocks: a CSR matrix if any block is sparse, else an array.

    CSR blocks of one dtype are stacked from their arrays in one pass (scipy's ``vstack`` goes
    through a per-block conversion, slow for thousands of sentences)."""
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


def like_input(images: list[np.ndarray], original):
    """Stack the outputs into an array when the input was an array, else return a list."""
    if isinstance(original, np.ndarray):
        return np.stack(images)
    return images


def store_parameters(estimator, arguments: dict) -> None:
    """Set an estimator's ``__init__`` arguments as its attributes, unchanged: scikit-learn's
    contract (``__init__`` only stores its parameters; ``get_params`` reads them back by the
    signature's names). Called as ``store_parameters(self, locals())`` first in ``__init__``."""
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)
