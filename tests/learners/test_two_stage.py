"""TwoStageCRF: the out-of-fold probabilities stage two learns from, every kind of sample, the
gain of the learned pairwise terms over the classifier alone, and the errors."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, KFold, ShuffleSplit, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import (
    GraphSample,
    GraphStructure,
    GridStructure,
    PerturbMAPCRF,
    SequenceVectorizer,
    StructuredSVM,
    TwoStageCRF,
    grid_edges,
)
from pmap_sklearn._optim import defaults
from pmap_sklearn._optim.defaults import TWO_STAGE_OFFSET_SHARES as CLASS_OFFSET_SHARES
from pmap_sklearn._optim.defaults import TWO_STAGE_PAIRWISE_SCALES as PAIRWISE_SCALES
from pmap_sklearn._optim.defaults import TWO_STAGE_POTTS_WEIGHTS as POTTS_WEIGHTS
from pmap_sklearn._validation import check_generator
from pmap_sklearn.datasets import make_chain_data, make_grid_data, token_features
from pmap_sklearn.learners._estimator import stage_two_fit
from pmap_sklearn.learners._two_stage_choice import (
    _balancing_offsets,
    _class_shares,
    _keeps_stage_one,
    _smoothed,
    _uniform_potts,
)

#: Stage two as fitted, with nothing chosen on held-out samples.
AS_FITTED = dict(unary="matrix", pairwise_scale=1.0)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def test_stage_two_learns_from_out_of_fold_probabilities():
    """Stage two is fitted on the log-probabilities of classifiers that never saw the sample:
    rebuilt by hand from the same folds, they give the same stage-two weights."""
    data = make_chain_data(n_samples=30, n_states=3, n_features=4, random_state=0)
    X, y = data.data, data.target
    crf = PerturbMAPCRF(max_iter=3, tol=None, random_state=0)
    model = TwoStageCRF(crf=crf, cv=3, random_state=7, **AS_FITTED).fit(X, y)
    seed = check_generator(7).integers(2**31)
    folds = KFold(3, shuffle=True, random_state=seed).split(np.arange(len(X)))
    stage_two = _out_of_fold_by_hand(X, y, folds)
    with stage_two_fit():  # stage two by hand: a fit on log-probabilities, on purpose
        by_hand = clone(crf).fit(stage_two, y)
    np.testing.assert_allclose(model.crf_.coef_, by_hand.coef_)
    # and at prediction time the classifier fitted on every node gives them
    full = LogisticRegression(max_iter=1000).fit(np.vstack(X), np.concatenate(y))
    np.testing.assert_allclose(
        model.stage_two_samples(X[:1])[0], np.log(np.maximum(full.predict_proba(X[0]), 1e-6))
    )


def _out_of_fold_by_hand(X, y, folds):
    """Stage two's samples rebuilt from ``folds`` with the default classifier."""
    stage_two = [None] * len(X)
    for train, test in folds:
        fold = LogisticRegression(max_iter=1000).fit(
            np.vstack([X[i] for i in train]), np.concatenate([y[i] for i in train])
        )
        for i in test:
            stage_two[i] = np.log(np.maximum(fold.predict_proba(X[i]), 1e-6))
    return stage_two


@pytest.mark.parametrize("cv", [3, GroupKFold(3)])
def test_groups_stay_in_one_fold(cv):
    """With ``groups`` (an int ``cv``, or a group splitter) stage two learns from the folds of
    GroupKFold: no group is both in a classifier's training nodes and held out by it."""
    data = make_chain_data(n_samples=30, n_states=3, n_features=4, random_state=0)
    X, y = data.data, data.target
    groups = np.repeat(np.arange(6), 5)  # e.g. six documents of five sentences
    crf = PerturbMAPCRF(max_iter=3, tol=None, random_state=0)
    model = TwoStageCRF(crf=crf, cv=cv, random_state=7, **AS_FITTED).fit(X, y, groups=groups)
    folds = list(GroupKFold(3).split(np.arange(len(X)), groups=groups))
    for train, test in folds:
        assert not set(groups[train]) & set(groups[test])
    stage_two = _out_of_fold_by_hand(X, y, folds)
    with stage_two_fit():  # stage two by hand: a fit on log-probabilities, on purpose
        by_hand = clone(crf).fit(stage_two, y)
    np.testing.assert_allclose(model.crf_.coef_, by_hand.coef_)


def test_bad_groups_and_splitters_are_refused():
    data = make_chain_data(n_samples=12, random_state=0)
    X, y = data.data, data.target
    with pytest.raises(ValueError, match="groups has shape \\(11,\\) but X has 12 samples"):
        TwoStageCRF(cv=2).fit(X, y, groups=np.arange(11))
    with pytest.raises(ValueError, match="single group"):
        TwoStageCRF(cv=2).fit(X, y, groups=np.zeros(12))
    with pytest.raises(ValueError, match="does not partition the samples"):
        TwoStageCRF(cv=ShuffleSplit(3, random_state=0)).fit(X, y)
    with pytest.raises(InvalidParameterError, match="cv"):
        TwoStageCRF(cv="five").fit(X, y)


