"""The queries of a fitted learner: predictions, marginals, draws, calibration, chunks."""

import itertools

import numpy as np
import pytest
from sklearn.datasets import make_multilabel_classification
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    MultiLabelStructure,
    PerturbMAPCRF,
    PseudoLikelihoodCRF,
    SequenceVectorizer,
    StructuredSVM,
    _parallel,
)
from pmap_sklearn._backend import BruteForceSolver
from pmap_sklearn.datasets import (
    make_boxes,
    make_chain_data,
    make_grid_data,
    token_features,
)
from pmap_sklearn.perturbation import perturbed_maps

from ..helpers import _assert_chunking_invariant, _corpus, _same


def _chains(rng, n=9):
    """Chains of very different lengths (1 to 30 nodes), labels following a feature's sign."""
    lengths = rng.choice([1, 2, 3, 8, 30], size=n)
    X = [rng.normal(size=(d, 3)) for d in lengths]
    y = [np.where(x[:, 0] > 0, "b", "a") for x in X]
    return X, y


def test_chain_predictions_do_not_depend_on_the_chunks(monkeypatch):
    rng = np.random.default_rng(0)
    X, y = _chains(rng)
    model = PerturbMAPCRF(max_iter=3, n_perturbations=5, random_state=0).fit(X, y)
    known = [np.where(np.arange(len(t)) % 3 == 0, t, None) for t in y]
    calls = [
        lambda m, X: m.predict(X),
        lambda m, X: m.predict(X, decoding="marginal"),
        lambda m, X: m.predict(X, known_labels=known),
        lambda m, X: m.predict_latent(X),
        lambda m, X: m.predict_marginals(X),  # exact (forward-backward)
        lambda m, X: m.predict_marginals(X, method="perturb"),
        lambda m, X: m.predict_marginals(X, method="perturb", known_labels=known),
        lambda m, X: m.predict_proba(X),
        lambda m, X: np.array([m.score(X, y)]),
    ]
    _assert_chunking_invariant(model, X, calls, monkeypatch, rounded=(4, 7))


def test_randomised_predictions_draw_each_sample_s_seed_once(monkeypatch):
    """With a Generator as random_state, chunked perturb-and-MAP marginals consume it as one
    call does: two estimators with equal generators give the same marginals, chunked or not."""
    rng = np.random.default_rng(1)
    X, y = _chains(rng)
    fitted = PerturbMAPCRF(max_iter=2, n_perturbations=4, random_state=0).fit(X, y)
    out = []
    for limit in (10**9, 5):
        monkeypatch.setattr(_parallel, "PREDICT_NODES", limit)
        model = fitted.set_params(random_state=np.random.default_rng(7))
        out.append([model.predict_marginals(X, method="perturb") for _ in range(2)])
    for got, expected in zip(out[1], out[0], strict=True):
        _same(got, expected)


def test_grid_and_graph_predictions_do_not_depend_on_the_chunks(monkeypatch):
    rng = np.random.default_rng(2)
    images = [rng.normal(size=(h, w, 2)) for h, w in [(4, 5), (1, 1), (6, 2), (3, 3)]]
    labels = [(x[..., 0] > 0).astype(int) for x in images]
    grid = PerturbMAPCRF(GridStructure(), max_iter=2, n_perturbations=3, random_state=0)
    grid.fit(images, labels)
    calls = [
        lambda m, X: m.predict(X),
        lambda m, X: m.predict_marginals(X),
        lambda m, X: m.predict_marginals(X, method="gibbs", n_perturbations=2),
    ]
    _assert_chunking_invariant(grid, images, calls, monkeypatch)
    graphs = []
    for n in (1, 7, 3, 12):
        edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
        graphs.append(GraphSample(rng.normal(size=(n, 2)), edges))
    targets = [(g.node_features[:, 0] > 0).astype(int) for g in graphs]
    graph = PerturbMAPCRF(GraphStructure(), max_iter=2, random_state=0).fit(graphs, targets)
    _assert_chunking_invariant(graph, graphs, calls[:2], monkeypatch)
    tuples = [(g.node_features, g.edges) for g in graphs]  # graphs given as tuples are counted too
    _assert_chunking_invariant(graph, tuples, calls[:1], monkeypatch)


