"""partial_fit: one pass of the fit's optimiser over each chunk, continuing its state
(scikit-learn's SGDClassifier.partial_fit), on the SGD learners and the subgradient SVM."""

import pickle

import numpy as np
import pytest

from pmap_sklearn import (
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    PerturbMAPCRF,
    SequenceVectorizer,
    StructuredSVM,
)
from pmap_sklearn.datasets import make_chain_data, make_grid_data


def _subgradient_svm(**params):
    return StructuredSVM(algorithm="subgradient", **params)


def _chain_mean_field(**params):
    return MeanFieldCRF("chain", **params)


LEARNERS = [PerturbMAPCRF, MarginalPerturbMAPCRF, _chain_mean_field, _subgradient_svm]
IDS = ["PerturbMAPCRF", "MarginalPerturbMAPCRF", "MeanFieldCRF", "StructuredSVM"]


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=120, n_states=3, n_features=4, random_state=0)
    return data.data, data.target


def _chunks(X, y, n_chunks):
    bounds = np.linspace(0, len(X), n_chunks + 1).astype(int)
    return [(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _stream(model, X, y, n_chunks=4, n_epochs=1, classes=(0, 1, 2)):
    for _ in range(n_epochs):
        for chunk_X, chunk_y in _chunks(X, y, n_chunks):
            model.partial_fit(chunk_X, chunk_y, classes=classes)
    return model


@pytest.mark.parametrize("make", LEARNERS, ids=IDS)
def test_chunks_learn_close_to_fit(make, chains):
    X, y = chains
    model = make(random_state=0)
    scores = [_stream(model, X, y).score(X, y)]
    for _ in range(3):
        scores.append(_stream(model, X, y).score(X, y))
    fitted = make(random_state=0).fit(X, y).score(X, y)
    assert scores[-1] > 0.5  # three labels: chance is 1/3
    assert max(scores[1:]) >= scores[0] - 0.01  # more passes do not undo the first
    assert scores[-1] == pytest.approx(fitted, abs=0.05)
    assert model.n_iter_ == 1  # one pass per call


def test_chunks_of_grids_learn():
    data = make_grid_data(n_samples=12, shape=(10, 10), random_state=0)
    X, y = data.data, data.target
    model = PerturbMAPCRF("grid", random_state=0)
    first = _stream(model, X, y, n_chunks=3, classes=(0, 1)).score(X, y)
    last = _stream(model, X, y, n_chunks=3, n_epochs=4, classes=(0, 1)).score(X, y)
    assert last >= first - 0.01
    assert last == pytest.approx(
        PerturbMAPCRF("grid", random_state=0).fit(X, y).score(X, y), abs=0.05
    )


@pytest.mark.parametrize("make", LEARNERS, ids=IDS)
def test_one_call_on_all_samples_is_one_epoch_of_fit(make, chains):
    """The same optimiser, settings and random stream: bit for bit the fit of one epoch."""
    X, y = chains
    fitted = make(max_iter=1, random_state=0).fit(X, y)
    streamed = make(max_iter=1, random_state=0).partial_fit(X, y, classes=[0, 1, 2])
    np.testing.assert_array_equal(streamed.coef_, fitted.coef_)


def test_calls_continue_the_schedule_and_the_average(chains):
    """Two calls on halves continue one state: the updates add up, the average keeps going."""
    X, y = chains
    model = PerturbMAPCRF(random_state=0, batch_size=10, average=True)
    model.partial_fit(X[:60], y[:60], classes=[0, 1, 2])
    state = model._state
    t, n_averaged, eta0 = model.t_, state.n_averaged, model.eta0_
    model.partial_fit(X[60:], y[60:])
    assert (model.t_, model._state.n_averaged, model.eta0_) == (t + 6, n_averaged + 6, eta0)
    assert model.sgd_settings_["batch_size"] == 10


def test_auto_settings_come_from_the_first_chunk_and_stay(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0).partial_fit(X[:20], y[:20], classes=[0, 1, 2])
    settings = dict(model.sgd_settings_)
    assert settings["batch_size"] == 4  # min(16, max(2, 20 // 5))
    model.partial_fit(X[20:], y[20:])
    assert model.sgd_settings_ == settings


def test_a_chunk_may_lack_classes(chains):
    X, y = chains
    only = [np.minimum(yi, 1) for yi in y[:30]]  # labels 0 and 1 alone
    model = PerturbMAPCRF(random_state=0).partial_fit(X[:30], only, classes=[0, 1, 2])
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    assert model.structure_.n_states_ == 3
    model.partial_fit(X[30:], y[30:])  # the third label arrives later
    assert model.score(X, y) > 0.4


def test_string_labels_and_unordered_classes(chains):
    X, y = chains
    names = np.array(["noun", "verb", "adj"])
    tags = [names[yi] for yi in y]
    model = PerturbMAPCRF(random_state=0).partial_fit(X, tags, classes=["verb", "noun", "adj"])
    np.testing.assert_array_equal(model.classes_, ["adj", "noun", "verb"])
    assert set(np.concatenate(model.predict(X[:5]))) <= set(names)


def test_classes_are_required_first_and_fixed_after(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0)
    with pytest.raises(ValueError, match="classes must be given in the first call"):
        model.partial_fit(X, y)
    with pytest.raises(ValueError, match=r"labels \[1, 2\] are not one of the classes \[0, 5\]"):
        model.partial_fit(X, y, classes=[0, 5])
    assert not hasattr(model, "coef_")
    model.partial_fit(X[:50], y[:50], classes=[0, 1, 2])
    with pytest.raises(ValueError, match=r"classes=\[0, 1, 2, 3\] differs .* classes_=\[0, 1, 2\]"):
        model.partial_fit(X[50:], y[50:], classes=[0, 1, 2, 3])
    model.partial_fit(X[50:], y[50:], classes=[2, 1, 0])  # the same classes, in any order
    bad = [yi.copy() for yi in y[:5]]
    bad[2][0] = 7
    with pytest.raises(ValueError, match="label 7 is not one of the classes"):
        model.partial_fit(X[:5], bad)


def test_a_failed_call_leaves_the_model_as_it_was(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0).partial_fit(X[:60], y[:60], classes=[0, 1, 2])
    coef, t, state = model.coef_.copy(), model.t_, pickle.dumps(model._state)
    wider = [np.hstack([x, x]) for x in X[60:]]
    with pytest.raises(ValueError, match="sample 0 has 8 node features, expected 4"):
        model.partial_fit(wider, y[60:])  # other feature dimensions than the first chunk's
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.t_ == t and pickle.dumps(model._state) == state
    # and the stream goes on as if the failed call had not been made
    ahead = pickle.loads(pickle.dumps(model)).partial_fit(X[60:], y[60:])
    np.testing.assert_array_equal(model.partial_fit(X[60:], y[60:]).coef_, ahead.coef_)


def test_a_pass_interrupted_midway_leaves_the_model_as_it_was(chains, monkeypatch):
    """The pass works on a copy of the fit state: steps taken before a failure are dropped."""
    X, y = chains
    model = PerturbMAPCRF(random_state=0, batch_size=10).partial_fit(
        X[:60], y[:60], classes=[0, 1, 2]
    )
    coef, state, expected = model.coef_.copy(), pickle.dumps(model._state), pickle.dumps(model)
    make_oracle, calls = model._make_oracle, []

    def failing(batch, targets):
        oracle = make_oracle(batch, targets)

        def step(part, w, rng):
            calls.append(part)
            if len(calls) == 3:
                raise RuntimeError("interrupted")
            return oracle(part, w, rng)

        return step

    monkeypatch.setattr(model, "_make_oracle", failing)
    with pytest.raises(RuntimeError, match="interrupted"):
        model.partial_fit(X[60:], y[60:])
    assert len(calls) == 3  # two steps were taken, then dropped
    np.testing.assert_array_equal(model.coef_, coef)
    assert pickle.dumps(model._state) == state
    monkeypatch.undo()
    continued = pickle.loads(expected).partial_fit(X[60:], y[60:])
    np.testing.assert_array_equal(model.partial_fit(X[60:], y[60:]).coef_, continued.coef_)


def test_one_call_on_all_images_is_one_epoch_of_fit():
    data = make_grid_data(n_samples=6, shape=(8, 8), random_state=0)
    params = dict(max_iter=1, tol=None, random_state=0)  # the logistic start, then one epoch
    fitted = PerturbMAPCRF("grid", **params).fit(data.data, data.target)
    streamed = PerturbMAPCRF("grid", **params).partial_fit(data.data, data.target, classes=[0, 1])
    np.testing.assert_array_equal(streamed.coef_, fitted.coef_)


def test_pickling_mid_stream_continues_exactly(chains):
    X, y = chains
    (a, ya), (b, yb), (c, yc) = _chunks(X, y, 3)
    straight = PerturbMAPCRF(random_state=0).partial_fit(a, ya, classes=[0, 1, 2])
    loaded = pickle.loads(pickle.dumps(straight))  # warm_start=False: the state is kept
    for chunk_X, chunk_y in ((b, yb), (c, yc)):
        straight.partial_fit(chunk_X, chunk_y)
        loaded.partial_fit(chunk_X, chunk_y)
    np.testing.assert_array_equal(loaded.coef_, straight.coef_)


def test_random_state_and_n_jobs():
    data = make_grid_data(n_samples=6, shape=(8, 8), random_state=1)
    X, y = data.data, data.target

    def stream(**params):
        model = PerturbMAPCRF("grid", random_state=3, **params)
        return _stream(model, X, y, n_chunks=2, n_epochs=2, classes=(0, 1)).coef_

    np.testing.assert_array_equal(stream(), stream())
    np.testing.assert_array_equal(stream(), stream(n_jobs=2))
    assert not np.array_equal(
        stream(), _stream(PerturbMAPCRF("grid", random_state=4), X, y, 2, 2, (0, 1)).coef_
    )


def test_fit_starts_afresh_and_partial_fit_continues_a_fit(chains):
    X, y = chains
    fresh = PerturbMAPCRF(random_state=0).fit(X, y)
    streamed = _stream(PerturbMAPCRF(random_state=0), X, y)
    np.testing.assert_array_equal(streamed.fit(X, y).coef_, fresh.coef_)
    for warm_start in (False, True):  # a warm start does not continue a stream either
        model = _stream(PerturbMAPCRF(random_state=0, warm_start=warm_start), X, y)
        np.testing.assert_array_equal(model.fit(X, y).coef_, fresh.coef_)
    t, settings = fresh.t_, dict(fresh.sgd_settings_)
    fresh.partial_fit(X[:40], y[:40])  # classes: those of the fit
    assert fresh.t_ > t and fresh.sgd_settings_ == settings


def test_unknown_labels_are_filled_in_after_the_first_chunk(chains):
    X, y = chains
    partial = [yi.copy() for yi in y]
    for yi in partial[60:]:
        yi[:2] = -1
    model = PerturbMAPCRF(random_state=0)
    with pytest.raises(ValueError, match="the first partial_fit needs fully labelled samples"):
        model.partial_fit(X[50:], partial[50:], classes=[0, 1, 2])
    model.partial_fit(X[:60], partial[:60], classes=[0, 1, 2])
    model.partial_fit(X[60:], partial[60:])
    assert model.score(X, y) > 0.5


def test_refusals_name_the_remedy(chains):
    X, y = chains
    with pytest.raises(ValueError, match="algorithm='bcfw'.* use algorithm='subgradient'"):
        StructuredSVM().partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="class_weight='balanced'.*compute_class_weight"):
        PerturbMAPCRF(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 2])
    weights = {0: 1.0, 1: 2.0, 2: 1.0}  # a dict is the stream's own
    PerturbMAPCRF(class_weight=weights, random_state=0).partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="classes holds 1 label"):
        PerturbMAPCRF().partial_fit(X, y, classes=[0])


