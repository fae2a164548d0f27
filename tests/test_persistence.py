"""Sharing fitted models without pickles: every public estimator and structure through
``skops.io`` with only :func:`~pmap_sklearn.persistence.trusted_types` trusted, and through the
weights-only format of :func:`~pmap_sklearn.persistence.save_weights`."""

import copy
import json
import re
import warnings
import zipfile
from functools import cache

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    ContinuousLogSupermodularDenoiser,
    ContrastiveDivergenceCRF,
    EpsilonCRF,
    GraphStructure,
    GridStructure,
    LogSupermodularDenoiser,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    MultiLabelStructure,
    NodeTransformer,
    PartClampCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
    SequenceUnion,
    SequenceVectorizer,
    StructuredSVM,
    SuperpixelGraphs,
    TokenClusters,
    TokenEmbeddings,
    TwoStageCRF,
)
from pmap_sklearn import persistence as shared
from pmap_sklearn.datasets import add_flip_noise, make_chain_data, make_grid_data, token_features

from .helpers import _corpus, _grid_graphs, _hidden_graph_data

sio = pytest.importorskip("skops.io", reason="skops is the share extra")


# ---- tiny data of every kind ------------------------------------------------------------------
@cache
def _data(kind):
    rng = np.random.default_rng(0)
    if kind == "chain":
        data = make_chain_data(n_samples=12, n_states=3, n_features=3, random_state=0)
        return data.data, data.target
    if kind == "grid":
        data = make_grid_data(n_samples=4, shape=(4, 4), random_state=0)
        return data.data, data.target
    if kind == "graph":
        return _grid_graphs(rng, n_samples=4)
    if kind == "hidden graph":  # a hidden node joined to every visible one
        return _hidden_graph_data(n_samples=6)
    if kind == "multilabel":
        X = rng.normal(size=(30, 4))
        cause = X[:, 0] + 0.5 * rng.normal(size=30)
        return X, np.column_stack([cause > 0, cause > 0.5, X[:, 1] > 0]).astype(int)
    if kind == "tokens":
        return _corpus(12)
    raise KeyError(kind)


def _structure(kind):
    return {
        "chain": ChainStructure(),
        "grid": GridStructure(),
        "graph": GraphStructure(),
        "multilabel": MultiLabelStructure("tree"),
    }[kind]


#: Every public learner, given a structure, quick on tiny data.
LEARNERS = {
    "PerturbMAPCRF": lambda s: PerturbMAPCRF(s, max_iter=2, random_state=0),
    "MarginalPerturbMAPCRF": lambda s: MarginalPerturbMAPCRF(s, max_iter=2, random_state=0),
    "StructuredSVM": lambda s: StructuredSVM(s, max_iter=2, random_state=0),
    "ChainCRF": lambda s: ChainCRF(s, max_iter=5),
    "EpsilonCRF": lambda s: EpsilonCRF(s, max_iter=5),
    "PartClampCRF": lambda s: PartClampCRF(s, n_rounds=1, max_iter=5, random_state=0),
    "PseudoLikelihoodCRF": lambda s: PseudoLikelihoodCRF(s, max_iter=5),
    "ContrastiveDivergenceCRF": lambda s: ContrastiveDivergenceCRF(s, max_iter=2, random_state=0),
    "PiecewiseCRF": lambda s: PiecewiseCRF(s, max_iter=5, random_state=0),
    "MeanFieldCRF": lambda s: MeanFieldCRF(s, max_iter=2, random_state=0),
    "TwoStageCRF": lambda s: TwoStageCRF(
        crf=PerturbMAPCRF(s, max_iter=2, random_state=0), cv=2, random_state=0
    ),
}
#: Kinds a learner does not take (the chain CRF's exact marginals; stage one classifies nodes).
NOT_TAKEN = {("ChainCRF", "grid"), ("ChainCRF", "graph"), ("TwoStageCRF", "multilabel")}
KINDS = ["chain", "grid", "graph", "multilabel"]


