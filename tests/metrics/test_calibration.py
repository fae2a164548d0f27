"""Calibration error and reliability curves."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmap_sklearn.metrics import expected_calibration_error, reliability_curve

from ..helpers import FAST


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


@pytest.mark.parametrize("metric", [expected_calibration_error, reliability_curve])
def test_flat_flags_with_marginal_rows_are_refused(metric):
    """Flat bools beside an (n, 2) array would be read as n samples of one node each."""
    right = np.array([True, False, True])
    proba = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8]])
    with pytest.raises(ValueError, match=r"y_true is a flat array of 3 bools but y_proba has "):
        metric(right, proba)
    with pytest.raises(ValueError, match=r"flat array of 3 values .* shape \(3, 2\)"):
        metric([0, 1, 1], proba)
    assert metric([[0, 1, 1]], [proba]) is not None  # the same nodes, as one sample


@pytest.mark.parametrize(
    "y_true, y_proba", [([[0, 1, 1]], [[0.2, 0.7, 0.9]]), ([[0, 1]], [[0.3, 0.7]])]
)
def test_ece_says_one_probability_per_node_is_not_marginals(y_true, y_proba):
    n = len(y_true[0])
    with pytest.raises(ValueError, match=rf"y_proba\[0\] has shape \({n},\), the shape of y_true"):
        expected_calibration_error(y_true, y_proba)
    p = np.asarray(y_proba[0])
    two_columns = [np.stack([1 - p, p], axis=-1)]  # the remedy the message gives
    assert 0 <= expected_calibration_error(y_true, two_columns) <= 1


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


def test_reliability_curve_gives_the_calibration_error(rng):
    y_true = [rng.integers(0, 3, size=n) for n in (5, 40, 17)]
    y_proba = [rng.dirichlet(np.ones(3) * 0.5, size=len(t)) for t in y_true]
    for n_bins in (1, 7, 15):
        curve = reliability_curve(y_true, y_proba, n_bins=n_bins)
        kept = curve.count > 0
        assert curve.count.sum() == 62 and len(curve.bin_edges) == n_bins + 1
        gap = np.sum(curve.count[kept] * np.abs(curve.accuracy[kept] - curve.confidence[kept]))
        np.testing.assert_allclose(
            gap / curve.count.sum(), expected_calibration_error(y_true, y_proba, n_bins=n_bins)
        )
        assert np.isnan(curve.accuracy[~kept]).all()
        inside = (curve.bin_edges[:-1][kept] <= curve.confidence[kept]) & (
            curve.confidence[kept] <= curve.bin_edges[1:][kept]
        )
        assert inside.all()
    top = np.concatenate([p.max(axis=1) for p in y_proba])
    right = np.concatenate([p.argmax(axis=1) == t for p, t in zip(y_proba, y_true, strict=True)])
    events = reliability_curve(right, top)  # the same items as events: the same curve
    np.testing.assert_allclose(events.accuracy, reliability_curve(y_true, y_proba).accuracy)
    np.testing.assert_allclose(
        expected_calibration_error(right.astype(int), top.tolist()),
        expected_calibration_error(y_true, y_proba),
    )


def test_reliability_curve_refuses_bad_events():
    with pytest.raises(ValueError, match="outside"):
        reliability_curve([True, False], [0.5, 1.5])
    with pytest.raises(ValueError, match="bools or 0/1"):
        reliability_curve([2, 0], [0.5, 0.5])
    with pytest.raises(ValueError, match="must hold whether"):
        reliability_curve([True], [0.5, 0.5])
    with pytest.raises(ValueError, match="classes and void"):
        reliability_curve([True], [0.5], classes=[0, 1])
    with pytest.raises(ValueError, match="n_bins"):
        reliability_curve([True], [0.5], n_bins=0)
    with pytest.raises(ValueError, match="sums to"):
        reliability_curve([[0]], [[[0.5, 0.6]]])
