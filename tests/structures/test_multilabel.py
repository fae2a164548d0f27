"""MultiLabelStructure: label graphs, exact inference, scikit-learn's outputs, every learner."""

import pickle
import warnings

import numpy as np
import pytest
from scipy import sparse
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.datasets import make_multilabel_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, hamming_loss, mutual_info_score
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.multioutput import MultiOutputClassifier

from pmap_sklearn import (
    ChainCRF,
    EpsilonCRF,
    MarginalPerturbMAPCRF,
    MultiLabelStructure,
    PerturbMAPCRF,
    StructuredSVM,
    TwoStageCRF,
    hamming_scorer,
)
from pmap_sklearn.metrics import example_f1_scorer
from pmap_sklearn.structures import chow_liu_tree, label_mutual_information

from ..helpers import _correlated, scores_of


# ---- the label graphs ------------------------------------------------------------------------
def test_mutual_information_is_scikit_learns_and_chow_liu_keeps_the_strongest_tree():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 500)
    b = np.where(rng.random(500) < 0.9, a, 1 - a)  # close to a
    c = np.where(rng.random(500) < 0.7, b, 1 - b)  # weaker to b
    d = rng.integers(0, 2, 500)  # independent
    Y = np.column_stack([a, b, c, d])
    information = label_mutual_information(Y)
    for i in range(4):
        for j in range(4):
            assert information[i, j] == pytest.approx(mutual_info_score(Y[:, i], Y[:, j]))
    tree = {tuple(sorted(edge)) for edge in chow_liu_tree(Y).tolist()}
    assert len(tree) == 3 and {(0, 1), (1, 2)} <= tree  # d joins wherever it is least bad


@pytest.mark.parametrize(
    "graph, edges",
    [
        ("independent", []),
        ("chain", [[0, 1], [1, 2], [2, 3]]),
        ("full", [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]),
        ([[0, 3], [1, 2]], [[0, 3], [1, 2]]),
    ],
)
def test_label_graphs(graph, edges):
    X, Y = _correlated(40)
    structure = MultiLabelStructure(graph).fit(X, Y)
    np.testing.assert_array_equal(structure.edges_.reshape(-1, 2), np.reshape(edges, (-1, 2)))


@pytest.mark.parametrize("graph", ["tree", "full"])
def test_map_and_marginals_are_exact_on_the_label_graph(graph, rng):
    X, Y = _correlated(30)
    structure = MultiLabelStructure(graph).fit(X, Y)
    assert structure.solver_.name == ("forest" if graph == "tree" else "brute_force")
    batch = structure.prepare(X[:6])
    w = rng.normal(scale=2.0, size=structure.size_)
    potentials = structure.potentials(batch, w)
    labels = structure.solver_.map(potentials)
    node = structure.solver_.marginals(potentials).node
    for i, one in enumerate(potentials.split()):
        labellings, scores = scores_of(one)
        np.testing.assert_array_equal(labels[batch.nodes_of(i)], labellings[np.argmax(scores)])
        probability = np.exp(scores - logsumexp(scores))
        expected = np.stack([probability @ (labellings == 1)[:, d] for d in range(4)])
        np.testing.assert_allclose(node[batch.nodes_of(i), 1], expected, atol=1e-10)


def test_loopy_graphs_beyond_ten_labels_search_locally_and_reach_the_optimum(rng):
    """12 labels on the full graph: ``"auto"`` is the local search, whose labellings of a
    fitted model's potentials score as the brute-force optimum on most samples (never above)."""
    X = rng.normal(size=(160, 4))
    common = X[:, :1] + 0.5 * rng.normal(size=(160, 1)) > 0
    Y = (common ^ (rng.random((160, 12)) < 0.15)).astype(int)  # twelve noisy copies of one bit
    model = PerturbMAPCRF(MultiLabelStructure("full"), random_state=0).fit(X, Y)
    structure = model.structure_
    assert structure.solver_.name == "local_search"
    assert model.score(X, Y) > 0.7  # all zeros score about 0.5; the Bayes rule about 0.75
    potentials = structure.potentials(structure.prepare(X[:20]), model.coef_)
    found = potentials.score(structure.solver_.map(potentials))
    optimum = np.array([scores_of(one)[1].max() for one in potentials.split()])
    assert np.all(found <= optimum + 1e-9)
    assert np.mean(found >= optimum - 1e-9) >= 0.9


