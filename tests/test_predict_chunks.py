"""Predictions in chunks: the same outputs wherever the chunks of ``X`` end, and the packed
Viterbi kernel equals brute force and a per-chain reference on chains of very different
lengths; SequenceVectorizer makes its token dicts block by block with the same matrices."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from pmap_sklearn._backend import Potentials
from pmap_sklearn._backend.chain import viterbi
from pmap_sklearn._backend.mean_field import MeanFieldSolver
from pmap_sklearn._backend.messages import MessagePassingSolver
from pmap_sklearn._backend.trws import TRWSSolver
from pmap_sklearn.samples import grid_edges

from .helpers import _assert_chunking_invariant, _same, scores_of


def _reference_viterbi(unary, transition):
    """Viterbi of one chain with a stored back-pointer table (the textbook recursion)."""
    n, k = unary.shape
    score, pointer = unary[0].copy(), np.zeros((n, k), dtype=int)
    for d in range(1, n):
        candidates = score[:, None] + transition
        pointer[d] = candidates.argmax(axis=0)
        score = candidates.max(axis=0) + unary[d]
    labels = np.zeros(n, dtype=int)
    labels[-1] = score.argmax()
    for d in range(n - 1, 0, -1):
        labels[d - 1] = pointer[d, labels[d]]
    return labels


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_states=st.integers(2, 4))
def test_packed_viterbi_matches_per_chain_reference(seed, n_states):
    """Chains of lengths 1 to 60 in any order (no padding): each chain's labels are those of
    the textbook Viterbi of that chain alone."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([1, 1, 2, 5, 17, 60], size=int(rng.integers(1, 12)))
    unary = rng.normal(size=(lengths.sum(), n_states)) * 2
    transition = rng.normal(size=(n_states, n_states))
    labels = viterbi(unary, lengths, transition)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        np.testing.assert_array_equal(labels[a:b], _reference_viterbi(unary[a:b], transition))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_packed_viterbi_matches_brute_force(seed):
    """Tiny chains of lengths 1 to 6 with clamped-out labels (-inf): the best labelling."""
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(2, 4))
    lengths = rng.integers(1, 7, size=int(rng.integers(1, 5)))
    unary = rng.normal(size=(lengths.sum(), n_states))
    keep = rng.integers(n_states, size=len(unary))
    unary[
        (rng.random(len(unary)) < 0.2)[:, None] & (np.arange(n_states) != keep[:, None])
    ] = -np.inf
    transition = rng.normal(size=(n_states, n_states))
    labels = viterbi(unary, lengths, transition)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        edges = np.stack([np.arange(b - a - 1), np.arange(1, b - a)], axis=1)
        sample = Potentials(unary[a:b], edges, transition)
        _, scores = scores_of(sample)
        assert sample.score(labels[a:b])[0] == pytest.approx(scores.max())


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


def _mixed_batch(rng, k=3):
    """Samples of several shapes in one batch: a grid (bipartite), a triangle with a tail and
    a complete graph (odd cycles), a chain, one lone node; tables of both signs."""
    graphs = [
        grid_edges((3, 4)),
        np.array([[0, 1], [1, 2], [2, 0], [2, 3]]),
        np.array(list(itertools.combinations(range(5), 2))),
        np.stack([np.arange(5), np.arange(1, 6)], axis=1),
        np.empty((0, 2), dtype=int),
    ]
    sizes = [int(e.max()) + 1 if len(e) else 1 for e in graphs]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    edges = np.concatenate([e + o for e, o in zip(graphs, offsets, strict=False)])
    edge_offsets = np.concatenate([[0], np.cumsum([len(e) for e in graphs])])
    unary = rng.normal(size=(offsets[-1], k))
    tables = 1.5 * rng.normal(size=(len(edges), k, k))
    return Potentials(unary, edges, tables, offsets, edge_offsets)


@pytest.mark.parametrize(
    "solver, call",
    [
        (TRWSSolver(), "map"),
        (TRWSSolver(order="colour"), "map"),
        (MessagePassingSolver(counting_numbers="convex"), "map"),
        (MessagePassingSolver(counting_numbers="convex"), "marginals"),
        (MessagePassingSolver(), "marginals"),
        (MeanFieldSolver(schedule="sequential"), "marginals"),
    ],
    ids=["trws", "trws-colour", "convex-bp-map", "convex-bp-marginals", "bp", "mean-field"],
)
def test_loopy_solvers_treat_a_sample_the_same_in_any_batch(solver, call):
    """Iterative solvers stop each sample on its own and colour each sample as if alone: a
    sample's labelling or marginals are the same in its batch, alone, or in another batch
    (so chunked and parallel predictions agree with one call)."""
    p = _mixed_batch(np.random.default_rng(7))

    def solve(samples):
        out = getattr(solver, call)(p.take(samples))
        return out if call == "map" else out.node

    together = solve(np.arange(p.n_samples))
    alone = np.concatenate([solve([i]) for i in range(p.n_samples)])
    shuffled_order = [3, 0, 4, 2, 1]
    shuffled = solve(shuffled_order)
    parts = np.split(shuffled, np.cumsum([p.lengths[i] for i in shuffled_order])[:-1])
    regrouped = np.concatenate([parts[shuffled_order.index(i)] for i in range(p.n_samples)])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(together, regrouped)
