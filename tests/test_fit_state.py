"""The state of a fit: warm starts that continue only what they may, refits that fail cleanly,
and the label markers (``ignore_label``, ``unknown_label``) read by the same rule as labels, by
the estimators and by the scorers."""

from __future__ import annotations

import numpy as np
import pytest

from pmap_sklearn import MeanFieldCRF, StructuredSVM
from pmap_sklearn.datasets import make_chain_data


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=12, random_state=7)
    return list(data.data), list(data.target)


def _other(chains):
    """Other samples of the same kind: the chains of another seed."""
    data = make_chain_data(n_samples=12, random_state=8)
    return list(data.data), list(data.target)


# ---- warm starts continue a state only on its data and parameters ----------------------------
def test_bcfw_warm_start_on_other_data_is_a_fresh_fit(chains):
    """A's dual blocks on B gave a negative duality gap after two passes and a training
    accuracy of 0.056 (a cold fit: 1.0)."""
    (XA, YA), (XB, YB) = chains, _other(chains)
    warm = StructuredSVM(alpha=0.01, warm_start=True, random_state=0).fit(XA, YA).fit(XB, YB)
    cold = StructuredSVM(alpha=0.01, warm_start=True, random_state=0).fit(XB, YB)
    np.testing.assert_array_equal(warm.coef_, cold.coef_)
    assert min(warm.duality_gaps_) >= -1e-9
    assert warm.score(XB, YB) == cold.score(XB, YB) == 1.0
    warm.fit(XB, YB)  # the same data again: it continues (the gap keeps falling)
    assert warm.duality_gaps_[-1] <= cold.duality_gaps_[-1] + 1e-12


def test_subgradient_warm_start_after_a_new_alpha_is_a_fresh_fit(chains):
    """The average kept the old alpha's iterates: objective 450 against 3.94 cold."""
    X, y = chains
    warm = StructuredSVM(solver="subgradient", warm_start=True, random_state=0).fit(X, y)
    warm.set_params(alpha=0.1).fit(X, y)
    cold = StructuredSVM(solver="subgradient", alpha=0.1, random_state=0).fit(X, y)
    np.testing.assert_allclose(warm.coef_, cold.coef_)
    assert warm.loss_curve_[-1] == pytest.approx(cold.loss_curve_[-1])


@pytest.mark.parametrize("change", [{"n_iterations": 8}, {"damping": 0.3}])
def test_mean_field_warm_start_predicts_with_the_new_solver(chains, change):
    """Learning used the new value while prediction kept the old ``structure_.solver_``."""
    X, y = chains
    params = dict(structure="chain", max_iter=3, random_state=0)
    warm = MeanFieldCRF(warm_start=True, **params).fit(X, y).set_params(**change).fit(X, y)
    cold = MeanFieldCRF(**params, **change).fit(X, y)
    name, value = next(iter(change.items()))
    assert getattr(warm.structure_.solver_, name) == value
    np.testing.assert_allclose(warm.coef_, cold.coef_)
    for a, b in zip(warm.predict_marginals(X), cold.predict_marginals(X), strict=True):
        np.testing.assert_allclose(a, b)


# ---- a refit that fails leaves the fitted model as it was -------------------------------------
def test_a_two_stage_refit_whose_stage_two_fails_keeps_the_previous_model(chains):
    """A failed stage two kept the new ``n_features_in_`` beside the old stages, and predict
    failed on old and new data alike."""
    from pmap_sklearn import PerturbMAPCRF, TwoStageCRF

    X, y = chains
    model = TwoStageCRF(crf=PerturbMAPCRF("chain", max_iter=2, random_state=0), cv=2).fit(X, y)
    before, n_features = model.predict(X), model.n_features_in_
    wider = [np.hstack([x, x]) for x in X]
    model.set_params(crf__max_iter=0)  # stage two refuses it, after stage one has run
    with pytest.raises(ValueError, match="max_iter"):
        model.fit(wider, y)
    assert model.n_features_in_ == n_features
    for a, b in zip(before, model.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)


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
def _learners():
    from pmap_sklearn import ChainCRF, PerturbMAPCRF, PiecewiseCRF

    return [
        PerturbMAPCRF("chain", max_iter=2, random_state=0),
        ChainCRF(max_iter=20),
        MeanFieldCRF("chain", max_iter=2, random_state=0),
        PiecewiseCRF("chain", max_iter=10, random_state=0),
        StructuredSVM(max_iter=2, random_state=0),
    ]


@pytest.mark.parametrize("model", _learners(), ids=lambda m: type(m).__name__)
def test_a_marker_of_another_kind_than_the_labels_is_refused(chains, model):
    """``ignore_label=11`` never matched the string labels ``"11"``: the void label was
    silently learnt as a class."""
    X, y = chains
    words = [np.where(t == 0, "11", np.where(t == 1, "a", "b")) for t in y]
    with pytest.raises(ValueError, match=r"ignore_label=11 is a number but the labels are.*'11'"):
        model.set_params(ignore_label=11).fit(X, words)
    with pytest.raises(ValueError, match="unknown_label='a' is a string but the labels are"):
        model.set_params(ignore_label=None, unknown_label="a").fit(X, y)
    fitted = model.set_params(ignore_label="11", unknown_label=-1).fit(X, words)
    np.testing.assert_array_equal(fitted.classes_, ["a", "b"])  # the void nodes are left out
    assert fitted.score(X, words) == pytest.approx(
        1
        - np.mean(
            [
                np.mean(p[t != "11"] != t[t != "11"])
                for p, t in zip(fitted.predict(X), words, strict=True)
            ]
        )
    )


def test_two_stage_refuses_a_marker_of_another_kind(chains):
    from pmap_sklearn import PerturbMAPCRF, TwoStageCRF

    X, y = chains
    words = [np.where(t == 0, "11", "a") for t in y]
    with pytest.raises(ValueError, match="ignore_label=11 is a number"):
        TwoStageCRF(crf=PerturbMAPCRF("chain", max_iter=1), ignore_label=11, cv=2).fit(X, words)


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


def test_a_warm_start_reads_the_data_by_content(chains):
    """Copies of the same samples continue the fit; one value changed in one sample (dense or
    sparse) is other data, and the warm start fits afresh."""
    from scipy import sparse

    from pmap_sklearn import PerturbMAPCRF

    X, y = chains
    for kind in (np.asarray, sparse.csr_matrix):
        samples = [kind(x) for x in X]
        model = PerturbMAPCRF("chain", max_iter=2, tol=None, warm_start=True, random_state=0)
        t = model.fit(samples, y).t_
        assert model.fit([kind(np.array(x)) for x in X], [t.copy() for t in y]).t_ == 2 * t
        changed = [np.array(x) for x in X]
        changed[5][0, 0] += 1e-9
        assert model.fit([kind(x) for x in changed], y).t_ == t