def test_learned_pairwise_terms_beat_the_classifier_alone():
    """On noisy blocky grids the CRF on the classifier's probabilities is more accurate on
    held-out images than the classifier's own per-pixel decisions."""
    data = make_grid_data(n_samples=16, shape=(20, 20), random_state=0)
    X, y = data.data, data.target
    model = TwoStageCRF(crf=PerturbMAPCRF("grid", random_state=0), cv=4, random_state=0)
    model.fit(X[:10], y[:10])
    alone = np.mean(
        [
            np.mean(model.classifier_.predict(x.reshape(-1, x.shape[-1])) == t.ravel())
            for x, t in zip(X[10:], y[10:], strict=True)
        ]
    )
    assert model.score(X[10:], y[10:]) > alone + 0.01
    assert model.crf_.coef_[-1] < 0  # an attractive Potts weight was learned


def test_graphs_strings_unknown_labels_and_other_learners():
    rng = np.random.default_rng(0)
    samples, labels = [], []
    for i in range(12):
        truth = rng.integers(0, 2, size=(5, 5))
        features = (truth[..., None] + 0.8 * rng.normal(size=(5, 5, 2))).reshape(25, 2)
        edges = grid_edges((5, 5))
        samples.append(GraphSample(features, edges, np.ones((len(edges), 1))))
        tags = np.where(truth.ravel() == 1, "fg", "bg").astype(object)
        if i % 2:  # some samples with an unknown node (the learners need complete ones too)
            tags[0] = "?"
        labels.append(tags)
    model = TwoStageCRF(
        crf=StructuredSVM("graph", max_iter=5, random_state=0),  # gets the marker below
        cv=3,
        random_state=0,
        unknown_label="?",
    ).fit(samples, labels)
    assert list(model.classes_) == ["bg", "fg"]
    assert set(np.concatenate(model.predict(samples))) <= {"bg", "fg"}
    assert not hasattr(model, "predict_proba")  # the S-SVM has no marginals


def test_sparse_token_chains_and_the_pipeline_marginals():
    sentences = [["the", "dog", "barks"], ["a", "cat", "sleeps"], ["the", "cat", "barks"]] * 6
    tags = [["DET", "NOUN", "VERB"]] * 18
    pipeline = make_pipeline(
        SequenceVectorizer(token_features), TwoStageCRF(cv=3, random_state=0)
    ).fit(sentences, tags)
    assert pipeline.predict([["a", "dog", "sleeps"]])[0].tolist() == ["DET", "NOUN", "VERB"]
    (marginals,) = pipeline.predict_proba([["a", "dog", "sleeps"]], as_dicts=True)
    assert max(marginals[1], key=marginals[1].get) == "NOUN"


def test_errors_name_the_problem():
    data = make_chain_data(n_samples=10, random_state=0)
    X, y = data.data, data.target
    with pytest.raises(ValueError, match="at least 2 samples"):
        TwoStageCRF().fit(X[:1], y[:1])
    with pytest.raises(ValueError, match="sample 2: y has shape"):
        TwoStageCRF(cv=2).fit(X, [t[:-1] if i == 2 else t for i, t in enumerate(y)])
    with pytest.raises(InvalidParameterError, match="classifier"):
        TwoStageCRF(classifier=LinearSVC()).fit(X, y)
    with pytest.raises(InvalidParameterError, match="cv"):
        TwoStageCRF(cv=1).fit(X, y)
    model = TwoStageCRF(cv=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="expecting 10"):
        model.predict([np.hstack([x, x]) for x in X])


def test_grid_search_clone_and_pickle():
    import pickle

    from sklearn.model_selection import GridSearchCV

    data = make_chain_data(n_samples=24, random_state=0)
    X, y = data.data, data.target
    search = GridSearchCV(
        TwoStageCRF(
            crf=PerturbMAPCRF(max_iter=2, random_state=0), cv=2, random_state=0, **AS_FITTED
        ),
        {"crf__alpha": [1e-4, 1e-2], "min_proba": [1e-6, 1e-2]},
        cv=2,
    ).fit(X, y)
    model = search.best_estimator_
    again = pickle.loads(pickle.dumps(model))
    for a, b in zip(model.predict(X), again.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)
    assert clone(model).get_params()["crf__alpha"] == model.get_params()["crf__alpha"]


