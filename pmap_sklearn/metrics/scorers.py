"""Scorers for ``GridSearchCV(scoring=...)`` and ``cross_validate``: callables
``(estimator, X, y, sample_weight=None)`` that read the node sizes of the samples and the
markers of the estimator that predicts (the last step of a pipeline).

They are scikit-learn scorer objects, so that with metadata routing
(``sklearn.set_config(enable_metadata_routing=True)``) ``scorer.set_score_request(
sample_weight=True)`` has ``GridSearchCV`` and ``cross_validate`` hand them the test fold's
sample weights."""

from __future__ import annotations

import functools

import numpy as np
from scipy import sparse
from sklearn.metrics import f1_score, make_scorer
from sklearn.metrics._scorer import _BaseScorer

from .._labels import warn_unseen
from .._validation import as_real_array, check_sample_weight
from .hamming import _shaped_like, mean_hamming_loss, weighted_hamming_loss
from .segmentation import segmentation_scores
from .sequence import entity_f1_score, flat_f1_score


class _SampleScorer(_BaseScorer):
    """A scorer ``scorer(estimator, X, y, sample_weight=None)`` computed by ``function(estimator,
    X, y, sample_weight=None)``, which reads the samples ``X`` and the estimator (what a
    :func:`~sklearn.metrics.make_scorer` scorer never sees); as a scikit-learn scorer it takes
    ``set_score_request(sample_weight=True)`` under metadata routing. ``function`` is a
    module-level function (or a partial of one), so the scorer pickles with its requests."""

    def __init__(self, function, name: str, doc: str | None = None):
        super().__init__(function, sign=1, kwargs={}, response_method="predict")
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc if doc is not None else function.__doc__
        self.__wrapped__ = function  # the signature, for inspect and the documentation

    def _score(self, method_caller, estimator, X, y_true, **kwargs):
        return self._score_func(estimator, X, y_true, **kwargs)

    def __repr__(self):
        return f"pmap_sklearn.metrics.{self.__name__}"


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


def _warn_unseen(estimator, y) -> None:
    """Warn of labels of ``y`` outside the classes of the estimator that predicts, as its
    ``score`` does: they count as errors."""
    classes = getattr(_scored_model(estimator), "classes_", None)
    if classes is not None:
        warn_unseen(y, classes, _not_counted(estimator))


def _sizes(X, y) -> list:
    sizes = [getattr(x, "node_sizes", None) for x in X]
    return [np.ones(np.size(t)) if s is None else s for s, t in zip(sizes, y, strict=True)]


def _hamming_score(estimator, X, y, sample_weight=None) -> float:
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
    sample_weight : array-like of shape (n_samples,), optional
        One weight per sample: the weighted mean over the samples (routed to the scorer
        with ``set_score_request(sample_weight=True)`` under metadata routing).

    Returns
    -------
    float
    """
    _warn_unseen(estimator, y)
    return 1.0 - mean_hamming_loss(
        y,
        _shaped_like(y, estimator.predict(X)),
        _not_counted(estimator),
        sample_weight=sample_weight,
    )


def _weighted_hamming_score(estimator, X, y, sample_weight=None) -> float:
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
    sample_weight : array-like of shape (n_samples,), optional
        One weight per sample: the weighted mean over the samples (routed to the scorer
        with ``set_score_request(sample_weight=True)`` under metadata routing).

    Returns
    -------
    float
    """
    _warn_unseen(estimator, y)
    return 1.0 - weighted_hamming_loss(
        y,
        _shaped_like(y, estimator.predict(X)),
        _sizes(X, y),
        _not_counted(estimator),
        sample_weight=sample_weight,
    )


hamming_scorer = _SampleScorer(_hamming_score, "hamming_scorer")
weighted_hamming_scorer = _SampleScorer(_weighted_hamming_score, "weighted_hamming_scorer")


