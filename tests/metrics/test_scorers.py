"""The scorers, in model selection and with ignored nodes."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from pmap_sklearn import (
    ChainCRF,
    GraphSample,
    PerturbMAPCRF,
    hamming_scorer,
    weighted_hamming_loss,
    weighted_hamming_scorer,
)
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.metrics import (
    class_average_accuracy_scorer,
    global_accuracy_scorer,
    mean_iou_scorer,
    segmentation_scores,
)


def _graphs_with_void(seed=0, n=8):
    from pmap_sklearn import GraphSample

    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        labels = rng.integers(0, 2, size=8)
        features = np.column_stack([labels + rng.normal(0, 0.8, 8), rng.normal(size=8)])
        edges = np.column_stack([np.arange(7), np.arange(1, 8)])
        X.append(GraphSample(features, edges, None, rng.integers(1, 9, size=8)))
        y.append(np.where(rng.random(8) < 0.3, 255, labels))
    return X, y


def test_hamming_scorers_leave_out_the_estimators_ignored_nodes():
    """They counted the ignored nodes as errors: 0.51 against score()'s 0.70."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pmap_sklearn import (
        NodeTransformer,
        PerturbMAPCRF,
        hamming_scorer,
        weighted_hamming_loss,
        weighted_hamming_scorer,
    )

    X, y = _graphs_with_void()
    crf = PerturbMAPCRF("graph", ignore_label=255, max_iter=5, random_state=0)
    for model in (crf, make_pipeline(NodeTransformer(StandardScaler()), crf)):
        model.fit(X, y)
        score = model.score(X, y)
        assert 0.6 < score <= 1.0
        assert hamming_scorer(model, X, y) == pytest.approx(score)
        sizes = [x.node_sizes for x in X]
        kept = [t != 255 for t in y]
        expected = 1 - weighted_hamming_loss(
            [t[k] for t, k in zip(y, kept, strict=True)],
            [p[k] for p, k in zip(model.predict(X), kept, strict=True)],
            [s[k] for s, k in zip(sizes, kept, strict=True)],
        )
        assert weighted_hamming_scorer(model, X, y) == pytest.approx(expected)


def test_segmentation_scorers_see_the_ignore_label_of_a_pipelines_crf():
    """In GridSearchCV every score of a pipeline was NaN (with a warning only): the scorers did
    not see the CRF's ignore_label."""
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pmap_sklearn import NodeTransformer, PerturbMAPCRF
    from pmap_sklearn.metrics import mean_iou_scorer, segmentation_scores

    X, y = _graphs_with_void(n=12)
    crf = PerturbMAPCRF("graph", ignore_label=255, max_iter=3, random_state=0)
    pipe = make_pipeline(NodeTransformer(StandardScaler()), crf).fit(X, y)
    expected = segmentation_scores(
        y, pipe.predict(X), labels=[0, 1], void=255, sample_weight=[x.node_sizes for x in X]
    )
    assert mean_iou_scorer(pipe, X, y) == pytest.approx(expected["mean_iou"])
    search = GridSearchCV(
        pipe,
        {"perturbmapcrf__alpha": [1e-4, 1e3]},
        scoring=mean_iou_scorer,
        cv=KFold(2),
        error_score="raise",
    ).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all() and scores[0] > scores[1] + 0.05  # alpha 1e3 underfits
    assert search.best_params_["perturbmapcrf__alpha"] == 1e-4


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


def test_score_lays_grid_predictions_out_as_the_labels_it_is_given(rng):
    """A grid's labels may be given flat; its predictions are images: the estimator's score
    and the Hamming scorers compare them pixel by pixel, not refuse the shapes."""
    from pmap_sklearn import hamming_scorer

    images = [rng.integers(0, 2, size=(4, 5)) for _ in range(4)]
    X = [(m + rng.normal(0, 0.5, m.shape))[:, :, None] for m in images]
    model = PerturbMAPCRF("grid", max_iter=3, random_state=0).fit(X, images)
    flat = [m.ravel() for m in images]
    score = model.score(X, images)
    assert model.score(X, flat) == pytest.approx(score)
    assert hamming_scorer(model, X, flat) == pytest.approx(score)
    assert weighted_hamming_scorer(model, X, flat) == pytest.approx(
        weighted_hamming_scorer(model, X, images)
    )


