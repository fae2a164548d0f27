"""Sequence labelling with token features: sparse chains, the vectorizer, lazy sparse SGD,
constrained decoding, weight inspection and the treebank loader."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler

from pmap_sklearn import (
    NodeTransformer,
    PerturbMAPCRF,
    SequenceVectorizer,
)
from pmap_sklearn.datasets import token_features
from pmap_sklearn.inspection import explain_weights

from .helpers import _corpus, _sparse_and_dense


def _dicts(sentences):
    return [[token_features(s, i) for i in range(len(s))] for s in sentences]


# ---- the vectorizer ---------------------------------------------------------------------------
def test_vectorizer_follows_dictvectorizer_rules():
    X = [[{"w": "the", "upper": False, "n": 2.5}, {"w": "dog", "upper": True}], [{"w": "a"}]]
    vectorizer = SequenceVectorizer().fit(X)
    names = vectorizer.get_feature_names_out().tolist()
    assert names == ["n", "upper", "w=a", "w=dog", "w=the"]
    chains = vectorizer.transform(X)
    assert [c.shape for c in chains] == [(2, 5), (1, 5)]
    assert all(sparse.issparse(c) and c.format == "csr" for c in chains)
    np.testing.assert_array_equal(chains[0].toarray(), [[2.5, 0, 0, 0, 1], [0, 1, 0, 1, 0]])
    # unseen features are ignored at transform
    assert vectorizer.transform([[{"w": "zebra"}]])[0].nnz == 0


def test_vectorizer_matches_dictvectorizer_on_a_corpus(monkeypatch):
    """The comprehension path gives DictVectorizer's vocabulary and matrices, in chunks of any
    size, and hands values of other kinds (lists, None) to DictVectorizer itself."""
    from sklearn.feature_extraction import DictVectorizer

    from pmap_sklearn import preprocessing

    monkeypatch.setattr(preprocessing, "CHUNK_TOKENS", 7)  # many chunks, new keys in each
    rng = np.random.default_rng(0)
    words = ["a", "b", "c", "d", "e"]

    def token():
        features = {
            "w": str(rng.choice(words)),
            "x": float(rng.normal()),
            "up": bool(rng.random() < 0.5),
        }
        if rng.random() < 0.3:
            features["n"] = int(rng.integers(0, 3))  # ints, and explicit zeros
        return features

    train = [[token() for _ in range(rng.integers(1, 6))] for _ in range(30)]
    test = [[token() | {"w": "unseen"} for _ in range(3)]]
    vectorizer = SequenceVectorizer().fit(train)
    reference = DictVectorizer().fit([t for s in train for t in s])
    assert vectorizer.get_feature_names_out().tolist() == reference.feature_names_
    for X in (train, test):
        ours = sparse.vstack(vectorizer.transform(X)).toarray()
        theirs = reference.transform([t for s in X for t in s]).toarray()
        np.testing.assert_array_equal(ours, theirs)
    listed = [[{"w": ["a", "b"]}], [{"w": ["c"]}]]  # iterables of strings: DictVectorizer's rule
    assert SequenceVectorizer().fit(listed).get_feature_names_out().tolist() == [
        "w=a",
        "w=b",
        "w=c",
    ]
    with_none = [[{"w": None, "v": "a"}]]  # None: DictVectorizer gives a NaN feature
    with pytest.raises(ValueError, match="'w' is None: leave the feature out"):
        SequenceVectorizer().fit(with_none)


def test_vectorizer_gives_each_sentence_its_own_rows():
    """A sentence's block is its rows of DictVectorizer's matrix, with its own shape and arrays
    — also between sentences of one length, whose blocks are copies of one checked block with
    the arrays replaced — and it behaves as any CSR matrix (products, slices, pickling)."""
    import pickle

    from sklearn.feature_extraction import DictVectorizer

    sentences, _ = _corpus(40)
    rng = np.random.default_rng(0)
    dicts = [  # tokens with different numbers of features
        [{k: v for k, v in t.items() if rng.random() < 0.7} | {"bias": 1.0} for t in s]
        for s in _dicts(sentences)
    ]
    blocks = SequenceVectorizer().fit_transform(dicts)
    reference = DictVectorizer().fit_transform([t for s in dicts for t in s]).tocsr()
    lengths = [len(s) for s in sentences]
    assert len(set(lengths)) < len(lengths)  # blocks of one shape share a prototype
    ends = np.cumsum(lengths)
    for block, n, end in zip(blocks, lengths, ends, strict=True):
        rows = reference[end - n : end]
        assert sparse.isspmatrix_csr(block) and block.shape == rows.shape
        np.testing.assert_array_equal(block.toarray(), rows.toarray())
        np.testing.assert_array_equal(
            block @ np.arange(block.shape[1]), rows @ np.arange(rows.shape[1])
        )
        np.testing.assert_array_equal(block[1:].toarray(), rows[1:].toarray())
    copied = pickle.loads(pickle.dumps(blocks))
    assert all((a != b).nnz == 0 for a, b in zip(copied, blocks, strict=True))


def test_vectorizer_builds_dicts_hashes_and_prunes():
    sentences, _ = _corpus(20)
    from_words = SequenceVectorizer(token_features).fit_transform(sentences)
    from_dicts = SequenceVectorizer().fit_transform(_dicts(sentences))
    for a, b in zip(from_words, from_dicts, strict=True):
        assert (a != b).nnz == 0
    hashed = SequenceVectorizer(token_features, n_features=64).fit(sentences)
    assert hashed.transform(sentences)[0].shape[1] == 64
    assert hashed.get_feature_names_out()[3] == "hash3"
    one_pass = SequenceVectorizer(token_features, min_count=2).fit_transform(sentences)
    two_passes = SequenceVectorizer(token_features, min_count=2).fit(sentences).transform(sentences)
    for a, b in zip(one_pass, two_passes, strict=True):
        assert a.shape == b.shape and (a != b).nnz == 0
    full = SequenceVectorizer(token_features).fit(sentences).n_features_out_
    pruned = SequenceVectorizer(token_features, min_count=5).fit(sentences).n_features_out_
    assert pruned < full


@pytest.mark.parametrize(
    "X, message",
    [
        ({"w": "the"}, "wrap one sequence"),
        ([{"w": "the"}, {"w": "dog"}], "sequence 0 is a dict"),
        ([[]], "sequence 0 is empty"),
        ([[{"w": "a"}, "dog"]], "token 1: expected a dict"),
        ([], "X is empty"),
    ],
)
def test_vectorizer_names_bad_input(X, message):
    with pytest.raises(ValueError, match=message):
        SequenceVectorizer().fit(X)


# ---- sparse chains give the dense results -----------------------------------------------------
def test_node_transformer_keeps_sparse_chains_sparse():
    chains, dense, tags = _sparse_and_dense(10)
    scaled = NodeTransformer(MaxAbsScaler()).fit_transform(chains)
    assert all(sparse.issparse(s) for s in scaled)
    np.testing.assert_allclose(
        scaled[0].toarray(), MaxAbsScaler().fit(np.vstack(dense)).transform(dense[0])
    )


# ---- inspection -------------------------------------------------------------------------------
def test_explain_weights_names_the_features_of_each_tag():
    sentences, tags = _corpus(60)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    pipe.fit(sentences, tags)
    explained = explain_weights(pipe, top=5)
    assert explained.transitions.shape == (3, 3)
    classes = list(explained.classes)
    det, noun, verb = (classes.index(t) for t in ("DET", "NOUN", "VERB"))
    # DET is followed by NOUN, never by VERB
    assert explained.transitions[det, noun] > explained.transitions[det, verb]
    top_det = [name for name, _ in explained.positive["DET"]]
    assert {"word.lower()=the", "word.lower()=a"} & set(top_det)
    weights = [w for _, w in explained.positive["NOUN"]]
    assert weights == sorted(weights, reverse=True) and weights[0] > 0
    with pytest.raises(ValueError, match="feature_names has 2 names"):
        explain_weights(pipe[-1], feature_names=["a", "b"])