def test_sample_weight_of_a_chunk(chains):
    X, y = chains
    twice = PerturbMAPCRF(random_state=0, max_iter=1)
    twice.partial_fit(X[:40], y[:40], classes=[0, 1, 2], sample_weight=np.full(40, 2.0))
    fit = PerturbMAPCRF(random_state=0, max_iter=1).fit(
        X[:40], y[:40], sample_weight=np.full(40, 2.0)
    )
    np.testing.assert_array_equal(twice.coef_, fit.coef_)


def test_hashed_token_chunks_stream_through_a_vectorizer():
    """The out-of-core recipe: a hashing vectorizer is fitted on nothing it keeps, each chunk is
    transformed and fed to partial_fit."""
    rng = np.random.default_rng(0)
    words = np.array(["the", "a", "dog", "cat", "runs", "sleeps"])
    tags = np.array(["DET", "DET", "NOUN", "NOUN", "VERB", "VERB"])
    sentences = [rng.choice(6, size=rng.integers(3, 7)) for _ in range(80)]
    X = [[{"word": words[i]} for i in s] for s in sentences]
    y = [tags[s] for s in sentences]
    vectorizer = SequenceVectorizer(n_features=2**10).fit(X[:1])
    model = PerturbMAPCRF(random_state=0)
    for _ in range(3):  # epochs
        for start in range(0, 80, 20):
            chunk = vectorizer.transform(X[start : start + 20])
            model.partial_fit(chunk, y[start : start + 20], classes=np.unique(tags))
    assert model.score(vectorizer.transform(X), y) > 0.95