def _indicators():
    """Sparse word indicators of 600 documents, 12 labels: 300 to train, 300 to test."""
    X, Y = make_multilabel_classification(
        n_samples=600, n_features=300, n_classes=12, n_labels=2, length=300, random_state=0
    )
    X = sparse.csr_matrix((X > 0).astype(float))
    return (X[:300], Y[:300]), (X[300:], Y[300:])


def test_uncentred_sparse_indicators_get_the_dense_budget_and_learn_the_rare_labels():
    """Without a bias (uncentred sparse features) multi-label rows run AdaGrad for 50 epochs,
    not the tagging budget of 8, which stops before the rare labels' weights grow: held-out
    Hamming loss and micro F1 both improve."""
    (X, Y), (X_test, Y_test) = _indicators()
    scores, models = {}, {}
    for max_iter in ("auto", 8):
        model = PerturbMAPCRF(MultiLabelStructure(bias=False), max_iter=max_iter, random_state=0)
        models[max_iter] = model.fit(X, Y)
        predicted = model.predict(X_test)
        scores[max_iter] = (
            model.score(X_test, Y_test),
            f1_score(Y_test, predicted, average="micro"),
        )
    settings = models["auto"].sgd_settings_
    assert settings["max_iter"] == 50 and settings["learning_rate"] == "adagrad"
    assert scores["auto"][0] > scores[8][0] + 0.01
    assert scores["auto"][1] > scores[8][1] + 0.1


def test_sparse_indicators_are_centred_and_beat_independent_regressions():
    """With a bias, sparse X is centred implicitly (its zeros kept) and takes the dense rule:
    on held-out documents the default CRF beats the uncentred one (no bias) and scikit-learn's
    independent logistic regressions on both Hamming loss and micro F1."""
    (X, Y), (X_test, Y_test) = _indicators()
    lr = MultiOutputClassifier(LogisticRegression(max_iter=1000))
    models = {
        "centred": PerturbMAPCRF(MultiLabelStructure(), random_state=0),
        "uncentred": PerturbMAPCRF(MultiLabelStructure(bias=False), random_state=0),
        "lr": lr,
    }
    scores = {}
    for name, model in models.items():
        predicted = model.fit(X, Y).predict(X_test)
        scores[name] = (
            hamming_loss(Y_test, predicted),
            f1_score(Y_test, predicted, average="micro"),
        )
    centred = models["centred"]
    assert centred.structure_._centres_implicitly
    assert sparse.issparse(centred.structure_.prepare(X_test).features)
    assert centred.sgd_settings_["learning_rate"] == "optimal"  # the dense rule
    np.testing.assert_allclose(centred.structure_.feature_mean_, X.mean(axis=0).A1)
    for other in ("uncentred", "lr"):
        assert scores["centred"][0] < scores[other][0] - 0.005
        assert scores["centred"][1] > scores[other][1] + 0.05


