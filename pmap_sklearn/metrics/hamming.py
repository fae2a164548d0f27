"""Hamming losses and the weights of their weighted forms (class weights), per sample.

Labellings are sequences of label arrays, one per sample (labels of any discrete kind);
``unknown_label`` (default ``-1``) in ``y_true`` marks an unknown label, which is not counted.
Losses are per-sample losses averaged over samples, as in Shpakova et al. (2018) — unlike
:func:`sklearn.metrics.hamming_loss`, which pools all labels: a long sample then weighs no more
than a short one. The learners' ``class_weight`` is resolved here too: the size-balanced
weights of the weighted Hamming loss (Kolesnikov et al. 2014), per-label weights and each
node's share.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.metrics import accuracy_score, f1_score, hamming_loss

from .._labels import unknown_mask
from .._utils import onehot
from .._validation import as_real_array, check_probabilities, check_sample_weight


def _pairs(y_true, y_pred):
    y_true, y_pred = (y.toarray() if sparse.issparse(y) else y for y in (y_true, y_pred))
    for name, y in (("y_true", y_true), ("y_pred", y_pred)):
        if isinstance(y, str) or any(np.ndim(labels) == 0 for labels in y):
            raise ValueError(
                f"{name} is one flat sequence of labels, not a sequence of label arrays (one "
                f"per sample): wrap a single sequence in a list, e.g. [{name}]"
            )
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} samples but y_pred has {len(y_pred)}")
    for i, (true, pred) in enumerate(zip(y_true, y_pred, strict=True)):
        true, pred = np.asarray(true), np.asarray(pred)
        if true.size != pred.size:
            raise ValueError(
                f"sample {i}: y_true has {true.size} labels but y_pred has {pred.size}"
            )
        if true.shape != pred.shape:  # same count, other layout: which node is which?
            raise ValueError(
                f"sample {i}: y_true has shape {true.shape} but y_pred has shape {pred.shape}: "
                "each sample's labels and predictions must have the same shape (reshape one "
                "to the other's, e.g. np.reshape(pred, np.shape(true)))"
            )
        yield i, true.ravel(), pred.ravel()


def _shaped_like(y_true, y_pred) -> list:
    """An estimator's predictions laid out as the labels it was given: a structure takes a
    grid's labels flat (in row-major order) or as the image, and predicts the image."""
    if sparse.issparse(y_true) or sparse.issparse(y_pred):  # multi-label rows
        return y_pred
    return [
        np.reshape(pred, np.shape(true)) if np.size(pred) == np.size(true) else pred
        for true, pred in zip(y_true, y_pred, strict=False)
    ]


