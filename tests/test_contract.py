"""The scikit-learn contract under hostile use: fits that fail cleanly, labels of any kind,
parameters checked at fit, non-finite numbers, progress and convergence, the ecosystem."""

import inspect
import warnings

import numpy as np
import pytest
import sklearn.utils.estimator_checks as checks
from sklearn.exceptions import ConvergenceWarning, SkipTestWarning
from sklearn.metrics import check_scoring
from sklearn.model_selection import GridSearchCV, KFold, cross_val_predict, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    ContrastiveDivergenceCRF,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    GridStructure,
    LogSupermodularDenoiser,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    NodeTransformer,
    PartClampCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
    SequenceVectorizer,
    StructuredSVM,
    TwoStageCRF,
    hamming_scorer,
    mean_hamming_loss,
)
from pmap_sklearn._optim import sgd as _sgd
from pmap_sklearn._validation import NonFiniteError
from pmap_sklearn.datasets import add_flip_noise, make_chain_data, make_grid_data
from pmap_sklearn.superpixels import SuperpixelGraphs

SUPERVISED = [
    PerturbMAPCRF,
    MarginalPerturbMAPCRF,
    StructuredSVM,
    ChainCRF,
    EpsilonCRF,
    PiecewiseCRF,
    MeanFieldCRF,
]


def _quick(cls, **params):
    defaults = {
        ChainCRF: dict(max_iter=20),
        EpsilonCRF: dict(max_iter=20),
        PiecewiseCRF: dict(structure="chain", max_iter=20, random_state=0),
        MeanFieldCRF: dict(structure="chain", max_iter=2, random_state=0),
    }.get(cls, dict(max_iter=2, random_state=0))
    return cls(**{**defaults, **params})


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=40, n_states=3, n_features=4, random_state=0)
    return data.data, data.target