def test_implicit_centring_is_the_centred_features_exactly():
    """Fitted on sparse X, the unary scores, the joint feature (summed, per sample, over some
    nodes) and the logistic start's node features are those of the explicitly centred
    block features."""
    X, Y = make_multilabel_classification(n_samples=40, n_features=6, n_classes=4, random_state=0)
    n, F, L = 40, 6, 4
    structure = MultiLabelStructure("tree").fit(sparse.csr_matrix(X), Y)
    batch = structure.prepare(sparse.csr_matrix(X))
    rng = np.random.default_rng(0)
    w = rng.normal(size=structure.size_)
    blocks = structure.unpack(w)[0].reshape(L, F + 1, 2)
    centred = (X - X.mean(axis=0)) / structure.feature_scale_
    scores = np.einsum("nf,lfk->nlk", centred, blocks[:, :F]) + blocks[:, F]
    np.testing.assert_allclose(
        structure.potentials(batch, w).unary, scores.reshape(-1, 2), atol=1e-12
    )
    values = rng.normal(size=(batch.n_nodes, 2))
    for rows in (None, np.array([0, 3, 7, 8, 21, 159])):
        kept = np.zeros_like(values)
        kept[slice(None) if rows is None else rows] = values[slice(None) if rows is None else rows]
        by_sample = kept.reshape(n, L, 2)
        expected = np.zeros((n, L, F + 1, 2))
        expected[:, :, :F] = np.einsum("nf,nlk->nlfk", centred, by_sample)
        expected[:, :, F] = by_sample
        taken = values if rows is None else values[rows]
        got = structure._unary_joint_feature(batch, taken, rows, False)
        np.testing.assert_allclose(got, expected.sum(axis=0).ravel(), atol=1e-12)
        got = structure._unary_joint_feature(batch, taken, rows, True)
        np.testing.assert_allclose(got, expected.reshape(n, -1), atol=1e-12)
    nodes = np.array([1, 6, 38, 159])
    design = np.zeros((len(nodes), L * (F + 1)))
    for row, node in enumerate(nodes):
        start = (node % L) * (F + 1)
        design[row, start : start + F], design[row, start + F] = centred[node // L], 1.0
    np.testing.assert_allclose(structure.node_features(batch, nodes).toarray(), design, atol=1e-12)


def test_logistic_start_bounds_the_dense_rows_of_wide_sparse_features(monkeypatch):
    """The logistic start builds the implicitly centred rows of sparse X dense (F + 1 entries
    each): it keeps at most ``LOGISTIC_DENSE_ENTRIES`` of them, as a random subset, and still
    starts where the logistic regressions are; on dense X the rows are the batch's own."""
    from pmap_sklearn._optim import defaults

    X, Y = make_multilabel_classification(n_samples=150, n_features=30, n_classes=4, random_state=0)
    F = X.shape[1]
    monkeypatch.setattr(defaults, "LOGISTIC_DENSE_ENTRIES", 100 * (F + 1))
    widths, rows = [], []
    original = MultiLabelStructure.node_features

    def recording(structure, batch, nodes):
        widths.append(structure.dense_node_feature_width())
        rows.append(len(nodes))
        return original(structure, batch, nodes)

    monkeypatch.setattr(MultiLabelStructure, "node_features", recording)
    Xs = sparse.csr_matrix(X)

    def one_pass(X, init="logistic"):
        model = PerturbMAPCRF(MultiLabelStructure("independent"), init=init, max_iter=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return hamming_loss(Y, model.set_params(random_state=0).fit(X, Y).predict(X))

    from_subset, from_all = one_pass(Xs), one_pass(X)
    assert widths == [F + 1, None]
    assert rows == [100, 150 * 4]  # the sparse start's 100 rows of 600 nodes; every dense node
    # a start still: one pass from it is ahead of one from zeros, the whole start further
    assert from_all < from_subset < one_pass(Xs, init="zeros")


# ---- the scikit-learn forms ------------------------------------------------------------------
def test_outputs_take_scikit_learns_multi_label_forms():
    X, Y = _correlated(120)
    model = PerturbMAPCRF(MultiLabelStructure("tree"), random_state=0).fit(X, Y)
    predicted = model.predict(X)
    assert predicted.shape == Y.shape and set(np.unique(predicted)) <= {0, 1}
    proba = model.predict_proba(X)
    assert proba.shape == Y.shape and ((proba >= 0) & (proba <= 1)).all()
    marginals = model.predict_marginals(X)
    assert marginals.shape == Y.shape + (2,)
    np.testing.assert_allclose(marginals[..., 1], proba)
    np.testing.assert_allclose(marginals.sum(axis=-1), 1.0)
    assert model.score(X, Y) == pytest.approx(1 - hamming_loss(Y, predicted))
    # scikit-learn's metrics and scorers read the predictions as they are
    accuracy_score(Y, predicted), f1_score(Y, predicted, average="samples", zero_division=1.0)
    search = GridSearchCV(
        clone(model),
        {"structure__label_graph": ["independent", "tree"]},
        scoring={"hamming": hamming_scorer, "subset": "accuracy", "f1": example_f1_scorer},
        refit="subset",
        cv=KFold(3),
        error_score="raise",
    ).fit(X, Y)
    assert search.best_params_["structure__label_graph"] in ("independent", "tree")
    scores = cross_validate(clone(model), X, Y, cv=3, scoring=example_f1_scorer)
    assert np.isfinite(scores["test_score"]).all()
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), predicted)


