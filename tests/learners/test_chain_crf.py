"""ChainCRF: exact likelihood, gradient and marginals against enumeration; learning."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import logsumexp
from sklearn.linear_model import LogisticRegression

from pmap_sklearn import ChainCRF, ChainStructure, GridStructure, mean_hamming_loss
from pmap_sklearn._backend import BruteForceSolver
from pmap_sklearn.datasets import make_chain_data, make_grid_data

from ..helpers import _chains, _token_data, scores_of


@pytest.fixture
def tiny(rng):
    X = [rng.normal(size=(d, 2)) for d in (1, 3, 4)]
    y = [rng.integers(0, 3, size=len(x)) for x in X]
    crf = ChainCRF(ChainStructure(n_states=3), max_iter=1).fit(X, y)
    return crf, X, y


def _brute_log_likelihood(crf, batch, labels, w):
    total = 0.0
    for i, sample in enumerate(crf.structure_.potentials(batch, w).split()):
        labellings, scores = scores_of(sample)
        given = labels[batch.nodes_of(i)]
        agree = np.all((labellings == given) | (given < 0), axis=1)
        total += np.logaddexp.reduce(scores[agree]) - np.logaddexp.reduce(scores)
    return total / batch.n_samples


@pytest.mark.parametrize("unknown", [False, True])
def test_log_likelihood_and_gradient_are_exact(tiny, rng, unknown):
    crf, X, y = tiny
    batch = crf.structure_.prepare(X)
    labels = crf.structure_.prepare_labels(batch, y)
    if unknown:
        labels[[1, 5, 6]] = -1  # marginalised exactly
    w = rng.normal(size=crf.structure_.size_)
    value, gradient = crf._log_likelihood(batch, labels, w)
    np.testing.assert_allclose(value, _brute_log_likelihood(crf, batch, labels, w))
    numeric = approx_fprime(w, lambda v: crf._log_likelihood(batch, labels, v)[0], 1e-6)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)
    if not unknown:  # the fit's shortcut: Ψ(x, y) computed once instead of a clamped pass
        observed = crf.structure_.joint_feature(batch, labels)
        shortcut = crf._log_likelihood(batch, labels, w, observed)
        np.testing.assert_allclose(shortcut[0], value)
        np.testing.assert_allclose(shortcut[1], gradient, atol=1e-12)


def test_marginals_match_brute_force(tiny):
    crf, X, _ = tiny
    brute = BruteForceSolver().marginals(crf.potentials(X))
    np.testing.assert_allclose(np.concatenate(crf.predict_marginals(X)), brute.node, atol=1e-12)
    with pytest.raises(ValueError, match="method must be one of \\['exact'\\]"):
        crf.predict_marginals(X, method="perturb")


def test_any_structure_with_exact_marginals(rng):
    """The exact likelihood on a tiny grid by enumeration (solver='brute_force'); graph cuts,
    which compute no marginals, are refused with a clear error."""
    data = make_grid_data(n_samples=6, shape=(3, 3), noise=0.8, random_state=0)
    crf = ChainCRF(GridStructure(solver="brute_force"), alpha=1e-2).fit(data.data, data.target)
    pixelwise = mean_hamming_loss(data.target, [x[..., 0] > 0.5 for x in data.data])
    assert 1 - crf.score(data.data, data.target) <= pixelwise
    assert crf.predict_marginals(data.data[:1])[0].shape == (3, 3, 2)
    with pytest.raises(ValueError, match="graph_cut solver: it computes no marginals"):
        ChainCRF("grid").fit(data.data, data.target)


def test_learning_beats_independent_classification():
    data = make_chain_data(n_samples=160, n_states=4, n_features=6, noise=1.8, random_state=0)
    X, y, X_test, y_test = data.data[:100], data.target[:100], data.data[100:], data.target[100:]
    crf = ChainCRF(alpha=1e-3).fit(X, y)
    logistic = LogisticRegression(max_iter=1000).fit(np.vstack(X), np.concatenate(y))
    independent = 1 - mean_hamming_loss(y_test, [logistic.predict(x) for x in X_test])
    assert crf.score(X_test, y_test) > independent + 0.03
    decoded = crf.predict(X_test, decoding="marginal")
    assert mean_hamming_loss(y_test, decoded) < 1 - independent
    warm = ChainCRF(alpha=1e-3, warm_start=True).fit(X, y)
    objective = warm.objective_
    assert warm.fit(X, y).objective_ >= objective - 1e-9  # continues from the optimum


# ---- the elastic net: OWL-QN, crfsuite's c1 / c2 and its observed-states model ---------------
def _penalised_objective(crf, X, y):
    """``w -> (value, gradient)`` of ChainCRF's negative mean log-likelihood plus its L2 part,
    and the L1 strength: the fitted objective, recomputed from its definition."""
    from pmap_sklearn._labels import encode

    structure = crf.structure_
    batch = structure.prepare(X)
    codes, _ = encode(y, -1, crf.classes_)
    labels = structure.prepare_labels(batch, codes)
    l1, l2 = crf.alpha_ * crf.l1_ratio_, crf.alpha_ * (1 - crf.l1_ratio_)
    observed = structure.joint_feature(batch, labels)

    def objective(w):
        value, gradient = crf._log_likelihood(batch, labels, w, observed)
        return -value + 0.5 * l2 * w @ w, -gradient + l2 * w

    return objective, l1


def test_l1_ratio_zero_is_the_lbfgsb_fit_bit_for_bit():
    from scipy.optimize import minimize

    data = make_chain_data(n_samples=40, n_states=3, n_features=4, noise=1.0, random_state=0)
    crf = ChainCRF(alpha=1e-2, l1_ratio=0.0, max_iter=50).fit(data.data, data.target)
    np.testing.assert_array_equal(
        crf.coef_, ChainCRF(alpha=1e-2, max_iter=50).fit(data.data, data.target).coef_
    )
    objective, l1 = _penalised_objective(crf, data.data, data.target)
    assert l1 == 0
    direct = minimize(
        objective,
        np.zeros(crf.structure_.size_),
        jac=True,
        method="L-BFGS-B",
        options=dict(maxiter=50, gtol=crf.tol),
    )
    np.testing.assert_array_equal(crf.coef_, direct.x)
    assert crf.n_nonzero_ == crf.coef_.size


def test_l1_gives_exact_zeros_at_the_optimum(rng):
    """OWL-QN's solution meets the subgradient conditions of the elastic net: ``|g_i| <= λ1``
    where ``w_i = 0``, ``g_i = −λ1 sign w_i`` elsewhere; more L1, fewer non-zeros."""
    data = make_chain_data(n_samples=60, n_states=3, n_features=8, noise=1.0, random_state=1)
    previous = None
    for l1_ratio in (0.5, 0.9):
        crf = ChainCRF(alpha=0.05, l1_ratio=l1_ratio, tol=1e-10, max_iter=2000)
        crf.fit(data.data, data.target)
        objective, l1 = _penalised_objective(crf, data.data, data.target)
        _, g = objective(crf.coef_)
        zero = crf.coef_ == 0
        assert 0 < zero.sum() < zero.size and crf.n_nonzero_ == (~zero).sum()
        assert np.all(np.abs(g[zero]) <= l1 + 1e-6)
        np.testing.assert_allclose(g[~zero], -l1 * np.sign(crf.coef_[~zero]), atol=1e-4)
        value = objective(crf.coef_)[0] + l1 * np.abs(crf.coef_).sum()
        np.testing.assert_allclose(-crf.objective_, value)
        if previous is not None:
            assert crf.n_nonzero_ < previous
        previous = crf.n_nonzero_


def test_crfsuite_penalty_is_crfsuites_objective_over_n(rng):
    """crfsuite's summed objective ``−Σ log P + c1‖w‖₁ + c2‖w‖²`` is N times ours."""
    from pmap_sklearn import crfsuite_penalty

    data = make_chain_data(n_samples=20, n_states=3, n_features=4, noise=1.0, random_state=2)
    c1, c2 = 0.3, 0.05
    alpha, l1_ratio = crfsuite_penalty(c1, c2, n_samples=20)
    crf = ChainCRF(alpha=alpha, l1_ratio=l1_ratio, max_iter=1).fit(data.data, data.target)
    objective, l1 = _penalised_objective(crf, data.data, data.target)
    w = rng.normal(size=crf.structure_.size_)
    ours = objective(w)[0] + l1 * np.abs(w).sum()
    mean_log_likelihood = -(objective(w)[0] - 0.5 * alpha * (1 - l1_ratio) * w @ w)
    crfsuite = -20 * mean_log_likelihood + c1 * np.abs(w).sum() + c2 * w @ w
    np.testing.assert_allclose(20 * ours, crfsuite)
    with pytest.raises(ValueError, match="not both 0"):
        crfsuite_penalty(0, 0, 10)
    with pytest.raises(ValueError, match="n_samples must be an int"):
        crfsuite_penalty(0.1, 0.1, 0)
    with pytest.raises(TypeError, match=r"c1 must be a real number .* str '0.1': pass float"):
        crfsuite_penalty("0.1", 0.1, 10)
    with pytest.raises(TypeError, match="c2 must be a real number .* bool True"):
        crfsuite_penalty(0.1, True, 10)
    assert crfsuite_penalty(np.float32(0.1), 0, 10) == pytest.approx((0.01, 1.0))


