"""Hostile inputs of the newest surfaces: inputs read as something else, numerics at the edge of
double precision, metrics given what is not a probability, memory asked for by one label, and
cryptic or lenient meta-estimator arguments. Each gets a named error or a correct result;
property tests (hypothesis) pin the metrics and the superpixel helpers against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from pmap_sklearn.metrics import (
    entity_f1_score,
    entity_spans,
    expected_calibration_error,
    flat_f1_score,
    mean_hamming_loss,
    segmentation_confusion,
    segmentation_scores,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- metrics: inputs read as something else, probabilities that are not -----------------------
@pytest.mark.parametrize("metric", [entity_f1_score, flat_f1_score, mean_hamming_loss])
def test_one_flat_sequence_is_refused_not_read_as_samples(metric):
    with pytest.raises(ValueError, match=r"one flat sequence .* e.g. \[y_true\]"):
        metric(["B-PER", "I-PER"], ["B-PER", "O"])
    assert entity_f1_score([["B-PER", "I-PER"]], [["B-PER", "O"]]) == 0.0


@pytest.mark.parametrize(
    "proba, message",
    [
        ([[[3.0, -1.0], [0.5, 2.0]]], r"outside \[0, 1\].*logits"),  # logits
        ([[[1.5, 0.0], [0.0, 1.0]]], r"outside \[0, 1\]"),
        ([[[0.5, 0.2], [0.0, 1.0]]], "sums to 0.7"),
        ([[[np.nan, 0.5], [0.0, 1.0]]], "NaN"),
    ],
)
def test_ece_refuses_what_is_not_a_probability(proba, message):
    with pytest.raises(ValueError, match=message):
        expected_calibration_error([[0, 1]], proba)


def test_ece_refuses_ragged_classes_and_takes_any_number_of_bins():
    with pytest.raises(ValueError, match="same classes"):
        expected_calibration_error([[0], [1]], [[[0.5, 0.5]], [[0.2, 0.3, 0.5]]])
    proba = [[[0.9, 0.1], [0.2, 0.8]]]
    # one node per bin once the bins are fine: the mean of |correct - confidence|
    assert expected_calibration_error([[0, 1]], proba, n_bins=10**9) == pytest.approx(0.15)
    assert expected_calibration_error([[0, 1]], proba, n_bins=10**18) == pytest.approx(0.15)


def _ece_brute(labels, proba, n_bins):
    """Guo et al.'s ECE by its definition: a loop over the bins."""
    confidence, correct = proba.max(axis=1), proba.argmax(axis=1) == labels
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        inside = bins == b
        if inside.any():
            total += inside.sum() * abs(correct[inside].mean() - confidence[inside].mean())
    return total / len(labels)


@FAST
@given(
    st.integers(1, 30),
    st.integers(2, 5),
    st.integers(1, 40),
    st.integers(0, 2**31 - 1),
)
def test_ece_matches_its_definition(n_nodes, n_classes, n_bins, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_nodes, n_classes)) * rng.uniform(0.1, 5)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = rng.integers(n_classes, size=n_nodes)
    split = rng.integers(0, n_nodes + 1)  # the same nodes as two samples
    ece = expected_calibration_error(
        [labels[:split], labels[split:]], [proba[:split], proba[split:]], n_bins=n_bins
    )
    assert ece == pytest.approx(_ece_brute(labels, proba, n_bins), abs=1e-12)
    assert 0.0 <= ece <= 1.0


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


TAGS = st.sampled_from(["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-PER"])


def _hamming_brute(y_true, y_pred):
    return np.mean(
        [
            np.mean([a != b for a, b in zip(t, p, strict=True)])
            for t, p in zip(y_true, y_pred, strict=True)
        ]
    )


@FAST
@given(st.lists(st.lists(st.tuples(TAGS, TAGS), min_size=1, max_size=8), min_size=1, max_size=5))
def test_entity_and_flat_scores_match_their_definitions(sentences):
    y_true = [[t for t, _ in s] for s in sentences]
    y_pred = [[p for _, p in s] for s in sentences]
    true = {(i, *span) for i, tags in enumerate(y_true) for span in entity_spans(tags)}
    pred = {(i, *span) for i, tags in enumerate(y_pred) for span in entity_spans(tags)}
    correct = len(true & pred)
    expected = 2 * correct / (len(true) + len(pred)) if true or pred else 0.0
    assert entity_f1_score(y_true, y_pred) == pytest.approx(expected)
    assert entity_f1_score(y_true, y_true) == (1.0 if true else 0.0)
    assert mean_hamming_loss(y_true, y_pred) == pytest.approx(_hamming_brute(y_true, y_pred))
    pooled_true, pooled_pred = np.concatenate(y_true), np.concatenate(y_pred)
    labels = sorted(set(pooled_true) | set(pooled_pred))
    expected_flat = f1_score(
        pooled_true, pooled_pred, labels=labels, average="weighted", zero_division=0
    )
    assert flat_f1_score(y_true, y_pred) == pytest.approx(expected_flat)