def test_class_weight_reaches_both_stages_and_balances_a_rare_class():
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(40):  # class 1 is rare (about 5 % of the nodes) and hard to see
        labels = (rng.random(12) < 0.05).astype(int)
        X.append(np.column_stack([labels + rng.normal(0, 0.8, 12), np.ones(12)]))
        y.append(labels)
    plain = TwoStageCRF(crf=PerturbMAPCRF("chain", random_state=0), random_state=0).fit(X, y)
    balanced = TwoStageCRF(
        crf=PerturbMAPCRF("chain", random_state=0), random_state=0, class_weight="balanced"
    ).fit(X, y)
    assert balanced.classifier_.class_weight == "balanced"
    assert balanced.crf_.class_weight == "balanced"

    def recall(model):
        predicted, truth = np.concatenate(model.predict(X)), np.concatenate(y)
        return np.mean(predicted[truth == 1] == 1)

    assert recall(balanced) > recall(plain) + 0.2


def _rare_class_graphs(edges):
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(40):  # class 1 is rare (about 5 % of the nodes) and hard to see
        labels = (rng.random(12) < 0.05).astype(int)
        features = np.column_stack([labels + rng.normal(0, 0.8, 12), np.ones(12)])
        X.append(GraphSample(features, edges))
        y.append(labels)
    return X, y


def test_scale_learns_one_weight_and_keeps_the_balance_of_stage_one():
    """``unary="scale"``: stage two scales the log-probabilities by one weight (no bias), so
    without edges it decides as the balanced classifier does; the K×K matrix re-learns the
    class frequencies instead and loses the rare class."""
    X, y = _rare_class_graphs(np.empty((0, 2), int))
    classifier = LogisticRegression(class_weight="balanced")
    crf = PerturbMAPCRF("graph", random_state=0)
    scale = TwoStageCRF(classifier, crf, random_state=0, unary="scale").fit(X, y)
    matrix = TwoStageCRF(classifier, crf, random_state=0).fit(X, y)
    structure = scale.crf_.structure_
    assert structure.unary == "scaled" and structure.bias is False
    assert structure.n_unary_weights_ == 1 and scale.crf_.coef_[0] > 0
    alone = [scale.classifier_.predict(x.node_features) for x in X]
    np.testing.assert_array_equal(np.concatenate(scale.predict(X)), np.concatenate(alone))
    truth = np.concatenate(y)
    recall = np.mean(np.concatenate(matrix.predict(X))[truth == 1] == 1)
    assert recall < np.mean(np.concatenate(alone)[truth == 1] == 1) - 0.3
    # with edges the learned Potts weight smooths the scaled scores
    X, y = _rare_class_graphs(np.column_stack([np.arange(11), np.arange(1, 12)]))
    scale = TwoStageCRF(classifier, crf, random_state=0, unary="scale").fit(X, y)
    assert scale.crf_.coef_[0] > 0 and scale.crf_.coef_[-1] < 0


def test_scale_needs_a_structure_that_can_scale():
    class Fixed(GraphStructure):
        def __init__(self, bias=True):
            self.bias = bias
            self.n_states, self.pairwise, self.solver = None, "potts", "auto"

    X, y = _rare_class_graphs(np.empty((0, 2), int))
    model = TwoStageCRF(crf=PerturbMAPCRF(Fixed()), unary="scale")
    with pytest.raises(ValueError, match="unary parameter"):
        model.fit(X, y)
    with pytest.raises(InvalidParameterError):
        TwoStageCRF(unary="diagonal").fit(X, y)


def test_verbose_says_which_stage_runs_and_passes_on_to_stage_two(capsys):
    data = make_chain_data(n_samples=30, random_state=0)
    crf = PerturbMAPCRF(max_iter=4, tol=None, random_state=0)
    model = TwoStageCRF(crf=crf, cv=3, random_state=0, verbose=1).fit(data.data, data.target)
    lines = capsys.readouterr().out.splitlines()
    stages = [line for line in lines if line.startswith("[TwoStageCRF]")]
    assert [line.split(",")[0].split(" (")[0] for line in stages] == [
        "[TwoStageCRF] stage one: LogisticRegression out of fold",
        "[TwoStageCRF] stage one: fold 1/3 done",
        "[TwoStageCRF] stage one: fold 2/3 done",
        "[TwoStageCRF] stage one: fold 3/3 done",
        "[TwoStageCRF] choice: stage two with unary='scale' on 20 samples",
        "[TwoStageCRF] choice: stage two with unary='matrix' on 20 samples",
        "[TwoStageCRF] choice: the temperature of the marginals on 10 held-out samples",
        f"[TwoStageCRF] choice: unary={model.unary_!r}",
        "[TwoStageCRF] stage two: PerturbMAPCRF on the out-of-fold log-probabilities",
        f"[TwoStageCRF] stage one: the final classifier on all {sum(map(len, data.target))} "
        "known nodes",
        "[TwoStageCRF] done",
    ]
    assert all(line.endswith(" s elapsed") for line in stages)
    # stage two's epochs: the two candidates' and the refit's
    assert sum(line.startswith("[PerturbMAPCRF] epoch") for line in lines) == 3 * 4
    assert crf.verbose == 0  # the given learner is cloned, not changed
    TwoStageCRF(crf=crf, cv=3, random_state=0, **AS_FITTED).fit(data.data, data.target)
    assert capsys.readouterr().out == ""  # verbose=0 leaves stage two's own setting: silent