def test_observed_states_only_keeps_the_unseen_pairs_at_zero(rng):
    from pmap_sklearn import SequenceVectorizer

    X, y = _token_data(rng)
    chains = SequenceVectorizer().fit_transform(X)
    crf = ChainCRF(alpha=0.01, l1_ratio=0.2, all_possible_states=False).fit(chains, y)
    unary, _ = crf.structure_.unpack(crf.coef_)
    seen = np.zeros(unary.shape, dtype=bool)
    for chain, tags in zip(chains, y, strict=True):
        for row, tag in zip(chain.toarray(), tags, strict=True):
            seen[np.flatnonzero(row), list(crf.classes_).index(tag)] = True
    seen[-1] = True  # the bias column
    assert np.all(unary[~seen] == 0) and np.any(unary[seen] != 0)
    dense = ChainCRF(alpha=0.01, l1_ratio=0.2, all_possible_states=True).fit(chains, y)
    assert dense.structure_.unpack(dense.coef_)[0][~seen].any()
    with pytest.raises(ValueError, match="all_possible_states=False needs one table"):
        ChainCRF(ChainStructure(unary="scaled"), all_possible_states=False).fit(
            [np.zeros((2, 2))], [[0, 1]]
        )


def test_all_possible_states_auto_is_observed_states_on_token_features_only(rng):
    """ "auto": crfsuite's observed (feature, label) pairs on sparse token features, every pair
    on the same features given dense (the fits of the explicit values, bit for bit)."""
    from pmap_sklearn import SequenceVectorizer

    X, y = _token_data(rng)
    chains = SequenceVectorizer().fit_transform(X)
    dense = [chain.toarray() for chain in chains]
    for features, states in ((chains, False), (dense, True)):
        auto = ChainCRF(alpha=0.01, l1_ratio=0.2, max_iter=40).fit(features, y)
        explicit = ChainCRF(alpha=0.01, l1_ratio=0.2, max_iter=40, all_possible_states=states)
        assert auto.all_possible_states_ is states
        np.testing.assert_array_equal(auto.coef_, explicit.fit(features, y).coef_)
    assert auto.n_nonzero_ > ChainCRF(alpha=0.01, l1_ratio=0.2).fit(chains, y).n_nonzero_