def _check_multilabel(estimator, y, scorer: str) -> None:
    """Refuse, naming ``scorer``, a model that is not multi-label (its structure's samples
    are chains, grids or graphs) or labels ``y`` that are not an (n_samples, n_labels)
    indicator matrix."""
    structure = getattr(_scored_model(estimator), "structure_", None)
    kind = getattr(structure, "sample_kind", None)
    if kind is not None and kind != "multilabel":
        raise ValueError(
            f"{scorer} needs multi-label data (an (n_samples, n_labels) 0/1 indicator matrix, "
            f"MultiLabelStructure's Y), got a model on {kind} samples: score it with a scorer "
            "of node labels (hamming_scorer, flat_f1_scorer, global_accuracy_scorer, ...)"
        )
    if sparse.issparse(y):
        return
    try:
        shape = np.shape(y)
    except ValueError:  # ragged: one label array per sample
        shape = (len(y),)
    if len(shape) != 2:
        raise ValueError(
            f"{scorer} needs multi-label data: y must be an (n_samples, n_labels) 0/1 "
            f"indicator matrix (MultiLabelStructure's Y), got {len(y)} samples that are not "
            "rows of one such matrix"
        )


def _example_f1_score(estimator, X, y, sample_weight=None) -> float:
    """The example-based F1 of ``estimator.predict(X)`` (:func:`multilabel_scores`):
    scikit-learn's ``"f1_samples"`` scorer with a sample that has no true and no predicted
    label scoring 1 instead of 0 with a warning. Subset accuracy is scikit-learn's
    ``"accuracy"`` scorer and ``1 −`` the Hamming loss is :data:`hamming_scorer`.

    Parameters
    ----------
    estimator : fitted estimator
        A multi-label model (e.g. on :class:`~pmap_sklearn.MultiLabelStructure`).
    X : array-like or sparse matrix of shape (n_samples, n_features)
    y : array-like or sparse matrix of shape (n_samples, n_labels)
        0/1 indicator matrix.
    sample_weight : array-like of shape (n_samples,), optional
        One weight per sample (routed to the scorer with
        ``set_score_request(sample_weight=True)`` under metadata routing).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For a model on chains, grids or graphs, or labels that are not an indicator matrix.
    """
    _check_multilabel(estimator, y, "example_f1_scorer")
    return float(
        f1_score(
            y,
            estimator.predict(X),
            average="samples",
            zero_division=1.0,
            sample_weight=sample_weight,
        )
    )


example_f1_scorer = _SampleScorer(_example_f1_score, "example_f1_scorer")


#: Entity-level F1 of ``estimator.predict(X)`` (IOB1, IOB2 or BIOES tags, ``O`` outside): a
#: scorer for ``GridSearchCV(scoring=entity_f1_scorer)`` / ``cross_validate``.
entity_f1_scorer = make_scorer(entity_f1_score)


#: Token-level F1 weighted over the tags other than ``O`` (sklearn-crfsuite's tutorial score),
#: as a scorer; on tag sets without ``O`` every tag is scored.
flat_f1_scorer = make_scorer(flat_f1_score, exclude="O")


def _segmentation_score(name: str, estimator, X, y, sample_weight=None) -> float:
    """``segmentation_scores(...)[name]`` of ``estimator.predict(X)``, each node weighted by
    its size (times its sample's weight with ``sample_weight``)."""
    labels = getattr(estimator, "classes_", None)
    void = getattr(_scored_model(estimator), "ignore_label", None)
    sizes = _sizes(X, y)
    if sample_weight is not None:  # a node counts its size times its sample's weight
        weights = check_sample_weight(sample_weight, len(sizes), what="y")
        sizes = [
            as_real_array(size, f"sample {i}: node_sizes") * c
            for i, (size, c) in enumerate(zip(sizes, weights, strict=True))
        ]
    scores = segmentation_scores(
        y, estimator.predict(X), labels=labels, void=void, sample_weight=sizes
    )
    return scores[name]


def _segmentation_scorer(name: str) -> _SampleScorer:
    doc = (
        f"``{name}`` of :func:`segmentation_scores` for ``estimator.predict(X)``, each node "
        "weighted by its size (a superpixel's pixels: node labels scored as their pixels; "
        "times its sample's weight with ``sample_weight``), the estimator's ``ignore_label`` "
        "(if any; the last step's in a pipeline) not scored. A scorer callable ``(estimator, "
        "X, y, sample_weight=None)`` for ``GridSearchCV`` / ``cross_validate``."
    )
    return _SampleScorer(functools.partial(_segmentation_score, name), f"{name}_scorer", doc)


global_accuracy_scorer = _segmentation_scorer("global_accuracy")


class_average_accuracy_scorer = _segmentation_scorer("class_average_accuracy")


mean_iou_scorer = _segmentation_scorer("mean_iou")