def test_sparse_features_give_the_dense_model():
    """The same model from a CSR X as from the dense X: both centred (the sparse one
    implicitly). Sparse columns share one scale: compare on columns of one deviation."""
    X, Y = _correlated(80)
    X = (X - X.mean(axis=0)) / X.std(axis=0) + np.arange(X.shape[1])  # means 0, 1, 2, ...
    dense = ChainCRF(MultiLabelStructure("tree")).fit(X, Y)
    sparse_fit = ChainCRF(MultiLabelStructure("tree")).fit(sparse.csr_matrix(X), Y)
    means = np.arange(X.shape[1])
    np.testing.assert_allclose(sparse_fit.structure_.feature_mean_, means, atol=1e-12)
    np.testing.assert_allclose(dense.structure_.feature_mean_, means, atol=1e-12)
    np.testing.assert_allclose(sparse_fit.structure_.feature_scale_, 1.0)
    np.testing.assert_allclose(sparse_fit.coef_, dense.coef_, atol=1e-6)
    np.testing.assert_array_equal(sparse_fit.predict(sparse.csr_matrix(X)), dense.predict(X))


def test_a_shift_of_dense_features_moves_only_the_intercepts():
    """With a bias the nodes see centred features: X + 100 gives the same predictions and
    coefficients, the shift moved into each label's intercept (a penalised bias on uncentred
    features would shrink the intercepts instead and change the model)."""
    X, Y = _correlated(80)
    model = ChainCRF(MultiLabelStructure("tree"), alpha=0.1).fit(X, Y)
    shifted = ChainCRF(MultiLabelStructure("tree"), alpha=0.1).fit(X + 100.0, Y)
    np.testing.assert_allclose(shifted.coef_, model.coef_, atol=1e-6)
    np.testing.assert_array_equal(shifted.predict(X + 100.0), model.predict(X))
    coefficients = model.structure_.label_coefficients(model.coef_)
    moved = shifted.structure_.label_coefficients(shifted.coef_)
    np.testing.assert_allclose(moved[:, :-1], coefficients[:, :-1], atol=1e-6)
    np.testing.assert_allclose(
        moved[:, -1], coefficients[:, -1] - 100.0 * coefficients[:, :-1].sum(axis=1), atol=1e-4
    )
    # in X's units, with independent labels: each label's logistic regression
    independent = ChainCRF(MultiLabelStructure("independent"), alpha=0.1).fit(X, Y)
    coefficients = independent.structure_.label_coefficients(independent.coef_)
    scores = X @ coefficients[:, :-1].T + coefficients[:, -1]
    np.testing.assert_allclose(
        independent.predict_proba(X), 1.0 / (1.0 + np.exp(-scores)), atol=1e-6
    )


# ---- every learner, and what the label graph buys ----------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda s: PerturbMAPCRF(s, random_state=0),
        lambda s: MarginalPerturbMAPCRF(s, random_state=0, max_iter=20),
        lambda s: StructuredSVM(s, random_state=0, max_iter=10),
        lambda s: ChainCRF(s),
        lambda s: EpsilonCRF(s, max_iter=20),
    ],
    ids=["PerturbMAPCRF", "MarginalPerturbMAPCRF", "StructuredSVM", "ChainCRF", "EpsilonCRF"],
)
def test_every_learner_fits_the_multi_label_structure(make):
    X, Y = _correlated(120)
    model = make(MultiLabelStructure("full")).fit(X[:80], Y[:80])
    predicted = model.predict(X[80:])
    assert predicted.shape == (40, 4)
    assert 1 - hamming_loss(Y[80:], predicted) > 0.75


