"""Input checks at the API boundary, in one place: numbers, features, edges, images,
probabilities, sample weights, random states and parameter intervals (labels are checked in
:mod:`._labels`). Each error names what is wrong and where."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
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


def check_sample_weight(sample_weight, n_samples: int, what: str = "X") -> np.ndarray | None:
    """The ``sample_weight`` of a fit as one float weight per sample, or None when not given:
    scikit-learn's ``_check_sample_weight`` with the learners' rules (a number is every
    sample's weight, as scikit-learn takes it).

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), number or None
    n_samples : int
        The number of samples of ``what``.
    what : str, default="X"
        What holds the samples, for the messages.

    Returns
    -------
    ndarray of shape (n_samples,) or None

    Raises
    ------
    ValueError
        Naming what is wrong: not numbers, not one weight per sample, a weight that is not
        finite or is negative (naming the first), every weight zero, or weights whose sum
        overflows.
    """
    if sample_weight is None:
        return None
    if sparse.issparse(sample_weight):
        raise ValueError("sample_weight must be a dense array of one weight per sample")
    try:
        weights = as_real_array(sample_weight, "sample_weight")
    except ValueError as exc:
        raise ValueError(f"sample_weight must hold numbers, one per sample ({exc})") from None
    if weights.ndim == 0:
        weights = np.full(n_samples, float(weights))
    elif weights.ndim != 1:
        raise ValueError(
            f"sample_weight must be 1-D, one weight per sample, got an array of shape "
            f"{weights.shape}"
        )
    elif len(weights) != n_samples:
        raise ValueError(
            f"sample_weight has {len(weights)} weights but {what} has {n_samples} samples: "
            "give one weight per sample"
        )
    bad = np.flatnonzero(~np.isfinite(weights))
    if len(bad):
        raise ValueError(
            f"sample_weight[{bad[0]}] is {weights[bad[0]]}: every weight must be finite"
        )
    negative = np.flatnonzero(weights < 0)
    if len(negative):
        raise ValueError(
            f"sample_weight[{negative[0]}] is {weights[negative[0]]:g}: weights must be >= 0 "
            "(0 leaves a sample out)"
        )
    if not weights.any():
        raise ValueError(
            "sample_weight is 0 for every sample: at least one sample needs a positive weight"
        )
    with np.errstate(over="ignore"):
        if not np.isfinite(weights.sum()):
            raise ValueError(
                "sample_weight sums to more than a float can hold: rescale the weights (at a "
                "fixed alpha only their ratios matter)"
            )
    return weights


def check_generator(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def as_real_array(value, what: str) -> np.ndarray:
    """``value`` as a float array, or a ValueError naming ``what`` when it is not real numbers:
    complex numbers (casting would drop their imaginary part; scikit-learn's ``check_array``
    refuses them too), strings (even numeric ones: a text column is converted explicitly,
    never silently) or anything else that is not a number."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise ValueError(f"{what} must be numeric ({exc}){_feature_hint(value)}") from None
    _check_real_dtype(array, what, value)
    try:
        return array.astype(float, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric ({exc}){_feature_hint(value)}") from None


def _check_real_dtype(array, what: str, value=None) -> None:
    """Refuse complex numbers and strings (numeric or not) in ``array`` (dense or sparse), the
    elements of an object array included."""
    kind = array.dtype.kind
    if kind == "O" and not sparse.issparse(array):
        odd = [v for v in array.flat if isinstance(v, str | bytes | complex)]
        kind = "c" if any(isinstance(v, complex) for v in odd) else "U" if odd else kind
    if kind == "c":
        raise ValueError(
            f"{what}: Complex data not supported; pass real numbers (np.real and np.imag as "
            "separate features if both parts matter)"
        )
    if kind in "US":
        hint = _feature_hint(value) or (
            "; convert numeric text to numbers explicitly, e.g. np.asarray(X, dtype=float)"
        )
        raise ValueError(f"{what} must be numeric, got strings{hint}")
    if kind in "mMV":
        raise ValueError(f"{what} must be numeric, got dtype {array.dtype}")


def as_finite_array(value, what: str) -> np.ndarray:
    """``value`` as a float array (:func:`as_real_array`), or a ValueError naming ``what`` if
    it is not real numbers or holds NaN / inf."""
    array = as_real_array(value, what)
    if not np.all(np.isfinite(array)):
        raise ValueError(_non_finite_message(what))
    return array


def _non_finite_message(what: str) -> str:
    return (
        f"{what}: non-finite values (NaN or inf) found; impute or drop them first, e.g. with "
        "sklearn.impute.SimpleImputer"
    )


def check_probabilities(value, what: str, *, atol: float = 1e-6) -> np.ndarray:
    """``value`` as a float array whose last axis holds probability distributions (entries in
    [0, 1], rows summing to 1 within ``atol``), or a ValueError naming ``what`` and the first
    row that is not one (logits, scores or counts are not probabilities: take their softmax,
    or ``predict_proba`` / ``predict_marginals``)."""

    def ragged(exc):
        return ValueError(
            f"{what} must be an array of probabilities with one column per class ({exc}); "
            "rows of different lengths are not"
        )

    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ragged(exc) from None
    _check_real_dtype(array, what)  # complex numbers and text are refused, never cast
    try:
        array = array.astype(float, copy=False)
    except (TypeError, ValueError) as exc:
        raise ragged(exc) from None
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
        _check_real_dtype(value, what)
        try:
            matrix = sparse.csr_matrix(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be numeric ({exc})") from None
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError(_non_finite_message(what))
    return matrix


def check_edges(edges, n_nodes: int, where: str) -> np.ndarray:
    """Validated undirected edges: int array (E, 2) of node indices in ``0..n_nodes-1``, no
    self-loop, each pair of nodes at most once. ``where`` names the sample in the messages (e.g.
    ``"sample 3"``)."""
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
    edges = edges.astype(np.intp)
    # An undirected pair listed twice (as (i, j) twice or as (i, j) and (j, i)) would add its
    # pairwise term twice, silently doubling that edge's coupling.
    pairs = np.sort(edges, axis=1)
    keys = pairs[:, 0] * np.intp(n_nodes) + pairs[:, 1]
    order = np.argsort(keys, kind="stable")
    repeated = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    if len(repeated):
        first, second = order[repeated[0]], order[repeated[0] + 1]
        raise ValueError(
            f"{where}: edges {first} {tuple(edges[first].tolist())} and {second} "
            f"{tuple(edges[second].tolist())} join the same pair of nodes; an undirected edge "
            "must be listed once (a repeated edge would count its coupling twice)"
        )
    return edges


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


def check_feature_matrix(X, who: str):
    """``X`` as a float array or float CSR matrix (n_samples, n_features), finite and not
    empty; errors name ``who`` (the structure that takes it)."""
    if not sparse.issparse(X):
        try:
            values = np.asarray(X)
        except (TypeError, ValueError) as exc:  # ragged rows
            raise ValueError(f"{who} takes X of shape (n_samples, n_features) ({exc})") from None
        values = as_real_array(values, "X")
        if values.ndim != 2:
            raise ValueError(
                f"{who} takes X of shape (n_samples, n_features), got an array of shape "
                f"{values.shape}"
                + (": for one sample pass X.reshape(1, -1)" if values.ndim == 1 else "")
            )
        X = values
    features = as_finite_features(X, "X")
    if features.shape[0] == 0:
        raise ValueError("X is empty: at least one sample is needed")
    return features


def physical_memory() -> int | None:
    """The machine's physical memory in bytes, or None where the system does not say."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


#: Bytes a node of a draw takes at the peak of ``sample``: its 8-byte state and the copies
#: that decoding, formatting and stacking the draws make (a peak of 6.4 times the states,
#: measured with tracemalloc on ChainCRF and PerturbMAPCRF).
DRAW_NODE_BYTES = 48


def check_draws_memory(n_draws: int, n_nodes: int, limit: int | None = None) -> None:
    """Refuse ``n_draws`` joint draws of ``n_nodes`` nodes whose memory
    (:data:`DRAW_NODE_BYTES` a node a draw) would exceed ``limit`` bytes (by default the
    machine's physical memory), before anything is allocated, naming the memory and the
    remedy.

    Parameters
    ----------
    n_draws : int
        Draws per sample.
    n_nodes : int
        Nodes of every sample drawn together.
    limit : int, optional
        The bytes allowed; None: :func:`physical_memory` (no check where it is unknown).
    """
    limit = physical_memory() if limit is None else limit
    need = DRAW_NODE_BYTES * int(n_draws) * int(n_nodes)
    if limit is None or need <= limit:
        return
    affordable = max(limit // max(DRAW_NODE_BYTES * int(n_nodes), 1), 1)
    raise ValueError(
        f"n_draws={n_draws} draws of {n_nodes} nodes need about {_bytes(need)}, more than the "
        f"{_bytes(limit)} of memory: ask for at most about {affordable} draws of these "
        "samples, or draw in batches (fewer samples or draws a call) and combine them"
    )


def _bytes(n: int) -> str:
    """``n`` bytes in binary units (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
