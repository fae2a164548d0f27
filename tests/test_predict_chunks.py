"""Predictions in chunks: the same outputs wherever the chunks of ``X`` end, and the packed
Viterbi kernel equals brute force and a per-chain reference on chains of very different
lengths; SequenceVectorizer makes its token dicts block by block with the same matrices."""

import numpy as np
import pytest

from pmap_sklearn import (
    ChainStructure,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    GridStructure,
    MultiLabelStructure,
    PerturbMAPCRF,
    _base,
)

from .helpers import _assert_chunking_invariant, _same


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
        monkeypatch.setattr(_base, "PREDICT_NODES", limit)
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
    monkeypatch.setattr(_base, "PREDICT_NODES", 1)
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
    monkeypatch.setattr(_base, "PARALLEL_PREDICT_NODES", 3)
    model.set_params(n_jobs=2)
    got = [model.predict(X), model.predict_marginals(X, method="perturb")]
    for a, b in zip(got, expected, strict=True):
        _same(a, b)


@pytest.mark.parametrize("block", [1, 5, 10**9])
def test_vectorizer_blocks_give_the_same_matrices(block, monkeypatch):
    """Token dicts made in blocks of any size (one sequence each, a few, all): the same
    vocabulary and matrices; a generator X is read again by the slow path (list values)."""
    from pmap_sklearn import SequenceVectorizer, preprocessing
    from pmap_sklearn.datasets import token_features

    rng = np.random.default_rng(6)
    words = ["The", "dog", "runs", "a", "cat", "sat", "42", "on", "Mats"]
    sentences = [list(rng.choice(words, size=rng.integers(1, 9))) for _ in range(25)]
    expected = SequenceVectorizer(token_features)
    expected_rows = expected.fit_transform(sentences)
    monkeypatch.setattr(preprocessing, "CHUNK_TOKENS", block)
    vectorizer = SequenceVectorizer(token_features)
    rows = vectorizer.fit_transform(sentences)
    assert vectorizer.get_feature_names_out().tolist() == (
        expected.get_feature_names_out().tolist()
    )
    for got, want in zip(
        [*rows, *vectorizer.transform(sentences[:7])],
        [*expected_rows, *expected.transform(sentences[:7])],
        strict=True,
    ):
        assert (got != want).nnz == 0 and got.shape == want.shape
    listed = ([{"w": [word, "x"]} for word in s] for s in sentences)  # slow path, generator
    assert len(SequenceVectorizer().fit_transform(listed)) == len(sentences)


def test_exact_entity_probabilities_do_not_depend_on_the_chunks(monkeypatch):
    """Constrained forward-backward over the sequences in chunks: the same probabilities."""
    from pmap_sklearn.inspection import entity_probabilities

    from .test_sampling import _tagging_data

    X, y = _tagging_data()
    model = PerturbMAPCRF(random_state=0, max_iter=5).fit(X, y)
    whole = entity_probabilities(model, X[:12], method="exact")
    assert sum(map(len, whole)) >= 5
    for limit in (1, 9, 30):
        monkeypatch.setattr(_base, "PREDICT_NODES", limit)
        chunked = entity_probabilities(model, X[:12], method="exact")
        assert [[e[:3] for e in s] for s in chunked] == [[e[:3] for e in s] for s in whole]
        np.testing.assert_allclose(
            [e[3] for s in chunked for e in s], [e[3] for s in whole for e in s], rtol=1e-12
        )


def test_denoiser_predictions_do_not_depend_on_the_chunks(monkeypatch):
    """LogSupermodularDenoiser takes its images in the same chunks: the same denoised images
    and marginals (arrays in, arrays out; lists in, lists out), also with a Generator."""
    from pmap_sklearn import LogSupermodularDenoiser
    from pmap_sklearn.datasets import add_flip_noise

    rng = np.random.default_rng(7)
    clean = (rng.random((6, 7, 9)) < 0.5).astype(int)
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    model = LogSupermodularDenoiser(noise_level=0.1, max_iter=2, n_perturbations=5)
    model.set_params(random_state=0).fit(noisy, clean)
    calls = [
        lambda m, X: m.predict(X),
        lambda m, X: m.predict(list(X)),
        lambda m, X: m.predict(X, decoding="marginal"),
        lambda m, X: m.predict_marginals(list(X)),
    ]
    _assert_chunking_invariant(model, noisy, calls, monkeypatch)
    out = []
    for limit in (10**9, 70):
        monkeypatch.setattr(_base, "PREDICT_NODES", limit)
        model.set_params(random_state=np.random.default_rng(3))
        out.append([model.predict_marginals(noisy) for _ in range(2)])
    for got, expected in zip(out[1], out[0], strict=True):
        np.testing.assert_array_equal(got, expected)