def test_structured_svm_converges_on_label_graphs_with_pairwise_steps():
    """Multi-label data: BCFW with pairwise steps, its dual certified by the primal objective
    of the weights it returns (a duality gap below tol), no ConvergenceWarning."""
    X, Y = _correlated(150)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        svm = StructuredSVM(MultiLabelStructure("full"), average=False, random_state=0)
        svm.fit(X, Y)
    assert svm.duality_gaps_[-1] < svm.tol and svm.n_iter_ < 200
    structure = svm.structure_
    batch = structure.prepare(X)
    targets = svm._targets(batch, structure.prepare_labels(batch, list(Y)), None, None)
    hinge = -svm._hinge_oracle(batch, *targets)(slice(None), svm.coef_, None)[1] / len(X)
    primal = 0.5 * svm.alpha_ * svm.coef_ @ svm.coef_ + hinge
    assert svm.dual_objective() <= primal + 1e-12
    assert primal - svm.dual_objective() < 2 * svm.tol
    atoms = svm._state.atoms
    assert all(abs(sum(w for w, _ in block.values()) - 1) < 1e-9 for block in atoms if block)


def test_a_label_graph_beats_independent_labels_on_correlated_labels():
    """Label 3 is label 0 AND label 2: with the labels' table the joint labelling comes out
    consistent far more often than from independent logistic regressions."""
    X, Y = _correlated(600, random_state=1)
    subset = {}
    for graph in ("independent", "full"):
        model = ChainCRF(MultiLabelStructure(graph)).fit(X[:400], Y[:400])
        subset[graph] = accuracy_score(Y[400:], model.predict(X[400:]))
    assert subset["full"] > subset["independent"] + 0.03


def test_unknown_labels_are_summed_over():
    X, Y = _correlated(120)
    partial = Y.copy()
    partial[::3, 1] = -1
    model = ChainCRF(MultiLabelStructure("tree")).fit(X, partial)
    assert model.predict(X).shape == Y.shape
    assert 1 - hamming_loss(Y, model.predict(X)) > 0.8


def test_auto_alpha_gives_the_same_model_whatever_the_units_of_each_column():
    """The nodes see each dense column over its own scale: X with its columns in other units,
    the same model (alpha included), its coefficients in the units of X."""
    X, Y = _correlated(120)
    units = np.logspace(-2, 3, X.shape[1])
    model = ChainCRF(MultiLabelStructure("tree")).fit(X, Y)
    scaled = ChainCRF(MultiLabelStructure("tree")).fit(units * X, Y)
    np.testing.assert_allclose(
        scaled.structure_.feature_scale_, units * model.structure_.feature_scale_
    )
    np.testing.assert_allclose(scaled.coef_, model.coef_, atol=1e-6)
    np.testing.assert_array_equal(scaled.predict(units * X), model.predict(X))
    np.testing.assert_allclose(scaled.predict_proba(units * X), model.predict_proba(X), atol=1e-6)
    coefficients = model.structure_.label_coefficients(model.coef_)
    np.testing.assert_allclose(
        scaled.structure_.label_coefficients(scaled.coef_)[:, :5], coefficients[:, :5] / units
    )


def test_a_constant_label_and_a_sparse_y():
    """A label never seen positive in training is learned as always 0 (its bias), and Y may
    come as a sparse indicator matrix (MultiLabelBinarizer(sparse_output=True))."""
    X, Y = _correlated(120)
    Y[:, 2] = 0
    model = PerturbMAPCRF(MultiLabelStructure("tree"), random_state=0).fit(X, sparse.csr_matrix(Y))
    predicted = model.predict(X)
    assert (predicted[:, 2] == 0).all()
    assert model.predict_proba(X)[:, 2].max() < 0.5
    assert model.score(X, sparse.csr_matrix(Y)) == pytest.approx(1 - hamming_loss(Y, predicted))


