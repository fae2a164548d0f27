"""Segmentation scores: global and class-average pixel accuracy and intersection over union,
from size-weighted confusion matrices."""

from __future__ import annotations

import numpy as np

from .._labels import unknown_mask
from .._validation import as_real_array
from .hamming import _pairs


def segmentation_confusion(y_true, y_pred, *, labels=None, void=None, sample_weight=None):
    """The confusion matrix of labellings pooled over every node (or pixel) of every sample.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
        True and predicted labels, one array per sample (pixel maps, or node labels).
    labels : array-like, optional
        The classes, in the order of the matrix; by default the sorted labels of ``y_true``
        (without ``void``).
    void : scalar, optional
        A true label that is not scored (CamVid's 11, "unlabelled"); true labels outside
        ``labels`` are refused otherwise.
    sample_weight : sequence of arrays, optional
        A weight per node (e.g. superpixel sizes, to score node labels as their pixels).

    Returns
    -------
    ndarray of shape (K, K)
        ``C[i, j]``: (weighted) count of nodes of true class ``labels[i]`` predicted
        ``labels[j]``.
    """
    return _labelled_confusion(y_true, y_pred, labels, void, sample_weight)[0]


def _labelled_confusion(y_true, y_pred, labels, void, sample_weight):
    """:func:`segmentation_confusion` and the labels of its rows and columns."""
    pairs = list(_pairs(y_true, y_pred))
    if sample_weight is not None and len(sample_weight) != len(pairs):
        raise ValueError(f"{len(pairs)} samples but {len(sample_weight)} sample_weight arrays")
    if labels is None:
        seen = np.concatenate([true[~unknown_mask(true, void)] for _, true, _ in pairs] or [[]])
        labels = np.unique(seen)
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(np.unique(labels)) != len(labels):
        raise ValueError(f"labels must be distinct labels in one list, got {labels.tolist()}")
    k = len(labels)
    confusion = np.zeros((k, k))
    for i, true, pred in pairs:
        scored = ~unknown_mask(true, void)
        weight = None
        if sample_weight is not None:
            weight = as_real_array(sample_weight[i], f"sample {i}: sample_weight").ravel()
        if weight is not None and weight.shape != true.shape:
            raise ValueError(f"sample {i}: {true.size} labels but {weight.size} weights")
        if weight is not None and not (np.isfinite(weight).all() and (weight >= 0).all()):
            raise ValueError(
                f"sample {i}: sample_weight must hold finite weights >= 0 (node sizes), got "
                f"{float(weight[~(np.isfinite(weight) & (weight >= 0))][0])!r}"
            )
        true_code = _codes(true[scored], labels, f"sample {i}: y_true")
        pred_code = _codes(pred[scored], labels, f"sample {i}: y_pred")
        confusion += np.bincount(
            true_code * k + pred_code,
            None if weight is None else weight[scored],
            minlength=k * k,
        ).reshape(k, k)
    return confusion, labels


def _codes(values, labels, what: str) -> np.ndarray:
    """The position of each value in ``labels`` (in any order), or a ValueError naming a value
    that is not one of them."""
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    position = np.clip(np.searchsorted(ordered, values), 0, max(len(labels) - 1, 0))
    bad = ordered[position] != values if len(labels) else np.ones(len(values), bool)
    if np.any(bad):
        raise ValueError(
            f"{what} holds {values[bad].tolist()[0]!r}, not one of the labels {labels.tolist()}"
        )
    return order[position]


def segmentation_scores(y_true, y_pred, *, labels=None, void=None, sample_weight=None) -> dict:
    """Global accuracy, class-average accuracy and mean intersection over union.

    The scores of semantic segmentation benchmarks (CamVid, PASCAL VOC): over the pooled
    pixels (or nodes) of every sample, void excluded — global accuracy
    :math:`\\sum_k C_{kk} / \\sum C`, class-average accuracy (the mean per-class recall)
    :math:`\\frac1K \\sum_k C_{kk} / \\sum_j C_{kj}` and mean IoU
    :math:`\\frac1K \\sum_k C_{kk} / (\\sum_j C_{kj} + \\sum_j C_{jk} - C_{kk})`. Classes that
    never occur in ``y_true`` are left out of the means.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    labels : array-like, optional
        As in :func:`segmentation_confusion`.
    void : scalar, optional
        The true label that is not scored.
    sample_weight : sequence of arrays, optional
        Per-node weights (superpixel sizes score node labels as pixels).

    Returns
    -------
    dict
        ``global_accuracy``, ``class_average_accuracy``, ``mean_iou`` (floats),
        ``class_accuracy`` and ``iou`` (per class, NaN for absent classes), ``labels`` and
        ``confusion``.

    Examples
    --------
    >>> from pmap_sklearn.metrics import segmentation_scores
    >>> s = segmentation_scores([[0, 0, 1, 2]], [[0, 1, 1, 2]], void=2)
    >>> s["global_accuracy"], s["class_average_accuracy"], s["mean_iou"]
    (0.6666666666666666, 0.75, 0.5)
    """
    confusion, labels = _labelled_confusion(y_true, y_pred, labels, void, sample_weight)
    if confusion.sum() == 0:
        raise ValueError("no scored label in y_true (every label is void)")
    true_counts, hits = confusion.sum(axis=1), np.diag(confusion)
    present = true_counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(present, hits / true_counts, np.nan)
        iou = np.where(present, hits / (true_counts + confusion.sum(axis=0) - hits), np.nan)
    return {
        "global_accuracy": float(hits.sum() / confusion.sum()),
        "class_average_accuracy": float(np.nanmean(accuracy)),
        "mean_iou": float(np.nanmean(iou)),
        "class_accuracy": accuracy,
        "iou": iou,
        "labels": labels,
        "confusion": confusion,
    }