def _thin_line_scenes(rng, n, noise, size=16):
    """Grids of a background, a square of class 1 and two one-pixel columns of class 2 (thin:
    each of their pixels has two neighbours of another class); features one-hot + noise."""
    X, y = [], []
    for _ in range(n):
        labels = np.zeros((size, size), dtype=int)
        r, c = rng.integers(0, size // 2, 2)
        labels[r : r + size // 2, c : c + size // 2] = 1
        labels[:, rng.choice(size, 2, replace=False)] = 2
        X.append(np.eye(3)[labels] + noise * rng.normal(size=(size, size, 3)))
        y.append(labels)
    return X, y


def _three_scores(truth, predicted):
    from pmap_sklearn.metrics import segmentation_scores

    s = segmentation_scores(truth, predicted, labels=np.arange(3))
    return np.array([s["global_accuracy"], s["class_average_accuracy"], s["mean_iou"]])


def test_the_choice_keeps_thin_lines_the_learned_smoothing_erases():
    """With one weight on the log-probabilities, the learned Potts weights erase the thin
    lines (below the classifier alone on held-out images on every score); the held-out
    choice keeps them: class offsets that favour the thin class, and a model at least as good
    as the classifier on every score."""
    rng = np.random.default_rng(0)
    X, y = _thin_line_scenes(rng, 12, noise=1.2)
    X_test, y_test = _thin_line_scenes(rng, 12, noise=1.2)
    crf = PerturbMAPCRF(GridStructure(), random_state=0)
    fitted = TwoStageCRF(crf=crf, cv=4, random_state=0, unary="scale", pairwise_scale=1.0)
    fitted.fit(X, y)
    alone = [fitted.classifier_.predict(x.reshape(-1, 3)).reshape(x.shape[:2]) for x in X_test]
    assert (_three_scores(y_test, fitted.predict(X_test)) < _three_scores(y_test, alone)).all()
    assert fitted.choice_scores_ is None and fitted.pairwise_scale_ == 1.0
    assert not fitted.class_offsets_.any()
    chosen = TwoStageCRF(crf=crf, cv=4, random_state=0, unary="scale").fit(X, y)
    smoothings = [("learned", scale) for scale in PAIRWISE_SCALES]
    smoothings += [("potts", weight) for weight in POTTS_WEIGHTS]
    assert set(chosen.choice_scores_) == {
        ("scale", *smoothing, share) for smoothing in smoothings for share in CLASS_OFFSET_SHARES
    }
    assert chosen.pairwise_scale_ > 0 and chosen.class_offsets_[2] > chosen.class_offsets_[0]
    assert (_three_scores(y_test, chosen.predict(X_test)) > _three_scores(y_test, alone)).all()


def _superpixel_like_graphs(rng, n_samples, constant=True):
    """Random graphs with 3-class log-probability node features and edge features
    ``[1, contrast, boundary]`` (as SuperpixelGraphs gives them), or without the 1."""
    X, y = [], []
    for _ in range(n_samples):
        labels = rng.integers(0, 3, 30)
        proba = np.full((30, 3), 0.2)
        proba[np.arange(30), labels] = 0.6
        edges = np.array([(i, i + 1) for i in range(29)] + [(i, i + 5) for i in range(25)])
        features = np.column_stack([np.ones(len(edges)), rng.uniform(size=(len(edges), 2))])
        features = features if constant else features[:, 1:]
        X.append(GraphSample(np.log(proba) + 0.3 * rng.normal(size=(30, 3)), edges, features))
        y.append(labels)
    return X, y


def test_a_uniform_potts_weight_is_the_same_on_every_edge():
    """The uniform Potts candidate puts ``−w λ`` (λ the unary trust) on every edge, whatever
    its edge features, on graphs with a constant edge feature and on grids (one indicator per
    direction); it is not offered without one, nor with pairwise tables."""
    rng = np.random.default_rng(0)
    X, y = _superpixel_like_graphs(rng, 6)
    scaled = GraphStructure(unary="scaled", bias=False)
    crf = PerturbMAPCRF(scaled, max_iter=3, tol=None, random_state=0).fit(X, y)
    uniform = _uniform_potts(crf, X)
    np.testing.assert_allclose(uniform, [1.0, 0.0, 0.0], atol=1e-10)
    potts = _smoothed(crf, "potts", 0.5, uniform)
    trust = crf.structure_.unpack(crf.coef_)[0][0]
    batch = potts.structure_.prepare(X)
    edge_weights = potts.structure_._pairwise_potentials(
        batch, potts.structure_.unpack(potts.coef_)[1]
    )
    np.testing.assert_allclose(edge_weights, -0.5 * trust)
    np.testing.assert_allclose(potts.structure_.unpack(potts.coef_)[0], [trust])
    assert crf.structure_.unpack(crf.coef_)[1] is not potts.structure_.unpack(potts.coef_)[1]

    without_constant = _superpixel_like_graphs(rng, 6, constant=False)
    crf = PerturbMAPCRF(scaled, max_iter=3, tol=None, random_state=0).fit(*without_constant)
    assert _uniform_potts(crf, without_constant[0]) is None
    tables = GraphStructure(unary="scaled", bias=False, pairwise="table")
    crf = PerturbMAPCRF(tables, max_iter=3, tol=None, random_state=0).fit(X, y)
    assert _uniform_potts(crf, X) is None

    grids, labels = _thin_line_scenes(rng, 3, noise=1.0)
    grid = PerturbMAPCRF(GridStructure(), max_iter=3, tol=None, random_state=0)
    np.testing.assert_allclose(_uniform_potts(grid.fit(grids, labels), grids), [1.0, 1.0])


def test_a_chosen_uniform_potts_weight_is_refitted_on_every_sample():
    """A scorer that prefers the uniform Potts weight 1/4: it is the choice, and the final
    stage two has that weight on the scale of its own unary trust."""

    def prefers_potts(estimator, X, y):
        trust, pairwise = estimator.structure_.unpack(estimator.coef_)
        return float(np.allclose(pairwise, -0.25 * trust[0]))

    rng = np.random.default_rng(1)
    X, y = _thin_line_scenes(rng, 8, noise=1.0)
    crf = PerturbMAPCRF(GridStructure(), max_iter=5, tol=None, random_state=0)
    model = TwoStageCRF(crf=crf, cv=2, random_state=0, unary="scale", scoring=prefers_potts)
    model.fit(X, y)
    assert (model.pairwise_, model.pairwise_scale_) == ("potts", 0.25)
    assert model.choice_scores_["scale", "potts", 0.25, 0.0] == 1.0
    trust, pairwise = model.crf_.structure_.unpack(model.crf_.coef_)
    np.testing.assert_allclose(pairwise, [-0.25 * trust[0]] * 2)
    assert not model.class_offsets_.any()  # ties go to the smaller share of the offsets


def test_the_choice_keeps_stage_ones_scores_within_half_a_point_of_class_average():
    """The rule of the held-out choice: global accuracy at least stage one's, class average
    at most half a point below."""
    alone = {"global_accuracy": 0.80, "class_average_accuracy": 0.60}
    assert _keeps_stage_one({"global_accuracy": 0.82, "class_average_accuracy": 0.596}, alone)
    assert not _keeps_stage_one({"global_accuracy": 0.82, "class_average_accuracy": 0.594}, alone)
    assert not _keeps_stage_one({"global_accuracy": 0.79, "class_average_accuracy": 0.70}, alone)


def test_balancing_offsets_give_each_class_its_share():
    """The offsets' fixed-point iteration on a decoder with no pairwise term (argmax of the
    scores plus the offsets): each class ends with the wanted share of the nodes' sizes."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(4000, 4)) + [1.0, 0.5, 0.0, -1.0]
    sizes = rng.uniform(1, 3, size=4000)
    target = np.array([0.4, 0.3, 0.2, 0.1])
    delta = _balancing_offsets(lambda d: (scores + d).argmax(axis=1), target, sizes, n_iter=60)
    np.testing.assert_allclose(
        _class_shares((scores + delta).argmax(1), sizes, 4), target, atol=0.01
    )
    assert abs(delta.mean()) < 1e-12 and delta[3] > delta[0]  # the rare class is pushed up


def test_default_stage_two_is_not_below_the_classifier_on_under_confident_probabilities():
    """A strongly regularised classifier (under-confident probabilities, the rare thin class
    hardly ever predicted): the default stage two, its unary form and smoothing chosen on a
    held-out fold, scores at least as well as the classifier on held-out images, on global
    accuracy, class-average accuracy and mean IoU, and its marginals get a temperature."""
    rng = np.random.default_rng(1)
    X, y = _thin_line_scenes(rng, 16, noise=1.0)
    X_test, y_test = _thin_line_scenes(rng, 16, noise=1.0)
    classifier = LogisticRegression(C=0.001)
    model = TwoStageCRF(
        classifier, PerturbMAPCRF(GridStructure(), random_state=0), cv=4, random_state=0
    ).fit(X, y)
    confidence = np.mean([model.classifier_.predict_proba(x.reshape(-1, 3)).max(1) for x in X])
    alone = [model.classifier_.predict(x.reshape(-1, 3)).reshape(x.shape[:2]) for x in X_test]
    accuracy = np.mean(np.concatenate(alone).ravel() == np.concatenate(y_test).ravel())
    assert confidence < accuracy - 0.02  # under-confident
    assert (_three_scores(y_test, model.predict(X_test)) >= _three_scores(y_test, alone)).all()
    assert model.unary_ in ("scale", "matrix") and model.pairwise_scale_ in PAIRWISE_SCALES
    assert model.crf_.marginal_temperature_ > 0


def test_a_given_pairwise_scale_and_scoring():
    """A number scales the learned pairwise weights (the unary ones untouched); a scorer
    decides the choice."""
    data = make_grid_data(n_samples=10, shape=(12, 12), random_state=0)
    X, y = data.data, data.target
    crf = PerturbMAPCRF("grid", max_iter=5, tol=None, random_state=0)
    full = TwoStageCRF(crf=crf, cv=2, random_state=0, **AS_FITTED).fit(X, y)
    half = TwoStageCRF(crf=crf, cv=2, random_state=0, unary="matrix", pairwise_scale=0.5)
    half.fit(X, y)
    unary, pairwise = full.crf_.structure_.unpack(full.crf_.coef_)
    half_unary, half_pairwise = half.crf_.structure_.unpack(half.crf_.coef_)
    np.testing.assert_allclose(half_unary, unary)
    np.testing.assert_allclose(half_pairwise, 0.5 * pairwise)
    assert half.choice_scores_ is None and half.unary_ == "matrix"

    def smoothest(estimator, X, y):  # prefers the strongest pairwise weights
        return -float(np.sum(estimator.structure_.unpack(estimator.coef_)[1]))

    chosen = TwoStageCRF(crf=crf, cv=2, random_state=0, unary="matrix", scoring=smoothest)
    assert chosen.fit(X, y).pairwise_scale_ == max(PAIRWISE_SCALES)
    with pytest.raises(InvalidParameterError, match="pairwise_scale"):
        TwoStageCRF(pairwise_scale=-1.0).fit(X, y)


def test_the_weights_as_fitted_stand_without_a_clear_held_out_gain(monkeypatch):
    """Candidates within ``CHOICE_MARGIN`` of the weights as fitted (scale 1, no offsets) do
    not replace them; with no margin the best held-out score wins."""

    data = make_grid_data(n_samples=12, shape=(16, 16), random_state=0)
    crf = PerturbMAPCRF("grid", max_iter=20, tol=None, random_state=0)
    monkeypatch.setattr(defaults, "TWO_STAGE_CHOICE_MARGIN", 0.0)
    best = TwoStageCRF(crf=crf, cv=2, random_state=0, unary="matrix").fit(data.data, data.target)
    scores = best.choice_scores_
    assert max(scores.values()) > scores["matrix", "learned", 1.0, 0.0]
    assert best.class_offsets_.any()  # a candidate with class offsets scored best
    monkeypatch.setattr(defaults, "TWO_STAGE_CHOICE_MARGIN", 1.0)  # no candidate gains a whole IoU
    kept = TwoStageCRF(crf=crf, cv=2, random_state=0, unary="matrix").fit(data.data, data.target)
    assert kept.pairwise_scale_ == 1.0 and not kept.class_offsets_.any()
    assert kept.choice_scores_ == scores


def test_the_temperature_is_fitted_with_the_learners_own_perturbed_maps(monkeypatch):
    """The held-out temperature counts the same number of perturbed MAPs as the marginals it
    will scale (fewer would weigh the log-loss's pseudo-count more and fit a lower T), and
    fitting it leaves the learner's ``n_perturbations`` as set."""
    seen = []
    calibrate = PerturbMAPCRF.calibrate_marginals

    def recording(self, X, y):
        seen.append(self.n_perturbations)
        return calibrate(self, X, y)

    monkeypatch.setattr(PerturbMAPCRF, "calibrate_marginals", recording)
    data = make_grid_data(n_samples=8, shape=(10, 10), random_state=0)
    crf = PerturbMAPCRF("grid", max_iter=5, tol=None, n_perturbations=37, random_state=0)
    model = TwoStageCRF(crf=crf, cv=2, random_state=0).fit(data.data, data.target)
    assert seen == [37]
    assert model.crf_.n_perturbations == 37 and model.crf_.marginal_temperature_ > 0


def test_a_two_stage_refit_whose_stage_two_fails_keeps_the_previous_model(chains):
    """A failed stage two kept the new ``n_features_in_`` beside the old stages, and predict
    failed on old and new data alike."""
    from pmap_sklearn import PerturbMAPCRF, TwoStageCRF

    X, y = chains
    model = TwoStageCRF(
        crf=PerturbMAPCRF("chain", max_iter=2, random_state=0), cv=2, random_state=0
    ).fit(X, y)
    before, n_features = model.predict(X), model.n_features_in_
    wider = [np.hstack([x, x]) for x in X]
    model.set_params(crf__max_iter=0)  # stage two refuses it, after stage one has run
    with pytest.raises(ValueError, match="max_iter"):
        model.fit(wider, y)
    assert model.n_features_in_ == n_features
    for a, b in zip(before, model.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)


def test_two_stage_refuses_a_marker_of_another_kind(chains):
    from pmap_sklearn import PerturbMAPCRF, TwoStageCRF

    X, y = chains
    words = [np.where(t == 0, "11", "a") for t in y]
    with pytest.raises(ValueError, match="ignore_label=11 is a number"):
        TwoStageCRF(crf=PerturbMAPCRF("chain", max_iter=1), ignore_label=11, cv=2).fit(X, words)


class _Folds:
    """A splitter of fixed (train, test) folds, as a user might write one."""

    def __init__(self, folds):
        self.folds = folds

    def split(self, X, y=None, groups=None):
        n = len(X)
        for train, test in self.folds(n):
            yield np.asarray(train, dtype=int), np.asarray(test, dtype=int)

    def get_n_splits(self, X=None, y=None, groups=None):
        return 2


def _halves(n):
    return np.arange(n // 2), np.arange(n // 2, n)


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"crf": make_pipeline(StandardScaler(), PerturbMAPCRF())},
            "got Pipeline.*NodeTransformer",
        ),
        ({"crf": LogisticRegression()}, "structured learner.*got LogisticRegression"),
        ({"cv": StratifiedKFold(3)}, "no single class to stratify on; use KFold"),
        (
            {"cv": _Folds(lambda n: [(np.arange(0), _halves(n)[0]), _halves(n)])},
            "fold 0 has no training sample",
        ),
        (
            {"cv": _Folds(lambda n: [(np.arange(n), h) for h in _halves(n)])},
            "trains on samples it tests.*in-sample",
        ),
        ({"class_weight": {0: 0, 1: 0, 2: 0, 3: 0}}, "every class weight 0"),
        ({"class_weight": {0: True}}, r"class_weight\[0\] = True"),
    ],
)
def test_two_stage_names_what_is_wrong(chains, params, message):
    X, Y = chains
    params.setdefault("crf", PerturbMAPCRF(max_iter=2))
    with pytest.raises(ValueError, match=message):
        TwoStageCRF(**params).fit(X, Y)