# ---- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "X, Y, match",
    [
        (np.ones((4, 2)), np.array([0, 1, 0, 1]), "Y of shape \\(n_samples, n_labels\\)"),
        (
            np.ones((4, 2)),
            np.eye(4, 2, dtype=int) * 2,
            "label .*2.* is not one of the classes \\[0, 1\\]",
        ),
        (np.ones((4, 2)), np.zeros((3, 2), int), "X has 4 samples but Y has 3"),
        (np.ones(4), np.zeros((4, 2), int), "X of shape \\(n_samples, n_features\\)"),
        (np.array([[1.0, np.nan]] * 4), np.eye(4, 2, dtype=int), "X: non-finite values .NaN"),
        (np.ones((4, 2)) + 1j, np.eye(4, 2, dtype=int), "X: Complex data not supported"),
        (
            sparse.csr_matrix(np.ones((4, 2)) + 1j),
            np.eye(4, 2, dtype=int),
            "X: Complex data not supported",
        ),
        (np.array([["0.1", "2"]] * 4), np.eye(4, 2, dtype=int), "X must be numeric, got strings"),
        ([["0.1", "2"]] * 4, np.eye(4, 2, dtype=int), "X must be numeric, got strings"),
    ],
)
def test_bad_input_is_named(X, Y, match):
    with pytest.raises(ValueError, match=match):
        PerturbMAPCRF(MultiLabelStructure("tree"), max_iter=1).fit(X, Y)


def test_bad_label_graphs_and_predict_input_are_named():
    X, Y = _correlated(40)
    for graph, match in [
        ("star", "label_graph must be one of"),
        ([[0, 9]], "Y has 4 labels"),
        ([[1, 1]], "joins a label to itself"),
        ([[0, 1], [1, 0]], "repeats a pair"),
    ]:
        with pytest.raises(ValueError, match=match):
            ChainCRF(MultiLabelStructure(graph)).fit(X, Y)
    model = ChainCRF(MultiLabelStructure("tree"), max_iter=5).fit(X, Y)
    with pytest.raises(ValueError, match="X has 3 features, but MultiLabelStructure was fitted"):
        model.predict(X[:, :3])
    marked = Y.copy()
    marked[0, 1] = 9
    with pytest.raises(ValueError, match="ignore_label=9: a multi-label sample keeps all"):
        ChainCRF(MultiLabelStructure("tree"), ignore_label=9).fit(X, marked)
    with pytest.raises(ValueError, match="TwoStageCRF classifies each node"):
        TwoStageCRF(crf=PerturbMAPCRF(MultiLabelStructure("tree"))).fit(X, Y)


@pytest.mark.parametrize("container", [np.asarray, sparse.csr_matrix, sparse.coo_matrix])
def test_complex_and_text_x_are_refused_at_predict(container):
    """A fitted model takes real numbers only, as at fit: a complex X (even with a zero
    imaginary part) or numeric text is refused by name, never cast."""
    X, Y = _correlated(40)
    model = ChainCRF(MultiLabelStructure("tree"), max_iter=5).fit(X, Y)
    with pytest.raises(ValueError, match="X: Complex data not supported"):
        model.predict(container(X + 0j))
    with pytest.raises(ValueError, match="X: Complex data not supported"):
        model.predict_proba(container(X + 1j))
    with pytest.raises(ValueError, match="X must be numeric, got strings"):
        model.predict(X.astype(str))


# ---- label sets that are never empty ---------------------------------------------------------
def _never_empty(n_samples=400, random_state=0):
    """Documents that each carry one to three of 6 labels: 200 to train, the rest to test."""
    X, Y = make_multilabel_classification(
        n_samples=n_samples,
        n_features=20,
        n_classes=6,
        n_labels=1,
        length=20,  # short documents: weak unaries, whose MAP is often the empty set
        allow_unlabeled=False,
        random_state=random_state,
    )
    return (X[:200], Y[:200]), (X[200:], Y[200:])


