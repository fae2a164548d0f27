"""The state of a fit: warm starts that continue only what they may, refits that fail cleanly,
and the label markers (``ignore_label``, ``unknown_label``) read by the same rule as labels, by
the estimators and by the scorers."""

from __future__ import annotations

import numpy as np
import pytest


# ---- a refit that fails leaves the fitted model as it was -------------------------------------
def test_a_failed_sequence_vectorizer_refit_keeps_its_vocabulary():
    from pmap_sklearn import SequenceVectorizer

    tokens = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    vectorizer = SequenceVectorizer().fit(tokens)
    before = vectorizer.transform(tokens)
    with pytest.raises(ValueError, match="is None"):
        vectorizer.set_params(n_features=16).fit([[{"w": None}]])  # the hasher's refit fails
    assert vectorizer.n_features_out_ == 3
    for a, b in zip(before, vectorizer.set_params(n_features=None).transform(tokens), strict=True):
        assert (a != b).nnz == 0


# ---- label markers: compared as labels are, read by the scorers ------------------------------
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
