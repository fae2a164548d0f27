"""Predictions in chunks: the same outputs wherever the chunks of ``X`` end, and the packed
Viterbi kernel equals brute force and a per-chain reference on chains of very different
lengths; SequenceVectorizer makes its token dicts block by block with the same matrices."""

import numpy as np
import pytest

from pmap_sklearn import PerturbMAPCRF, _base


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
