"""Calibration of marginals and event probabilities: expected calibration error and the
reliability curve."""

from __future__ import annotations

import numpy as np

from .._labels import unknown_mask
from .._validation import check_probabilities
from .segmentation import _codes


def expected_calibration_error(y_true, y_proba, *, classes=None, n_bins=15, void=None) -> float:
    """Expected calibration error of the top-label probabilities (Guo et al. 2017).

    The nodes are binned by the probability of their most probable label (``n_bins`` equal
    bins of [0, 1]); the error is the mean over nodes of ``|accuracy − confidence|`` of their
    bin. 0 for marginals that are right as often as they say. Confidences of events (entities,
    regions) are measured the same way: pass whether each event is right as ``y_true`` and its
    probability as ``y_proba`` (see :func:`reliability_curve`).

    Parameters
    ----------
    y_true : sequence of label arrays, or array-like of shape (n_events,) of bool
        The true labels; with event confidences, whether each event is right.
    y_proba : sequence of arrays of shape (n_nodes, K), or array-like of shape (n_events,)
        Marginals, as :meth:`predict_marginals` gives them: each row a distribution over the
        same K classes (probabilities in [0, 1] summing to 1; logits or scores are refused).
        Or a flat array of the events' probabilities.
    classes : array-like of shape (K,), optional
        The labels of the last axis (a fitted model's ``classes_``); ``0..K-1`` by default.
    n_bins : int, default=15
        Any number of bins: only the bins that hold nodes are counted.
    void : scalar, optional
        A true label that is not scored.

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import expected_calibration_error
    >>> round(expected_calibration_error([[0, 1]], [[[0.9, 0.1], [0.2, 0.8]]]), 6)
    0.15
    >>> round(expected_calibration_error([True, False], [0.9, 0.3]), 6)  # two events
    0.2
    """
    confidence, correct = _confidence_and_correct(y_true, y_proba, classes, void)
    _, count, hits, confidences = _calibration_bins(confidence, correct, n_bins)
    return float(np.abs(hits - confidences).sum() / count.sum())


def reliability_curve(y_true, y_proba, *, classes=None, n_bins=15, void=None):
    """The reliability diagram of top-label probabilities or of event confidences.

    The probabilities are binned as :func:`expected_calibration_error` bins them (``n_bins``
    equal bins of [0, 1]); each bin gives the mean confidence of its items and the fraction of
    them that are right (DeGroot & Fienberg 1983; Guo et al. 2017, Fig. 1). A calibrated model's
    points lie on the diagonal, and the expected calibration error is the mean of
    ``|accuracy − confidence|`` weighted by the counts. Two kinds of items:

    - node marginals (``y_proba`` a sequence of (n_nodes, K) arrays, as
      :meth:`predict_marginals` gives them): each node's most probable label, right when it is
      the true one;
    - events (``y_proba`` a flat array of probabilities, ``y_true`` whether each event is
      right): the confidences of entities
      (:func:`~pmap_sklearn.inspection.entity_probabilities`), regions
      (:func:`~pmap_sklearn.inspection.region_probabilities`) or whole labellings.

    Parameters
    ----------
    y_true : sequence of label arrays, or array-like of shape (n_events,) of bool
        The true labels; with event confidences, whether each event is right (bools or 0/1).
    y_proba : sequence of arrays of shape (n_nodes, K), or array-like of shape (n_events,)
        Marginals (each row a distribution over the same K classes), or the probability of
        each event.
    classes : array-like of shape (K,), optional
        The labels of the marginals' last axis (a fitted model's ``classes_``); ``0..K-1`` by
        default.
    n_bins : int, default=15
        Equal-width bins of [0, 1].
    void : scalar, optional
        A true label that is not scored (marginals only).

    Returns
    -------
    curve : Bunch
        ``confidence``, ``accuracy`` (shape (n_bins,), NaN for an empty bin): the mean
        confidence and the fraction right in each bin; ``count`` (n_bins,): the items in each
        bin; ``bin_edges`` (n_bins + 1,).

    See Also
    --------
    expected_calibration_error : The weighted mean gap of the same bins.

    Examples
    --------
    >>> from pmap_sklearn.metrics import reliability_curve
    >>> curve = reliability_curve([True, False, True, True], [0.9, 0.3, 0.8, 0.95], n_bins=5)
    >>> curve.count.tolist(), curve.accuracy[[1, 4]].tolist()
    ([0, 1, 0, 0, 3], [0.0, 1.0])
    >>> round(float(curve.confidence[4]), 6)
    0.883333
    """
    from sklearn.utils import Bunch

    confidence, correct = _confidence_and_correct(y_true, y_proba, classes, void)
    index, count, hits, confidences = _calibration_bins(confidence, correct, n_bins)
    out = Bunch(
        confidence=np.full(n_bins, np.nan),
        accuracy=np.full(n_bins, np.nan),
        count=np.zeros(n_bins, dtype=np.intp),
        bin_edges=np.linspace(0.0, 1.0, n_bins + 1),
    )
    out.confidence[index], out.accuracy[index] = confidences / count, hits / count
    out.count[index] = count
    return out


