"""Labels as users give them (ints, strings, bools) ↔ the codes ``0..K-1`` structures work on."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from numbers import Number

import numpy as np
from scipy import sparse
from sklearn.utils.multiclass import type_of_target

from ._utils import user_stacklevel


def unknown_mask(values: np.ndarray, unknown_label) -> np.ndarray:
    """Where ``values`` equal the unknown-label marker (never for a marker of another kind, e.g.
    the default ``-1`` among string labels); a tuple of markers matches any of them."""
    if isinstance(unknown_label, tuple):
        mask = np.zeros(np.shape(values), dtype=bool)
        for marker in unknown_label:
            mask |= unknown_mask(values, marker)
        return mask
    if unknown_label is None:
        return np.zeros(values.shape, dtype=bool)
    if _textual(values) != isinstance(unknown_label, str):
        return np.zeros(values.shape, dtype=bool)
    return np.asarray(values == unknown_label, dtype=bool)


def _textual(values: np.ndarray) -> bool:
    """Whether label values are strings (the kind a string marker matches); a set of labels
    (:func:`is_label_set`) counts as the kind of its labels."""
    if values.dtype.kind in "US":
        return True
    if values.dtype.kind != "O" or not values.size:
        return False
    first = values.flat[0]
    if is_label_set(first) and first:
        first = next(iter(first))
    return isinstance(first, str)


def is_label_set(value) -> bool:
    """Whether a node's entry of ``y`` or ``known_labels`` is a set of labels (a ``set`` or
    ``frozenset``): the node takes one of them."""
    return isinstance(value, set | frozenset)


def set_entries(values: np.ndarray) -> np.ndarray:
    """Where an array of label entries holds sets of labels (only object arrays can)."""
    if values.dtype != object or not values.size:
        return np.zeros(values.shape, dtype=bool)
    return np.asarray(np.frompyfunc(is_label_set, 1, 1)(values), dtype=bool)


def _natural(values) -> np.ndarray:
    """Label values of one kind in the array numpy infers for them (strings, numbers), as
    :func:`encode` reads labels; values of mixed kinds are an error."""
    values = np.asarray(values, dtype=object)
    flat = values.ravel().tolist()
    textual = [isinstance(v, str) for v in flat]
    if all(textual) or not any(textual):
        return np.array(flat).reshape(values.shape) if flat else values
    raise ValueError("y mixes numeric and string labels: give every sample labels of one kind")


def encode_with_sets(y, unknown_label=-1, classes=None, n_states=None):
    """:func:`encode`, where a node's entry may also be a set of labels (:func:`is_label_set`).

    A set of one label is that label and a set of every class an unknown label; the other
    sets get the codes ``-2, -3, ...``, rows of a table of the labels each allows, so that
    every code below zero reads as "not one known label".

    Parameters
    ----------
    y : sequence of array-like
        One label array per sample.
    unknown_label : scalar or None
        The marker of an unknown label.
    classes : ndarray, optional
        Known classes: labels outside them (in a set too) are an error.
    n_states : int, optional
        As in :func:`encode`.

    Returns
    -------
    codes : list of int arrays
        Shaped like the label arrays.
    classes : ndarray
        Sorted; the labels of the sets count among them.
    label_sets : ndarray of shape (n_sets, K) of bool or None
        Row ``j``: the labels code ``-2 - j`` allows; None when no node holds such a set.
    """
    arrays = [np.asarray(yi) for yi in y]
    entries = [set_entries(a) for a in arrays]
    if not any(mask.any() for mask in entries):
        codes, classes = encode(arrays, unknown_label, classes, n_states)
        return codes, classes, None
    filled, members, sizes = [], [], []
    for i, (values, mask) in enumerate(zip(arrays, entries, strict=True)):
        if mask.any():
            values = values.copy()
            for entry in values[mask].tolist():
                if not entry:
                    raise ValueError(f"sample {i}: an empty set of labels (a node takes one)")
                members.extend(entry)
                sizes.append(len(entry))
            values[mask] = [next(iter(entry)) for entry in values[mask].tolist()]
        filled.append(_natural(values) if values.dtype == object else values)
    codes, classes = encode([*filled, _natural(members)], unknown_label, classes, n_states)
    member_codes = codes.pop()
    if (member_codes < 0).any():
        raise ValueError(
            f"a set of labels holds the unknown marker {unknown_label!r}: a set lists the "
            "labels a node may take"
        )
    allowed = np.zeros((len(sizes), len(classes)), dtype=bool)
    allowed[np.repeat(np.arange(len(sizes)), sizes), member_codes] = True
    n_allowed = allowed.sum(axis=1)
    several = (n_allowed > 1) & (n_allowed < len(classes))
    label_sets, row = np.unique(allowed[several], axis=0, return_inverse=True)
    set_codes = np.where(n_allowed == len(classes), -1, allowed.argmax(axis=1))
    set_codes[several] = -2 - row.ravel()
    start = 0
    for code, mask in zip(codes, entries, strict=True):
        n = int(mask.sum())
        code[mask] = set_codes[start : start + n]
        start += n
    return codes, classes, label_sets if len(label_sets) else None


def check_markers(y, **markers) -> None:
    """Refuse a label marker (``unknown_label=...``, ``ignore_label=...``) that cannot match the
    labels, by the rule labels follow: strings match strings and numbers numbers, never one the
    other (as ``y`` may not mix them). A marker of the other kind would mark no node and the
    nodes it was meant for would be learnt as a class (``ignore_label=11`` among the strings
    ``"11"``), so it is an error naming the marker to give. None marks nothing, and the default
    ``unknown_label=-1`` stands for "no unknown label" among string labels.

    Parameters
    ----------
    y : sequence of array-like
        One label array per sample.
    **markers : scalar or None
        The markers by parameter name.
    """
    sample = next((a for a in map(np.asarray, y) if a.size), None)
    if sample is None:
        return
    textual = _textual(sample)
    for name, marker in markers.items():
        if marker is None or isinstance(marker, str) == textual:
            continue
        if name == "unknown_label" and not isinstance(marker, str) and marker == -1:
            continue
        if textual:
            remedy = f"{name}={str(marker)!r}"
        else:
            try:
                remedy = f"{name}={int(marker) if float(marker).is_integer() else float(marker)!r}"
            except ValueError:
                remedy = f"a number as {name}"
        labels = "strings" if textual else "numbers"
        kind = "a string" if isinstance(marker, str) else "a number"
        raise ValueError(
            f"{name}={marker!r} is {kind} but the labels are {labels}: it would mark no node "
            f"(a marker matches labels of its own kind, as a label does); give {remedy}"
        )


def _flat(y) -> tuple[list[np.ndarray], np.ndarray]:
    arrays = [np.asarray(yi) for yi in y]
    if not arrays:
        return arrays, np.zeros(0)
    if len({a.dtype.kind in "USO" for a in arrays}) > 1:
        raise ValueError("y mixes numeric and string labels: give every sample labels of one kind")
    return arrays, np.concatenate([a.ravel() for a in arrays])


def encode(y, unknown_label=-1, classes=None, n_states=None):
    """Encode label arrays to int codes (``-1`` = unknown) and give the classes.

    Parameters
    ----------
    y : sequence of array-like
        One label array per sample.
    unknown_label : scalar or None
        The marker of an unknown label.
    classes : ndarray, optional
        Known classes (a fitted estimator's ``classes_``): labels outside them are an error.
    n_states : int, optional
        Fixed number of labels: the labels must then be the ints ``0..n_states-1`` and the
        classes are exactly those (a class need not appear).

    Returns
    -------
    codes : list of int arrays
        Shaped like the label arrays.
    classes : ndarray
        Sorted.
    """
    arrays, flat = _flat(y)
    if flat.dtype.kind == "O" and any(value is None for value in flat.tolist()):
        raise ValueError(
            "y holds None: None is not a label. Mark unknown labels with the estimator's "
            f"unknown_label (now {unknown_label!r}; e.g. unknown_label='?' with string labels, "
            "and '?' in y)"
        )
    unknown = unknown_mask(flat, unknown_label)
    known = flat[~unknown]
    if classes is None:
        if known.size:
            kind = type_of_target(known, input_name="y")
            if kind not in ("binary", "multiclass"):
                raise ValueError(
                    f"labels must be discrete classes (ints, strings or bools); got {kind} values"
                    " (e.g. floats that are not whole numbers)"
                )
        if n_states is not None:
            classes = np.arange(n_states)
        else:
            classes = np.unique(known)
    codes = np.full(flat.shape, -1, dtype=np.intp)
    if known.size:
        position, valid = _positions_in(classes, known)
        if not np.all(valid):
            bad = _distinct(known[~valid])
            marker = "" if unknown_label is None else f"; unknown labels are {unknown_label!r}"
            named = f"label {bad[0]!r} is" if len(bad) == 1 else f"labels {bad} are"
            raise ValueError(
                f"{named} not one of the classes {np.asarray(classes).tolist()}{marker}"
            )
        codes[~unknown] = position
    out, start = [], 0
    for a in arrays:
        out.append(codes[start : start + a.size].reshape(a.shape))
        start += a.size
    return out, classes


def _positions_in(classes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's position in the sorted ``classes`` and whether it is one of them (False
    for values of another kind than the classes)."""
    try:
        position = np.minimum(np.searchsorted(classes, values), len(classes) - 1)
        return position, classes[position] == values
    except (TypeError, np.exceptions.DTypePromotionError):
        return np.zeros(values.shape, dtype=np.intp), np.zeros(values.shape, dtype=bool)


def _distinct(values: np.ndarray) -> list:
    """The distinct values in order of first appearance, as Python scalars (for messages)."""
    return list(dict.fromkeys(v.item() if isinstance(v, np.generic) else v for v in values))


class LabelCodes(list):
    """The label codes of the samples (a list of int arrays, one per sample) with the number of
    classes they encode, which a structure fits ``K`` from: a class need not appear in them
    (the classes given to a first ``partial_fit``, the members of a set of labels)."""

    def __init__(self, codes, n_classes: int):
        super().__init__(codes)
        self.n_classes = int(n_classes)


def warn_unseen(y, classes, markers=(), name: str = "y") -> None:
    """Warn, naming every label of ``y`` outside ``classes`` (a fitted estimator's
    ``classes_``): a score counts those nodes as errors the model could never avoid. The nodes
    of ``markers`` (the unknown and ignored labels) are not labels and pass.

    A warning, not an error, so that a cross-validation fold holding a rare class its training
    folds lack is still scored, as scikit-learn's ``accuracy_score`` scores it.

    Parameters
    ----------
    y : sequence of array-like
        One label array per sample.
    classes : ndarray
        The labels the model knows.
    markers : tuple
        The markers of nodes that are not counted.
    name : str, default="y"
        The argument named in the warning.
    """
    if sparse.issparse(y):  # a multi-label indicator matrix: its stored values and its zeros
        zeros = [np.zeros(1, y.dtype)] if y.nnz < np.prod(y.shape) else []
        y = [np.asarray(y.data), *zeros]
    _, flat = _flat(y)
    if not flat.size:
        return
    known = flat[~unknown_mask(flat, tuple(markers))]
    if not known.size:
        return
    classes = np.asarray(classes)
    valid = _positions_in(classes, known)[1]
    if np.all(valid):
        return
    unseen = _distinct(known[~valid])
    shown = ", ".join(repr(v) for v in unseen[:10]) + (", ..." if len(unseen) > 10 else "")
    marker = next((m for m in markers if m is not None), None)
    if marker is not None and isinstance(marker, str) == _textual(flat):
        remedy = f"mark those nodes with unknown_label={marker!r} to leave them out"
    else:  # the marker cannot match these labels: one of their kind is needed
        remedy = "mark those nodes with an unknown_label of the labels' kind to leave them out"
    warnings.warn(
        f"{name} holds labels the model never saw: {shown} ({int((~valid).sum())} of "
        f"{known.size} nodes), counted as errors; classes_ is {classes.tolist()}. Refit on "
        f"data holding them, or {remedy}",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def is_marker(value, marker) -> bool:
    """Whether one label value is ``marker`` by the rule labels follow: a value of the marker's
    kind (``np.int64(-1)`` and ``-1.0`` match ``-1``; ``"-1"`` does not); None always marks a
    free node."""
    if value is None:
        return True
    if marker is None:
        return False
    if isinstance(marker, str):
        return isinstance(value, str) and value == marker
    return isinstance(value, Number) and not isinstance(value, bool) and value == marker


def known_sequence(known_labels, n_samples: int) -> list:
    """``known_labels`` as a list of one entry per sample, or a ValueError."""
    if isinstance(known_labels, str | bytes | Mapping) or not isinstance(known_labels, Iterable):
        raise ValueError(
            f"known_labels must be a sequence of label arrays, one per sample of X (None or "
            f"unknown_label where a label is free), got {type(known_labels).__name__} "
            f"{known_labels!r:.40}"
        )
    known_labels = list(known_labels)  # a generator is read once
    if len(known_labels) != n_samples:
        raise ValueError(f"X has {n_samples} samples but known_labels has {len(known_labels)}")
    return known_labels


def encode_known(known_labels, classes, markers=()):
    """Codes of labels known at prediction time: ``-1`` where None or one of ``markers``
    (a free node), the index in ``classes`` elsewhere, and a set of labels as
    :func:`encode_with_sets` codes it; errors name the sample.

    Parameters
    ----------
    known_labels : sequence of array-like
        One array per sample, None (or a marker) where the label is free, a set of labels
        where the node takes one of them.
    classes : ndarray
        The estimator's ``classes_``.
    markers : tuple
        The markers of free nodes (the estimator's unknown and ignored labels).

    Returns
    -------
    codes : list of int arrays
        Shaped like the label arrays.
    label_sets : ndarray of shape (n_sets, K) of bool or None
        As :func:`encode_with_sets` gives them.
    """
    codes, free_masks, kept = [], [], []
    for labels in known_labels:
        values = np.asarray(labels, dtype=object)
        free = np.array(
            [
                not is_label_set(v) and (v is None or any(is_marker(v, m) for m in markers))
                for v in values.ravel().tolist()
            ],
            dtype=bool,
        ).reshape(values.shape)
        codes.append(np.full(values.shape, -1, dtype=np.intp))
        free_masks.append(free)
        kept.append(values[~free])
    if not any(known.size for known in kept):
        return codes, None
    try:
        known_codes, _, label_sets = encode_with_sets(kept, None, classes)
    except ValueError:
        for i, known in enumerate(kept):  # the first sample at fault, named
            try:
                encode_with_sets([known], None, classes)
            except ValueError as error:
                raise ValueError(f"known_labels of sample {i}: {error}") from None
        raise
    for code, free, known in zip(codes, free_masks, known_codes, strict=True):
        code[~free] = known
    return codes, label_sets


def _runs(keep: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of the runs of True in a 1-D boolean array."""
    edges = np.diff(np.concatenate([[0], keep.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))


def without_ignored(X, y, ignore_label, kind: str, return_origin: bool = False):
    """The samples with their ``ignore_label`` nodes removed (void pixels, untagged tokens):
    they neither count in a loss nor get filled in.

    Graph samples keep the subgraph of the other nodes (and its edges); a chain is cut into
    the runs between ignored positions. Samples left without a node are dropped. Grids cannot
    lose nodes: there it is an error that says what to do instead. With ``return_origin``,
    also the index in ``X`` of each sample returned (None when every sample is kept as it
    is): what a sample weight follows.
    """
    from .samples import GraphSample

    X, y = list(X), list(y)
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} samples but y has {len(y)}")
    masks = [unknown_mask(np.asarray(labels), ignore_label) for labels in y]
    if not any(mask.any() for mask in masks):
        return (X, y, None) if return_origin else (X, y)
    if kind == "grid":
        raise ValueError(
            f"ignore_label={ignore_label!r} removes nodes, which a grid cannot lose: give the "
            "images as GraphSample objects (node features of the pixels, grid_edges(shape)) "
            "with structure='graph', or mark the nodes as unknown (unknown_label) to have them "
            "filled in"
        )
    kept_X, kept_y, origin = [], [], []
    for i, (x, labels, ignored) in enumerate(zip(X, y, masks, strict=True)):
        labels = np.asarray(labels)
        if not ignored.any():
            kept_X.append(x)
            kept_y.append(labels)
            origin.append(i)
            continue
        keep = ~ignored.ravel()
        if isinstance(x, GraphSample):
            if labels.size != x.n_nodes:
                raise ValueError(f"sample {i}: {x.n_nodes} nodes but {labels.size} labels")
            if not keep.any():
                continue
            position = np.cumsum(keep) - 1
            edges = np.asarray(x.edges, dtype=np.intp).reshape(-1, 2)
            inside = keep[edges].all(axis=1) if len(edges) else np.zeros(0, dtype=bool)
            kept_X.append(
                GraphSample(
                    np.asarray(x.node_features)[keep]
                    if not hasattr(x.node_features, "tocsr")
                    else x.node_features.tocsr()[keep],
                    position[edges[inside]],
                    None if x.edge_features is None else np.asarray(x.edge_features)[inside],
                    None if x.node_sizes is None else np.asarray(x.node_sizes)[keep],
                )
            )
            kept_y.append(labels.ravel()[keep])
            origin.append(i)
        else:  # a chain: its runs of kept positions
            if np.shape(x)[0] != labels.size:
                raise ValueError(f"sample {i}: {np.shape(x)[0]} positions but {labels.size} labels")
            for start, stop in _runs(keep):
                kept_X.append(x[start:stop])
                kept_y.append(labels.ravel()[start:stop])
                origin.append(i)
    if not kept_X:
        raise ValueError(f"every node is ignored (ignore_label={ignore_label!r}): nothing to fit")
    if return_origin:
        return kept_X, kept_y, np.asarray(origin, dtype=np.intp)
    return kept_X, kept_y


def as_samples(arrays) -> np.ndarray:
    """A 1-D object array holding one array per sample: it indexes and iterates like a list,
    and concatenates like an array (``cross_val_predict`` on ragged samples)."""
    out = np.empty(len(arrays), dtype=object)
    for i, array in enumerate(arrays):
        out[i] = array
    return out
