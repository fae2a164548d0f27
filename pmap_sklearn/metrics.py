"""Structured losses, size-balanced node weights and scorers (SPEC §1).

Labellings are sequences of int arrays, one per sample; ``-1`` in ``y_true`` marks an unknown
label, which is not counted. Losses are per-sample losses averaged over samples, as in the paper.
"""

from __future__ import annotations

import numpy as np

from ._utils import onehot

__all__ = [
    "hamming_loss",
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


def hamming_loss(y_true, y_pred) -> float:
    """Mean over samples of ``(1/D) Σ_d [y_d != ŷ_d]`` (unknown labels ``-1`` skipped).

    Examples
    --------
    >>> hamming_loss([[0, 1, 2], [1, 1]], [[0, 1, 1], [1, 1]])
    0.16666666666666666
    """
    losses = []
    for _, true, pred in _pairs(y_true, y_pred):
        known = true >= 0
        if known.any():
            losses.append(np.mean(true[known] != pred[known]))
    if not losses:
        raise ValueError("no known labels in y_true")
    return float(np.mean(losses))


def balanced_node_weights(label_distribution, node_sizes=None) -> np.ndarray:
    """Size-balanced weights ``θ_d(k)`` of one sample (Kolesnikov et al., SPEC §1).

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
    class_weight : None, "balanced" or dict
        None: the Hamming loss, ``θ_d = 1/D``; "balanced": :func:`balanced_weights_batch`;
        a dict ``{label: weight}`` multiplies ``1/D``.
    """
    if isinstance(class_weight, str) and class_weight == "balanced":
        return balanced_weights_batch(distribution, node_sizes, node_sample)
    n_states = distribution.shape[1]
    per_label = np.ones(n_states)
    if isinstance(class_weight, dict):
        unknown = set(class_weight) - set(range(n_states))
        if unknown:
            raise ValueError(f"class_weight has labels {sorted(unknown)} outside 0..{n_states - 1}")
        for label, weight in class_weight.items():
            per_label[label] = weight
    lengths = np.bincount(node_sample)
    return per_label[None, :] / lengths[node_sample][:, None]


def weighted_hamming_loss(y_true, y_pred, node_sizes=None) -> float:
    """Mean over samples of the size-balanced weighted Hamming loss
    ``Σ_d θ_d(y_d) [y_d != ŷ_d]`` (see :func:`balanced_node_weights`).

    Parameters
    ----------
    node_sizes : sequence of arrays, optional
        Node sizes of each sample; all 1 when omitted (then it is the class-balanced error).
    """
    losses = []
    for i, true, pred in _pairs(y_true, y_pred):
        sizes = None if node_sizes is None else np.asarray(node_sizes[i], dtype=float).ravel()
        if sizes is not None and sizes.shape != true.shape:
            raise ValueError(f"sample {i}: {sizes.size} node sizes for {true.size} labels")
        known = true >= 0
        if not known.any():
            continue
        weights = balanced_node_weights(true, sizes)
        theta = weights[np.flatnonzero(known), true[known]]
        losses.append(float(theta @ (true[known] != pred[known])))
    if not losses:
        raise ValueError("no known labels in y_true")
    return float(np.mean(losses))


def hamming_scorer(estimator, X, y) -> float:
    """``1 − hamming_loss``: a scorer for ``GridSearchCV(scoring=hamming_scorer)``."""
    return 1.0 - hamming_loss(y, estimator.predict(X))


def weighted_hamming_scorer(estimator, X, y) -> float:
    """``1 − weighted_hamming_loss`` with the node sizes of the samples (superpixel sizes of
    :class:`~pmap_sklearn.GraphSample`, 1 for other samples). Works on pipelines too."""
    sizes = [getattr(x, "node_sizes", None) for x in X]
    sizes = [np.ones(np.size(t)) if s is None else s for s, t in zip(sizes, y, strict=True)]
    return 1.0 - weighted_hamming_loss(y, estimator.predict(X), sizes)