def test_multilabel_and_epsilon_predictions_do_not_depend_on_the_chunks(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(11, 4))
    Y = (X[:, :3] + 0.3 * rng.normal(size=(11, 3)) > 0).astype(int)
    model = PerturbMAPCRF(MultiLabelStructure(), max_iter=3, random_state=0).fit(X, Y)
    calls = [lambda m, X: m.predict(X), lambda m, X: m.predict_proba(X)]
    _assert_chunking_invariant(model, X, calls, monkeypatch)
    chains, y = _chains(rng, n=6)
    epsilon = EpsilonCRF(ChainStructure(), max_iter=5).fit(chains, y)
    calls = [
        lambda m, X: m.predict(X),
        lambda m, X: m.predict(X, decoding="map"),
        lambda m, X: m.predict_marginals(X),
    ]
    _assert_chunking_invariant(epsilon, chains, calls, monkeypatch, rounded=(2,))


def test_chunked_errors_name_the_sample_in_X(monkeypatch):
    """A bad sample in a later chunk is named by its index in X, and known_labels of the wrong
    length are refused before any chunk is solved."""
    rng = np.random.default_rng(4)
    X, y = _chains(rng)
    model = PerturbMAPCRF(max_iter=1, random_state=0).fit(X, y)
    monkeypatch.setattr(_parallel, "PREDICT_NODES", 1)
    bad = [*X[:5], rng.normal(size=(4, 2)), *X[5:]]
    with pytest.raises(ValueError, match="sample 5 has 2 node features"):
        model.predict(bad)
    with pytest.raises(ValueError, match=f"X has {len(X)} samples but known_labels has 2"):
        model.predict(X, known_labels=y[:2])
    with pytest.raises(ValueError, match="known_labels must be a sequence"):
        model.predict(X, known_labels="abc")


def test_chunks_with_several_workers_give_the_same_predictions(monkeypatch):
    """With n_jobs=2 the chunks follow PARALLEL_PREDICT_NODES: the same outputs."""
    rng = np.random.default_rng(5)
    X, y = _chains(rng)
    model = PerturbMAPCRF(max_iter=2, n_perturbations=3, random_state=0).fit(X, y)
    expected = [model.predict(X), model.predict_marginals(X, method="perturb")]
    monkeypatch.setattr(_parallel, "PARALLEL_PREDICT_NODES", 3)
    model.set_params(n_jobs=2)
    got = [model.predict(X), model.predict_marginals(X, method="perturb")]
    for a, b in zip(got, expected, strict=True):
        _same(a, b)


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=16, random_state=7)
    return data.data, data.target


def test_perturbed_draws_are_the_perturbed_marginals(chains):
    """The same perturbations as predict_marginals: the frequencies are its marginals exactly."""
    X, y = chains
    model = MarginalPerturbMAPCRF(random_state=0, max_iter=3).fit(X, y)
    draws = model.sample(X[:4], n_draws=50, method="perturb")
    marginals = model.predict_marginals(X[:4], method="perturb", n_perturbations=50)
    for sample, marginal in zip(draws, marginals, strict=True):
        assert sample.shape == (50, len(marginal))
        frequency = np.stack([(sample == c).mean(axis=0) for c in model.classes_], axis=-1)
        np.testing.assert_allclose(frequency, marginal, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [lambda: PerturbMAPCRF(random_state=0), lambda: ChainCRF(), lambda: MeanFieldCRF("chain")],
)
def test_default_draws_match_the_default_marginals(make, chains):
    """Each estimator draws from its own model: exact chain draws for PerturbMAPCRF and
    ChainCRF, independent mean-field draws for MeanFieldCRF — within Monte-Carlo error."""
    X, y = chains
    model = make().fit(X, y)
    n_draws = 4000
    draws = model.sample(X[:3], n_draws=n_draws, random_state=0)
    for sample, marginal in zip(draws, model.predict_marginals(X[:3]), strict=True):
        frequency = np.stack([(sample == c).mean(axis=0) for c in model.classes_], axis=-1)
        sd = np.sqrt(marginal * (1 - marginal) / n_draws) + 1e-3
        assert np.all(np.abs(frequency - marginal) < 5 * sd)


def test_known_labels_are_kept_in_every_draw(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0).fit(X, y)
    known = [np.array([y[0][0]] + [None] * (len(y[0]) - 1), dtype=object)]
    for method in ("exact", "perturb"):
        draws = model.sample(X[:1], n_draws=40, known_labels=known, method=method)[0]
        assert (draws[:, 0] == y[0][0]).all()


