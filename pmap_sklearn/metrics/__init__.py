"""Structured losses and scores, and scorers for scikit-learn's model selection.

One module a family: Hamming losses and class weights (:mod:`.hamming`), sequence-labelling
scores (:mod:`.sequence`), segmentation scores (:mod:`.segmentation`), calibration
(:mod:`.calibration`) and the scorers (:mod:`.scorers`); every public name is importable from
``pmap_sklearn.metrics``.
"""

from .calibration import expected_calibration_error, reliability_curve
from .hamming import (
    balanced_node_weights,
    balanced_weights_batch,
    loss_weights,
    mean_hamming_loss,
    multilabel_scores,
    weighted_hamming_loss,
)
from .scorers import (
    class_average_accuracy_scorer,
    entity_f1_scorer,
    example_f1_scorer,
    flat_f1_scorer,
    global_accuracy_scorer,
    hamming_scorer,
    mean_iou_scorer,
    weighted_hamming_scorer,
)
from .segmentation import segmentation_confusion, segmentation_scores
from .sequence import (
    entity_f1_score,
    entity_precision_recall_fscore_support,
    entity_spans,
    flat_accuracy_score,
    flat_classification_report,
    flat_f1_score,
    flat_fbeta_score,
    flat_precision_recall_fscore_support,
    flat_precision_score,
    flat_recall_score,
    sequence_accuracy_score,
    to_bio_tags,
)

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
    "to_bio_tags",
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