# ---- 1. a failed fit changes nothing --------------------------------------------------------
@pytest.mark.parametrize("cls", SUPERVISED)
def test_a_failed_refit_leaves_the_fitted_estimator_as_it_was(cls, chains):
    X, y = chains
    model = _quick(cls).fit(X, y)
    coef, structure, before = model.coef_.copy(), model.structure_, model.predict(X[:5])
    wider = [np.hstack([x, x]) for x in X]  # other features, and a bad label array
    bad_y = [yi.copy() for yi in y]
    bad_y[3] = bad_y[3][:-1]
    with pytest.raises(ValueError, match="sample 3: y has shape"):
        model.fit(wider, bad_y)
    assert model.structure_ is structure
    np.testing.assert_array_equal(model.coef_, coef)
    for a, b in zip(before, model.predict(X[:5]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_failed_warm_start_does_not_advance_the_state(chains):
    X, y = chains
    model = PerturbMAPCRF(max_iter=2, warm_start=True, random_state=0).fit(X, y)
    t, coef = model.t_, model.coef_.copy()
    with pytest.raises(NonFiniteError, match="diverged"):  # a step size that diverges
        model.set_params(learning_rate="constant", eta0=1e305).fit(X, y)
    assert model.t_ == t
    np.testing.assert_array_equal(model.coef_, coef)
    model.set_params(learning_rate="auto", eta0="auto").fit(X, y)  # it continues from there
    assert model.t_ == 2 * t


#: Every public estimator that takes ``warm_start``: a new learner must join the contract below.
WARM_STARTED = [
    *SUPERVISED,
    PseudoLikelihoodCRF,
    ContrastiveDivergenceCRF,
    PartClampCRF,
]

#: A new value of each parameter a warm start's state may depend on (``_warm_start_depends_on``).
NEW_VALUES = {
    "structure": ChainStructure(bias=False),
    "alpha": 0.3,
    "l1_ratio": 0.5,
    "class_weight": "balanced",
    "loss": {MeanFieldCRF: "hamming", EpsilonCRF: None},
    "unknown_label": None,
    "ignore_label": 2,
    "algorithm": "subgradient",
    "average": False,
    "n_sweeps": 3,
    "damping": 0.5,
    "unlabeled_weight": 0.5,
    "gumbel_reduction": "flip",
    "epsilon": 0.5,
    "counting_numbers": "bethe",
    "all_possible_states": "flip",
}


def _warm_quick(cls, **params):
    structure = {} if cls in SUPERVISED else {"structure": "chain", "random_state": 0}
    return _quick(cls, **{**structure, "max_iter": 3, **params})


def test_every_public_estimator_with_warm_start_is_in_the_contract():
    import pmap_sklearn

    public = {
        cls
        for cls in map(lambda name: getattr(pmap_sklearn, name), pmap_sklearn.__all__)
        if isinstance(cls, type) and "warm_start" in inspect.signature(cls).parameters
    }
    assert public == set(WARM_STARTED)


@pytest.mark.parametrize("cls", WARM_STARTED)
def test_a_warm_start_after_a_change_of_data_or_state_parameter_is_a_fresh_fit(cls, chains):
    """A warm start continues its state only on the data and parameters it was fitted on
    (BCFW's dual blocks belong to their samples, an SGD average to its alpha, the mean-field
    solver to its iterations): after a change it is exactly the fit of a fresh estimator."""
    X, y = chains
    X, y, X_new, y_new = X[:12], y[:12], X[12:24], y[12:24]
    changes = [("data", None)] + [
        (name, NEW_VALUES[name])
        for name in cls._warm_start_depends_on
        if name in cls().get_params()
    ]
    for name, value in changes:
        if isinstance(value, dict):
            value = value[cls]
        elif isinstance(value, str) and value == "flip":
            value = not cls().get_params()[name]
        warm = _warm_quick(cls, warm_start=True).fit(X, y)
        if name == "data":
            warm.fit(X_new, y_new)
            cold = _warm_quick(cls).fit(X_new, y_new)
        else:
            warm.set_params(**{name: value}).fit(X, y)
            cold = _warm_quick(cls, **{name: value}).fit(X, y)
        np.testing.assert_allclose(warm.coef_, cold.coef_, err_msg=name)
        for a, b in zip(warm.predict(X[:4]), cold.predict(X[:4]), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    # and on the same data and parameters it continues: not the fit of a fresh estimator
    warm = _warm_quick(cls, warm_start=True).fit(X, y).fit(X, y)
    assert not np.allclose(warm.coef_, _warm_quick(cls).fit(X, y).coef_)


def _fails(*args, **kwargs):
    raise RuntimeError("interrupted")


@pytest.mark.parametrize("cls", [*WARM_STARTED, TwoStageCRF])
def test_a_refit_that_fails_midway_keeps_the_model_predicting_as_before(cls, chains, monkeypatch):
    """The fit fails at its very end, once the optimiser has run on other data (wider
    features, other classes): the fitted model is the previous one, whole."""
    X, y = chains
    if cls is TwoStageCRF:
        model = TwoStageCRF(crf=_quick(PerturbMAPCRF), cv=2).fit(X, y)
        where = PerturbMAPCRF  # stage two fails after stage one
    else:
        model = _warm_quick(cls, warm_start=True).fit(X, y)
        where = cls
    before, n_features = model.predict(X[:5]), model.n_features_in_
    wider = [np.hstack([x, x]) for x in X]
    monkeypatch.setattr(where, "_set_fitted_attributes", _fails)
    with pytest.raises(RuntimeError, match="interrupted"):
        model.fit(wider, [np.minimum(t, 1) for t in y])
    monkeypatch.undo()
    assert model.n_features_in_ == n_features
    for a, b in zip(before, model.predict(X[:5]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_other_estimators_keep_their_model_when_a_refit_fails_midway(rng, monkeypatch):
    """The continuous denoiser (its optimiser interrupted after its groups and domain were
    set) and NodeTransformer (its transformer failing on wider features); SequenceVectorizer's
    is in test_fit_state, the binary denoiser's below, and SuperpixelGraphs learns nothing."""
    from pmap_sklearn import ContinuousLogSupermodularDenoiser

    clean = rng.laplace(scale=2.0, size=(200, 4))
    params = dict(groups="unary", grid_step=0.25, noise_std=1.0, max_iter=20, random_state=0)
    denoiser = ContinuousLogSupermodularDenoiser(**params).fit(clean)
    weights, noisy = denoiser.group_weights_.copy(), clean + rng.normal(size=clean.shape)
    before = denoiser.predict(noisy)
    monkeypatch.setattr(_sgd, "run_sgd", _fails)
    with pytest.raises(RuntimeError, match="interrupted"):
        denoiser.fit(np.hstack([clean, clean]))
    monkeypatch.undo()
    assert denoiser.n_features_in_ == 4
    np.testing.assert_array_equal(denoiser.group_weights_, weights)
    np.testing.assert_array_equal(denoiser.predict(noisy), before)

    class FailsOnWideFeatures(StandardScaler):
        def fit(self, X, y=None, sample_weight=None):
            if X.shape[1] > 2:
                raise RuntimeError("interrupted")
            return super().fit(X, y, sample_weight)

    samples = [rng.normal(size=(5, 2)) for _ in range(4)]
    transformer = NodeTransformer(FailsOnWideFeatures()).fit(samples)
    before = transformer.transform(samples)
    with pytest.raises(RuntimeError, match="interrupted"):
        transformer.fit([np.hstack([x, x]) for x in samples])
    assert transformer.n_features_in_ == 2
    for a, b in zip(before, transformer.transform(samples), strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_interrupted_denoiser_fit_keeps_the_previous_model(rng):
    clean = (rng.random((6, 5, 5)) < 0.5).astype(int)
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    model = LogSupermodularDenoiser(max_iter=2, random_state=0).fit(noisy, clean)
    coef = model.coef_.copy()
    bigger = np.pad(noisy, ((0, 0), (0, 1), (0, 1)))
    with pytest.raises(NonFiniteError, match="diverged"):
        model.set_params(eta0=1e308).fit(bigger, np.pad(clean, ((0, 0), (0, 1), (0, 1))))
    assert model.image_shape_ == (5, 5)
    np.testing.assert_array_equal(model.coef_, coef)
    assert model.predict(noisy).shape == noisy.shape


# ---- 2. labels as scikit-learn users give them ----------------------------------------------
def test_labels_without_phantom_classes(chains):
    X, y = chains
    y = [np.array([0, 1, 5])[yi] for yi in y]  # labels {0, 1, 5}
    model = PerturbMAPCRF(max_iter=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.classes_, [0, 1, 5])
    assert model.coef_.shape == (model.structure_.size_,) and model.structure_.n_states_ == 3
    marginals = model.predict_marginals(X[:3], n_perturbations=10)
    assert marginals[0].shape == (len(X[0]), 3)
    assert set(np.concatenate(model.predict(X)).tolist()) <= {0, 1, 5}
    decoded = model.predict(X[:3], decoding="marginal")
    for m, d in zip(model.predict_marginals(X[:3]), decoded, strict=True):
        np.testing.assert_array_equal(model.classes_[m.argmax(-1)], d)  # columns = classes_


@pytest.mark.parametrize("cls", SUPERVISED)
def test_string_labels_and_a_string_unknown_marker(cls, chains):
    X, y = chains
    letters = np.array(["a", "b", "c"])
    y = [letters[yi] for yi in y]
    model = _quick(cls).fit(X, y)
    np.testing.assert_array_equal(model.classes_, letters)
    predicted = model.predict(X[:4])
    assert predicted[0].dtype.kind == "U" and predicted[0].shape == y[0].shape
    assert 0 <= model.score(X, y) <= 1
    partial = [yi.copy() for yi in y]
    partial[0][:2] = "?"  # unknown labels, marked by a string
    model = _quick(cls, unknown_label="?").fit(X, partial)
    assert "?" not in model.classes_
    assert model.score(X[:1], partial[:1]) == pytest.approx(
        1 - np.mean(model.predict(X[:1])[0][2:] != y[0][2:])
    )


def test_loopy_structures_take_any_two_labels():
    data = make_grid_data(n_samples=6, shape=(8, 8), random_state=0)
    y = [np.where(t == 1, 7, 3) for t in data.target]  # labels {3, 7}
    model = PerturbMAPCRF("grid", max_iter=3, random_state=0).fit(data.data, y)
    np.testing.assert_array_equal(model.classes_, [3, 7])
    assert set(np.unique(np.stack(model.predict(data.data)))) <= {3, 7}
    booleans = [t.astype(bool) for t in data.target]
    model = StructuredSVM("grid", max_iter=2, random_state=0).fit(data.data, booleans)
    np.testing.assert_array_equal(model.classes_, [False, True])
    assert model.predict(data.data)[0].dtype == bool


def test_bad_labels_are_named(chains):
    X, y = chains
    with pytest.raises(ValueError, match="at least two are needed"):
        PerturbMAPCRF(max_iter=1).fit(X, [np.zeros_like(yi) for yi in y])
    with pytest.raises(ValueError, match="discrete classes"):
        PerturbMAPCRF(max_iter=1).fit(X, [yi + 0.5 for yi in y])
    with pytest.raises(ValueError, match="mixes numeric and string"):
        PerturbMAPCRF(max_iter=1).fit(X[:2], [y[0], np.array(["a"] * len(y[1]))])


def test_cross_val_predict_on_ragged_chains(chains):
    X, y = chains
    predicted = cross_val_predict(PerturbMAPCRF(max_iter=2, random_state=0), X, y, cv=2)
    assert len(predicted) == len(X)
    assert all(p.shape == t.shape for p, t in zip(predicted, y, strict=True))
    assert 0 <= mean_hamming_loss(y, predicted) < 0.7


# ---- 3. parameters validated at fit ---------------------------------------------------------
@pytest.mark.parametrize("cls", [PerturbMAPCRF, MarginalPerturbMAPCRF, StructuredSVM])
def test_n_jobs_zero_is_refused(cls, chains):
    with pytest.raises(ValueError, match="'n_jobs' parameter"):
        cls(n_jobs=0).fit(*chains)
    with pytest.raises(ValueError, match="'n_jobs' parameter"):
        LogSupermodularDenoiser(n_jobs=0).fit(np.zeros((2, 3, 3), int))


@pytest.mark.parametrize("cls", [MarginalPerturbMAPCRF, StructuredSVM])
@pytest.mark.parametrize(
    "class_weight, match",
    [
        ({0: np.nan}, "finite numbers >= 0"),
        ({0: -1.0}, "finite numbers >= 0"),
        ({9: 2.0}, r"labels \[9\] that are not classes"),
        ({"a": 2.0}, r"labels \['a'\] that are not classes"),
    ],
)
def test_class_weight_is_validated(cls, class_weight, match, chains):
    with pytest.raises(ValueError, match=match):
        cls(max_iter=1, class_weight=class_weight).fit(*chains)


def test_class_weight_keys_are_class_labels(chains):
    X, y = chains
    y = [np.array(["x", "y", "z"])[yi] for yi in y]
    model = MarginalPerturbMAPCRF(max_iter=2, class_weight={"z": 3.0}, random_state=0).fit(X, y)
    assert model.score(X, y) > 0


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_n_perturbations_is_validated(value, chains):
    model = PerturbMAPCRF(max_iter=1, random_state=0).fit(*chains)
    with pytest.raises(ValueError, match="n_perturbations must be an int >= 1"):
        model.predict_marginals(chains[0][:2], n_perturbations=value)
    with pytest.raises(ValueError, match="n_perturbations"):
        PerturbMAPCRF(n_perturbations=0).fit(*chains)


# ---- 4. non-finite numbers never hang or pass silently --------------------------------------
def test_graph_features_that_overflow_stop_the_fit_with_a_clear_error(rng):
    X = [
        GraphSample(rng.normal(size=(4, 2)), [[0, 1], [1, 2], [2, 3]], [[1e160]] * 3)
        for _ in range(4)
    ]
    y = [rng.integers(0, 2, 4) for _ in X]
    with pytest.raises(NonFiniteError, match="scale the features"):
        MarginalPerturbMAPCRF("graph", max_iter=2, eta0=1.0, random_state=0).fit(X, y)


def test_chain_crf_with_huge_features_raises(chains):
    X, y = chains
    with pytest.raises(NonFiniteError, match="scale the features"):
        ChainCRF().fit([x * 1e155 for x in X], y)


def test_sgd_divergence_raises(chains):
    with pytest.raises(NonFiniteError, match="diverged"):
        PerturbMAPCRF(learning_rate="constant", eta0=1e305, max_iter=3).fit(*chains)


@pytest.mark.parametrize("scale", [1e50, 1e150])
def test_auto_step_size_search_is_bounded(scale, chains, monkeypatch):
    """The step-size search runs a bounded number of calibration passes at any feature scale
    (it walked 334 passes at ×1e50 and ~1000 at ×1e150 by factors of 2)."""
    X, y = chains
    steps = []
    step = _sgd._step
    monkeypatch.setattr(_sgd, "_step", lambda *a, **k: steps.append(1) or step(*a, **k))
    model = PerturbMAPCRF(max_iter=1, batch_size=8, tol=None, random_state=0)
    model.fit([x * scale for x in X], y)
    passes = (len(steps) - 5) / 5  # 5 steps per pass over 40 samples, minus the epoch
    assert passes <= 45, passes
    assert model.eta0_ < 1e-80 and np.isfinite(model.coef_).all()


# ---- 5. progress and convergence ------------------------------------------------------------
@pytest.mark.parametrize(
    "cls, unit", [(PerturbMAPCRF, "epoch"), (StructuredSVM, "pass"), (ChainCRF, "iteration")]
)
def test_one_progress_format(cls, unit, chains, capsys):
    cls(max_iter=2, verbose=1, **({} if cls is ChainCRF else {"random_state": 0})).fit(*chains)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"[{cls.__name__}] {unit} 1/2: loss ")
    assert "elapsed" in lines[0] and "left" in lines[0]
    LogSupermodularDenoiser(max_iter=2, verbose=1).fit(np.zeros((2, 3, 3), int))
    assert "[LogSupermodularDenoiser] epoch 2/2: loss" in capsys.readouterr().out


def test_progress_prints_a_few_lines_per_fit(chains, capsys):
    """verbose=1 prints the first three epochs, every tenth of max_iter and the last (13
    lines for 100 epochs, not 100); verbose=3 every epoch; an early stop prints its last."""
    X, y = chains
    PerturbMAPCRF(max_iter=100, tol=None, verbose=1, random_state=0).fit(X, y)
    epochs = [int(line.split()[2].split("/")[0]) for line in capsys.readouterr().out.splitlines()]
    assert epochs == [1, 2, 3, *range(10, 101, 10)]
    PerturbMAPCRF(max_iter=30, tol=None, verbose=3, random_state=0).fit(X, y)
    assert len(capsys.readouterr().out.splitlines()) == 30
    model = PerturbMAPCRF(max_iter=100, tol=1e-3, verbose=1, random_state=0).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"[PerturbMAPCRF] converged after {model.n_iter_} epochs"
    assert lines[-2].startswith(f"[PerturbMAPCRF] epoch {model.n_iter_}/100: loss ")
    assert len(lines) <= 15


@pytest.mark.parametrize("cls", [PerturbMAPCRF, StructuredSVM, ChainCRF])
def test_convergence_warning_when_max_iter_ends_the_fit(cls, chains):
    params = {} if cls is ChainCRF else {"random_state": 0}
    with pytest.warns(ConvergenceWarning, match=f"{cls.__name__} did not converge") as record:
        cls(max_iter=1, **params).fit(*chains)
    # it points at the user's call (this file), not at the library's optimiser
    assert {w.filename for w in record if w.category is ConvergenceWarning} == {__file__}
    if cls is PerturbMAPCRF:  # no stopping rule, no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            cls(max_iter=1, tol=None, random_state=0).fit(*chains)


def test_warnings_point_at_the_users_call(chains):
    """Through scikit-learn (cross_validate, a Pipeline) and from every depth of the library
    (the optimisers, a learner's own checks, a deprecated parameter), the warning's file and
    line are the user's."""
    X, y = chains
    with pytest.warns(ConvergenceWarning) as record:
        cross_validate(
            make_pipeline(NodeTransformer(StandardScaler()), ChainCRF(max_iter=1)), X, y, cv=2
        )
    with pytest.warns(ConvergenceWarning) as more:
        EpsilonCRF(max_iter=1, tol=1e-12).fit(X, y)
    with pytest.warns(UserWarning, match="node features as large") as large:
        MeanFieldCRF("chain", max_iter=1, random_state=0).fit([x * 1e4 for x in X], y)
    assert {w.filename for w in [*record, *more, *large]} == {__file__}


# ---- 7. fits into the ecosystem -------------------------------------------------------------
def test_scorers_are_scikit_learn_scorers(chains):
    X, y = chains
    model = PerturbMAPCRF(max_iter=2, random_state=0)
    assert check_scoring(model, scoring=hamming_scorer) is hamming_scorer
    result = cross_validate(model, X, y, cv=KFold(2), scoring={"hamming": hamming_scorer})
    assert np.all((0 <= result["test_hamming"]) & (result["test_hamming"] <= 1))
    fitted = model.fit(X, y)
    assert hamming_scorer(fitted, X, y) == pytest.approx(fitted.score(X, y))


#: scikit-learn checks that test the API without fitting an (n_samples, n_features) array.
APPLICABLE_CHECKS = [
    "check_parameters_default_constructible",
    "check_no_attributes_set_in_init",
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_get_params_invariance",
    "check_set_params",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_param_validation",
    "check_estimators_unfitted",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_mixin_order",
    "check_fit1d",
]

#: The checks that cannot apply, and why. Each of them feeds the estimator data it does not
#: take: a structured estimator's X is a sequence of samples (chains (D, F), images (H, W[, F]),
#: graphs), so a 2-D array is read as a list of 1-D samples and refused; y is a sequence of
#: label arrays, not one label per row (the sample_weight checks fit 2-D arrays too: the
#: weights are tested in tests/learners/test_sample_weight.py); there is no array API support,
#: and sparse input is a list of per-sample sparse matrices, not one 2-D sparse X.
NOT_APPLICABLE = {
    "2-D (n_samples, n_features) X": [
        "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self",
        "check_estimators_overwrite_params",
        "check_estimators_pickle",
        "check_estimators_dtypes",
        "check_fit_check_is_fitted",
        "check_fit_idempotent",
        "check_fit_score_takes_y",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_n_features_in",
        "check_pipeline_consistency",
        "check_readonly_memmap_input",
        "check_f_contiguous_array_estimator",
        "check_dict_unchanged",
        "check_dtype_object",
        "check_fit2d_predict1d",
        "check_fit2d_1feature",
        "check_estimators_empty_data_messages",
        "check_non_transformer_estimators_n_iter",
        "check_inplace_ensure_writeable",
        "check_estimators_partial_fit_n_features",
    ],
    "y as one label per row": ["check_supervised_y_2d", "check_classifier_multioutput"],
    "sample_weight": ["check_sample_weights_list", "check_sample_weights_shape"],
    "sparse input": ["check_estimator_sparse_array", "check_estimator_sparse_matrix"],
}


def _estimators():
    return [
        PerturbMAPCRF(max_iter=2),
        MarginalPerturbMAPCRF(max_iter=2),
        StructuredSVM(max_iter=2),
        ChainCRF(max_iter=3),
        EpsilonCRF(max_iter=3),
        LogSupermodularDenoiser(max_iter=2),
        NodeTransformer(StandardScaler()),
        SequenceVectorizer(),
        SuperpixelGraphs(n_segments=4),
        TwoStageCRF(crf=PerturbMAPCRF(max_iter=2), cv=2),
        MeanFieldCRF("chain", max_iter=2),
        PiecewiseCRF("chain", max_iter=5),
    ]


@pytest.mark.parametrize("estimator", _estimators(), ids=lambda e: type(e).__name__)
def test_scikit_learn_estimator_checks(estimator):
    """Every API check that can apply passes; the documented others indeed do not apply (a
    check that starts passing must move to the applicable list)."""
    name = type(estimator).__name__
    for check in APPLICABLE_CHECKS:
        getattr(checks, check)(name, estimator)
    if isinstance(estimator, NodeTransformer | SequenceVectorizer | SuperpixelGraphs):
        return
    for names in NOT_APPLICABLE.values():
        for check in names:
            if check == "check_non_transformer_estimators_n_iter" and "max_iter" not in (
                estimator.get_params(deep=False)
            ):  # passes without trying anything when there is no max_iter (TwoStageCRF)
                continue
            if check == "check_estimators_partial_fit_n_features" and not hasattr(
                estimator, "partial_fit"
            ):  # passes without trying anything without partial_fit (tested on chunks of
                continue  # samples in tests/learners/test_partial_fit.py)
            function = getattr(checks, check)
            assert list(inspect.signature(function).parameters)[:1] == ["name"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(Exception):  # noqa: B017 - any refusal of foreign data
                    function(name, estimator)
    # scikit-learn's own run: it has no check for samples that are not 2-D arrays, and says so
    if get_tags(estimator).input_tags.two_d_array:
        checks.check_estimator(estimator)
    else:
        with pytest.warns(SkipTestWarning, match=f"Can't test estimator {name}"):
            checks.check_estimator(estimator)


def test_grid_with_any_number_of_labels_needs_a_fitting_solver():
    data = make_grid_data(n_samples=4, shape=(3, 3), random_state=0)
    checker = np.arange(9).reshape(3, 3) % 2 * 2
    three = [np.where(t == 0, checker, t) for t in data.target]  # labels 0, 1, 2
    with pytest.raises(ValueError, match="graph_cut solver: it handles at most 2 labels"):
        PerturbMAPCRF(GridStructure(solver="graph_cut"), max_iter=1).fit(data.data, three)
    for solver in ("auto", "brute_force"):  # "auto": α-expansion for K > 2 Potts
        model = PerturbMAPCRF(GridStructure(solver=solver), max_iter=1, random_state=0)
        assert len(model.fit(data.data, three).classes_) == len(np.unique(np.concatenate(three)))


def test_a_pickle_keeps_the_fit_state_only_for_warm_starts(chains):
    """Without warm_start a pickle holds the fitted model alone (BCFW's dual blocks, the SGD
    average and step sizes stay behind); with it, a warm start after loading continues."""
    import pickle

    X, y = chains
    for cls in (PerturbMAPCRF, StructuredSVM):
        model = _quick(cls).fit(X, y)
        alone = pickle.loads(pickle.dumps(model))
        assert not hasattr(alone, "_state")
        for a, b in zip(alone.predict(X), model.predict(X), strict=True):
            np.testing.assert_array_equal(a, b)
        kept = pickle.loads(pickle.dumps(model.set_params(warm_start=True)))
        assert hasattr(kept, "_state")
        # a warm start after loading the model alone fits afresh: as a new fit does
        refit = alone.set_params(warm_start=True).fit(X, y)
        np.testing.assert_array_equal(refit.coef_, _quick(cls).fit(X, y).coef_)
    with pytest.raises(ValueError, match="pickled with warm_start=False"):
        pickle.loads(pickle.dumps(StructuredSVM(max_iter=2).fit(X, y))).dual_objective()


# ---- multi-label classification: plain (X, Y) through every learner ---------------------------
@pytest.fixture(scope="module")
def multilabel():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    cause = X[:, 0] + 0.5 * rng.normal(size=60)
    Y = np.column_stack([cause > 0, cause > 0.5, X[:, 1] > 0]).astype(int)
    return X, Y


@pytest.mark.parametrize("cls", SUPERVISED)
def test_the_multi_label_structure_keeps_the_contract(cls, multilabel):
    """Clone, pickle, a failed refit, a warm start, GridSearchCV with a multi-label scorer and
    cross_validate, for every learner on MultiLabelStructure's plain (X, Y)."""
    import pickle

    from sklearn.base import clone

    from pmap_sklearn import MultiLabelStructure
    from pmap_sklearn.metrics import example_f1_scorer

    X, Y = multilabel
    model = _quick(cls, structure=MultiLabelStructure("tree")).fit(X, Y)
    predicted = model.predict(X)
    assert predicted.shape == Y.shape and model.n_features_in_ == 4
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).predict(X), predicted)
    twin = clone(model)
    assert not hasattr(twin, "coef_") and twin.get_params()["structure"].label_graph == "tree"
    coef = model.coef_.copy()
    with pytest.raises(ValueError, match="X has 3 samples but Y has 60"):
        model.fit(X[:3], Y)
    np.testing.assert_array_equal(model.coef_, coef)
    if "warm_start" in model.get_params():
        model.set_params(warm_start=True).fit(X, Y)
        assert model.predict(X).shape == Y.shape
    search = GridSearchCV(
        twin,
        {"structure__label_graph": ["independent", "tree"]},
        scoring={"hamming": hamming_scorer, "subset": "accuracy", "f1": example_f1_scorer},
        refit="hamming",
        cv=KFold(3),
        error_score="raise",
    ).fit(X, Y)
    assert search.best_estimator_.predict(X).shape == Y.shape
    result = cross_validate(twin, X, Y, cv=KFold(3), scoring=hamming_scorer)
    assert np.all((0 <= result["test_score"]) & (result["test_score"] <= 1))


LEARNERS = {
    "EpsilonCRF": lambda s: EpsilonCRF(s, max_iter=20),
    "PerturbMAPCRF": lambda s: PerturbMAPCRF(s, max_iter=2, random_state=0),
    "MarginalPerturbMAPCRF": lambda s: MarginalPerturbMAPCRF(s, max_iter=2, random_state=0),
    "StructuredSVM": lambda s: StructuredSVM(s, max_iter=2, random_state=0),
    "PartClampCRF": lambda s: PartClampCRF(s, n_rounds=1, random_state=0),
    "PseudoLikelihoodCRF": lambda s: PseudoLikelihoodCRF(s),
    "ContrastiveDivergenceCRF": lambda s: ContrastiveDivergenceCRF(s, max_iter=2, random_state=0),
}


def _batches(rng):
    """(structure, X, y): only 1×1 images; 1×1 images mixed with a 3×3 one (K = 3); edgeless
    graphs with K = 3 tables."""
    tiny = [rng.normal(size=(1, 1, 2)) for _ in range(4)]
    mixed = [tiny[0], rng.normal(size=(3, 3, 2)), tiny[1]]
    graphs = [
        GraphSample(rng.normal(size=(3, 2)), np.zeros((0, 2), int), np.zeros((0, 1)))
        for _ in range(3)
    ]
    return {
        "1x1 images": (GridStructure(), tiny, [np.array([[i % 2]]) for i in range(4)]),
        "1x1 and 3x3, K = 3": (
            GridStructure(),
            mixed,
            [np.array([[0]]), rng.integers(3, size=(3, 3)), np.array([[2]])],
        ),
        "1x1 images, tables": (
            GridStructure(pairwise="table", solver="message_passing"),
            tiny,
            [np.array([[i % 2]]) for i in range(4)],
        ),
        "edgeless graphs, K = 3 tables": (
            GraphStructure(pairwise="table", solver="message_passing"),
            graphs,
            [rng.integers(3, size=3) for _ in range(3)],
        ),
    }


@pytest.mark.parametrize(
    "batch",
    ["1x1 images", "1x1 and 3x3, K = 3", "1x1 images, tables", "edgeless graphs, K = 3 tables"],
)
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_every_learner_fits_and_predicts_edgeless_samples(learner, batch):
    structure, X, y = _batches(np.random.default_rng(0))[batch]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LEARNERS[learner](structure).fit(X, y)
    predictions = model.predict(X)
    assert [np.shape(p) for p in predictions] == [np.shape(t) for t in y]
    k = len(model.classes_)
    if hasattr(model, "predict_marginals") and learner != "StructuredSVM":
        marginals = model.predict_marginals(X)
        for m in marginals:
            np.testing.assert_allclose(np.sum(m, axis=-1), 1.0, atol=1e-6)
            assert m.shape[-1] == k
