"""pmap_sklearn.embeddings (TokenEmbeddings, SequenceUnion) and
datasets.sentences_from_table."""

import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import PerturbMAPCRF, SequenceUnion, SequenceVectorizer, TokenEmbeddings
from pmap_sklearn.datasets import sentences_from_table, token_features

VECTORS = {"the": [1.0, 0.0], "dog": [0.0, 2.0], "barks": [3.0, -1.0]}
SENTENCES = [["The", "dog", "barks"], ["a", "dog"]]


def _union(**embeddings):
    return SequenceUnion(
        [
            ("tokens", SequenceVectorizer(token_features)),
            ("vectors", TokenEmbeddings(VECTORS, lowercase=True, **embeddings)),
        ]
    )


def test_token_embeddings_look_up_each_token():
    out = TokenEmbeddings(VECTORS, lowercase=True).fit_transform(SENTENCES)
    np.testing.assert_array_equal(out[0], [[1, 0], [0, 2], [3, -1]])
    np.testing.assert_array_equal(out[1], [[0, 0], [0, 2]])  # "a" has no vector: zeros
    # case kept without lowercase: "The" is unknown
    kept = TokenEmbeddings(VECTORS).fit(SENTENCES)
    np.testing.assert_array_equal(kept.transform(SENTENCES)[0][0], [0, 0])
    assert kept.unknown_rate_ == pytest.approx(2 / 5)


@pytest.mark.parametrize(
    "vectors",
    [
        VECTORS,
        (list(VECTORS), np.array(list(VECTORS.values()))),
    ],
)
def test_token_embeddings_read_every_form_of_vectors(vectors):
    class KeyedVectors:  # gensim's attributes
        index_to_key = list(VECTORS)
        vectors = np.array(list(VECTORS.values()))

    for given in (vectors, KeyedVectors()):
        out = TokenEmbeddings(given, lowercase=True).fit_transform(SENTENCES)
        np.testing.assert_array_equal(out[0], [[1, 0], [0, 2], [3, -1]])


def test_the_word_is_found_by_key():
    pairs = [[("The", "DA"), ("dog", "NC")]]  # (word, pos) tokens: the word is the first item
    np.testing.assert_array_equal(
        TokenEmbeddings(VECTORS, lowercase=True).fit_transform(pairs)[0], [[1, 0], [0, 2]]
    )
    dicts = [[token_features(SENTENCES[0], i) for i in range(3)]]
    by_name = TokenEmbeddings(VECTORS, key="word.lower()").fit_transform(dicts)[0]
    np.testing.assert_array_equal(by_name, [[1, 0], [0, 2], [3, -1]])
    by_call = TokenEmbeddings(VECTORS, key=str.lower).fit_transform(SENTENCES)[0]
    np.testing.assert_array_equal(by_call, by_name)


def test_unknown_words_get_an_indicator_column():
    embeddings = TokenEmbeddings(VECTORS, lowercase=True, unknown="indicator").fit(SENTENCES)
    out = embeddings.transform(SENTENCES + [["cat"]])
    np.testing.assert_array_equal(out[1], [[0, 0, 1], [0, 2, 0]])
    np.testing.assert_array_equal(out[2], [[0, 0, 1]])
    assert embeddings.get_feature_names_out().tolist() == ["vector0", "vector1", "unknown"]


def test_union_equals_the_hstack_of_its_blocks():
    union = _union().fit(SENTENCES)
    tokens = SequenceVectorizer(token_features).fit_transform(SENTENCES)
    vectors = TokenEmbeddings(VECTORS, lowercase=True).fit_transform(SENTENCES)
    for joined, fitted in (
        (union.transform(SENTENCES), True),
        (_union().fit_transform(SENTENCES), False),
    ):
        assert all(sparse.isspmatrix_csr(block) for block in joined), fitted
        for block, a, b in zip(joined, tokens, vectors, strict=True):
            np.testing.assert_array_equal(block.toarray(), sparse.hstack([a, b]).toarray())
    names = union.get_feature_names_out()
    assert names[-2:].tolist() == ["vectors__vector0", "vectors__vector1"]
    assert len(names) == union.n_features_out_ == tokens[0].shape[1] + 2
    # dense blocks only: a dense output
    dense = SequenceUnion([("a", TokenEmbeddings(VECTORS)), ("b", TokenEmbeddings(VECTORS))])
    out = dense.fit_transform(SENTENCES)
    assert isinstance(out[0], np.ndarray) and out[0].shape == (3, 4)