def test_a_stream_after_a_fit_drops_what_belonged_to_the_fit(chains):
    X, y = chains
    model = MarginalPerturbMAPCRF(max_iter=2, random_state=0).fit(X, y)
    assert hasattr(model, "supervised_coef_")
    model.partial_fit(X[:40], y[:40])
    assert not hasattr(model, "supervised_coef_")


def _tagged_words():
    """60 sentences of six words, each word's tag fixed: token features, tags, the tag set."""
    rng = np.random.default_rng(0)
    words = np.array(["the", "a", "dog", "cat", "runs", "sleeps"])
    tags = np.array(["DET", "DET", "NOUN", "NOUN", "VERB", "VERB"])
    sentences = [rng.choice(6, size=rng.integers(3, 7)) for _ in range(60)]
    X = SequenceVectorizer().fit_transform([[{"word": words[i]} for i in s] for s in sentences])
    y = [tags[s] for s in sentences]
    return X, y, tags


def test_auto_alpha_on_sparse_features_counts_every_sample_given():
    """A stream's ``alpha="auto"`` on token features is over the evidence of the samples given
    so far, as a fit's is over its training set: the stream of a whole corpus ends near the
    fit's regularisation, not ten times stronger."""
    from pmap_sklearn._optim.defaults import SPARSE_ALPHA

    X, y, tags = _tagged_words()
    model = PerturbMAPCRF(random_state=0)
    model.partial_fit(X[:20], y[:20], classes=np.unique(tags))
    assert model.sgd_settings_["alpha"] == pytest.approx(SPARSE_ALPHA / 20)
    model.partial_fit(X[20:50], y[20:50], sample_weight=np.full(30, 2.0))
    assert model.sgd_settings_["alpha"] == pytest.approx(SPARSE_ALPHA / (20 + 60))
    fitted = PerturbMAPCRF(random_state=0).fit(X, y)
    assert fitted.sgd_settings_["alpha"] == pytest.approx(SPARSE_ALPHA / 60)
    refit = pickle.loads(pickle.dumps(model)).fit(X[:10], y[:10])  # a fit starts afresh
    assert refit.sgd_settings_["alpha"] == pytest.approx(SPARSE_ALPHA / 10)