def _special_setups():
    """Setups that hold more than a learner and a structure: solvers, hidden states, L1, fit
    states kept for warm starts, constraints, pipelines of the transformers, the denoisers."""
    vectors = {"the": [1.0, 0.0], "dog": [0.0, 2.0], "runs": [3.0, -1.0]}
    return {
        "hidden states": (
            lambda: ChainCRF(ChainStructure(n_states_per_label=2), max_iter=5, random_state=0),
            "chain",
        ),
        "hidden graph nodes": (
            lambda: StructuredSVM(
                GraphStructure(pairwise="table", n_hidden_states=2), max_iter=2, random_state=0
            ),
            "hidden graph",
        ),
        "L1": (lambda: ChainCRF(l1_ratio=0.9, alpha=0.5, max_iter=10), "chain"),
        "warm SGD, L1, AdaGrad": (
            lambda: PerturbMAPCRF(
                max_iter=2, warm_start=True, l1_ratio=0.5, learning_rate="adagrad", random_state=0
            ),
            "chain",
        ),
        "warm BCFW": (
            lambda: StructuredSVM(GridStructure(), max_iter=2, warm_start=True, random_state=0),
            "grid",
        ),
        "warm L-BFGS": (lambda: ChainCRF(max_iter=3, warm_start=True), "chain"),
        "warm epsilon": (lambda: EpsilonCRF(max_iter=3, warm_start=True), "chain"),
        "BIO constraints": (
            lambda: ChainCRF(ChainStructure(constraints="BIO"), max_iter=5),
            "bio",
        ),
        "tables, message passing": (
            lambda: PerturbMAPCRF(
                GridStructure(pairwise="table", solver="message_passing"),
                max_iter=2,
                random_state=0,
            ),
            "grid",
        ),
        "TRW-S": (
            lambda: PerturbMAPCRF(GridStructure(n_states=3, solver="trws"), max_iter=2),
            "grid",
        ),
        "alpha expansion": (
            lambda: PerturbMAPCRF(GridStructure(n_states=3), max_iter=2, random_state=0),
            "grid",
        ),
        "brute force": (
            lambda: PerturbMAPCRF(GraphStructure(solver="brute_force"), max_iter=2),
            "small graph",
        ),
        "vectorizer pipeline": (
            lambda: make_pipeline(SequenceVectorizer(token_features), ChainCRF(max_iter=5)),
            "tokens",
        ),
        "sparse warm BCFW": (
            lambda: make_pipeline(
                SequenceVectorizer(token_features),
                StructuredSVM(max_iter=2, warm_start=True, random_state=0),
            ),
            "tokens",
        ),
        "union pipeline": (
            lambda: make_pipeline(
                SequenceUnion(
                    [
                        ("tokens", SequenceVectorizer(token_features)),
                        ("vectors", TokenEmbeddings(vectors)),
                        ("clusters", TokenClusters(vectors, n_clusters=(2,))),
                    ]
                ),
                PerturbMAPCRF(max_iter=2, random_state=0),
            ),
            "tokens",
        ),
        "hashing pipeline": (
            lambda: make_pipeline(
                SequenceVectorizer(token_features, n_features=64), ChainCRF(max_iter=5)
            ),
            "tokens",
        ),
        "chain of labels": (
            lambda: ChainCRF(MultiLabelStructure("chain"), max_iter=5),
            "multilabel",
        ),
        "untied tables, contrast, balanced": (
            lambda: PerturbMAPCRF(
                GridStructure(
                    contrast=True, n_states=3, pairwise="table", untied=True, solver="trws"
                ),
                class_weight="balanced",
                max_iter=2,
                random_state=0,
            ),
            "grid",
        ),
        "node transformer pipeline": (
            lambda: make_pipeline(NodeTransformer(StandardScaler()), ChainCRF(max_iter=5)),
            "chain",
        ),
        "binary denoiser": (
            lambda: LogSupermodularDenoiser(max_iter=2, n_perturbations=5, random_state=0),
            "binary images",
        ),
        "continuous denoiser": (
            lambda: ContinuousLogSupermodularDenoiser(
                groups="unary", grid_step=0.25, noise_std=1.0, max_iter=5, random_state=0
            ),
            "values",
        ),
    }