def test_two_stage_takes_a_generator_and_probabilities_only(chains):
    X, Y = chains
    crf = PerturbMAPCRF(max_iter=2, random_state=0)
    fitted = [
        TwoStageCRF(crf=crf, cv=3, random_state=np.random.default_rng(5)).fit(X, Y)
        for _ in range(2)
    ]  # a Generator is taken, as documented, and seeds the folds reproducibly
    np.testing.assert_array_equal(fitted[0].crf_.coef_, fitted[1].crf_.coef_)

    class Scores(LogisticRegression):
        def predict_proba(self, X):
            return self.decision_function(X)

    with pytest.raises(ValueError, match="Scores.predict_proba's output.*not scores or logits"):
        TwoStageCRF(Scores(), crf=crf, cv=3).fit(X, Y)


def test_two_stage_reads_grey_images_on_a_grid():
    data = make_grid_data(n_samples=6, random_state=0)
    grey = [np.asarray(x)[..., 0] for x in data.data]  # (H, W): one feature per pixel
    crf = PerturbMAPCRF("grid", max_iter=3, random_state=0)
    model = TwoStageCRF(crf=crf, cv=3, random_state=0).fit(grey, data.target)
    as_channel = [g[..., None] for g in grey]
    reference = TwoStageCRF(crf=crf, cv=3, random_state=0).fit(as_channel, data.target)
    assert model.n_features_in_ == 1
    np.testing.assert_array_equal(model.crf_.coef_, reference.crf_.coef_)
    assert [p.shape for p in model.predict(grey)] == [t.shape for t in data.target]