def test_structured_svm_stream_counts_every_sample_given_for_auto_alpha():
    """The subgradient SVM's stream resolves ``alpha="auto"`` on token features as the SGD
    learners' does: over every sample given so far (a fit it continues included), where its
    first chunk's alone would leave the whole corpus regularised as a tenth of it."""
    from pmap_sklearn._optim.defaults import SPARSE_ALPHA

    X, y, tags = _tagged_words()
    model = _subgradient_svm(random_state=0)
    model.partial_fit(X[:20], y[:20], classes=np.unique(tags))
    assert model.alpha_ == pytest.approx(SPARSE_ALPHA / 20)
    after_first = model.coef_.copy()
    model.partial_fit(X[20:50], y[20:50], sample_weight=np.full(30, 2.0))
    assert model.alpha_ == pytest.approx(SPARSE_ALPHA / (20 + 60))
    # the steps take the new penalty: not the stream of the first chunk's alpha throughout
    first = _subgradient_svm(random_state=0, alpha=SPARSE_ALPHA / 20)
    first.partial_fit(X[:20], y[:20], classes=np.unique(tags))
    np.testing.assert_allclose(first.coef_, after_first)  # the same first step
    first.partial_fit(X[20:50], y[20:50], sample_weight=np.full(30, 2.0))
    assert not np.allclose(first.coef_, model.coef_)
    fitted = _subgradient_svm(random_state=0, max_iter=3).fit(X, y)
    assert fitted.alpha_ == pytest.approx(SPARSE_ALPHA / 60)
    fitted.partial_fit(X[:10], y[:10])  # continuing the fit counts its 60 samples
    assert fitted.alpha_ == pytest.approx(SPARSE_ALPHA / 70)
    refit = pickle.loads(pickle.dumps(model)).fit(X[:10], y[:10])  # a fit starts afresh
    assert refit.alpha_ == pytest.approx(SPARSE_ALPHA / 10)
