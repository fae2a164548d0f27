"""Structured losses, size-balanced node weights and scorers.

Labellings are sequences of label arrays, one per sample (labels of any discrete kind);
``unknown_label`` (default ``-1``) in ``y_true`` marks an unknown label, which is not counted.
Losses are per-sample losses averaged over samples, as in Shpakova et al. (2018) — unlike
:func:`sklearn.metrics.hamming_loss`, which pools all labels: a long sample then weighs no more
than a short one.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import make_scorer

from ._labels import unknown_mask
from ._utils import onehot

__all__ = [
    "mean_hamming_loss",
    "weighted_hamming_loss",
    "balanced_node_weights",
    "balanced_weights_batch",
    "loss_weights",
    "hamming_scorer",
    "weighted_hamming_scorer",
]


def _pairs(y_true, y_pred):
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} samples but y_pred has {len(y_pred)}")
    for i, (true, pred) in enumerate(zip(y_true, y_pred, strict=True)):
        true, pred = np.asarray(true).ravel(), np.asarray(pred).ravel()
        if true.shape != pred.shape:
            raise ValueError(
                f"sample {i}: y_true has {true.size} labels but y_pred has {pred.size}"
            )
        yield i, true, pred


def mean_hamming_loss(y_true, y_pred, unknown_label=-1) -> float:
    """Mean over samples of each sample's Hamming loss ``(1/D) Σ_d [y_d != ŷ_d]``.

    Unknown labels (``unknown_label`` in ``y_true``) are not counted; samples without a known
    label are skipped. Unlike :func:`sklearn.metrics.hamming_loss` (the fraction of wrong labels
    pooled over every node), each sample weighs the same whatever its length.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    unknown_label : scalar or None, default=-1

    Returns
    -------
    float

    Examples
    --------
    >>> mean_hamming_loss([[0, 1, 2], [1, 1]], [[0, 1, 1], [1, 1]])
    0.16666666666666666
    >>> mean_hamming_loss([["a", "b"], ["b"]], [["a", "a"], ["b"]])
    0.25
    """
    losses = []
    for _, true, pred in _pairs(y_true, y_pred):
        known = ~unknown_mask(true, unknown_label)
        if known.any():
            losses.append(np.mean(true[known] != pred[known]))
    if not losses:
        raise ValueError("no known labels in y_true")
    return float(np.mean(losses))


def balanced_node_weights(label_distribution, node_sizes=None) -> np.ndarray:
    """Size-balanced weights ``θ_d(k)`` of one sample (Kolesnikov et al. 2014).

    ``θ_d(k) = V_d / (K' V_k)`` with ``V_d`` the size of node d, ``V_k = Σ_d V_d P(y_d = k)`` the
    total size of class k in the sample and ``K'`` the number of classes present; for K = 2 this
    is ``V_d / (2 V_fg)`` and ``V_d / (2 V_bg)``, and the weights of the true labels sum to 1.

    Parameters
    ----------
    label_distribution : array-like of shape (D,) or (D, K)
        Int labels (one-hot is taken; ``-1`` rows are ignored) or soft marginals ``q_d(k)``.
    node_sizes : array-like of shape (D,), optional
        ``V_d``; 1 for every node when omitted.

    Returns
    -------
    weights : ndarray of shape (D, K)
        ``θ_d(k)``; 0 for classes absent from the sample.
    """
    dist = np.asarray(label_distribution)
    if dist.ndim == 1:
        labels = dist.astype(np.intp)
        dist = onehot(labels, max(labels.max() + 1, 2))
    sizes = np.ones(len(dist)) if node_sizes is None else np.asarray(node_sizes, dtype=float)
    return balanced_weights_batch(dist, sizes, np.zeros(len(dist), dtype=np.intp))


def balanced_weights_batch(distribution, node_sizes, node_sample) -> np.ndarray:
    """:func:`balanced_node_weights` of many samples at once (vectorised).

    Parameters
    ----------
    distribution : ndarray of shape (n_nodes, K)
        One-hot labels or marginals of the stacked nodes.
    node_sizes : ndarray of shape (n_nodes,)
    node_sample : ndarray of shape (n_nodes,)
        Sample index of each node.
    """
    n_samples = int(node_sample.max()) + 1 if len(node_sample) else 0
    class_sizes = np.stack(
        [
            np.bincount(node_sample, node_sizes * column, minlength=n_samples)
            for column in distribution.T
        ],
        axis=1,
    )
    present = class_sizes > 0
    inverse = np.zeros_like(class_sizes)
    n_present = np.broadcast_to(present.sum(axis=1, keepdims=True), present.shape)
    inverse[present] = 1.0 / (n_present[present] * class_sizes[present])
    return node_sizes[:, None] * inverse[node_sample]


def loss_weights(distribution, node_sizes, node_sample, class_weight=None) -> np.ndarray:
    """Per-node loss weights ``θ_d(k)`` (n_nodes, K) of stacked samples.

    Parameters
    ----------
    distribution : ndarray of shape (n_nodes, K)
        Label distribution of each node (one-hot or marginals), used by "balanced".
    node_sizes, node_sample : ndarray of shape (n_nodes,)
    class_weight : None, "balanced" or ndarray of shape (K,)
        None: the Hamming loss, ``θ_d = 1/D``; "balanced": :func:`balanced_weights_batch`;
        per-label weights multiply ``1/D``.

    Returns
    -------
    ndarray of shape (n_nodes, K)
    """
    if isinstance(class_weight, str) and class_weight == "balanced":
        return balanced_weights_batch(distribution, node_sizes, node_sample)
    per_label = np.ones(distribution.shape[1]) if class_weight is None else class_weight
    lengths = np.bincount(node_sample)
    return per_label[None, :] / lengths[node_sample][:, None]


def class_weight_by_code(class_weight, classes) -> np.ndarray | str | None:
    """A ``class_weight`` dict keyed by class labels as per-label weights over ``classes``
    (None and "balanced" pass through), or a ValueError naming what is wrong."""
    if class_weight is None or isinstance(class_weight, str):
        return class_weight
    position = {label: k for k, label in enumerate(np.asarray(classes).tolist())}
    unknown = [label for label in class_weight if label not in position]
    if unknown:
        raise ValueError(
            f"class_weight has labels {unknown} that are not classes "
            f"(classes_ = {np.asarray(classes).tolist()})"
        )
    per_label = np.ones(len(classes))
    for label, weight in class_weight.items():
        if not (
            isinstance(weight, int | float | np.number) and np.isfinite(weight) and weight >= 0
        ):
            raise ValueError(
                f"class_weight[{label!r}] = {weight!r}: weights must be finite numbers >= 0"
            )
        per_label[position[label]] = weight
    return per_label


def weighted_hamming_loss(y_true, y_pred, node_sizes=None, unknown_label=-1) -> float:
    """Mean over samples of the size-balanced weighted Hamming loss
    ``Σ_d θ_d(y_d) [y_d != ŷ_d]`` (see :func:`balanced_node_weights`).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    node_sizes : sequence of arrays, optional
        Node sizes of each sample; all 1 when omitted (then it is the class-balanced error).
    unknown_label : scalar or None, default=-1

    Returns
    -------
    float
    """
    losses = []
    for i, true, pred in _pairs(y_true, y_pred):
        sizes = None if node_sizes is None else np.asarray(node_sizes[i], dtype=float).ravel()
        if sizes is not None and sizes.shape != true.shape:
            raise ValueError(f"sample {i}: {sizes.size} node sizes for {true.size} labels")
        known = ~unknown_mask(true, unknown_label)
        if not known.any():
            continue
        _, codes = np.unique(true[known], return_inverse=True)
        weights = balanced_node_weights(codes, None if sizes is None else sizes[known])
        theta = weights[np.arange(len(codes)), codes]
        losses.append(float(theta @ (true[known] != pred[known])))
    if not losses:
        raise ValueError("no known labels in y_true")
    return float(np.mean(losses))


def _hamming_score(y_true, y_pred, unknown_label=-1) -> float:
    return 1.0 - mean_hamming_loss(y_true, y_pred, unknown_label)


#: ``1 − mean_hamming_loss`` of ``estimator.predict(X)``: a scikit-learn scorer for
#: ``GridSearchCV(scoring=hamming_scorer)`` or ``scoring={"hamming": hamming_scorer}``.
#: ``make_scorer(_hamming_score, unknown_label="?")`` marks unknown labels otherwise.
hamming_scorer = make_scorer(_hamming_score)


def weighted_hamming_scorer(estimator, X, y) -> float:
    """``1 − weighted_hamming_loss`` with the node sizes of the samples (superpixel sizes of
    :class:`~pmap_sklearn.GraphSample`, 1 for other samples); works on pipelines too.

    A scorer callable ``(estimator, X, y)``: the node sizes come from the samples X, which
    :func:`sklearn.metrics.make_scorer` scorers never see.

    Parameters
    ----------
    estimator : fitted estimator
    X : sequence of samples
    y : sequence of label arrays

    Returns
    -------
    float
    """
    sizes = [getattr(x, "node_sizes", None) for x in X]
    sizes = [np.ones(np.size(t)) if s is None else s for s, t in zip(sizes, y, strict=True)]
    return 1.0 - weighted_hamming_loss(y, estimator.predict(X), sizes)