def mean_hamming_loss(y_true, y_pred, unknown_label=-1, *, sample_weight=None) -> float:
    r"""Mean over samples of each sample's Hamming loss :math:`(1/D) \sum_d [y_d \ne \hat{y}_d]`.

    Unknown labels (``unknown_label`` in ``y_true``) are not counted; samples without a known
    label are skipped. Unlike :func:`sklearn.metrics.hamming_loss` (the fraction of wrong labels
    pooled over every node), each sample weighs the same whatever its length (or its
    ``sample_weight``).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    unknown_label : scalar or None, default=-1
    sample_weight : array-like of shape (n_samples,), optional
        One weight per sample (finite, >= 0): the weighted mean of the samples' losses.

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
    losses, counted, n_samples = [], [], 0
    for i, true, pred in _pairs(y_true, y_pred):
        n_samples = i + 1
        known = ~unknown_mask(true, unknown_label)
        if known.any():
            losses.append(np.mean(true[known] != pred[known]))
            counted.append(i)
    if not losses:
        raise ValueError("no known labels in y_true")
    return _sample_mean(losses, counted, sample_weight, n_samples)


def _sample_mean(losses, counted, sample_weight, n_samples: int) -> float:
    """The mean of the losses of the samples ``counted``, weighted by their ``sample_weight``
    (checked: one finite weight >= 0 per sample of ``y_true``)."""
    if sample_weight is None:
        return float(np.mean(losses))
    weights = check_sample_weight(sample_weight, n_samples, what="y_true")[counted]
    if not weights.any():
        raise ValueError("every sample with a known label has sample_weight 0")
    return float(np.average(losses, weights=weights))


def weighted_hamming_loss(
    y_true, y_pred, node_sizes=None, unknown_label=-1, *, sample_weight=None
) -> float:
    r"""Mean over samples of the size-balanced weighted Hamming loss
    :math:`\sum_d \theta_d(y_d) [y_d \ne \hat{y}_d]` (see :func:`balanced_node_weights`).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    node_sizes : sequence of arrays, optional
        Node sizes of each sample; all 1 when omitted (then it is the class-balanced error).
    unknown_label : scalar or None, default=-1
    sample_weight : array-like of shape (n_samples,), optional
        One weight per sample (finite, >= 0): the weighted mean of the samples' losses.

    Returns
    -------
    float
    """
    losses, counted, n_samples = [], [], 0
    for i, true, pred in _pairs(y_true, y_pred):
        n_samples = i + 1
        sizes = None
        if node_sizes is not None:
            sizes = as_real_array(node_sizes[i], f"sample {i}: node_sizes").ravel()
        if sizes is not None and sizes.shape != true.shape:
            raise ValueError(f"sample {i}: {sizes.size} node sizes for {true.size} labels")
        known = ~unknown_mask(true, unknown_label)
        if not known.any():
            continue
        _, codes = np.unique(true[known], return_inverse=True)
        weights = balanced_node_weights(codes, None if sizes is None else sizes[known])
        theta = weights[np.arange(len(codes)), codes]
        losses.append(float(theta @ (true[known] != pred[known])))
        counted.append(i)
    if not losses:
        raise ValueError("no known labels in y_true")
    return _sample_mean(losses, counted, sample_weight, n_samples)


def balanced_node_weights(label_distribution, node_sizes=None) -> np.ndarray:
    r"""Size-balanced weights :math:`\theta_d(k)` of one sample (Kolesnikov et al. 2014).

    ``θ_d(k) = V_d / (K' V_k)`` with ``V_d`` the size of node d, :math:`V_k = \sum_d V_d P(y_d = k)`
    the total size of class k in the sample and ``K'`` the number of classes present; for K = 2 this
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
        :math:`\theta_d(k)`; 0 for classes absent from the sample.
    """
    dist = np.asarray(label_distribution)
    if dist.ndim == 1:
        labels = dist.astype(np.intp)
        dist = onehot(labels, max(labels.max() + 1, 2))
    else:
        dist = check_probabilities(dist, "label_distribution")
    sizes = np.ones(len(dist)) if node_sizes is None else as_real_array(node_sizes, "node_sizes")
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
    r"""Per-node loss weights :math:`\theta_d(k)` (n_nodes, K) of stacked samples.

    Parameters
    ----------
    distribution : ndarray of shape (n_nodes, K)
        Label distribution of each node (one-hot or marginals), used by "balanced".
    node_sizes, node_sample : ndarray of shape (n_nodes,)
    class_weight : None, "balanced" or ndarray of shape (K,)
        None: the Hamming loss, :math:`\theta_d = 1/D`; "balanced": :func:`balanced_weights_batch`;
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
            isinstance(weight, int | float | np.number)
            and not isinstance(weight, bool | np.bool_)
            and np.isfinite(weight)
            and weight >= 0
        ):
            raise ValueError(
                f"class_weight[{label!r}] = {weight!r}: weights must be finite numbers >= 0"
            )
        per_label[position[label]] = weight
    if not per_label.any():
        raise ValueError(
            f"class_weight gives every class weight 0 ({class_weight!r}): nothing would be "
            "learned; give at least one class a positive weight"
        )
    return per_label


def label_weights(class_weight, classes, labels, node_weight=None) -> np.ndarray | None:
    r"""Per-label weights (K,) of ``class_weight`` over the label codes ``labels`` (``-1``:
    unknown, not counted): None; ``"balanced"``: :math:`n / (K \cdot n_k)` as scikit-learn balances
    classes (labels absent from ``labels`` weigh 1; with ``node_weight``, each node's sample
    weight, the counts are weighted, as scikit-learn counts a class with its samples' weights);
    a dict: its weights, 1 elsewhere."""
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        known = labels >= 0
        weight = None if node_weight is None else node_weight[known]
        counts = np.bincount(labels[known], weight, minlength=len(classes)).astype(float)
        present = counts > 0
        weights = np.ones(len(classes))
        weights[present] = counts.sum() / (present.sum() * counts[present])
        return weights
    return class_weight_by_code(class_weight, classes)


