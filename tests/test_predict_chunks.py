"""Predictions in chunks: the same outputs wherever the chunks of ``X`` end, and the packed
Viterbi kernel equals brute force and a per-chain reference on chains of very different
lengths; SequenceVectorizer makes its token dicts block by block with the same matrices."""

import numpy as np
import pytest

from pmap_sklearn import PerturbMAPCRF, _base

from .helpers import _assert_chunking_invariant


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