def test_example_f1_scorer_needs_multilabel_data(rng):
    """On a multi-label model it is scikit-learn's example-based F1 (with sample weights); a
    model on chains or grids, or labels that are not an indicator matrix, are refused by name
    instead of failing inside numpy."""
    from sklearn.datasets import make_multilabel_classification
    from sklearn.dummy import DummyClassifier
    from sklearn.metrics import f1_score

    from pmap_sklearn import ChainCRF, MultiLabelStructure, hamming_scorer
    from pmap_sklearn.datasets import make_chain_data
    from pmap_sklearn.metrics import example_f1_scorer, flat_f1_scorer

    X, Y = make_multilabel_classification(40, n_features=4, n_classes=3, random_state=0)
    multilabel = ChainCRF(MultiLabelStructure("tree")).fit(X, Y)
    predicted = multilabel.predict(X)
    expected = f1_score(Y, predicted, average="samples", zero_division=1.0)
    assert example_f1_scorer(multilabel, X, Y) == pytest.approx(expected)
    weights = rng.random(40)
    assert example_f1_scorer(multilabel, X, Y, sample_weight=weights) == pytest.approx(
        f1_score(Y, predicted, average="samples", zero_division=1.0, sample_weight=weights)
    )
    # the scorers of node labels read a multi-label model's rows as its nodes
    assert hamming_scorer(multilabel, X, Y) == pytest.approx(1 - np.mean(predicted != Y))
    assert 0 < flat_f1_scorer(multilabel, X, Y) <= 1

    data = make_chain_data(n_samples=8, n_states=3, n_features=3, random_state=0)
    chain = ChainCRF(max_iter=5).fit(data.data, data.target)
    with pytest.raises(ValueError, match="example_f1_scorer needs multi-label data.*chain"):
        example_f1_scorer(chain, data.data, data.target)
    images = [rng.integers(0, 2, size=(3, 4)) for _ in range(3)]
    grid = PerturbMAPCRF("grid", max_iter=2, random_state=0).fit(
        [m[:, :, None] + rng.normal(0, 0.5, (3, 4, 1)) for m in images], images
    )
    with pytest.raises(ValueError, match="example_f1_scorer needs multi-label data.*grid"):
        example_f1_scorer(grid, [m[:, :, None] * 1.0 for m in images], images)
    # a model without a structure: the labels decide
    dummy = DummyClassifier().fit(np.zeros((2, 1)), [0, 1])
    ragged = [np.array([0, 1]), np.array([1])]
    with pytest.raises(ValueError, match=r"example_f1_scorer .* \(n_samples, n_labels\)"):
        example_f1_scorer(dummy, np.zeros((2, 1)), ragged)


def test_hamming_scorers_warn_of_labels_the_model_never_saw():
    """As ``score``: a label outside ``classes_`` counts as an error, with a warning naming it,
    at the user's call."""
    data = make_chain_data(n_samples=8, random_state=0)
    model = ChainCRF(max_iter=20).fit(data.data, data.target)
    unseen = [np.where(np.arange(len(t)) == 0, 7, t) for t in data.target]
    values = []
    for scorer in (hamming_scorer, weighted_hamming_scorer):
        with pytest.warns(UserWarning, match="never saw: 7 ") as caught:
            values.append(scorer(model, data.data, unseen))
        assert caught[0].filename == __file__
    with pytest.warns(UserWarning, match="never saw: 7 "):
        assert values[0] == pytest.approx(model.score(data.data, unseen))
    assert values[1] < 1.0  # class-balanced: the nodes of 7 are errors
