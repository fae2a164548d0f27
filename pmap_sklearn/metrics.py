"""Structured losses, size-balanced node weights, sequence-labelling scores and scorers.

Labellings are sequences of label arrays, one per sample (labels of any discrete kind);
``unknown_label`` (default ``-1``) in ``y_true`` marks an unknown label, which is not counted.
Losses are per-sample losses averaged over samples, as in Shpakova et al. (2018) — unlike
:func:`sklearn.metrics.hamming_loss`, which pools all labels: a long sample then weighs no more
than a short one.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.metrics import accuracy_score, f1_score, hamming_loss, make_scorer

from ._labels import unknown_mask
from ._utils import check_probabilities, onehot

__all__ = [
    "mean_hamming_loss",
    "weighted_hamming_loss",
    "balanced_node_weights",
    "balanced_weights_batch",
    "loss_weights",
    "hamming_scorer",
    "weighted_hamming_scorer",
    "multilabel_scores",
    "example_f1_scorer",
    "flat_precision_recall_fscore_support",
    "flat_f1_score",
    "flat_f1_scorer",
    "flat_accuracy_score",
    "flat_precision_score",
    "flat_recall_score",
    "flat_fbeta_score",
    "flat_classification_report",
    "sequence_accuracy_score",
    "entity_spans",
    "entity_precision_recall_fscore_support",
    "entity_f1_score",
    "entity_f1_scorer",
    "segmentation_confusion",
    "segmentation_scores",
    "expected_calibration_error",
    "reliability_curve",
    "global_accuracy_scorer",
    "class_average_accuracy_scorer",
    "mean_iou_scorer",
]


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
        true, pred = np.asarray(true).ravel(), np.asarray(pred).ravel()
        if true.shape != pred.shape:
            raise ValueError(
                f"sample {i}: y_true has {true.size} labels but y_pred has {pred.size}"
            )
        yield i, true, pred


def mean_hamming_loss(y_true, y_pred, unknown_label=-1) -> float:
    r"""Mean over samples of each sample's Hamming loss :math:`(1/D) \sum_d [y_d \ne \hat{y}_d]`.

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


def weighted_hamming_loss(y_true, y_pred, node_sizes=None, unknown_label=-1) -> float:
    r"""Mean over samples of the size-balanced weighted Hamming loss
    :math:`\sum_d \theta_d(y_d) [y_d \ne \hat{y}_d]` (see :func:`balanced_node_weights`).

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


def _scored_model(estimator):
    """The estimator that predicts: the last step of a pipeline (of pipelines)."""
    while hasattr(estimator, "_final_estimator"):
        estimator = estimator._final_estimator
    return estimator


def _not_counted(estimator) -> tuple:
    """The markers of the nodes a scorer leaves out, read from the estimator that predicts (the
    last step of a pipeline), as its ``score`` leaves them out: its ``unknown_label`` (default
    ``-1``) and its ``ignore_label``."""
    model = _scored_model(estimator)
    return (getattr(model, "unknown_label", -1), getattr(model, "ignore_label", None))


def hamming_scorer(estimator, X, y) -> float:
    """``1 − mean_hamming_loss`` of ``estimator.predict(X)``, the estimator's ``score``: a
    scorer for ``GridSearchCV(scoring=hamming_scorer)`` or ``scoring={"hamming":
    hamming_scorer}``.

    The nodes of the estimator's ``unknown_label`` and ``ignore_label`` (those of the last
    step of a pipeline) are not counted, as its ``score`` leaves them out.

    Parameters
    ----------
    estimator : fitted estimator
    X : sequence of samples
    y : sequence of label arrays

    Returns
    -------
    float
    """
    return 1.0 - mean_hamming_loss(y, estimator.predict(X), _not_counted(estimator))


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

    Returns
    -------
    dict
        ``hamming_loss``, ``subset_accuracy`` and ``example_f1``.

    Examples
    --------
    >>> from pmap_sklearn.metrics import multilabel_scores
    >>> scores = multilabel_scores([[1, 0, 1], [0, 1, 0]], [[1, 0, 0], [0, 1, 0]])
    >>> {name: round(value, 3) for name, value in scores.items()}
    {'hamming_loss': 0.167, 'subset_accuracy': 0.5, 'example_f1': 0.833}
    """
    return {
        "hamming_loss": float(hamming_loss(y_true, y_pred)),
        "subset_accuracy": float(accuracy_score(y_true, y_pred)),
        "example_f1": float(f1_score(y_true, y_pred, average="samples", zero_division=1.0)),
    }