def test_empty_x_is_refused_as_the_structured_learners_refuse_it(chains):
    """``sample([])`` failed inside numpy ("need at least one array to concatenate")."""
    X, Y = chains
    crf = PerturbMAPCRF(max_iter=2, random_state=0)
    model = TwoStageCRF(crf=crf, cv=2, random_state=0, **AS_FITTED).fit(X, Y)
    queries = [
        lambda X: model.sample(X, n_draws=3),
        model.predict,
        model.predict_marginals,
        model.stage_two_samples,
    ]
    for query in queries:
        with pytest.raises(ValueError, match="X is empty: at least one sample is needed"):
            query([])
    with pytest.raises(ValueError, match="X is empty: at least one sample is needed"):
        crf.fit(X, Y).sample([], n_draws=3)  # the same words as the learner alone


def test_class_weight_reaches_the_last_step_of_a_pipeline_classifier_or_warns(chains):
    """A Pipeline classifier was left unbalanced with no word."""
    from sklearn.neighbors import KNeighborsClassifier

    X, Y = chains
    crf = PerturbMAPCRF(max_iter=2, random_state=0)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200))
    model = TwoStageCRF(pipeline, crf=crf, cv=2, class_weight="balanced", **AS_FITTED)
    model.fit(X, Y)
    assert model.classifier_[-1].class_weight == "balanced"
    assert pipeline[-1].class_weight is None  # the given classifier is cloned, not changed
    assert model.crf_.class_weight == "balanced"
    unbalanced = make_pipeline(StandardScaler(), KNeighborsClassifier())
    with pytest.warns(UserWarning, match="does not reach KNeighborsClassifier.*unbalanced"):
        TwoStageCRF(unbalanced, crf=crf, cv=2, class_weight="balanced", **AS_FITTED).fit(X, Y)