def node_label_weights(label_weight, labels: np.ndarray) -> np.ndarray | None:
    """Each node's label weight from per-label weights (:func:`label_weights`): 0 for an
    unknown label (-1), 1 for a hidden node (the code after the labels'); None without
    weights."""
    if label_weight is None:
        return None
    weights = np.append(label_weight, 1.0)
    return np.where(labels >= 0, weights[np.minimum(np.maximum(labels, 0), len(label_weight))], 0.0)


# ---- multi-label classification: (n_samples, n_labels) 0/1 arrays -------------------------------
def multilabel_scores(y_true, y_pred) -> dict:
    """The three usual scores of multi-label predictions, from scikit-learn's functions.

    For (n_samples, n_labels) 0/1 arrays (or sparse matrices), as
    :class:`~pmap_sklearn.MultiLabelStructure` predicts them: the Hamming loss (the fraction
    of wrong label bits, :func:`sklearn.metrics.hamming_loss` — ``1 −`` it is what the
    estimators' ``score`` and :data:`hamming_scorer` give), the subset accuracy (the fraction
    of samples whose labels are all right, :func:`sklearn.metrics.accuracy_score`, the
    ``score`` of scikit-learn's classifiers) and the example-based F1 (the F1 of each sample's
    label set, averaged over samples: ``f1_score(average="samples")``, a sample without true
    or predicted labels scoring 1).

    Parameters
    ----------
    y_true, y_pred : array-like or sparse matrix of shape (n_samples, n_labels)
        0/1 (or boolean) indicator matrices of the same shape.

    Returns
    -------
    dict
        ``hamming_loss``, ``subset_accuracy`` and ``example_f1``.

    Raises
    ------
    ValueError
        Naming ``y_true`` or ``y_pred`` when it is not 2-D or holds a value other than 0 and 1
        (``-1``, an unknown label, included: :func:`mean_hamming_loss` skips those), or when
        their shapes differ.

    Examples
    --------
    >>> from pmap_sklearn.metrics import multilabel_scores
    >>> scores = multilabel_scores([[1, 0, 1], [0, 1, 0]], [[1, 0, 0], [0, 1, 0]])
    >>> {name: round(value, 3) for name, value in scores.items()}
    {'hamming_loss': 0.167, 'subset_accuracy': 0.5, 'example_f1': 0.833}
    """
    y_true, y_pred = _indicator(y_true, "y_true"), _indicator(y_pred, "y_pred")
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"y_true has shape {y_true.shape} but y_pred has shape {y_pred.shape}: both are "
            "(n_samples, n_labels)"
        )
    return {
        "hamming_loss": float(hamming_loss(y_true, y_pred)),
        "subset_accuracy": float(accuracy_score(y_true, y_pred)),
        "example_f1": float(f1_score(y_true, y_pred, average="samples", zero_division=1.0)),
    }


def _indicator(y, name: str):
    """``y`` as a 2-D 0/1 indicator matrix (dense, or sparse as given), or a ValueError naming
    ``name`` and the first value outside {0, 1}."""
    matrix = y if sparse.issparse(y) else np.asarray(y)
    if matrix.ndim != 2:
        raise ValueError(
            f"{name} must be an (n_samples, n_labels) 0/1 indicator matrix, got shape "
            f"{matrix.shape}"
        )
    values = matrix.data if sparse.issparse(matrix) else matrix
    if values.dtype == object and any(v is None for v in values.flat):
        raise ValueError(
            f"{name} holds None: multilabel_scores takes 0/1 indicator matrices, as "
            "MultiLabelStructure predicts them"
        )
    if values.dtype == object:  # numbers in an object array are numbers
        try:
            values = values.astype(float)
        except (TypeError, ValueError):
            pass
    if values.dtype != bool:
        outside = values[(values != 0) & (values != 1)] if values.dtype.kind in "biuf" else values
        if outside.size:
            unknown = (
                "; -1 (an unknown label) cannot be scored here: mean_hamming_loss skips it"
                if values.dtype.kind in "iuf" and (outside == -1).any()
                else ""
            )
            raise ValueError(
                f"{name} holds {outside.flat[0].item()!r}: multilabel_scores takes 0/1 indicator "
                f"matrices, as MultiLabelStructure predicts them{unknown}"
            )
    return matrix if sparse.issparse(matrix) else values