def test_union_weights_scale_a_block_and_drop_leaves_it_out():
    weighted = _union().set_params(transformer_weights={"vectors": 0.5}).fit(SENTENCES)
    plain = _union().fit(SENTENCES)
    a, b = weighted.transform(SENTENCES)[0].toarray(), plain.transform(SENTENCES)[0].toarray()
    np.testing.assert_array_equal(a[:, -2:], 0.5 * b[:, -2:])
    np.testing.assert_array_equal(a[:, :-2], b[:, :-2])
    dropped = _union().set_params(vectors="drop").fit(SENTENCES)
    assert dropped.n_features_out_ == plain.n_features_out_ - 2
    assert list(dropped.named_transformers_) == ["tokens"]


def test_union_params_pickle_and_clone():
    union = _union()
    assert union.get_params()["vectors__unknown"] == "zero"
    union.set_params(vectors__unknown="indicator")
    assert union.transformer_list[1][1].unknown == "indicator"
    fitted = union.fit(SENTENCES)
    loaded = pickle.loads(pickle.dumps(fitted))
    for a, b in zip(loaded.transform(SENTENCES), fitted.transform(SENTENCES), strict=True):
        assert (a != b).nnz == 0
    assert clone(fitted).get_params()["vectors__unknown"] == "indicator"
    assert not hasattr(clone(fitted), "transformers_")


