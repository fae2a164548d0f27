"""Segmentation scores and calibration error against direct counts."""

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from pmap_sklearn import GraphSample, PerturbMAPCRF
from pmap_sklearn.metrics import (
    class_average_accuracy_scorer,
    expected_calibration_error,
    global_accuracy_scorer,
    mean_iou_scorer,
    segmentation_confusion,
    segmentation_scores,
)


def test_scores_match_their_definitions_on_random_maps(rng):
    true = [rng.integers(0, 5, size=(7, 9)) for _ in range(3)]  # 4 = void
    pred = [rng.integers(0, 4, size=(7, 9)) for _ in range(3)]
    t, p = np.concatenate([a.ravel() for a in true]), np.concatenate([a.ravel() for a in pred])
    scored = t != 4
    reference = confusion_matrix(t[scored], p[scored], labels=[0, 1, 2, 3])
    scores = segmentation_scores(true, pred, void=4)
    np.testing.assert_array_equal(scores["confusion"], reference)
    assert scores["global_accuracy"] == pytest.approx(np.mean(t[scored] == p[scored]))
    recalls = [np.mean(p[scored & (t == k)] == k) for k in range(4)]
    assert scores["class_average_accuracy"] == pytest.approx(np.mean(recalls))
    ious = [
        np.sum((t == k) & (p == k) & scored) / np.sum(((t == k) | (p == k)) & scored)
        for k in range(4)
    ]
    assert scores["mean_iou"] == pytest.approx(np.mean(ious))


def test_weights_count_nodes_as_their_pixels_and_absent_classes_are_left_out():
    # node labels with sizes == the pixels they cover
    nodes = segmentation_scores([[0, 1, 1]], [[0, 1, 0]], sample_weight=[[5, 1, 2]])
    pixels = segmentation_scores([[0] * 5 + [1] * 3], [[0] * 5 + [1] + [0] * 2])
    for key in ("global_accuracy", "class_average_accuracy", "mean_iou"):
        assert nodes[key] == pytest.approx(pixels[key])
    scores = segmentation_scores([[0, 0]], [[0, 1]], labels=[0, 1, 2])
    assert np.isnan(scores["class_accuracy"][1]) and scores["class_average_accuracy"] == 0.5


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: segmentation_scores([[0, 1]], [[0]]), "2 labels but y_pred has 1"),
        (lambda: segmentation_scores([[0, 1]], [[0, 7]]), "y_pred holds 7"),
        (lambda: segmentation_scores([[3, 3]], [[0, 1]], void=3), "every label is void"),
        (lambda: segmentation_confusion([[0]], [[0]], sample_weight=[]), "1 samples but 0"),
        (lambda: expected_calibration_error([[0]], [[[1.0, 0.0]]], n_bins=0), "n_bins"),
        (lambda: expected_calibration_error([[0, 1]], [[[1.0, 0.0]]]), "2 labels but 1 rows"),
        (lambda: expected_calibration_error([[5]], [[[1.0, 0.0]]]), "holds 5"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_calibration_error_of_calibrated_and_overconfident_marginals(rng):
    n = 200_000
    confidence = rng.uniform(0.5, 1.0, n)
    correct = rng.random(n) < confidence  # right as often as they say
    proba = np.column_stack([confidence, 1 - confidence])
    labels = np.where(correct, 0, 1)
    assert expected_calibration_error([labels], [proba]) < 0.01
    sure = np.column_stack([np.ones(n), np.zeros(n)])  # always certain, right 75 % of the time
    assert expected_calibration_error([labels], [sure]) == pytest.approx(1 - correct.mean())
    void = np.where(rng.random(n) < 0.5, 9, labels)
    assert expected_calibration_error([void], [sure], void=9) == pytest.approx(
        1 - correct[void != 9].mean()
    )


def test_scorers_weigh_nodes_by_size_and_skip_the_ignored_label(rng):
    X, y = [], []
    for _ in range(6):
        labels = rng.integers(0, 2, size=6)
        features = np.column_stack([labels + rng.normal(0, 0.6, 6), np.ones(6)])
        edges = np.column_stack([np.arange(5), np.arange(1, 6)])
        X.append(GraphSample(features, edges, None, rng.integers(1, 9, size=6)))
        y.append(np.where(rng.random(6) < 0.2, 5, labels))
    model = PerturbMAPCRF("graph", ignore_label=5, random_state=0).fit(X, y)
    expected = segmentation_scores(
        y, model.predict(X), labels=[0, 1], void=5, sample_weight=[x.node_sizes for x in X]
    )
    assert global_accuracy_scorer(model, X, y) == pytest.approx(expected["global_accuracy"])
    assert class_average_accuracy_scorer(model, X, y) == expected["class_average_accuracy"]
    assert mean_iou_scorer(model, X, y) == expected["mean_iou"]