def test_draws_take_the_shape_of_the_labels():
    grids = make_grid_data(n_samples=4, random_state=0)
    model = PerturbMAPCRF(GridStructure(), random_state=0, max_iter=3).fit(grids.data, grids.target)
    draws = model.sample(grids.data[:2], n_draws=5)
    assert draws[0].shape == (5, *np.shape(grids.target[0]))
    X, Y = make_multilabel_classification(n_samples=60, n_features=6, n_classes=3, random_state=0)
    multi = PerturbMAPCRF(MultiLabelStructure("full"), random_state=0).fit(X, Y)
    draws = multi.sample(X[:4], n_draws=20_000, random_state=0)
    assert draws.shape == (4, 20_000, 3) and set(np.unique(draws)) <= {0, 1}
    proba = multi.predict_proba(X[:4])
    assert np.all(np.abs(draws.mean(axis=1) - proba) < 5 * np.sqrt(0.25 / 20_000))


def test_sample_refuses_what_it_cannot_do(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="n_draws"):
        model.sample(X[:1], n_draws=0)
    with pytest.raises(ValueError, match="method must be one of"):
        model.sample(X[:1], method="beliefs")
    assert not hasattr(StructuredSVM(random_state=0).fit(X, y), "sample")  # no marginals


def test_a_fitted_pipeline_reaches_sample_through_its_last_step(chains):
    X, y = chains
    pipeline = make_pipeline(FunctionTransformer(), PerturbMAPCRF(random_state=0)).fit(X, y)
    draws = pipeline[-1].sample(pipeline[:-1].transform(X[:2]), n_draws=3)
    assert len(draws) == 2 and draws[1].shape == (3, len(y[1]))


