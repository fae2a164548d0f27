"""The one fit state: what every learner's optimiser keeps between calls.

A learner's ``_new_state`` makes one and its optimiser updates it in place; ``fit`` copies it
on a warm start (so a failed fit changes nothing), reads ``estimate`` into ``coef_`` and
``n_iter`` into ``n_iter_``, and the estimator turns ``history`` into its fitted curves.
Optimisers with more to keep (SGD's schedule position and average, BCFW's dual blocks) extend
it. ``fitted_on`` records what the state was fitted on (the fingerprints of the training data
and of the parameters the state depends on): a warm start continues the state only when they
are unchanged (:func:`fingerprint`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import pickle
from dataclasses import dataclass, field, fields

import numpy as np
from scipy import sparse


@dataclass
class FitState:
    """Weights, random stream, iterations and named histories of a fit.

    Parameters
    ----------
    coef : ndarray
        The current weights.
    rng : numpy.random.Generator, optional
        The fit's random stream, continued by warm starts.
    n_iter : int, default=0
        Iterations (epochs, rounds) of the last run.
    history : dict of str to list
        Per-iteration records by name (objective values, bounds, gaps, step sizes).
    fitted_on : dict
        The fingerprints (:func:`fingerprint`) of the training data and of the parameters the
        state depends on; empty when the fit did not record them (``warm_start=False``).
    """

    coef: np.ndarray
    rng: np.random.Generator | None = None
    n_iter: int = 0
    history: dict = field(default_factory=dict)
    fitted_on: dict = field(default_factory=dict)

    @property
    def estimate(self) -> np.ndarray:
        """The weights the fit returns (subclasses may average)."""
        return self.coef

    def record(self, **values) -> None:
        """Append each value to its history."""
        for name, value in values.items():
            self.history.setdefault(name, []).append(value)

    def recorded(self, name: str) -> list:
        """The history of ``name`` (empty if never recorded)."""
        return list(self.history.get(name, []))


def fingerprint(value) -> str | None:
    """A digest of ``value``'s content, to tell whether a warm start sees the data and
    parameters its state was fitted on: arrays (dense or sparse) by their type, shape and
    bytes, sequences and dataclasses (:class:`~pmap_sklearn.GraphSample`) item by item, other
    objects by their pickle. None when the value cannot be digested (a generator), which never
    matches."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        _digest(digest, value)
    except Exception:  # noqa: BLE001 - what cannot be read cannot be compared
        return None
    return digest.hexdigest()


def _digest(digest, value) -> None:
    if isinstance(value, np.ndarray) and value.dtype != object:
        digest.update(f"array {value.dtype.str} {value.shape}".encode())
        digest.update(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
    elif sparse.issparse(value):
        value = value.tocsr()
        digest.update(f"csr {value.shape}".encode())
        for part in (value.data, value.indices, value.indptr):
            _digest(digest, part)
    elif isinstance(value, list | tuple | np.ndarray):  # np.ndarray: of objects
        digest.update(f"{type(value).__name__} {len(value)}".encode())
        for item in value:
            _digest(digest, item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        digest.update(type(value).__name__.encode())
        for entry in fields(value):
            _digest(digest, getattr(value, entry.name))
    else:
        digest.update(pickle.dumps(value, protocol=5))


#: Pickles store a float array by its non-zeros when at most this share of it is non-zero (an
#: index and a value cost 12 bytes, a dense entry 8).
SPARSE_SHARE = 0.5


@dataclass(frozen=True)
class SparseArray:
    """A float array stored by its non-zero entries (C order), for pickles of L1 models."""

    shape: tuple
    dtype: np.dtype
    index: np.ndarray
    values: np.ndarray

    def toarray(self) -> np.ndarray:
        dense = np.zeros(self.shape, dtype=self.dtype)
        dense.reshape(-1)[self.index] = self.values
        return dense


@dataclass(frozen=True)
class SameAsWeights:
    """A copy of ``coef_`` (the fit state's weights or average, ``supervised_coef_`` when every
    label is known), stored as this marker."""


def _compact(value, weights):
    """``value`` as :class:`SameAsWeights` if it equals ``weights`` (``coef_``), as a
    :class:`SparseArray` if it is a mostly-zero float array, else itself."""
    if (
        not isinstance(value, np.ndarray)
        or value.dtype.kind != "f"
        or value.size < 64
        or not value.flags.c_contiguous
    ):
        return value
    if (
        value is not weights
        and isinstance(weights, np.ndarray)
        and value.dtype == weights.dtype
        and np.array_equal(value, weights)
    ):
        return SameAsWeights()
    index = np.flatnonzero(value)
    if len(index) > SPARSE_SHARE * value.size:
        return value
    index = index.astype(np.int32 if value.size < 2**31 else np.int64)
    return SparseArray(value.shape, value.dtype, index, value.reshape(-1)[index])


def _expand(value, weights):
    if isinstance(value, SameAsWeights):
        return weights.copy()
    return value.toarray() if isinstance(value, SparseArray) else value


def _map_arrays(attributes: dict, convert, weights) -> dict:
    """The attributes with ``convert(array, weights)`` applied to every array, and to every
    array field of a fit state (weights, averages, AdaGrad sums): the state is copied, never
    changed."""
    converted = {}
    for name, value in attributes.items():
        if isinstance(value, FitState):
            value = copy.copy(value)
            for entry in fields(value):
                setattr(value, entry.name, convert(getattr(value, entry.name), weights))
        converted[name] = convert(value, weights)
    return converted


def compact_attributes(attributes: dict) -> dict:
    """What a pickle of an estimator stores: its attributes with every copy of ``coef_`` (in the
    fit state kept for warm starts, ``supervised_coef_``) as a marker and every mostly-zero
    float array (``coef_`` of an L1 model) by its non-zeros. :func:`expand_attributes` gives
    back the same arrays."""
    return _map_arrays(attributes, _compact, attributes.get("coef_"))


def expand_attributes(attributes: dict) -> dict:
    """The attributes of :func:`compact_attributes` with their dense arrays."""
    weights = _expand(attributes.get("coef_"), None)
    expanded = _map_arrays(attributes, _expand, weights)
    if "coef_" in attributes:
        expanded["coef_"] = weights
    return expanded