@pytest.mark.parametrize("l1_ratio", [0.0, 0.5])
def test_observed_states_fit_is_the_optimum_over_the_free_weights(rng, l1_ratio):
    """The optimiser works on the free weights only: at its end the penalised objective's
    (sub)gradient vanishes on every free weight, whatever the others' gradient (they stay 0)."""
    from pmap_sklearn import SequenceVectorizer
    from pmap_sklearn._labels import encode

    X, y = _token_data(rng, n_samples=40)
    chains = SequenceVectorizer().fit_transform(X)
    crf = ChainCRF(alpha=0.05, l1_ratio=l1_ratio, all_possible_states=False, tol=1e-9)
    crf.set_params(max_iter=3000).fit(chains, y)
    objective, l1 = _penalised_objective(crf, chains, y)
    _, g = objective(crf.coef_)
    batch = crf.structure_.prepare(chains)
    labels = crf.structure_.prepare_labels(batch, encode(y, -1, crf.classes_)[0])
    free = crf._free_weights(batch, labels, False)
    assert 0 < free.sum() < free.size and np.all(crf.coef_[~free] == 0)
    assert np.abs(g[~free]).max() > 1e-3  # held at zero against their gradient
    at_zero, moved = free & (crf.coef_ == 0), crf.coef_ != 0
    assert np.all(np.abs(g[at_zero]) <= l1 + 1e-6)
    np.testing.assert_allclose(g[moved], -l1 * np.sign(crf.coef_[moved]), atol=1e-5)