def _confidence_and_correct(y_true, y_proba, classes, void):
    """The confidence of every scored item and whether it is right, checked: the top-label
    probability of each node's marginals, or each event's probability and flag."""
    try:
        flat = np.asarray(y_proba)
    except ValueError:  # ragged samples: marginals
        flat = None
    if flat is not None and flat.ndim == 1 and flat.dtype.kind in "biuf":
        return _event_confidences(y_true, flat, classes, void)
    if flat is not None and flat.ndim == 2 and _is_flat(y_true):
        kind = "bools" if np.asarray(y_true).dtype == bool else "values"
        raise ValueError(
            f"y_true is a flat array of {len(y_true)} {kind} but y_proba has shape "
            f"{flat.shape}: read so, each value would be a sample of one node. Give node "
            "marginals as sequences of samples (y_true=[labels], y_proba=[marginals], one "
            "(n_nodes, K) array per sample), or event confidences as a flat y_proba of shape "
            "(n_events,) with y_true whether each event is right"
        )
    if len(y_true) != len(y_proba):
        raise ValueError(f"y_true has {len(y_true)} samples but y_proba has {len(y_proba)}")
    confidence, correct, n_classes = [], [], set()
    for i, (true, proba) in enumerate(zip(y_true, y_proba, strict=True)):
        true = np.asarray(true)
        _check_class_axis(true.shape, proba, i)
        true = true.ravel()
        proba = check_probabilities(proba, f"y_proba[{i}]")
        proba = proba.reshape(-1, proba.shape[-1])
        n_classes.add(proba.shape[1])
        if len(n_classes) > 1:
            raise ValueError(
                f"y_proba[{i}] has {proba.shape[1]} columns but earlier samples have "
                f"{min(n_classes - {proba.shape[1]})}: every sample's marginals are over the "
                "same classes"
            )
        if len(proba) != len(true):
            raise ValueError(f"sample {i}: {true.size} labels but {len(proba)} rows of marginals")
        labels = np.arange(proba.shape[1]) if classes is None else np.asarray(classes)
        if len(labels) != proba.shape[1]:
            raise ValueError(
                f"{len(labels)} classes but the marginals have {proba.shape[1]} columns"
            )
        scored = ~unknown_mask(true, void)
        codes = _codes(true[scored], labels, f"sample {i}: y_true")
        top = proba[scored].argmax(axis=1)
        confidence.append(proba[scored].max(axis=1))
        correct.append(top == codes)
    confidence, correct = np.concatenate(confidence), np.concatenate(correct)
    if not len(confidence):
        raise ValueError("no scored label in y_true")
    return confidence, correct


def _is_flat(values) -> bool:
    """Whether ``values`` is a flat array of scalars (not a sequence of label arrays)."""
    try:
        array = np.asarray(values)
    except ValueError:  # ragged: a sequence of samples
        return False
    return array.ndim == 1 and array.dtype != object


def _check_class_axis(true_shape, proba, i) -> None:
    """Refuse sample ``i``'s marginals when they have the labels' shape (one probability per
    node) instead of one more axis of K classes."""
    try:
        shape = np.shape(proba)
    except ValueError:  # ragged rows: check_probabilities names them
        return
    if len(true_shape) and shape == true_shape and shape[-1] != 1:
        raise ValueError(
            f"y_proba[{i}] has shape {shape}, the shape of y_true[{i}]: one probability per "
            f"node, not marginals. Give one column per class, shape "
            f"({', '.join(map(str, true_shape))}, K) "
            "(for two classes and p the probability of class 1, np.stack([1 - p, p], axis=-1)), "
            "or event confidences as a flat y_proba with y_true whether each event is right"
        )


def _event_confidences(y_true, confidence, classes, void):
    """Event confidences in [0, 1] and their 0/1 outcomes, checked."""
    if classes is not None or void is not None:
        raise ValueError(
            "classes and void describe marginals; y_proba is a flat array of event "
            "probabilities, scored against y_true's flags"
        )
    if not len(confidence):
        raise ValueError("y_proba holds no event")
    # each probability as the distribution (p, 1 - p): the same checks as marginals'
    check_probabilities(np.column_stack([confidence, 1.0 - confidence]), "y_proba")
    correct = np.asarray(y_true)
    if correct.shape != confidence.shape:
        raise ValueError(
            f"y_proba holds {len(confidence)} event probabilities, so y_true must hold whether "
            f"each event is right ({len(confidence)} bools or 0/1), got shape {correct.shape}"
        )
    if correct.dtype.kind not in "biuf" or not np.isin(correct, (0, 1)).all():
        raise ValueError(
            "with event probabilities, y_true holds whether each event is right: bools or 0/1, "
            f"got {correct[~np.isin(correct, (0, 1))][:1].tolist() or correct.dtype}"
        )
    return confidence.astype(float), correct.astype(bool)


def _calibration_bins(confidence, correct, n_bins):
    """The occupied bins of ``n_bins`` equal bins of [0, 1]: their indices, item counts,
    number right and summed confidence (one binning for the error and the diagram)."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be an int >= 1, got {n_bins!r}")
    bins = np.minimum(np.floor(confidence * float(n_bins)), float(n_bins) - 1)
    # only the bins that hold items (n_bins may exceed them by far)
    index, occupied = np.unique(bins, return_inverse=True)
    count = np.bincount(occupied)
    hits, total = np.bincount(occupied, correct), np.bincount(occupied, confidence)
    return index.astype(np.intp), count, hits, total