def _one_sample_holds(label):
    """Chains of 3 classes where only the last sample holds ``label``."""
    data = make_chain_data(n_samples=16, n_states=3, random_state=0)
    y = [np.where(t == 2, 1, t) for t in data.target]
    y[-1] = y[-1].copy()
    y[-1][0] = label
    return list(data.data), y


def test_the_choice_fits_stage_two_on_samples_holding_every_class():
    """A class held only by samples of the held-out fold failed with "unary='scaled' takes
    one score per label as node features (K = 2), got 3 node features"."""
    X, y = _one_sample_holds(2)
    crf = PerturbMAPCRF(max_iter=2, random_state=0)
    for params in ({}, {"cv": 2}, {"unary": "scale"}, {"unary": "matrix"}):
        model = TwoStageCRF(crf=crf, random_state=0, **params).fit(X, y)
        np.testing.assert_array_equal(model.crf_.classes_, [0, 1, 2])
        assert model.choice_scores_  # a choice was made on held-out samples
        assert all(len(p) == len(t) for p, t in zip(model.predict(X), y, strict=True))


def test_the_choice_fits_stage_two_on_a_fully_labelled_sample():
    """With string labels and ``unknown_label='?'``, one fully labelled sample (sample 0) in
    the held-out fold left the choice's stage two without any: "every sample has unknown
    labels (-1)"."""
    data = make_chain_data(n_samples=16, n_states=3, random_state=0)
    y = [np.array(["abc"[k] for k in t], dtype=object) for t in data.target]
    for t in y[1:]:
        t[0] = "?"
    crf = PerturbMAPCRF(max_iter=2, random_state=0)
    for seed in range(4):  # folds that put sample 0 in the held-out fold among them
        model = TwoStageCRF(crf=crf, unknown_label="?", random_state=seed).fit(data.data, y)
        np.testing.assert_array_equal(model.classes_, ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"every sample has unknown labels \(unknown_label='\?'\)"):
        PerturbMAPCRF(max_iter=2, unknown_label="?").fit(data.data[1:], y[1:])