def test_allow_empty_follows_the_training_labels_and_is_checked():
    (X, Y), _ = _never_empty()
    assert Y.any(axis=1).all()
    structure = MultiLabelStructure().fit(X, Y)
    assert structure.allow_empty_ is False
    assert repr(structure.solver_) == "NonEmptyLabelling(ForestSolver())"
    assert structure.solver_.name == "forest"
    with_empty = Y.copy()
    with_empty[3] = 0
    assert MultiLabelStructure().fit(X, with_empty).allow_empty_ is True
    assert MultiLabelStructure(allow_empty=True).fit(X, Y).solver_.name == "forest"
    assert MultiLabelStructure(allow_empty=True).fit(X, Y).allow_empty_ is True
    with pytest.raises(ValueError, match="allow_empty=False, but sample 3 of Y has no label"):
        MultiLabelStructure(allow_empty=False).fit(X, with_empty)
    unknown = with_empty.copy()
    unknown[3, 0] = -1  # may be a label: allowed
    assert MultiLabelStructure(allow_empty=False).fit(X, unknown).allow_empty_ is False
    with pytest.raises(ValueError, match="allow_empty must be True, False or 'auto'"):
        MultiLabelStructure(allow_empty="never").fit(X, Y)


@pytest.mark.parametrize(
    "make",
    [lambda s: PerturbMAPCRF(s, random_state=0), lambda s: ChainCRF(s)],
    ids=["PerturbMAPCRF", "ChainCRF"],
)
def test_a_model_without_empty_label_sets_predicts_whole_label_sets_better(make):
    """Trained and decoded without the empty label set, on data that never has it: no empty
    prediction (the model that allows it predicts one for a fifth of the samples), a higher
    held-out subset accuracy and about the same Hamming loss; the marginals are its own
    (predict_proba its P(y_l = 1))."""
    (X, Y), (X_test, Y_test) = _never_empty()
    scores = {}
    for allow in ("auto", True):
        model = make(MultiLabelStructure(allow_empty=allow)).fit(X, Y)
        predicted = model.predict(X_test)
        if allow == "auto":
            assert predicted.any(axis=1).all()
        else:
            assert np.mean(~predicted.any(axis=1)) > 0.1
        if allow == "auto" and isinstance(model, ChainCRF):  # its exact marginals
            structure = model.structure_
            potentials = structure.potentials(structure.prepare(X_test[:5]), model.coef_)
            proba = model.predict_proba(X_test[:5])
            for i, one in enumerate(potentials.split()):
                labellings, values = scores_of(one)
                values[~labellings.any(axis=1)] = -np.inf
                np.testing.assert_allclose(
                    proba[i], np.exp(values - logsumexp(values)) @ labellings, atol=1e-10
                )
        scores[allow] = (accuracy_score(Y_test, predicted), hamming_loss(Y_test, predicted))
    assert scores["auto"][0] > scores[True][0] + 0.02
    assert scores["auto"][1] <= scores[True][1] + 0.01


def test_the_exact_likelihood_without_empty_label_sets_is_normalised_and_its_gradient_exact(rng):
    (X, Y), _ = _never_empty()
    model = ChainCRF(MultiLabelStructure("full"), max_iter=3).fit(X[:20], Y[:20])
    structure = model.structure_
    assert repr(structure.solver_) == "NonEmptyLabelling(BruteForceSolver())"
    batch, labels = structure.prepare(X[:5]), Y[:5].ravel()
    w = rng.normal(scale=0.3, size=structure.size_)
    value, gradient = model._log_likelihood(batch, labels, w)
    potentials = structure.potentials(batch, w)
    log_p = []
    for i, one in enumerate(potentials.split()):  # P(y_i) over the non-empty labellings
        labellings, scores = scores_of(one)
        keep = labellings.any(axis=1)
        truth = (labellings == Y[i]).all(axis=1)
        log_p.append(scores[truth][0] - logsumexp(scores[keep]))
    assert value == pytest.approx(np.mean(log_p), abs=1e-10)
    for index in rng.choice(len(w), 12, replace=False):
        step = np.zeros_like(w)
        step[index] = 1e-6
        numeric = (
            model._log_likelihood(batch, labels, w + step)[0]
            - model._log_likelihood(batch, labels, w - step)[0]
        ) / 2e-6
        assert gradient[index] == pytest.approx(numeric, abs=1e-6)


