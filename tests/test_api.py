"""The public API's rules: one name per meaning, one signature per query across the estimators."""

import inspect

import numpy as np
import pytest
from scipy.optimize import check_grad

import pmap_sklearn
from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    EpsilonCRF,
    GridStructure,
    LogSupermodularDenoiser,
    PerturbMAPCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
)
from pmap_sklearn.datasets import add_flip_noise, make_chain_data, make_grid_data

ESTIMATORS = [
    getattr(pmap_sklearn, name)
    for name in pmap_sklearn.__all__
    if inspect.isclass(getattr(pmap_sklearn, name))
    and hasattr(getattr(pmap_sklearn, name), "fit")
    and name.endswith(("CRF", "SVM", "Denoiser"))
]


def _parameters(cls) -> list:
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def _query_parameters(cls, name) -> list:
    return list(inspect.signature(getattr(cls, name)).parameters)[1:]


def test_one_name_per_meaning_across_the_estimators():
    for cls in ESTIMATORS:
        names = _parameters(cls)
        assert "solver" not in names, cls  # solver is a structure's inference solver only
        assert not [n for n in names if n.startswith("reg_")], cls  # regularisation is alpha
        for old in ("n_iterations", "n_message_sweeps", "n_gibbs", "step_size"):
            assert old not in names, (cls, old)  # inner passes are n_sweeps, first steps eta0


def test_every_estimator_that_samples_has_random_state_and_n_jobs():
    for cls in ESTIMATORS:
        methods = set(getattr(cls, "_marginal_methods", ("perturb",)))
        if hasattr(cls, "sample") and methods & {"exact", "perturb"}:  # sample is available
            assert {"random_state", "n_jobs"} <= set(_parameters(cls)), cls


def test_one_signature_for_predict_marginals_and_one_for_sample():
    marginals = ["X", "method", "n_perturbations", "known_labels", "n_sweeps", "as_dicts"]
    draws = ["X", "n_draws", "known_labels", "method", "random_state", "n_sweeps"]
    for cls in ESTIMATORS:
        if hasattr(cls, "predict_marginals"):
            assert _query_parameters(cls, "predict_marginals") == marginals, cls
        if hasattr(cls, "sample"):
            assert _query_parameters(cls, "sample") == draws, cls


def test_structures_take_keywords_after_their_first_argument():
    with pytest.raises(TypeError):
        ChainStructure(3, False)
    with pytest.raises(TypeError):
        GridStructure(4, True)
    assert GridStructure(8, contrast=True).contrast


def _chains():
    data = make_chain_data(n_samples=20, n_states=3, random_state=0)
    return list(data.data), list(data.target)


def test_crfsuite_dicts_come_from_predict_marginals():
    X, y = _chains()
    model = PerturbMAPCRF(max_iter=3, random_state=0).fit(X, y)
    dicts = model.predict_marginals(X[:2], as_dicts=True)
    assert dicts == model.predict_proba(X[:2], as_dicts=True)
    rows = model.predict_marginals(X[:2])
    assert [len(d) for d in dicts] == [len(r) for r in rows]
    np.testing.assert_allclose([dicts[0][0][k] for k in model.classes_], rows[0][0])


def test_n_sweeps_sets_the_gibbs_chains_and_only_them():
    data = make_grid_data(n_samples=6, shape=(6, 6), random_state=0)
    model = PerturbMAPCRF("grid", max_iter=3, n_perturbations=20, random_state=0)
    model.fit(data.data, data.target)
    default = model.predict_marginals(data.data[:2], method="gibbs")
    np.testing.assert_allclose(
        model.predict_marginals(data.data[:2], method="gibbs", n_sweeps=20)[0], default[0]
    )
    short = model.predict_marginals(data.data[:2], method="gibbs", n_sweeps=2)
    assert not np.allclose(short[0], default[0])
    draws = model.sample(data.data[:1], n_draws=3, method="gibbs", n_sweeps=4)
    assert draws[0].shape == (3, 6, 6)
    with pytest.raises(ValueError, match="n_sweeps sets the Gibbs chains"):
        model.predict_marginals(data.data[:1], method="perturb", n_sweeps=3)
    with pytest.raises(ValueError, match="n_sweeps must be an int >= 1"):
        model.sample(data.data[:1], method="gibbs", n_sweeps=0)