#: The example-based F1 of ``estimator.predict(X)`` (:func:`multilabel_scores`): scikit-learn's
#: ``"f1_samples"`` scorer with a sample that has no true and no predicted label scoring 1
#: instead of 0 with a warning. Subset accuracy is scikit-learn's ``"accuracy"`` scorer and
#: ``1 −`` the Hamming loss is :data:`hamming_scorer`.
example_f1_scorer = make_scorer(f1_score, average="samples", zero_division=1.0)


def weighted_hamming_scorer(estimator, X, y) -> float:
    """``1 − weighted_hamming_loss`` with the node sizes of the samples (superpixel sizes of
    :class:`~pmap_sklearn.GraphSample`, 1 for other samples); works on pipelines too.

    A scorer callable ``(estimator, X, y)``: the node sizes come from the samples X, which
    :func:`sklearn.metrics.make_scorer` scorers never see. The nodes of the estimator's
    ``unknown_label`` and ``ignore_label`` (those of the last step of a pipeline) are not
    counted.

    Parameters
    ----------
    estimator : fitted estimator
    X : sequence of samples
    y : sequence of label arrays

    Returns
    -------
    float
    """
    return 1.0 - weighted_hamming_loss(
        y, estimator.predict(X), _sizes(X, y), _not_counted(estimator)
    )


# ---- sequence labelling: flat per-tag scores and entity (chunk) scores -----------------------
def _flat(y_true, y_pred, unknown_label=-1) -> tuple[np.ndarray, np.ndarray]:
    """Every known node's true and predicted label, pooled over the samples."""
    pairs = [(true, pred) for _, true, pred in _pairs(y_true, y_pred)]
    if not pairs:
        raise ValueError("y_true holds no samples")
    true = np.concatenate([t for t, _ in pairs])
    pred = np.concatenate([p for _, p in pairs])
    known = ~unknown_mask(true, unknown_label)
    if not known.any():
        raise ValueError("no known labels in y_true")
    return true[known], pred[known]


def _flat_labels(true, pred, labels, exclude) -> list:
    """The labels scored: ``labels``, or every label seen, less ``exclude``."""
    if labels is None:
        labels = np.unique(np.concatenate([true, pred])).tolist()
    if isinstance(exclude, str):
        exclude = [exclude]
    left_out = set(exclude or ())
    kept = [label for label in labels if label not in left_out]
    if not kept:
        raise ValueError(f"no label is left to score once {sorted(left_out)} are left out")
    return kept


def flat_precision_recall_fscore_support(
    y_true, y_pred, *, labels=None, exclude=None, average=None, unknown_label=-1
):
    """Per-tag precision, recall, F1 and support of the labels pooled over every node.

    The flat scores of sklearn-crfsuite's ``metrics`` module: scikit-learn's
    :func:`~sklearn.metrics.precision_recall_fscore_support` of the concatenated labellings,
    with tags to leave out (``exclude=["O"]`` scores the entity tags of a named-entity task, as
    the crfsuite tutorial does).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    labels : list, optional
        The labels to score, in this order; by default every label in ``y_true`` or
        ``y_pred``, sorted.
    exclude : label or list of labels, optional
        Labels left out of ``labels`` (e.g. ``"O"``).
    average : {None, "micro", "macro", "weighted"}, default=None
        None: one value per label; otherwise averaged over the labels as scikit-learn does
        (``"weighted"`` by support).
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.

    Returns
    -------
    precision, recall, fscore : float or ndarray of shape (n_labels,)
    support : ndarray of shape (n_labels,) or None
    labels : list
        The labels scored.

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_precision_recall_fscore_support
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> p, r, f, support, labels = flat_precision_recall_fscore_support(
    ...     y_true, y_pred, exclude="O")
    >>> labels, r.tolist()
    (['B-LOC', 'B-PER', 'I-PER'], [1.0, 1.0, 0.0])
    """
    from sklearn.metrics import precision_recall_fscore_support

    true, pred = _flat(y_true, y_pred, unknown_label)
    kept = _flat_labels(true, pred, labels, exclude)
    precision, recall, fscore, support = precision_recall_fscore_support(
        true, pred, labels=kept, average=average, zero_division=0
    )
    return precision, recall, fscore, support, kept