def test_a_model_without_empty_label_sets_round_trips(tmp_path):
    from pmap_sklearn.persistence import load_weights, save_weights

    (X, Y), (X_test, _) = _never_empty()
    model = PerturbMAPCRF(MultiLabelStructure(), random_state=0, max_iter=5).fit(X, Y)
    expected = model.predict(X_test)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).predict(X_test), expected)
    save_weights(model, tmp_path / "model.npz")
    restored = load_weights(tmp_path / "model.npz")
    assert repr(restored.structure_.solver_) == repr(model.structure_.solver_)
    np.testing.assert_array_equal(restored.predict(X_test), expected)


def test_a_later_chunk_with_an_empty_label_set_is_refused_by_name():
    (X, Y), _ = _never_empty()
    model = PerturbMAPCRF(MultiLabelStructure(), random_state=0)
    model.partial_fit(X[:100], Y[:100], classes=[0, 1])
    assert model.structure_.allow_empty_ is False
    chunk = Y[100:150].copy()
    chunk[2] = 0
    with pytest.raises(ValueError, match="allow_empty_=False, but sample 2 of Y has no label"):
        model.partial_fit(X[100:150], chunk)
    model.partial_fit(X[100:150], Y[100:150])  # a chunk with labels continues


def test_the_k_best_label_sets_leave_out_the_empty_one():
    from pmap_sklearn.inspection import k_best_labellings

    (X, Y), (X_test, _) = _never_empty()
    model = ChainCRF(MultiLabelStructure("full")).fit(X, Y)
    labellings, probabilities = k_best_labellings(model, X_test[:4], k=64, method="exact")
    for listed, p in zip(labellings, probabilities, strict=True):
        assert len(listed) == 63 and listed.any(axis=1).all()  # every label set but the empty
        assert p.sum() == pytest.approx(1.0) and np.all(np.diff(p) <= 1e-12)
    proba = model.predict_proba(X_test[:4])
    for i in range(4):  # the listed sets' probabilities give the marginals
        np.testing.assert_allclose(probabilities[i] @ labellings[i], proba[i], atol=1e-10)


def test_without_empty_label_sets_the_contract_holds():
    """n_jobs 1 and 2 (and two shards) fit the same model; a warm refit on data with an
    empty label set lifts the constraint; a refused refit leaves the fitted model as it was."""
    (X, Y), _ = _never_empty()
    for options in ({}, {"n_shards": 2}):
        one = PerturbMAPCRF(MultiLabelStructure("full"), random_state=0, n_jobs=1, **options)
        two = PerturbMAPCRF(MultiLabelStructure("full"), random_state=0, n_jobs=2, **options)
        np.testing.assert_array_equal(one.fit(X, Y).coef_, two.fit(X, Y).coef_)
    with_empty = Y.copy()
    with_empty[0] = 0
    model = PerturbMAPCRF(MultiLabelStructure(), random_state=0, warm_start=True).fit(X, Y)
    assert model.structure_.allow_empty_ is False
    model.fit(X, with_empty)
    assert model.structure_.allow_empty_ is True and model.structure_.solver_.name == "forest"
    fitted = ChainCRF(MultiLabelStructure(allow_empty=False)).fit(X, Y)
    coef, predicted = fitted.coef_.copy(), fitted.predict(X)
    with pytest.raises(ValueError, match="sample 0 of Y has no label"):
        fitted.fit(X, with_empty)
    np.testing.assert_array_equal(fitted.coef_, coef)
    np.testing.assert_array_equal(fitted.predict(X), predicted)
