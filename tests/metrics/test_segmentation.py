"""Segmentation scores against direct counts."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import confusion_matrix

from pmap_sklearn.metrics import (
    expected_calibration_error,
    segmentation_confusion,
    segmentation_scores,
)

from ..helpers import FAST


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


@FAST
@given(st.integers(1, 25), st.integers(1, 4), st.integers(0, 2**31 - 1), st.booleans())
def test_segmentation_scores_match_a_brute_force_confusion(n_nodes, n_classes, seed, weighted):
    rng = np.random.default_rng(seed)
    true = rng.integers(n_classes, size=n_nodes)
    pred = rng.integers(n_classes, size=n_nodes)
    weight = rng.uniform(0, 3, size=n_nodes) if weighted else np.ones(n_nodes)
    labels = rng.permutation(n_classes)  # any order: the matrix's rows and columns
    expected = np.zeros((n_classes, n_classes))
    for t, p, c in zip(true, pred, weight, strict=True):
        expected[list(labels).index(t), list(labels).index(p)] += c
    confusion = segmentation_confusion([true], [pred], labels=labels, sample_weight=[weight])
    np.testing.assert_allclose(confusion, expected)
    if expected.sum() > 0:
        scores = segmentation_scores([true], [pred], labels=labels, sample_weight=[weight])
        assert scores["global_accuracy"] == pytest.approx(np.trace(expected) / expected.sum())
        assert 0.0 <= scores["mean_iou"] <= scores["class_average_accuracy"] + 1e-12 <= 1 + 1e-9


def test_segmentation_scores_refuse_negative_weights_and_read_labels_in_their_order():
    with pytest.raises(ValueError, match="sample_weight must hold finite weights >= 0"):
        segmentation_scores([[0, 1]], [[0, 0]], sample_weight=[[1.0, -1.0]])
    scores = segmentation_scores([[0, 1, 2]], [[0, 1, 1]], labels=[2, 0, 1])
    assert scores["confusion"].tolist() == [[0, 0, 1], [0, 1, 0], [0, 0, 1]]
    assert scores["labels"].tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="distinct"):
        segmentation_scores([[0, 1]], [[0, 1]], labels=[0, 1, 0])