def test_queries_a_model_cannot_honour_are_refused_by_name():
    X, y = _chains()
    epsilon = EpsilonCRF(max_iter=5).fit(X, y)
    beliefs = epsilon.predict_marginals(X[:2])
    assert epsilon.predict_marginals(X[:2], as_dicts=True)[0][0] == dict(
        zip(epsilon.classes_.tolist(), beliefs[0][0].tolist(), strict=True)
    )
    for option in ("n_perturbations", "known_labels", "n_sweeps"):
        with pytest.raises(ValueError, match=option):
            epsilon.predict_marginals(X[:2], **{option: 5})
    with pytest.raises(ValueError, match="known_labels"):
        epsilon.predict(X[:2], known_labels=[[None] * len(X[0])] * 2)
    clean = (np.random.default_rng(0).random((6, 5, 5)) < 0.5).astype(int)
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    denoiser = LogSupermodularDenoiser(max_iter=2, random_state=0).fit(noisy, clean)
    few = denoiser.predict_marginals(noisy[:2], n_perturbations=3)
    assert set(np.unique(few[0][..., 1] * 3).round(6)) <= {0.0, 1.0, 2.0, 3.0}
    for option in ("known_labels", "n_sweeps"):
        with pytest.raises(ValueError, match=option):
            denoiser.predict_marginals(noisy[:2], **{option: 2})
    with pytest.raises(ValueError, match="method must be 'perturb'"):
        denoiser.predict_marginals(noisy[:2], method="exact")


def test_the_chain_crf_draws_from_its_random_state():
    X, y = _chains()
    first = ChainCRF(max_iter=20, random_state=3).fit(X, y).sample(X[:2], n_draws=5)
    again = ChainCRF(max_iter=20, random_state=3).fit(X, y).sample(X[:2], n_draws=5)
    np.testing.assert_array_equal(first[1], again[1])


def test_structured_svm_names_its_optimiser_algorithm():
    X, y = _chains()
    svm = StructuredSVM(algorithm="subgradient", max_iter=3, random_state=0).fit(X, y)
    assert len(svm.loss_curve_) == 3


def test_pseudo_likelihood_class_weights_weigh_each_nodes_conditional():
    """The weighted objective's gradient is its gradient (finite differences); weights of 1 are
    the unweighted fit; balanced weights raise the rare class's score."""
    data = make_grid_data(n_samples=4, shape=(5, 5), random_state=0)
    y = list(data.target)
    model = PseudoLikelihoodCRF(class_weight={0: 3.0, 1: 0.5}, max_iter=2).fit(data.data, y)
    structure = model.structure_
    batch = structure.prepare(data.data)
    labels = np.concatenate([np.ravel(t) for t in y])
    w0 = np.random.default_rng(0).normal(scale=0.3, size=structure.size_)
    w0 = structure.project(w0)

    def value(w):
        return model._objective(batch, labels, w)[0]

    def gradient(w):
        return model._objective(batch, labels, w)[1]

    assert check_grad(value, gradient, w0) < 1e-5 * max(1.0, np.linalg.norm(gradient(w0)))
    plain = PseudoLikelihoodCRF(max_iter=50).fit(data.data, y)
    ones = PseudoLikelihoodCRF(class_weight={0: 1.0, 1: 1.0}, max_iter=50).fit(data.data, y)
    np.testing.assert_allclose(ones.coef_, plain.coef_, atol=1e-8)
    share = np.mean(np.concatenate([np.ravel(t) for t in y]))
    rare = 1 if share < 0.5 else 0
    balanced = PseudoLikelihoodCRF(class_weight="balanced", max_iter=50).fit(data.data, y)
    counts = [
        np.mean(np.concatenate([np.ravel(p) for p in m.predict(data.data)]) == rare)
        for m in (plain, balanced)
    ]
    assert counts[1] >= counts[0]