def _log_softmax(scores):
    top = scores.max(axis=1, keepdims=True)
    return scores - top - np.log(np.exp(scores - top).sum(axis=1, keepdims=True))


def _class_probability_warnings(record) -> list:
    return [w for w in record if "the node features are a classifier's" in str(w.message)]


def test_a_fit_on_class_probabilities_points_to_the_two_stage_crf():
    """Node features that are a classifier's log-probabilities or probabilities over the labels
    warn, naming TwoStageCRF; a one-hot code, other features and TwoStageCRF's own stage two
    do not."""
    rng = np.random.default_rng(0)
    y = [rng.integers(3, size=6) for _ in range(20)]
    log_proba = [_log_softmax(rng.normal(size=(6, 3)) + 2 * np.eye(3)[labels]) for labels in y]
    fit = dict(max_iter=2, tol=None, random_state=0)
    with pytest.warns(UserWarning, match="classifier's log-probabilities.*TwoStageCRF") as got:
        PerturbMAPCRF(**fit).fit(log_proba, y)
    assert _class_probability_warnings(got)[0].filename == __file__  # names the caller's line
    with warnings.catch_warnings(record=True) as record:  # a stream: at its first call only
        warnings.simplefilter("always")
        stream = PerturbMAPCRF(random_state=0)
        stream.partial_fit(log_proba, y, classes=[0, 1, 2]).partial_fit(log_proba, y)
    assert len(_class_probability_warnings(record)) == 1
    with pytest.warns(UserWarning, match="classifier's probabilities over the 3 labels"):
        StructuredSVM(max_iter=2).fit([np.exp(x) for x in log_proba], y)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        PerturbMAPCRF(**fit).fit([np.eye(3)[labels] for labels in y], y)  # one-hot
        PerturbMAPCRF(**fit).fit([rng.normal(size=(6, 3)) for _ in y], y)
        data = make_chain_data(n_samples=30, n_states=3, n_features=4, random_state=0)
        TwoStageCRF(crf=PerturbMAPCRF(**fit), cv=3, random_state=7).fit(data.data, data.target)
    assert _class_probability_warnings(record) == []
