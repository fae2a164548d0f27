"""Hamming losses, class weights and multi-label scores."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import accuracy_score, f1_score, hamming_loss

from pmap_sklearn import (
    MultiLabelStructure,
    PerturbMAPCRF,
    hamming_scorer,
    mean_hamming_loss,
    weighted_hamming_loss,
)
from pmap_sklearn._validation import check_probabilities
from pmap_sklearn.metrics import (
    balanced_node_weights,
    example_f1_scorer,
    multilabel_scores,
    segmentation_scores,
)

from ..helpers import _correlated


def test_hamming_loss_is_the_mean_of_per_sample_losses():
    # sample losses 1/4 and 1/2 -> 3/8 (not 2/6 pooled over nodes)
    assert mean_hamming_loss([[0, 1, 2, 3], [1, 1]], [[0, 1, 2, 0], [1, 0]]) == pytest.approx(3 / 8)
    assert mean_hamming_loss([[0, -1, 2]], [[0, 1, 1]]) == pytest.approx(1 / 2)  # -1 skipped
    with pytest.raises(ValueError, match="sample 0: y_true has 2 labels but y_pred has 3"):
        mean_hamming_loss([[0, 1]], [[0, 1, 1]])
    with pytest.raises(ValueError, match="1 samples but y_pred has 2"):
        mean_hamming_loss([[0, 1]], [[0, 1], [1]])


def test_balanced_weights_follow_the_spec():
    sizes = np.array([1.0, 3.0, 2.0, 4.0])
    labels = np.array([1, 0, 0, 0])  # V_fg = 1, V_bg = 9
    theta = balanced_node_weights(labels, sizes)
    np.testing.assert_allclose(theta[:, 1], sizes / 2)
    np.testing.assert_allclose(theta[:, 0], sizes / 18)
    assert theta[np.arange(4), labels].sum() == pytest.approx(1.0)
    soft = balanced_node_weights(np.eye(2)[labels], sizes)  # marginals give the same weights
    np.testing.assert_allclose(soft, theta)


def test_weighted_hamming_balances_classes():
    truth = [np.array([1, 0, 0, 0, 0, 0, 0, 0, 0, 0])]
    all_background = [np.zeros(10, dtype=int)]
    assert mean_hamming_loss(truth, all_background) == pytest.approx(0.1)
    assert weighted_hamming_loss(truth, all_background) == pytest.approx(0.5)
    sizes = [np.array([9.0] + [1.0] * 9)]  # the foreground node is half the image
    assert weighted_hamming_loss(truth, all_background, sizes) == pytest.approx(0.5)
    assert weighted_hamming_loss(truth, [1 - truth[0]], sizes) == pytest.approx(1.0)


def test_multi_label_metrics_are_scikit_learns():
    X, Y = _correlated(120)
    model = PerturbMAPCRF(MultiLabelStructure("tree"), random_state=0).fit(X, Y)
    predicted = model.predict(X)
    scores = multilabel_scores(Y, predicted)
    assert scores["hamming_loss"] == pytest.approx(hamming_loss(Y, predicted))
    assert scores["subset_accuracy"] == pytest.approx(accuracy_score(Y, predicted))
    assert scores["example_f1"] == pytest.approx(
        f1_score(Y, predicted, average="samples", zero_division=1.0)
    )
    assert example_f1_scorer(model, X, Y) == pytest.approx(scores["example_f1"])
    assert hamming_scorer(model, X, sparse.csr_matrix(Y)) == pytest.approx(
        1 - scores["hamming_loss"]
    )
    empty = np.zeros((2, 3), int)  # no label, none predicted: a perfect example-based F1
    assert multilabel_scores(empty, empty)["example_f1"] == 1.0


@pytest.mark.parametrize(
    "y_true, y_pred, match",
    [
        ([[1, -1, 0], [0, 1, 1]], [[1, 0, 0], [0, 1, 1]], "y_true holds -1: .*mean_hamming_loss"),
        ([[1, 0, 0], [1, 1, 1]], [[1, 2, 0], [0, 0, 0]], "y_pred holds 2: .*0/1 indicator"),
        (sparse.csr_matrix([[1, 0], [0, 2]]), [[1, 0], [0, 1]], "y_true holds 2"),
        ([["a", "b"]], [[0, 1]], "y_true holds 'a'"),
        ([[1, None], [0, 1]], [[1, 0], [0, 1]], "y_true holds None: "),
        ([[1, 0]], [[1, 0, 1]], r"y_true has shape \(1, 2\) but y_pred has shape \(1, 3\)"),
        ([1, 0], [1, 0], r"y_true must be an \(n_samples, n_labels\) 0/1 indicator"),
    ],
)
def test_multilabel_scores_take_0_1_indicators_only(y_true, y_pred, match):
    """Labels outside {0, 1} are refused by argument, not handed to scikit-learn (which reads
    them as another kind of target or scores them)."""
    with pytest.raises(ValueError, match=match):
        multilabel_scores(y_true, y_pred)
    ok = multilabel_scores(np.array([[True, False]]), sparse.csr_matrix([[1.0, 0.0]]))
    assert ok == {"hamming_loss": 0.0, "subset_accuracy": 1.0, "example_f1": 1.0}


def test_balanced_node_weights_take_distributions_only():
    with pytest.raises(ValueError, match="label_distribution: row 1 sums to 2"):
        balanced_node_weights([[1.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(
        balanced_node_weights([[1.0, 0.0], [0.0, 1.0]]), balanced_node_weights([0, 1])
    )


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: weighted_hamming_loss([[0, 1]], [[0, 0]], node_sizes=[np.array([1 + 1j, 2])]),
            "sample 0: node_sizes: Complex data",
        ),
        (
            lambda: balanced_node_weights([0, 1], node_sizes=np.array([1, 2 + 0j])),
            "node_sizes: Complex data",
        ),
        (
            lambda: balanced_node_weights(np.array([[0.5 + 0j, 0.5], [1, 0]])),
            "label_distribution: Complex data",
        ),
        (
            lambda: segmentation_scores([[0, 1]], [[0, 0]], sample_weight=[np.array([1j, 2])]),
            "sample 0: sample_weight: Complex data",
        ),
        (
            lambda: check_probabilities(np.array([[0.5 + 0j, 0.5]]), "y_proba"),
            "y_proba: Complex data",
        ),
        (
            lambda: check_probabilities(np.array([["0.5", "0.5"]]), "y_proba"),
            "y_proba must be numeric, got strings",
        ),
    ],
)
def test_metric_helpers_refuse_complex_numbers(call, match):
    """Complex node sizes, weights or probabilities are refused by name, not cast to their
    real part with numpy's ComplexWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning would fail here, not pass
        with pytest.raises(ValueError, match=match):
            call()
