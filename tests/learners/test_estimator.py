"""The fit contract of every structured learner: labels, markers, ignored nodes, warm starts."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    EpsilonCRF,
    GraphSample,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
    TwoStageCRF,
    _utils,
)
from pmap_sklearn._labels import without_ignored
from pmap_sklearn.datasets import make_chain_data

from ..helpers import _chains, _sparse_and_dense


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


VOID = 9


def _graphs(rng, n=12):
    """Chains as graphs, a tenth of their nodes void."""
    data = make_chain_data(n_samples=n, random_state=0)
    X, y_void = [], []
    for x, t in zip(data.data, data.target, strict=True):
        edges = np.column_stack([np.arange(len(t) - 1), np.arange(1, len(t))])
        X.append(GraphSample(x, edges, np.ones((len(edges), 1)), np.arange(1, len(t) + 1)))
        y_void.append(np.where(rng.random(len(t)) < 0.1, VOID, t))
    return X, y_void


LEARNERS = [
    lambda: PerturbMAPCRF("graph", random_state=0),
    lambda: MarginalPerturbMAPCRF("graph", random_state=0),
    lambda: MeanFieldCRF("graph", random_state=0),
    lambda: StructuredSVM("graph", max_iter=5, random_state=0),
    lambda: PiecewiseCRF("graph"),
    lambda: PseudoLikelihoodCRF("graph"),
    lambda: EpsilonCRF("graph", max_iter=5),
]


@pytest.mark.parametrize("make", LEARNERS)
def test_an_ignored_node_is_the_same_as_a_removed_node(make, rng):
    """Fitting with void nodes marked equals fitting on the graphs without them: the void
    label never becomes a class, and the score leaves them out."""
    X, y = _graphs(rng)
    removed_X, removed_y = without_ignored(X, y, VOID, "graph")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ignoring = make().set_params(ignore_label=VOID).fit(X, y)
        plain = make().fit(removed_X, removed_y)
    assert VOID not in ignoring.classes_
    np.testing.assert_allclose(ignoring.coef_, plain.coef_)
    predicted = ignoring.predict(X)
    assert all(VOID not in p for p in predicted)
    void_free = [t != VOID for t in y]
    accuracy = np.mean(
        [np.mean(p[k] == t[k]) for p, t, k in zip(predicted, y, void_free, strict=True)]
    )
    assert ignoring.score(X, y) == pytest.approx(accuracy)


def test_chain_learners_and_two_stage_ignore_too(rng):
    data = make_chain_data(n_samples=30, random_state=0)
    y = [
        np.where(rng.random(len(t)) < 0.15, "void", np.array(list("abcde"))[t]) for t in data.target
    ]
    for model in (
        ChainCRF(ignore_label="void"),
        PerturbMAPCRF(ignore_label="void", unknown_label=None, random_state=0),
        TwoStageCRF(ignore_label="void", random_state=0),
    ):
        model.fit(data.data, y)
        assert list(model.classes_) == list("abcde")
        assert model.score(data.data, y) > 0.6


def test_ignore_and_unknown_must_differ(rng):
    X, y = _graphs(rng)
    with pytest.raises(ValueError, match="both 9"):
        PerturbMAPCRF("graph", unknown_label=VOID, ignore_label=VOID).fit(X, y)
    with pytest.raises(ValueError, match="grid cannot lose"):
        PerturbMAPCRF("grid", ignore_label=1).fit([np.zeros((3, 3, 1))], [np.eye(3, dtype=int)])


def test_ignored_nodes_are_free_in_known_labels_and_calibration(rng):
    X, y = _graphs(rng)
    model = PerturbMAPCRF("graph", ignore_label=VOID, random_state=0, n_perturbations=20).fit(X, y)
    free = [np.full(len(t), VOID) for t in y]
    for a, b in zip(model.predict(X, known_labels=free), model.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)
    model.calibrate_marginals(X, y)
    assert 1 / 8 <= model.marginal_temperature_ <= 8


@pytest.mark.parametrize("cls", [EpsilonCRF, PiecewiseCRF])
def test_learners_without_hidden_states_refuse_them(cls):
    X, y = _chains()
    with pytest.raises(ValueError, match="does not learn hidden states .* StructuredSVM"):
        cls(ChainStructure(n_states_per_label=2)).fit(X, y)


@pytest.mark.parametrize(
    "X, message",
    [
        ([[{"w": "a"}, {"w": "b"}], [{"w": "c"}]], "feature dicts: .* SequenceVectorizer"),
        ([["a", "b"], ["c"]], "strings: .* SequenceVectorizer"),
    ],
)
def test_crfsuite_input_is_pointed_to_the_vectorizer(X, message):
    with pytest.raises(ValueError, match=message):
        PerturbMAPCRF().fit(X, [["x", "y"], ["y"]])


def test_none_as_a_tag_says_what_to_use():
    X = [np.eye(2)[[0, 1, 0]]] * 2
    with pytest.raises(ValueError, match="y holds None.*unknown_label"):
        PerturbMAPCRF().fit(X, [["a", None, "b"], ["a", "b", "b"]])
    fitted = PerturbMAPCRF(unknown_label="?", max_iter=2, random_state=0)
    fitted.fit(X, [["a", "?", "b"], ["a", "b", "b"]])  # the documented way
    assert list(fitted.classes_) == ["a", "b"]


@pytest.mark.parametrize(
    "learner", [PerturbMAPCRF, MarginalPerturbMAPCRF, StructuredSVM, PiecewiseCRF, MeanFieldCRF]
)
def test_class_weight_is_validated_once_for_every_learner(chains, learner):
    X, Y = chains
    for class_weight, message in (
        ({0: 0, 1: 0, 2: 0, 3: 0}, "every class weight 0"),
        ({1: True}, "finite numbers >= 0"),
    ):
        with pytest.raises(ValueError, match=message):
            learner("chain", class_weight=class_weight).fit(X, Y)


def test_non_finite_sparse_features_are_named():
    chains, _, tags = _sparse_and_dense(5)
    bad = chains[2].copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="sample 2: node features: non-finite values"):
        PerturbMAPCRF().fit(chains[:2] + [bad] + chains[3:], tags)


@pytest.mark.skipif(
    not Path("/proc/self/status").exists() or _utils._malloc_trim() is None,
    reason="needs glibc's malloc_trim and /proc (Linux)",
)
def test_fit_hands_freed_heap_memory_back():
    """glibc keeps freed blocks below its mmap threshold resident; a fit ends with
    release_freed_memory, which returns them (what a treebank fit leaves behind drops from
    ~170 MB to ~50 MB, the model)."""

    def resident_mb():
        return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024

    blocks = [np.ones(12_000) for _ in range(800)]  # 75 MB in 96 kB blocks, from the heap
    last = blocks[-1]  # the heap's top stays in use, so free() alone cannot shrink it
    del blocks
    before = resident_mb()
    data = make_chain_data(n_samples=6, n_features=3, random_state=0)
    PerturbMAPCRF(max_iter=1, random_state=0).fit(data.data, data.target)
    assert before - resident_mb() > 30
    del last