_FLAT_SCORE_SECTIONS = """Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    BETAlabels : list, optional
        The labels to score (by default every label seen).
    exclude : label or list of labels, optional
        Labels left out (e.g. ``"O"``).
    average : {"micro", "macro", "weighted"}, default="weighted"
        How the per-label scores are averaged (as scikit-learn does).
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.

    Returns
    -------
    float
        The averaged SCORE.
"""


def _flat_score_doc(score: str, beta: bool = False):
    """Write the shared Parameters and Returns sections of an averaged flat score into its
    docstring (at ``FLAT_SCORE_SECTIONS``)."""
    beta_entry = "beta : float\n        The weight of recall against precision.\n    "
    sections = _FLAT_SCORE_SECTIONS.replace("BETA", beta_entry if beta else "")
    sections = sections.replace("SCORE", score)

    def decorate(function):
        function.__doc__ = function.__doc__.replace("FLAT_SCORE_SECTIONS\n", sections)
        return function

    return decorate


@_flat_score_doc("F1")
def flat_f1_score(
    y_true, y_pred, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """F1 of the labels pooled over every node, averaged over the tags scored.

    With ``exclude=["O"]`` and the default ``average="weighted"`` this is the token-level score
    of sklearn-crfsuite's named-entity tutorial (``flat_f1_score(..., labels=tags other than
    O)``).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_f1_score
    >>> flat_f1_score([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]], exclude="O")
    0.5
    """
    if average is None:
        raise ValueError("flat_f1_score returns one number: average must not be None")
    return float(
        flat_precision_recall_fscore_support(
            y_true,
            y_pred,
            labels=labels,
            exclude=exclude,
            average=average,
            unknown_label=unknown_label,
        )[2]
    )


def _flat_average(which: int, y_true, y_pred, labels, exclude, average, unknown_label, beta=1.0):
    """One averaged score (0 precision, 1 recall, 2 F-beta) of the pooled labels."""
    from sklearn.metrics import precision_recall_fscore_support

    if average is None:
        raise ValueError("a flat score returns one number: average must not be None")
    true, pred = _flat(y_true, y_pred, unknown_label)
    kept = _flat_labels(true, pred, labels, exclude)
    scores = precision_recall_fscore_support(
        true, pred, beta=beta, labels=kept, average=average, zero_division=0
    )
    return float(scores[which])


@_flat_score_doc("precision")
def flat_precision_score(
    y_true, y_pred, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """Precision of the labels pooled over every node, averaged over the tags scored
    (sklearn-crfsuite's ``metrics.flat_precision_score``; the arguments of
    :func:`flat_f1_score`).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_precision_score
    >>> flat_precision_score([["B-PER", "I-PER", "O"]], [["B-PER", "B-PER", "O"]], exclude="O")
    0.25
    """
    return _flat_average(0, y_true, y_pred, labels, exclude, average, unknown_label)


@_flat_score_doc("recall")
def flat_recall_score(
    y_true, y_pred, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """Recall of the labels pooled over every node, averaged over the tags scored
    (sklearn-crfsuite's ``metrics.flat_recall_score``; the arguments of :func:`flat_f1_score`).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_recall_score
    >>> flat_recall_score([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]], exclude="O")
    0.5
    """
    return _flat_average(1, y_true, y_pred, labels, exclude, average, unknown_label)


@_flat_score_doc("F-beta", beta=True)
def flat_fbeta_score(
    y_true, y_pred, beta, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """F-beta of the labels pooled over every node, averaged over the tags scored
    (sklearn-crfsuite's ``metrics.flat_fbeta_score``; ``beta = 1`` is :func:`flat_f1_score`).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_fbeta_score
    >>> round(flat_fbeta_score([["B-PER", "I-PER"]], [["B-PER", "B-PER"]], beta=2), 4)
    0.4167
    """
    return _flat_average(2, y_true, y_pred, labels, exclude, average, unknown_label, beta)


def flat_accuracy_score(y_true, y_pred, *, unknown_label=-1) -> float:
    """The fraction of correct labels pooled over every known node (sklearn-crfsuite's
    ``metrics.flat_accuracy_score``): a long sequence counts more than a short one, unlike
    ``1 −`` :func:`mean_hamming_loss`.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_accuracy_score
    >>> flat_accuracy_score([["B-PER", "I-PER", "O"], ["O"]], [["B-PER", "O", "O"], ["O"]])
    0.75
    """
    true, pred = _flat(y_true, y_pred, unknown_label)
    return float(np.mean(true == pred))


def flat_classification_report(y_true, y_pred, labels=None, *, unknown_label=-1, **kwargs):
    """scikit-learn's :func:`~sklearn.metrics.classification_report` of the labels pooled over
    every known node (sklearn-crfsuite's ``metrics.flat_classification_report``).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    labels : list, optional
        The labels reported, in this order (e.g. the entity tags without ``"O"``).
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.
    **kwargs
        Passed on to :func:`~sklearn.metrics.classification_report` (``digits``,
        ``output_dict``, ``zero_division``, ...).

    Returns
    -------
    str or dict
        The report.

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_classification_report
    >>> report = flat_classification_report(
    ...     [["B-PER", "O"]], [["B-PER", "B-PER"]], digits=2, zero_division=0.0
    ... )
    >>> report.split()[:4]
    ['precision', 'recall', 'f1-score', 'support']
    """
    from sklearn.metrics import classification_report

    true, pred = _flat(y_true, y_pred, unknown_label)
    return classification_report(true, pred, labels=labels, **kwargs)


def sequence_accuracy_score(y_true, y_pred, *, unknown_label=-1) -> float:
    """The fraction of sequences labelled entirely right (sklearn-crfsuite's
    ``metrics.sequence_accuracy_score``); unknown labels in ``y_true`` match any prediction.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    unknown_label : scalar or None, default=-1

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import sequence_accuracy_score
    >>> sequence_accuracy_score([["B-PER", "O"], ["O"]], [["B-PER", "O"], ["B-LOC"]])
    0.5
    """
    right = [
        bool(np.all((true == pred) | unknown_mask(true, unknown_label)))
        for _, true, pred in _pairs(y_true, y_pred)
    ]
    if not right:
        raise ValueError("y_true holds no samples")
    return float(np.mean(right))


#: Chunk prefixes the entity scores read: IOB1 / IOB2 (B, I), BIOES / IOBES (also E, S) and
#: BILOU's L and U (the same as E and S).
_PREFIXES = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}


def _split_tag(tag, outside) -> tuple[str, str]:
    """``(prefix, type)`` of a chunk tag such as ``B-PER``; ``("O", "")`` outside."""
    if tag == outside:
        return "O", ""
    text = str(tag)
    prefix, dash, kind = text.partition("-")
    if not dash or prefix.upper() not in _PREFIXES or not kind:
        raise ValueError(
            f"tag {tag!r} is not a chunk tag: entity scores read tags PREFIX-TYPE with PREFIX "
            f"one of B, I, E, S (IOB1, IOB2, BIOES; L and U of BILOU) and {outside!r} outside "
            "an entity"
        )
    return _PREFIXES[prefix.upper()], kind


def entity_spans(tags, outside="O") -> list[tuple[str, int, int]]:
    """The entities (chunks) of one tagged sequence, read as ``conlleval`` reads them.

    An entity starts at a ``B`` or ``S`` tag, at an ``I`` or ``E`` tag that follows ``O``, the
    end of an entity or a tag of another type, and ends before the next start or ``O``, or
    after an ``E`` or ``S`` tag. These are the rules of the CoNLL shared tasks' ``conlleval``
    script (Tjong Kim Sang 2002), which read IOB1 (``I`` opens an entity, ``B`` only splits
    two adjacent entities of one type), IOB2 (every entity opens with ``B``) and BIOES alike;
    an ill-formed sequence (``I-PER`` after ``O``) is read the lenient way conlleval reads it.

    Parameters
    ----------
    tags : sequence of str
        One tag per token: ``PREFIX-TYPE`` or ``outside``.
    outside : str, default="O"
        The tag of tokens outside every entity.

    Returns
    -------
    list of (type, start, end)
        ``end`` is one past the last token.

    Examples
    --------
    >>> from pmap_sklearn.metrics import entity_spans
    >>> entity_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG"])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    >>> entity_spans(["I-PER", "I-PER", "B-PER", "O"])  # IOB1
    [('PER', 0, 2), ('PER', 2, 3)]
    >>> entity_spans(["S-LOC", "B-ORG", "E-ORG"])  # BIOES
    [('LOC', 0, 1), ('ORG', 1, 3)]
    """
    spans, start, kind = [], None, ""
    previous = "O"
    for position, tag in enumerate(np.asarray(tags, dtype=object).ravel().tolist()):
        prefix, current = _split_tag(tag, outside)
        ends = start is not None and (
            prefix in ("B", "S", "O") or previous in ("E", "S") or current != kind
        )
        if ends:
            spans.append((kind, start, position))
            start = None
        if prefix != "O" and start is None:
            start, kind = position, current
        previous = prefix
    if start is not None:
        spans.append((kind, start, position + 1))
    return spans


def entity_precision_recall_fscore_support(
    y_true, y_pred, *, average="micro", outside="O", unknown_label=-1
):
    """Entity-level precision, recall, F1 and support, the CoNLL shared tasks' score.

    An entity of ``y_pred`` counts as correct only if ``y_true`` has an entity of the same type
    with the same first and last token (see :func:`entity_spans` for how IOB1, IOB2 and BIOES
    tags are read). Precision is the share of predicted entities that are correct, recall the
    share of true entities found.

    Parameters
    ----------
    y_true, y_pred : sequence of tag arrays
    average : {"micro", "macro", None}, default="micro"
        ``"micro"``: entities of every type pooled (``conlleval``'s overall score);
        ``"macro"``: the mean of the per-type scores; None: per type.
    outside : str, default="O"
        The tag outside every entity.
    unknown_label : scalar or None, default=-1
        A sample whose ``y_true`` holds this label is refused: entities are read from whole
        sequences.

    Returns
    -------
    precision, recall, fscore : float, or ndarray of shape (n_types,) when ``average`` is None
    support : int or ndarray of shape (n_types,)
        True entities (of each type).
    types : list of str
        The entity types in ``y_true`` or ``y_pred``, sorted.

    Examples
    --------
    >>> from pmap_sklearn.metrics import entity_precision_recall_fscore_support
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O", "B-LOC"]]
    >>> p, r, f, support, types = entity_precision_recall_fscore_support(y_true, y_pred)
    >>> p, r, support
    (0.5, 0.5, 2)
    """
    if average not in ("micro", "macro", None):
        raise ValueError(f"average must be 'micro', 'macro' or None, got {average!r}")
    counts: dict[str, np.ndarray] = {}  # type -> [correct, predicted, true]
    for i, true, pred in _pairs(y_true, y_pred):
        if unknown_mask(true, unknown_label).any():
            raise ValueError(
                f"sample {i} of y_true has unknown labels ({unknown_label!r}): entity scores "
                "need whole tag sequences"
            )
        true_spans, pred_spans = set(entity_spans(true, outside)), set(entity_spans(pred, outside))
        for index, spans in ((0, true_spans & pred_spans), (1, pred_spans), (2, true_spans)):
            for kind, _, _ in spans:
                counts.setdefault(kind, np.zeros(3, dtype=np.int64))[index] += 1
    types = sorted(counts)
    table = np.array([counts[kind] for kind in types]).reshape(-1, 3)
    if average == "micro":
        table = table.sum(axis=0, keepdims=True)
    correct, predicted, true = table.T
    precision = np.divide(correct, predicted, out=np.zeros(len(table)), where=predicted > 0)
    recall = np.divide(correct, true, out=np.zeros(len(table)), where=true > 0)
    total = precision + recall
    fscore = np.divide(2 * precision * recall, total, out=np.zeros(len(table)), where=total > 0)
    if average is None:
        return precision, recall, fscore, true, types
    if average == "micro":
        return float(precision[0]), float(recall[0]), float(fscore[0]), int(true[0]), types
    means = [float(v.mean()) if len(v) else 0.0 for v in (precision, recall, fscore)]
    return (*means, int(true.sum()), types)


def entity_f1_score(y_true, y_pred, *, average="micro", outside="O", unknown_label=-1) -> float:
    """Entity-level F1 (``conlleval``'s overall score with ``average="micro"``).

    See :func:`entity_precision_recall_fscore_support`.

    Parameters
    ----------
    y_true, y_pred : sequence of tag arrays
    average : {"micro", "macro"}, default="micro"
        Entities of every type pooled, or the mean of the per-type F1.
    outside : str, default="O"
        The tag outside every entity.
    unknown_label : scalar or None, default=-1
        Samples of ``y_true`` holding it are refused.

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import entity_f1_score
    >>> entity_f1_score([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "O", "O", "B-LOC"]])
    0.5
    """
    if average is None:
        raise ValueError("entity_f1_score returns one number: average must not be None")
    return entity_precision_recall_fscore_support(
        y_true, y_pred, average=average, outside=outside, unknown_label=unknown_label
    )[2]


#: Entity-level F1 of ``estimator.predict(X)`` (IOB1, IOB2 or BIOES tags, ``O`` outside): a
#: scorer for ``GridSearchCV(scoring=entity_f1_scorer)`` / ``cross_validate``.
entity_f1_scorer = make_scorer(entity_f1_score)

#: Token-level F1 weighted over the tags other than ``O`` (sklearn-crfsuite's tutorial score),
#: as a scorer; on tag sets without ``O`` every tag is scored.
flat_f1_scorer = make_scorer(flat_f1_score, exclude="O")


# ---- segmentation: pixel accuracies, intersection over union, calibration ---------------------
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
        weight = None if sample_weight is None else np.asarray(sample_weight[i], float).ravel()
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
    if len(y_true) != len(y_proba):
        raise ValueError(f"y_true has {len(y_true)} samples but y_proba has {len(y_proba)}")
    confidence, correct, n_classes = [], [], set()
    for i, (true, proba) in enumerate(zip(y_true, y_proba, strict=True)):
        true = np.asarray(true).ravel()
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


def _sizes(X, y) -> list:
    sizes = [getattr(x, "node_sizes", None) for x in X]
    return [np.ones(np.size(t)) if s is None else s for s, t in zip(sizes, y, strict=True)]


def _segmentation_scorer(name: str):
    def scorer(estimator, X, y) -> float:
        labels = getattr(estimator, "classes_", None)
        void = getattr(_scored_model(estimator), "ignore_label", None)
        scores = segmentation_scores(
            y, estimator.predict(X), labels=labels, void=void, sample_weight=_sizes(X, y)
        )
        return scores[name]

    scorer.__name__ = f"{name}_scorer"
    scorer.__doc__ = (
        f"``{name}`` of :func:`segmentation_scores` for ``estimator.predict(X)``, each node "
        "weighted by its size (a superpixel's pixels: node labels scored as their pixels), the "
        "estimator's ``ignore_label`` (if any; the last step's in a pipeline) not scored. A "
        "scorer callable ``(estimator, X, y)`` for ``GridSearchCV`` / ``cross_validate``."
    )
    return scorer


global_accuracy_scorer = _segmentation_scorer("global_accuracy")
class_average_accuracy_scorer = _segmentation_scorer("class_average_accuracy")
mean_iou_scorer = _segmentation_scorer("mean_iou")