def test_a_pickle_holds_the_vectors_once():
    """The fitted table is the parameter's vectors: a pickle stores them once and loads the
    same transform; where the parameter no longer gives the fitted table (changed after the
    fit), the pickle keeps the table that was fitted."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    vectors = dict(zip(words, rng.normal(size=(2000, 50)), strict=True))
    sentences = [["w1", "w7", "unseen"], ["w1999"]]
    fitted = TokenEmbeddings(vectors, unknown="indicator").fit(sentences)
    size = len(pickle.dumps(fitted))
    assert size < 1.2 * len(pickle.dumps(vectors))  # once, not twice
    loaded = pickle.loads(pickle.dumps(fitted))
    assert loaded.vocabulary_ == fitted.vocabulary_ and loaded.n_features_out_ == 51
    for a, b in zip(loaded.transform(sentences), fitted.transform(sentences), strict=True):
        np.testing.assert_array_equal(a, b)
    vectors["w1"] = np.ones(50)  # the parameter changed: the fitted table is kept
    kept = pickle.loads(pickle.dumps(fitted))
    assert len(pickle.dumps(fitted)) > 1.8 * size
    np.testing.assert_array_equal(kept.transform(sentences)[0], fitted.transform(sentences)[0])
    assert not np.array_equal(kept.transform(sentences)[0][0, :50], np.ones(50))


def _synonym_task(rng, n_words=60, n_train=120, n_test=60, length=6):
    """Words of three classes, the tag of a token its word's class: the training sentences
    use half the words, the test sentences the other half, so only the vectors (class centre
    plus noise) carry the tag of a test word."""
    classes = rng.integers(0, 3, n_words)
    centres = 3 * np.eye(3)
    vectors = {f"w{v}": centres[classes[v]] + rng.normal(0, 0.5, 3) for v in range(n_words)}
    seen, unseen = np.arange(n_words // 2), np.arange(n_words // 2, n_words)

    def sentences(pool, n):
        words = rng.choice(pool, size=(n, length))
        return [[f"w{v}" for v in row] for row in words], [list(classes[row]) for row in words]

    return vectors, sentences(seen, n_train), sentences(unseen, n_test)


def features(sentence, i):
    """The word alone: a test word unseen in training has no feature the model knows."""
    return {"word": sentence[i]}


def test_informative_vectors_beat_the_tokens_alone(rng):
    vectors, (X, y), (X_test, y_test) = _synonym_task(rng)
    plain = make_pipeline(SequenceVectorizer(features), PerturbMAPCRF(random_state=0))
    joined = make_pipeline(
        SequenceUnion(
            [("tokens", SequenceVectorizer(features)), ("vectors", TokenEmbeddings(vectors))]
        ),
        PerturbMAPCRF(random_state=0),
    )
    plain_score = plain.fit(X, y).score(X_test, y_test)
    joined_score = joined.fit(X, y).score(X_test, y_test)
    assert joined_score > 0.9 and joined_score > plain_score + 0.4
    # a grid search picks the vectors over "drop", and refits through the union
    search = GridSearchCV(
        joined, {"sequenceunion__vectors": ["drop", TokenEmbeddings(vectors)]}, cv=2
    )
    search.fit(X + X_test, y + y_test)
    assert search.best_params_["sequenceunion__vectors"] != "drop"
    loaded = pickle.loads(pickle.dumps(search.best_estimator_))
    assert loaded.score(X_test, y_test) == search.best_estimator_.score(X_test, y_test)


@pytest.mark.parametrize(
    "vectors, message",
    [
        ({}, "holds no word"),
        ({"a": [1.0, 2.0], "b": [1.0]}, r"the vector of 'b' has shape \(1,\)"),
        ({"a": [1.0, np.nan]}, "the vector of 'a' holds non-finite values"),
        ({"a": [1.0], "b": [np.inf]}, "the vector of 'b' holds non-finite"),
        ((["a", "b"], np.zeros((3, 2))), "2 words but 3 vectors"),
        ((["a", "a"], np.zeros((2, 2))), "the word 'a' has two vectors"),
        (([1], np.zeros((1, 2))), "the word 1 .* is not a string"),
        ((["a"], np.zeros((1, 0))), "one length d >= 1"),
        ({"a": ["x"]}, "vectors must be numeric"),
        (np.zeros((2, 2)), "vectors must be a dict"),
    ],
)
def test_bad_vectors_are_named(vectors, message):
    with pytest.raises(ValueError, match=message):
        TokenEmbeddings(vectors).fit(SENTENCES)


@pytest.mark.parametrize(
    "params, X, message",
    [
        ({}, [[{"w": "a"}]], "sequence 0, token 0: its word is dict .* pass key="),
        ({}, [["a"], ["b", 3]], "sequence 1, token 1: its word is int"),
        (
            {"key": "w"},
            [[{"w": "a"}], [{"x": "b"}]],
            "sequence 1, token 0: the token's dict has no entry 'w'",
        ),
        ({"key": "w"}, [["a"]], "key='w' reads a feature dict but the token is str"),
        ({"key": len}, [["a"]], r"key\(token\) is int"),
        ({}, [["a"], []], "sequence 1 is empty"),
        ({}, [], "X is empty"),
        ({}, ["a b"], "sequence 0 is str"),
        ({"dtype": np.int64}, [["a"]], "not a float dtype"),
    ],
)
def test_bad_tokens_are_named(params, X, message):
    with pytest.raises(ValueError, match=message):
        TokenEmbeddings(VECTORS, **params).fit(X)


def test_bad_parameters_are_refused():
    with pytest.raises(InvalidParameterError, match="unknown"):
        TokenEmbeddings(VECTORS, unknown="mean").fit(SENTENCES)
    fitted = TokenEmbeddings(VECTORS).fit(SENTENCES)
    with pytest.raises(ValueError, match="is empty"):
        fitted.fit([["a"], []])  # a failed refit keeps the fitted state
    assert fitted.unknown_rate_ == pytest.approx(2 / 5)


class _Rows:
    """A transformer that returns a fixed list of blocks (to test the union's checks)."""

    def __init__(self, blocks):
        self.blocks = blocks

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return self.blocks

    def fit_transform(self, X, y=None):
        return self.blocks

    def get_params(self, deep=True):
        return {"blocks": self.blocks}

    def set_params(self, **params):
        return self


@pytest.mark.parametrize(
    "transformer_list, weights, message",
    [
        ([], None, "transformer_list is empty"),
        ([("a", "drop")], None, "every transformer is 'drop'"),
        ([("a", TokenEmbeddings(VECTORS)), ("a", TokenEmbeddings(VECTORS))], None, "unique"),
        ([("a", TokenEmbeddings(VECTORS))], {"b": 2.0}, r"names \['b'\], not in"),
        ([("a", TokenEmbeddings(VECTORS))], {"a": np.nan}, "is not a finite number"),
        ([("a", 3)], None, "has no fit and transform"),
        ([("a", _Rows([np.zeros((3, 1))]))], None, "returned 1 blocks .* for 2 sequences"),
        ([("a", _Rows([np.zeros(3), np.zeros(2)]))], None, r"block of shape \(3,\) for sequence 0"),
        (
            [("a", TokenEmbeddings(VECTORS)), ("b", _Rows([np.zeros((3, 1)), np.zeros((3, 1))]))],
            None,
            "sequence 1: transformer 'b' gave 3 rows but 'a' 2",
        ),
    ],
)
def test_union_names_bad_transformers(transformer_list, weights, message):
    with pytest.raises(ValueError, match=message):
        SequenceUnion(transformer_list, transformer_weights=weights).fit(SENTENCES)


def _table():
    return {
        "sentence_id": np.array([7, 7, 3, 7, 3, 9]),
        "token": np.array(["a", "b", "x", "c", "y", "z"], dtype=object),
        "pos": ["D", "N", "D", "V", "N", "N"],
        "tag": np.array(["O", "B-PER", "O", "O", "B-LOC", "O"]),
    }


def test_table_to_sentences_keeps_first_appearance_and_row_order():
    sentences, tags = sentences_from_table(_table())
    assert sentences == [["a", "b", "c"], ["x", "y"], ["z"]]
    assert tags == [["O", "B-PER", "O"], ["O", "B-LOC"], ["O"]]
    pairs = sentences_from_table(_table(), token=["token", "pos"], tag=None)
    assert pairs[0] == [("a", "D"), ("b", "N"), ("c", "V")]
    named = dict(_table(), sentence_id=["s2", "s2", "s1", "s2", "s1", "s0"])
    assert sentences_from_table(named)[0] == sentences
    assert sentences_from_table({key: [] for key in _table()}) == ([], [])


def test_table_from_a_dataframe():
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(_table())
    assert sentences_from_table(frame) == sentences_from_table(_table())


def test_table_sentences_fit_a_tagger():
    rng = np.random.default_rng(0)
    words = np.array(["ana", "ríe", "en", "lima"])
    tags = np.array(["B-PER", "O", "O", "B-LOC"])
    picks = rng.integers(0, 4, 200)
    table = {"sentence_id": np.repeat(np.arange(40), 5), "token": words[picks], "tag": tags[picks]}
    X, y = sentences_from_table(table)
    tagger = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    assert tagger.fit(X, y).score(X, y) == 1.0


@pytest.mark.parametrize(
    "change, params, message",
    [
        ({}, {"tag": "label"}, r"no column 'label' for the tag \(it has \['sentence_id'"),
        ({}, {"token": ["token", "lemma"]}, "no column 'lemma' for the token"),
        ({}, {"sentence": "sid"}, "no column 'sid' for the sentence"),
        ({"tag": ["O"] * 5}, {}, "the tag column 'tag' has 5 rows but the sentence column"),
        ({"token": np.zeros((6, 2))}, {}, r"has shape \(6, 2\): columns are 1-D"),
        (
            {"sentence_id": [1.0, np.nan, 2.0, 2.0, np.nan, 3.0]},
            {},
            "2 rows have no sentence id .* row 1: .*ffill",
        ),
        ({"sentence_id": ["a", None, "b", "b", "c", "c"]}, {}, "1 rows have no sentence id"),
        ({"sentence_id": np.array([1, "a", 1, 1, 1, 1], dtype=object)}, {}, "do not compare"),
        ({}, {"token": []}, "token names no column"),
    ],
)
def test_bad_tables_are_named(change, params, message):
    with pytest.raises(ValueError, match=message):
        sentences_from_table(dict(_table(), **change), **params)


@pytest.mark.parametrize(
    "estimator",
    [
        TokenEmbeddings(VECTORS),
        SequenceUnion([("vectors", TokenEmbeddings(VECTORS))]),
    ],
    ids=lambda e: type(e).__name__,
)
def test_scikit_learn_api_checks(estimator):
    """scikit-learn's API checks that apply to transformers of sequences (the contract
    tests' list)."""
    from sklearn.utils import estimator_checks as checks

    from .test_contract import APPLICABLE_CHECKS

    for check in APPLICABLE_CHECKS:
        getattr(checks, check)(type(estimator).__name__, estimator)


def _ppmi_by_loops(sentences, window):
    """The smoothed PPMI matrix counted pair by pair (the reference)."""
    vocabulary = sorted({w for s in sentences for w in s})
    index = {w: i for i, w in enumerate(vocabulary)}
    counts = np.zeros((len(vocabulary),) * 2)
    for s in sentences:
        for i in range(len(s)):
            for j in range(len(s)):
                if i != j and abs(i - j) <= window:
                    counts[index[s[i]], index[s[j]]] += 1
    total = counts.sum()
    context = counts.sum(0) ** 0.75
    context *= total / context.sum()
    with np.errstate(divide="ignore"):
        pmi = np.log(counts * total / np.outer(counts.sum(1), context))
    return vocabulary, np.maximum(pmi, 0)


@pytest.mark.parametrize("window", [1, 2])
def test_cooccurrence_vectors_are_the_svd_of_the_ppmi(rng, window):
    from pmap_sklearn.embeddings import cooccurrence_vectors

    pool = np.array(["a", "b", "c", "d", "e", "f", "g"])
    corpus = [list(rng.choice(pool, rng.integers(2, 7))) for _ in range(40)]
    vocabulary, ppmi = _ppmi_by_loops(corpus, window)
    words, vectors = cooccurrence_vectors(corpus, n_components=6, window=window)
    assert words == vocabulary
    U, S, _ = np.linalg.svd(ppmi)
    expected = U[:, :6] * np.sqrt(S[:6])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    # the same vectors up to each component's sign
    signs = np.sign(np.sum(vectors * expected, axis=0))
    np.testing.assert_allclose(vectors, expected * signs, atol=1e-6)
    upper = cooccurrence_vectors([[w.upper() for w in s] for s in corpus], 6, window=window)
    np.testing.assert_allclose(np.abs(upper[1]), np.abs(vectors), atol=1e-6)  # lower-cased


@pytest.mark.parametrize(
    "corpus, params, message",
    [
        ([["a", "b"], ["b", "c"]], {"n_components": 3}, r"n_components must be an int in \[1, 2\]"),
        ([["a", "b"], ["b", "c"]], {"n_components": 1, "window": 0}, "window must be an int"),
        ([["a", 1], ["b", "c"]], {"n_components": 1}, "sequence 0, token 1: 1 is not a string"),
        ([["a", "b"], []], {"n_components": 1}, "sequence 1 is empty"),
    ],
)
def test_cooccurrence_vectors_name_bad_input(corpus, params, message):
    from pmap_sklearn.embeddings import cooccurrence_vectors

    with pytest.raises(ValueError, match=message):
        cooccurrence_vectors(corpus, **params)
