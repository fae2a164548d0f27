import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from pmap_sklearn import (
    GraphSample,
    PerturbMAPCRF,
    mean_hamming_loss,
    weighted_hamming_loss,
    weighted_hamming_scorer,
)
from pmap_sklearn.metrics import balanced_node_weights


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


def test_weighted_scorer_uses_node_sizes_in_grid_search(rng):
    X, y = [], []
    for _ in range(12):
        labels = (rng.random(6) < 0.3).astype(int)
        features = labels[:, None] + 0.8 * rng.normal(size=(6, 2))
        X.append(GraphSample(features, [[0, 1], [1, 2], [3, 4], [4, 5]], None, rng.random(6) + 1))
        y.append(labels)
    search = GridSearchCV(
        PerturbMAPCRF("graph", max_iter=3, random_state=0),
        {"alpha": [1e-4, 1e-2]},
        cv=3,
        scoring=weighted_hamming_scorer,
    ).fit(X, y)
    model = search.best_estimator_
    sizes = [x.node_sizes for x in X]
    expected = 1 - weighted_hamming_loss(y, model.predict(X), sizes)
    assert weighted_hamming_scorer(model, X, y) == pytest.approx(expected)


def _tag_sequences(rng, n=40):
    tags = np.array(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    y_true = [list(tags[rng.integers(0, 5, size=rng.integers(1, 7))]) for _ in range(n)]
    y_pred = [[t if rng.random() < 0.7 else str(rng.choice(tags)) for t in s] for s in y_true]
    return y_true, y_pred


def test_crfsuite_reports_match_scikit_learn_on_the_pooled_labels(rng):
    from sklearn import metrics as sk

    from pmap_sklearn import metrics

    y_true, y_pred = _tag_sequences(rng)
    true, pred = np.concatenate(y_true), np.concatenate(y_pred)
    labels = ["B-LOC", "B-PER", "I-LOC", "I-PER"]
    assert metrics.flat_accuracy_score(y_true, y_pred) == sk.accuracy_score(true, pred)
    for ours, theirs in [
        (metrics.flat_precision_score, sk.precision_score),
        (metrics.flat_recall_score, sk.recall_score),
        (metrics.flat_f1_score, sk.f1_score),
    ]:
        expected = theirs(true, pred, labels=labels, average="weighted", zero_division=0)
        assert ours(y_true, y_pred, exclude="O") == pytest.approx(expected)
        assert ours(y_true, y_pred, labels=labels, average="macro") == pytest.approx(
            theirs(true, pred, labels=labels, average="macro", zero_division=0)
        )
    assert metrics.flat_fbeta_score(y_true, y_pred, 0.5, labels=labels) == pytest.approx(
        sk.fbeta_score(true, pred, beta=0.5, labels=labels, average="weighted")
    )
    assert metrics.flat_classification_report(
        y_true, y_pred, labels=labels, digits=3
    ) == sk.classification_report(true, pred, labels=labels, digits=3)
    whole = np.mean([list(t) == list(p) for t, p in zip(y_true, y_pred, strict=True)])
    assert metrics.sequence_accuracy_score(y_true, y_pred) == whole


def test_crfsuite_reports_agree_with_sklearn_crfsuite(rng):
    crfsuite_metrics = pytest.importorskip("sklearn_crfsuite.metrics")
    from pmap_sklearn import metrics

    y_true, y_pred = _tag_sequences(rng)
    labels = ["B-LOC", "B-PER", "I-LOC", "I-PER"]
    assert metrics.flat_accuracy_score(y_true, y_pred) == crfsuite_metrics.flat_accuracy_score(
        y_true, y_pred
    )
    assert metrics.sequence_accuracy_score(y_true, y_pred) == pytest.approx(
        crfsuite_metrics.sequence_accuracy_score(y_true, y_pred)
    )
    assert metrics.flat_classification_report(
        y_true, y_pred, labels=labels, digits=3
    ) == crfsuite_metrics.flat_classification_report(y_true, y_pred, labels=labels, digits=3)
    for name in ("flat_precision_score", "flat_recall_score", "flat_f1_score"):
        ours = getattr(metrics, name)(y_true, y_pred, labels=labels, average="weighted")
        theirs = getattr(crfsuite_metrics, name)(y_true, y_pred, labels=labels, average="weighted")
        assert ours == pytest.approx(theirs)


def test_crfsuite_reports_leave_unknown_labels_out():
    from pmap_sklearn import metrics

    y_true = [["B-PER", "?", "O"], ["?"]]
    y_pred = [["B-PER", "O", "B-LOC"], ["O"]]
    assert metrics.flat_accuracy_score(y_true, y_pred, unknown_label="?") == 0.5
    assert metrics.sequence_accuracy_score(y_true, y_pred, unknown_label="?") == 0.5
    report = metrics.flat_classification_report(
        y_true, y_pred, unknown_label="?", output_dict=True, zero_division=0
    )
    assert "?" not in report and report["B-PER"]["support"] == 1
    with pytest.raises(ValueError, match="2 labels but y_pred has 1"):
        metrics.sequence_accuracy_score([["O", "O"]], [["O"]])
