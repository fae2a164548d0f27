"""Scorers for ``GridSearchCV(scoring=...)`` and ``cross_validate``: callables
``(estimator, X, y)`` that read the node sizes of the samples and the markers of the estimator
that predicts (the last step of a pipeline)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import f1_score, make_scorer

from .hamming import mean_hamming_loss, weighted_hamming_loss
from .segmentation import segmentation_scores
from .sequence import entity_f1_score, flat_f1_score


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


def _sizes(X, y) -> list:
    sizes = [getattr(x, "node_sizes", None) for x in X]
    return [np.ones(np.size(t)) if s is None else s for s, t in zip(sizes, y, strict=True)]


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


#: The example-based F1 of ``estimator.predict(X)`` (:func:`multilabel_scores`): scikit-learn's
#: ``"f1_samples"`` scorer with a sample that has no true and no predicted label scoring 1
#: instead of 0 with a warning. Subset accuracy is scikit-learn's ``"accuracy"`` scorer and
#: ``1 −`` the Hamming loss is :data:`hamming_scorer`.
example_f1_scorer = make_scorer(f1_score, average="samples", zero_division=1.0)


#: Entity-level F1 of ``estimator.predict(X)`` (IOB1, IOB2 or BIOES tags, ``O`` outside): a
#: scorer for ``GridSearchCV(scoring=entity_f1_scorer)`` / ``cross_validate``.
entity_f1_scorer = make_scorer(entity_f1_score)


#: Token-level F1 weighted over the tags other than ``O`` (sklearn-crfsuite's tutorial score),
#: as a scorer; on tag sets without ``O`` every tag is scored.
flat_f1_scorer = make_scorer(flat_f1_score, exclude="O")


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