def _special_data(kind):
    rng = np.random.default_rng(0)
    if kind == "bio":
        X, _ = _data("chain")
        tags = np.array(["O", "B-X", "I-X"])
        return X, [tags[np.r_[0, (x[1:, 0] > 0) + (x[:-1, 0] > 0)] % 3] for x in X]
    if kind == "binary images":
        clean = (rng.random((4, 5, 5)) < 0.5).astype(int)
        noisy = add_flip_noise(clean, 0.1, random_state=0)
        return noisy, clean
    if kind == "values":
        clean = rng.laplace(scale=2.0, size=(60, 4))
        return clean, None
    if kind == "small graph":  # 2 × 3 nodes: 64 labellings to enumerate
        return _grid_graphs(rng, n_samples=3, shape=(2, 3))
    return _data(kind)


def _setups():
    setups = {
        f"{name} on {kind}": (lambda make=make, kind=kind: make(_structure(kind)), kind)
        for name, make in LEARNERS.items()
        for kind in KINDS
        if (name, kind) not in NOT_TAKEN
    }
    return {**setups, **_special_setups()}


SETUPS = _setups()


@cache
def _fitted(name):
    """The fitted model of a setup and the samples it predicts."""
    make, kind = SETUPS[name]
    X, y = _special_data(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        model = make().fit(X) if y is None else make().fit(X, y)
    if kind == "values":
        X = X + np.random.default_rng(1).normal(size=X.shape)
    return model, X


def _assert_predicts_the_same(model, other, X):
    expected, got = model.predict(X), other.predict(X)
    assert type(got) is type(expected) and len(got) == len(expected)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_every_public_estimator_and_structure_is_in_a_setup():
    """A new public estimator, transformer or structure must join the setups above."""
    from sklearn.base import BaseEstimator

    import pmap_sklearn

    public = {
        obj
        for obj in (getattr(pmap_sklearn, name) for name in pmap_sklearn.__all__)
        if isinstance(obj, type) and issubclass(obj, BaseEstimator)
    }
    covered = set()
    for make, _ in SETUPS.values():
        model = make()
        covered |= {type(model)} | {
            type(value)
            for value in model.get_params(deep=True).values()
            if isinstance(value, BaseEstimator)
        }
        for step in getattr(model, "steps", []):  # the transformers of a union
            for _, part in getattr(step[1], "transformer_list", []):
                covered.add(type(part))
    assert public - covered == {SuperpixelGraphs}  # (test_superpixel_graphs_round_trip)


# ---- skops.io -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SETUPS))
def test_skops_round_trip_with_the_listed_types_trusted(name, tmp_path):
    model, X = _fitted(name)
    path = tmp_path / "model.skops"
    sio.dump(model, path)
    untrusted = sio.get_untrusted_types(file=path)
    assert set(untrusted) <= set(shared.trusted_types()), name
    loaded = sio.load(path, trusted=shared.trusted_types())
    assert type(loaded) is type(model)
    _assert_predicts_the_same(model, loaded, X)


def test_the_two_stage_choice_scores_survive_skops_and_pickles():
    """Their keys are tuples, which skops.io cannot write: stored as pairs, loaded as the dict."""
    import pickle

    model, _ = _fitted("TwoStageCRF on chain")
    assert isinstance(model.choice_scores_, dict) and model.choice_scores_
    loaded = sio.loads(sio.dumps(model), trusted=shared.trusted_types())
    assert loaded.choice_scores_ == model.choice_scores_
    assert pickle.loads(pickle.dumps(model)).choice_scores_ == model.choice_scores_
    assert model.choice_scores_  # the fitted model itself is unchanged


def test_a_warm_started_structured_svm_continues_after_skops():
    """BCFW's state keeps its structure (not a bound method of it): skops.io stores it and a
    warm start after loading continues as one on the original does."""
    model, X = _fitted("warm BCFW")
    loaded = sio.loads(sio.dumps(model), trusted=shared.trusted_types())
    assert loaded._state.structure is loaded.structure_
    _, y = _data("grid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        original = copy.deepcopy(model).fit(X, y)  # (the cached model stays as fitted)
        np.testing.assert_array_equal(loaded.fit(X, y).coef_, original.coef_)
    assert not np.array_equal(original.coef_, model.coef_)  # it continued


def test_trusted_types_and_weights_classes_name_what_they_import():
    import importlib

    names = shared.trusted_types()
    assert names == sorted(set(names)) and shared.trusted_types() is not names  # a copy
    for name in names:
        module, _, attribute = name.rpartition(".")
        obj = getattr(importlib.import_module(module), attribute)
        if name.startswith("pmap_sklearn."):
            assert f"{obj.__module__}.{obj.__qualname__}" == name
    for name, qualified in shared.WEIGHTS_CLASSES.items():  # each resolves, by its own name
        module, _, attribute = qualified.rpartition(".")
        assert getattr(importlib.import_module(module), attribute).__name__ == name


#: Classes no fitted model holds: bases of the learners and structures, the solver protocol,
#: the sample types.
BASES_AND_SAMPLES = {
    "FullBatchCRF",
    "LbfgsSurrogateCRF",
    "ClassWeightedSGD",
    "EdgeFeatureStructure",
    "Solver",
    "GraphSample",
    "Potentials",
}


def test_every_estimator_structure_solver_and_fit_state_class_is_trusted():
    """A new class of one of these kinds must join the list (or skops.io refuses its models);
    the bases that are never instantiated and the sample types (data, not models) are not."""
    import pmap_sklearn
    from pmap_sklearn import solvers
    from pmap_sklearn._state import FitState
    from pmap_sklearn.structures import BaseStructure

    def subclasses(base):
        found = set()
        for cls in base.__subclasses__():
            found |= {cls} | subclasses(cls)
        return found

    from sklearn.base import BaseEstimator

    public = [getattr(pmap_sklearn, name) for name in pmap_sklearn.__all__]
    kinds = (BaseEstimator, BaseStructure, solvers.Solver, FitState)
    classes = {c for base in kinds for c in subclasses(base) | {base}} | set(public)
    names = {
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if isinstance(c, type)
        and c.__module__.startswith("pmap_sklearn.")
        and not c.__qualname__.startswith(("Base", "_"))
        and c.__qualname__ not in BASES_AND_SAMPLES
        and "<locals>" not in c.__qualname__
    }
    assert names - set(shared.trusted_types()) == set()


# ---- the weights-only format ---------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SETUPS))
def test_weights_round_trip_predicts_the_same(name, tmp_path):
    model, X = _fitted(name)
    path = tmp_path / "model.npz"
    shared.save_weights(model, path)
    with np.load(path, allow_pickle=False) as arrays:  # plain arrays, no pickle inside
        stored = [arrays[key] for key in arrays.files if key != "settings.json"]
    assert stored and all(a.dtype != object for a in stored)
    loaded = shared.load_weights(path)
    assert type(loaded) is type(model)
    _assert_predicts_the_same(model, loaded, X)


def test_models_holding_other_scikit_learn_objects_are_refused_by_name(tmp_path):
    """Stage one other than LogisticRegression, a NodeTransformer of another transformer
    than the scalers: named by their path, skops.io suggested, nothing written."""
    from sklearn.decomposition import PCA
    from sklearn.naive_bayes import GaussianNB

    X, y = _data("chain")
    two_stage = TwoStageCRF(GaussianNB(), PerturbMAPCRF(max_iter=2, random_state=0), cv=2)
    transformed = make_pipeline(NodeTransformer(PCA(2)), ChainCRF(max_iter=5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        models = {"GaussianNB": two_stage.fit(X, y), "PCA": transformed.fit(X, y)}
    for name, model in models.items():
        path = tmp_path / "model.npz"
        with pytest.raises(TypeError, match=rf"cannot store model\S* \(a {name} .*skops\.io"):
            shared.save_weights(model, path)
        assert not path.exists()


def test_the_weights_file_is_readable_without_the_library(tmp_path):
    """A zip of .npy arrays and a settings.json: the class, its parameters, the structure,
    the vocabulary of a tagging pipeline."""
    model, _ = _fitted("vectorizer pipeline")
    path = tmp_path / "tagger.npz"
    shared.save_weights(model, path)
    with zipfile.ZipFile(path) as archive:
        settings = json.loads(archive.read("settings.json"))
        names = set(archive.namelist())
    assert settings["format"] == "pmap_sklearn.weights" and settings["version"] == 1
    steps = settings["model"]["attributes"]["steps"]
    vectorizer, crf = steps[0]["tuple"][1], steps[1]["tuple"][1]
    assert crf["object"] == "ChainCRF"
    assert crf["attributes"]["structure_"]["object"] == "ChainStructure"
    vocabulary = vectorizer["attributes"]["vectorizer_"]["attributes"]["vocabulary_"]["dict"]
    assert vocabulary == model[0].vectorizer_.vocabulary_
    coef = crf["attributes"]["coef_"]["array"]
    assert f"{coef}.npy" in names and f"{crf['attributes']['classes_']['array']}.npy" in names
    with np.load(path, allow_pickle=False) as arrays:
        np.testing.assert_array_equal(arrays[coef], model[-1].coef_)


def test_the_weights_format_refuses_what_it_cannot_rebuild(tmp_path):
    from sklearn.exceptions import NotFittedError

    from pmap_sklearn.solvers import Solver

    path = tmp_path / "model.npz"
    with pytest.raises(NotFittedError, match="ChainCRF"):
        shared.save_weights(ChainCRF(), path)
    X, y = _data("chain")
    model = PerturbMAPCRF(max_iter=1, random_state=0).fit(X, y)

    class MySolver(Solver):  # a solver of one's own: not rebuilt
        pass

    model.structure_.solver_ = MySolver()
    with pytest.raises(TypeError, match=r"model.structure_.solver_ \(a MySolver.*skops.io"):
        shared.save_weights(model, path)


def _rewrite(path, edit):
    """The weights file at ``path`` with its settings changed by ``edit``."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    settings = json.loads(members["settings.json"])
    edit(settings)
    members["settings.json"] = json.dumps(settings)
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)


def test_loading_refuses_foreign_files_other_versions_and_unknown_classes(tmp_path):
    X, y = _data("chain")
    path = tmp_path / "model.npz"
    shared.save_weights(ChainCRF(max_iter=3).fit(X, y), path)
    # not a zip; a zip without settings; another format
    (tmp_path / "text.npz").write_text("coef_ = [1, 2]")
    with pytest.raises(ValueError, match="text.npz is not a weights file"):
        shared.load_weights(tmp_path / "text.npz")
    np.savez(tmp_path / "arrays.npz", coef_=np.zeros(3))
    with pytest.raises(ValueError, match="arrays.npz is not a weights file.*settings.json"):
        shared.load_weights(tmp_path / "arrays.npz")
    other = tmp_path / "other.npz"
    other.write_bytes(path.read_bytes())
    _rewrite(other, lambda s: s.update(format="somebody.else"))
    with pytest.raises(ValueError, match="other.npz is not a weights file.*format"):
        shared.load_weights(other)
    # another version of the format
    _rewrite(path, lambda s: s.update(version=2))
    with pytest.raises(ValueError, match="version 2 of the weights format.*reads version 1"):
        shared.load_weights(path)
    # a class outside the allowlist, by name (nothing is imported for it)
    _rewrite(path, lambda s: s.update(version=1))
    _rewrite(path, lambda s: s["model"].update(object="os.system"))
    with pytest.raises(ValueError, match="names the class 'os.system', which load_weights"):
        shared.load_weights(path)
    _rewrite(path, lambda s: s["model"].update(object="ChainCRF"))
    _rewrite(path, lambda s: s["model"]["attributes"].update(__class__="x"))
    with pytest.raises(ValueError, match=r"attribute names not allowed: \['__class__'\]"):
        shared.load_weights(path)
    _rewrite(path, lambda s: s["model"]["attributes"].pop("__class__"))
    _rewrite(path, lambda s: s["model"]["attributes"].update(dtype_={"dtype": "|O"}))
    with pytest.raises(ValueError, match=re.escape("names the dtype '|O', not plain data")):
        shared.load_weights(path)


def test_superpixel_graphs_round_trip(tmp_path):
    """The photo-to-graph transformer (its parameters only) through both formats."""
    pytest.importorskip("skimage")
    photo = np.zeros((12, 12, 3))  # four colour patches, some noise
    photo[:6, :6, 0] = photo[6:, :6, 1] = photo[:6, 6:, 2] = 1.0
    photo = np.clip(photo + np.random.default_rng(0).normal(0, 0.02, photo.shape), 0, 1)
    graphs = SuperpixelGraphs(4).fit([photo])
    shared.save_weights(graphs, tmp_path / "superpixels.npz")
    loaded = [
        sio.loads(sio.dumps(graphs), trusted=shared.trusted_types()),
        shared.load_weights(tmp_path / "superpixels.npz"),
    ]
    expected = graphs.transform([photo])[0]
    for other in loaded:
        assert other.get_params() == graphs.get_params()
        got = other.transform([photo])[0]
        np.testing.assert_array_equal(got.node_features, expected.node_features)
        np.testing.assert_array_equal(got.segments, expected.segments)


def test_a_fitted_structure_alone_round_trips(tmp_path):
    model, _ = _fitted("BIO constraints")
    shared.save_weights(model.structure_, tmp_path / "structure.npz")
    loaded = shared.load_weights(tmp_path / "structure.npz")
    assert type(loaded) is type(model.structure_)
    assert sorted(vars(loaded)) == sorted(vars(model.structure_))
    np.testing.assert_array_equal(loaded.label_states_, model.structure_.label_states_)
    assert loaded.get_params() == model.structure_.get_params()


@pytest.mark.parametrize("seed", [np.random.default_rng(5), np.random.RandomState(5)])
def test_a_random_state_object_is_stored_by_its_state(seed, tmp_path):
    """Marginals by perturbations re-seed from random_state: the same after loading."""
    X, y = _data("chain")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = PerturbMAPCRF(max_iter=2, random_state=seed).fit(X, y)
    shared.save_weights(model, tmp_path / "model.npz")
    loaded = shared.load_weights(tmp_path / "model.npz")
    assert type(loaded.random_state) is type(seed)
    for a, b in zip(
        model.predict_marginals(X[:3], n_perturbations=5),
        loaded.predict_marginals(X[:3], n_perturbations=5),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)

    def evil(settings):
        (node,) = settings["model"]["attributes"]["random_state"].values()
        node["dict"]["bit_generator"] = "Evil"

    _rewrite(tmp_path / "model.npz", evil)
    with pytest.raises(ValueError, match="names the bit generator 'Evil'"):
        shared.load_weights(tmp_path / "model.npz")


def test_a_warm_start_after_loading_weights_fits_afresh(tmp_path):
    X, y = _data("chain")
    model = PerturbMAPCRF(max_iter=2, warm_start=True, random_state=0).fit(X, y)
    shared.save_weights(model, tmp_path / "model.npz")
    loaded = shared.load_weights(tmp_path / "model.npz")
    assert not hasattr(loaded, "_state")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        refit = loaded.fit(X, y)
        fresh = PerturbMAPCRF(max_iter=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(refit.coef_, fresh.coef_)