def test_two_stage_crf_draws_from_its_stage_two(chains):
    from pmap_sklearn import TwoStageCRF

    X, y = chains
    model = TwoStageCRF(crf=PerturbMAPCRF(random_state=0), cv=3, random_state=7).fit(X, y)
    draws = model.sample(X[:2], n_draws=6, method="perturb")
    expected = model.crf_.sample(model.stage_two_samples(X[:2]), 6, method="perturb")
    for mine, theirs in zip(draws, expected, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_perturbed_draws_do_not_depend_on_n_jobs():
    """Each sample's perturbations come from its own stream: the draws are the same whatever
    the number of workers."""
    grids = make_grid_data(n_samples=6, shape=(12, 12), random_state=1)
    model = PerturbMAPCRF(GridStructure(), random_state=0, max_iter=3)
    model.fit(grids.data, grids.target)
    serial = model.sample(grids.data, n_draws=8, random_state=3)
    parallel = model.set_params(n_jobs=2).sample(grids.data, n_draws=8, random_state=3)
    for one, two in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(one, two)


def _hand_set_grid_model(k, coupling, n_samples=2, shape=(3, 3), seed=0):
    """A PerturbMAPCRF on small grids with its weights then set by hand: unary weights N(0, 1),
    every pairwise weight ``-coupling`` (a Gibbs model the user chose)."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(*shape, 2)) for _ in range(n_samples)]
    y = [rng.integers(k, size=shape) for _ in range(n_samples)]
    y[0].flat[:k] = np.arange(k)  # every label seen
    model = PerturbMAPCRF(GridStructure(), max_iter=1, random_state=0).fit(X, y)
    n_unary = model.structure_.n_unary_weights_
    model.coef_[:n_unary] = rng.normal(size=n_unary)
    model.coef_[n_unary:] = -coupling
    return model, X, y


def test_gibbs_on_chains_agrees_with_forward_backward():
    """Where the Gibbs marginals are known exactly the chains reach them, and the perturbed
    MAPs they start from do not (the bias of first-order perturbations)."""
    data = make_chain_data(n_samples=20, n_states=3, n_features=4, random_state=0)
    model = PerturbMAPCRF(random_state=0, max_iter=5).fit(data.data, data.target)
    X = data.data[:3]
    exact = np.concatenate(model.predict_marginals(X, method="exact"))
    gibbs = np.concatenate(model.predict_marginals(X, method="gibbs", n_perturbations=2000))
    perturbed = np.concatenate(model.predict_marginals(X, n_perturbations=2000, method="perturb"))
    assert np.abs(gibbs - exact).max() < 4 * np.sqrt(0.25 / 2000)
    assert np.abs(perturbed - exact).max() > 2 * np.abs(gibbs - exact).max()


@pytest.mark.parametrize("k", [2, 3])
def test_gibbs_marginals_of_an_estimator_are_conditional_on_known_labels(k):
    model, X, y = _hand_set_grid_model(k, coupling=1.0)
    known = [np.full((3, 3), None, dtype=object) for _ in X]
    known[0][1, 1] = model.classes_[k - 1]
    known[1][0, :2] = model.classes_[0]
    n_chains = 2000 if k == 2 else 800
    marginals = model.predict_marginals(
        X, method="gibbs", n_perturbations=n_chains, known_labels=known
    )
    clamp = np.full(18, -1)
    clamp[4], clamp[[9, 10]] = k - 1, 0
    exact = BruteForceSolver().marginals(model.potentials(X), clamp).node
    got = np.concatenate([m.reshape(-1, k) for m in marginals])
    assert np.abs(got - exact).max() < 4 * np.sqrt(0.25 / n_chains)
    np.testing.assert_array_equal(got[[4, 9, 10]], np.eye(k)[[k - 1, 0, 0]])
    draws = model.sample(X, n_draws=50, known_labels=known, method="gibbs")
    assert (draws[0][:, 1, 1] == model.classes_[k - 1]).all()
    assert (draws[1][:, 0, :2] == model.classes_[0]).all()


def test_gibbs_draws_follow_the_exact_marginals():
    model, X, _ = _hand_set_grid_model(2, coupling=1.0, n_samples=1)
    draws = model.sample(X, n_draws=3000, method="gibbs", random_state=1)[0]
    exact = BruteForceSolver().marginals(model.potentials(X)).node[:, 1]
    frequency = (draws == model.classes_[1]).mean(axis=0).ravel()
    assert np.abs(frequency - exact).max() < 4 * np.sqrt(0.25 / 3000)


def test_gibbs_results_do_not_depend_on_n_jobs_nor_on_chunks(always_parallel):
    model, X, y = _hand_set_grid_model(3, coupling=1.0, n_samples=5, shape=(4, 5))
    serial = model.predict_marginals(X, method="gibbs", n_perturbations=30)
    draws = model.sample(X, n_draws=7, method="gibbs", random_state=2)
    model.set_params(n_jobs=2)
    parallel = model.predict_marginals(X, method="gibbs", n_perturbations=30)
    for one, two in zip(serial, parallel, strict=True):
        np.testing.assert_allclose(one, two, atol=1e-12)
    again = model.sample(X, n_draws=7, method="gibbs", random_state=2)
    for one, two in zip(draws, again, strict=True):
        np.testing.assert_array_equal(one, two)
    potentials = model.potentials(X)
    solver = model.structure_.solver_
    whole = perturbed_maps(solver, potentials, 30, 4, n_sweeps=4)
    small = perturbed_maps(solver, potentials, 30, 4, n_sweeps=4, max_nodes=25)
    np.testing.assert_array_equal(whole, small)  # chunks of one sample, blocks of one chain


def test_the_method_is_offered_where_the_weights_define_a_gibbs_model():
    model, X, y = _hand_set_grid_model(2, coupling=0.5)
    surrogate = PseudoLikelihoodCRF("grid", max_iter=5).fit(X, y)
    assert surrogate.predict_marginals(X, method="gibbs")[0].shape == (3, 3, 2)
    chains = make_chain_data(n_samples=5, n_states=3, n_features=4, random_state=0)
    crf = ChainCRF(max_iter=5).fit(chains.data, chains.target)
    with pytest.raises(ValueError, match=r"method must be one of \['exact'\]"):
        crf.predict_marginals(chains.data[:1], method="gibbs")


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


def test_known_labels_take_the_marker_in_any_numeric_form_and_a_generator():
    data = make_chain_data(n_samples=20, random_state=0)
    model = PerturbMAPCRF(max_iter=3, tol=None, random_state=0).fit(data.data, data.target)
    X, y = data.data[:3], data.target[:3]
    clamps = [np.where(np.arange(len(t)) % 2 == 0, t, -1) for t in y]
    expected = model.predict(X, known_labels=clamps)
    for form in (
        [[np.int64(v) for v in c] for c in clamps],
        [c.astype(float) for c in clamps],
        (c for c in clamps),
    ):
        for got, want in zip(model.predict(X, known_labels=form), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    for bad in (3, "ab"):
        with pytest.raises(ValueError, match="known_labels must be a sequence of label arrays"):
            model.predict(X, known_labels=bad)


def test_a_temperature_fitted_on_held_out_samples_lowers_their_log_loss():
    from pmap_sklearn.datasets import make_chain_data

    data = make_chain_data(n_samples=120, n_states=3, noise=2.0, random_state=0)
    X, y = data.data[:40], data.target[:40]  # few samples, no penalty: over-confident
    held_out, held_out_y = data.data[40:80], data.target[40:80]
    model = PerturbMAPCRF(alpha=1e-8, random_state=0, max_iter=30).fit(X, y)

    def log_loss(samples, labels):
        marginals = np.concatenate(list(model.predict_proba(samples)))
        truth = np.concatenate(labels)
        return -np.mean(np.log(marginals[np.arange(len(truth)), truth]))

    before, labels_before = log_loss(data.data[80:], data.target[80:]), model.predict(X)
    model.calibrate_marginals(held_out, held_out_y)
    assert model.marginal_temperature_ > 1.0  # softened
    assert log_loss(data.data[80:], data.target[80:]) < before  # on other samples too
    for a, b in zip(model.predict(X), labels_before, strict=True):  # the MAP is unchanged
        np.testing.assert_array_equal(a, b)
    # the marginals are the exact ones of the weights divided by the temperature
    batch = model.structure_.prepare(X[:2])
    scaled = model._node_marginals(batch, model.coef_ / model.marginal_temperature_, "exact", 1)
    np.testing.assert_allclose(np.concatenate(list(model.predict_proba(X[:2]))), scaled)
    model.fit(X, y)
    assert not hasattr(model, "marginal_temperature_")  # a new fit, a new temperature
    with pytest.raises(ValueError, match="no known label"):
        model.calibrate_marginals(held_out[:1], [np.full(len(held_out_y[0]), -1)])
    assert not hasattr(StructuredSVM(), "calibrate_marginals")


def _constrained_map(model, chain, known):
    """argmax over every labelling that keeps the known labels (enumeration)."""
    potentials = model.potentials([chain])
    unary, transition = potentials.unary, potentials.pairwise
    best, best_score = None, -np.inf
    for labels in itertools.product(range(len(model.classes_)), repeat=len(unary)):
        labels = np.array(labels)
        if np.any((known >= 0) & (labels != known)):
            continue
        score = unary[np.arange(len(labels)), labels].sum()
        score += transition[labels[:-1], labels[1:]].sum()
        if score > best_score:
            best, best_score = labels, score
    return best


@pytest.mark.parametrize("model", [PerturbMAPCRF(random_state=0), ChainCRF()])
def test_known_labels_constrain_decoding_exactly(model):
    sentences, tags = _corpus(40)
    pipe = make_pipeline(SequenceVectorizer(token_features), model).fit(sentences, tags)
    vectorizer, fitted = pipe[0], pipe[-1]
    chains = vectorizer.transform(sentences[:6])
    rng = np.random.default_rng(0)
    classes = list(fitted.classes_)
    for chain, truth in zip(chains, tags[:6], strict=True):
        known = np.where(rng.random(len(truth)) < 0.4, rng.integers(0, 3, len(truth)), -1)
        given = [classes[k] if k >= 0 else None for k in known]
        predicted = fitted.predict([chain], known_labels=[given])[0]
        expected = _constrained_map(fitted, chain, known)
        assert [classes.index(p) for p in predicted] == expected.tolist()
        marginals = fitted.predict_marginals([chain], known_labels=[given])[0]
        np.testing.assert_allclose(marginals[known >= 0].max(axis=1), 1.0)
        assert np.all(marginals[known >= 0].argmax(axis=1) == known[known >= 0])


def test_known_labels_are_checked():
    sentences, tags = _corpus(20)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    pipe.fit(sentences, tags)
    with pytest.raises(ValueError, match="ADJ"):
        pipe.predict(sentences[:1], known_labels=[["ADJ"] + [None] * (len(tags[0]) - 1)])
    with pytest.raises(ValueError, match="shape"):
        pipe.predict(sentences[:1], known_labels=[[None]])


# ---- the score: labels of classes_ only ------------------------------------------------------
def test_score_warns_of_labels_the_model_never_saw(chains):
    """A label outside ``classes_`` (99 on a chain, 5 on a grid, "Z" in a string pipeline)
    scored 0 or some float with no word; it is counted as an error, with a warning naming it."""
    X, y = chains
    chain = ChainCRF(max_iter=10).fit(X, y)
    unseen = [np.where(np.arange(len(t)) == 0, 99, t) for t in y]
    with pytest.warns(UserWarning, match=r"y holds labels the model never saw: 99 \("):
        unseen_score = chain.score(X, unseen)
    predicted = chain.predict(X)
    # the score averages over samples; each first node is an error, the rest as predicted
    per_sample = [np.mean(np.r_[False, p[1:] == t[1:]]) for p, t in zip(predicted, y, strict=True)]
    assert unseen_score == pytest.approx(np.mean(per_sample))
    marked = [np.where(np.arange(len(t)) == 0, -1, t) for t in y]  # the marker is no label
    assert 0.0 <= chain.score(X, marked) <= 1.0

    grids = make_grid_data(n_samples=4, random_state=0)
    grid = PerturbMAPCRF("grid", max_iter=1, random_state=0).fit(grids.data, grids.target)
    bad = [np.full_like(grids.target[0], 5), *grids.target[1:]]
    with pytest.warns(UserWarning, match=r"never saw: 5 .*classes_ is \[0, 1\]"):
        grid.score(grids.data, bad)

    sentences, tags = _corpus(20)
    pipe = make_pipeline(SequenceVectorizer(token_features), ChainCRF(max_iter=5))
    pipe.fit(sentences, tags)
    tagged = [["Z"] * len(tags[0]), *tags[1:]]
    with pytest.warns(UserWarning, match=r"never saw: 'Z'.*of the labels' kind"):
        pipe.score(sentences, tagged)
    assert 0.0 <= pipe.score(sentences, tags) <= 1.0


# ---- known_labels: None for a whole sample ---------------------------------------------------
@pytest.mark.parametrize(
    "model",
    [
        ChainCRF(max_iter=10),
        ChainCRF(ChainStructure(n_states_per_label=2), max_iter=10, random_state=0),
        PerturbMAPCRF(max_iter=2, random_state=0),
        StructuredSVM(max_iter=2, random_state=0),
    ],
    ids=["chain_crf", "hidden_states", "perturb_map", "ssvm"],
)
def test_none_for_a_whole_sample_of_known_labels_means_nothing_known(chains, model):
    """``known_labels=[None, None]`` failed with "sample 0: y has shape ()", naming y."""
    X, y = chains
    model.fit(X, y)
    free = model.predict(X[:2])
    given = model.predict(X[:2], known_labels=[None, y[1]])
    np.testing.assert_array_equal(given[0], free[0])  # nothing known in sample 0
    np.testing.assert_array_equal(given[1], y[1])  # sample 1 clamped to its labels
    nothing = model.predict(X[:2], known_labels=[None, None])
    for predicted, expected in zip(nothing, free, strict=True):
        np.testing.assert_array_equal(predicted, expected)
    if hasattr(model, "sample"):
        draws = model.sample(X[:2], n_draws=3, known_labels=[None, y[1]], random_state=0)
        assert draws[0].shape == (3, len(y[0]))
        assert (draws[1] == y[1]).all()


def test_none_for_a_whole_grid_sample_of_known_labels():
    grids = make_grid_data(n_samples=4, random_state=0)
    model = PerturbMAPCRF("grid", max_iter=1, random_state=0).fit(grids.data, grids.target)
    free = model.predict(grids.data[:2])
    known = model.predict(grids.data[:2], known_labels=[None, grids.target[1]])
    np.testing.assert_array_equal(known[0], free[0])
    np.testing.assert_array_equal(known[1], grids.target[1])


# ---- n_draws against the memory it implies ---------------------------------------------------
def test_n_draws_beyond_memory_is_refused_before_allocating(chains, monkeypatch):
    """``sample(X, n_draws=10**12)`` asked numpy for 50-182 TiB at once."""
    from pmap_sklearn import _validation
    from pmap_sklearn.inspection import sequence_probabilities

    X, y = chains
    for model in (ChainCRF(max_iter=5), PerturbMAPCRF(max_iter=2, random_state=0)):
        model.fit(X, y)
        with pytest.raises(ValueError, match=r"n_draws=10+ draws of \d+ nodes need about .*TiB"):
            model.sample(X[:2], n_draws=10**12)
    with pytest.raises(ValueError, match="at most about .* draws.*batches"):  # frequencies of draws
        sequence_probabilities(model, X[:2], n_draws=10**12, tol=0)
    n_nodes = sum(len(x) for x in X[:2])
    monkeypatch.setattr(_validation, "physical_memory", lambda: 1000 * n_nodes * 48)
    assert model.sample(X[:2], n_draws=1000)[0].shape == (1000, len(X[0]))
    with pytest.raises(ValueError, match=r"n_draws=1001 .*at most about 1000 draws of these"):
        model.sample(X[:2], n_draws=1001)