def test_l1_fit_agrees_with_crfsuite(rng):
    """The same model and penalty as crfsuite's L-BFGS trainer (OWL-QN, c1 and c2, every state
    and transition feature), fitted to convergence by both: the same weights."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    import tempfile
    from pathlib import Path

    from pmap_sklearn import SequenceVectorizer, crfsuite_penalty

    X, y = _token_data(rng)
    c1, c2 = 0.3, 0.05
    trainer = pycrfsuite.Trainer(verbose=False)
    for tokens, tags in zip(X, y, strict=True):
        trainer.append(pycrfsuite.ItemSequence(tokens), tags)
    trainer.set_params(
        {
            "c1": c1,
            "c2": c2,
            "max_iterations": 5000,
            "epsilon": 1e-12,
            "delta": 1e-12,
            "feature.possible_states": True,
            "feature.possible_transitions": True,
        }
    )
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "model.crfsuite")
        trainer.train(path)
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        info = tagger.info()
        tagger.close()
    alpha, l1_ratio = crfsuite_penalty(c1, c2, len(X))
    vectorizer = SequenceVectorizer().fit(X)
    crf = ChainCRF(
        ChainStructure(bias=False),
        alpha=alpha,
        l1_ratio=l1_ratio,
        all_possible_states=True,
        tol=1e-12,
        max_iter=5000,
    ).fit(vectorizer.transform(X), y)
    unary, transitions = crf.structure_.unpack(crf.coef_)
    classes = list(crf.classes_)
    names = [name.replace("=", ":") for name in vectorizer.get_feature_names_out()]
    theirs = np.array(
        [[info.state_features.get((name, label), 0.0) for label in classes] for name in names]
    )
    np.testing.assert_allclose(unary, theirs, atol=1e-3)
    np.testing.assert_array_equal(unary == 0, theirs == 0)
    table = np.zeros((len(classes), len(classes)))
    for (a, b), weight in info.transitions.items():
        table[classes.index(a), classes.index(b)] = weight
    np.testing.assert_allclose(transitions.reshape(table.shape), table, atol=1e-3)


def test_l1_model_pickles_by_its_non_zeros_and_warm_starts_after_loading(rng, tmp_path):
    import pickle

    import joblib
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import SequenceVectorizer

    words = rng.integers(0, 300, size=(80, 6))
    X = [[{"w": f"w{i}", "odd": bool(i % 2), "bias": 1.0} for i in row] for row in words]
    y = [[("A", "B", "C")[i % 3] if rng.random() > 0.3 else "C" for i in row] for row in words]
    model = make_pipeline(
        SequenceVectorizer(), ChainCRF(alpha=0.05, l1_ratio=0.9, warm_start=True, max_iter=20)
    ).fit(X, y)
    crf = model[-1]
    assert crf.n_nonzero_ < 0.25 * crf.coef_.size
    # coef_ and the fit state's weights, each by its non-zeros (dense: 2 × coef_.nbytes)
    assert len(pickle.dumps(crf)) < crf.coef_.nbytes
    joblib.dump(model, tmp_path / "model.joblib")
    for loaded in (pickle.loads(pickle.dumps(model)), joblib.load(tmp_path / "model.joblib")):
        np.testing.assert_array_equal(loaded[-1].coef_, crf.coef_)
        assert loaded[0].vectorizer_.vocabulary_ == model[0].vectorizer_.vocabulary_
        assert list(loaded[0].get_feature_names_out()) == list(model[0].get_feature_names_out())
        for a, b in zip(loaded.predict(X), model.predict(X), strict=True):
            np.testing.assert_array_equal(a, b)
    assert crf.coef_.flags.writeable and hasattr(model[0].vectorizer_, "vocabulary_")
    chains = model[0].transform(X)
    loaded = pickle.loads(pickle.dumps(crf)).fit(chains, y)  # continues where it stopped
    crf.fit(chains, y)
    np.testing.assert_array_equal(loaded.coef_, crf.coef_)
    assert loaded.objective_ == crf.objective_


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
