"""pmap_sklearn.preprocessing: NodeTransformer and SequenceVectorizer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from sklearn.preprocessing import MaxAbsScaler, StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import GraphSample, NodeTransformer, SequenceVectorizer
from pmap_sklearn.datasets import token_features

from .helpers import _corpus, _sparse_and_dense


def test_node_transformer_handles_images_and_graphs(rng):
    images = [rng.normal(3, 2, size=(4, 5, 2)), rng.normal(3, 2, size=(2, 3, 2))]
    out = NodeTransformer(StandardScaler()).fit(images).transform(images)
    assert [o.shape for o in out] == [(4, 5, 2), (2, 3, 2)]
    np.testing.assert_allclose(
        np.concatenate([o.reshape(-1, 2) for o in out]).mean(0), 0, atol=1e-12
    )
    graphs = [GraphSample(rng.normal(5, 1, size=(3, 2)), [[0, 1]], [[0.5]], [1, 2, 3])]
    [transformed] = NodeTransformer(StandardScaler()).fit_transform(graphs)
    assert isinstance(transformed, GraphSample)
    np.testing.assert_allclose(transformed.node_features.mean(0), 0, atol=1e-12)
    np.testing.assert_array_equal(transformed.node_sizes, [1, 2, 3])


def test_node_transformer_feature_names_and_output():
    chains = [np.array([[0.0, 10.0], [2.0, 30.0]]), np.array([[4.0, 20.0]])]
    transformer = NodeTransformer(StandardScaler()).fit(chains)
    assert transformer.n_features_in_ == 2
    np.testing.assert_array_equal(transformer.get_feature_names_out(), ["x0", "x1"])
    np.testing.assert_array_equal(transformer.get_feature_names_out(["r", "g"]), ["r", "g"])
    assert transformer.set_output(transform="default") is transformer
    with pytest.raises(ValueError, match="'pandas' output container is not available"):
        transformer.set_output(transform="pandas")


def test_a_failed_sequence_vectorizer_refit_keeps_its_vocabulary():
    from pmap_sklearn import SequenceVectorizer

    tokens = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    vectorizer = SequenceVectorizer().fit(tokens)
    before = vectorizer.transform(tokens)
    with pytest.raises(ValueError, match="is None"):
        vectorizer.set_params(n_features=16).fit([[{"w": None}]])  # the hasher's refit fails
    assert vectorizer.n_features_out_ == 3
    for a, b in zip(before, vectorizer.set_params(n_features=None).transform(tokens), strict=True):
        assert (a != b).nnz == 0


@pytest.mark.parametrize(
    "params, X, message",
    [
        ({}, [[{1: "a"}, {"b": "c"}]], "sequence 0, token 0: the feature has the name 1"),
        ({}, [[{"a": "x"}, {"b": b"1"}]], "sequence 0, token 1: the feature 'b' is bytes"),
        ({}, [[{"a": "x"}], [{"b": None}]], "sequence 1, token 0: the feature 'b' is None"),
        ({}, [[{"a": np.nan}]], "'a' is nan: values must be finite"),
        ({}, [[{"a": {"x": 1}}]], "'a' is dict"),
        ({"n_features": 16}, [[{1: "a"}]], "the feature has the name 1"),
        ({"dtype": "banana"}, [[{"a": "x"}]], "dtype='banana' is not a numeric numpy dtype"),
        ({"token_features": lambda s, i: s[i]}, [["w"]], "returned str 'w'"),
    ],
)
def test_sequence_vectorizer_names_the_bad_token(params, X, message):
    with pytest.raises(ValueError, match=message):
        SequenceVectorizer(**params).fit_transform(X)


def test_sequence_vectorizer_bounds():
    with pytest.raises(InvalidParameterError, match="n_features"):
        SequenceVectorizer(n_features=2**40).fit([[{"a": "x"}]])
    with pytest.raises(InvalidParameterError, match="min_count"):
        SequenceVectorizer(min_count=True).fit([[{"a": "x"}]])
    vectorizer = SequenceVectorizer().fit([[{"a": "x"}]])
    with pytest.raises(ValueError, match="'a' is None"):
        vectorizer.transform([[{"a": None}]])


def test_a_sequence_of_strings_is_still_a_multi_valued_feature():
    (matrix,) = SequenceVectorizer().fit_transform([[{"tags": ["x", "y"], "n": 2}]])
    assert matrix.toarray().tolist() == [[2.0, 1.0, 1.0]]


_names = st.one_of(st.text(max_size=4), st.integers(), st.none())
_values = st.one_of(
    st.text(max_size=4),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.binary(max_size=3),
    st.lists(st.text(max_size=2), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.dictionaries(_names, _values, max_size=3), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_sequence_vectorizer_is_finite_or_names_the_token(X):
    """Any token dicts: finite CSR chains of the right lengths, or a ValueError naming the
    sequence and the token (or that nothing is left to learn)."""
    try:
        chains = SequenceVectorizer().fit_transform(X)
    except ValueError as error:
        assert "sequence" in str(error) or "no feature" in str(error), error
        return
    assert [c.shape[0] for c in chains] == [len(s) for s in X]
    assert all(np.isfinite(c.data).all() for c in chains)


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


@pytest.mark.parametrize("dtype, value", [(np.int8, 1000), (np.int16, 0.5), (np.float32, 1e300)])
def test_sequence_vectorizer_refuses_values_its_dtype_cannot_hold(dtype, value):
    with pytest.raises(ValueError, match=f"does not fit dtype={np.dtype(dtype).name}"):
        SequenceVectorizer(dtype=dtype).fit_transform([[{"a": value, "w": "x"}]])
    vectorizer = SequenceVectorizer(dtype=dtype).fit([[{"a": 1, "w": "x"}]])
    with pytest.raises(ValueError, match="does not fit"):
        vectorizer.transform([[{"a": value}]])
    assert vectorizer.transform([[{"a": 7}]])[0].toarray().tolist() == [[7, 0]]


def test_node_transformer_reads_grey_images_when_told():
    rng = np.random.default_rng(0)
    grey = [rng.random((6, 5)) * 10 + 3 for _ in range(3)]
    scaled = NodeTransformer(StandardScaler(), images=True).fit_transform(grey)
    as_channel = NodeTransformer(StandardScaler()).fit_transform([g[..., None] for g in grey])
    for a, b in zip(scaled, as_channel, strict=True):
        assert a.shape == (6, 5, 1)
        np.testing.assert_allclose(a, b)
    pooled = np.concatenate([s.ravel() for s in scaled])  # one feature over every pixel
    assert abs(pooled.mean()) < 1e-12 and abs(pooled.std() - 1) < 1e-12
    chains = NodeTransformer(StandardScaler()).fit_transform(grey)  # (D, F) chains by default
    assert chains[0].shape == (6, 5)


def test_grid_refuses_grey_images_a_node_transformer_read_as_chains():
    """By default a 2-D sample is a chain, and a grid reads it as a grey image: in a pipeline
    each image column was scaled as its own feature, with no word."""
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import GridStructure, PerturbMAPCRF

    rng = np.random.default_rng(0)
    labels = [rng.integers(0, 2, size=(5, 6)) for _ in range(4)]
    grey = [m + rng.normal(0, 0.5, m.shape) for m in labels]
    crf = PerturbMAPCRF(GridStructure(), max_iter=2, random_state=0)
    with pytest.raises(
        ValueError, match=r"NodeTransformer\(images=False\), which read .* images=True"
    ):
        make_pipeline(NodeTransformer(StandardScaler()), crf).fit(grey, labels)
    pipe = make_pipeline(NodeTransformer(StandardScaler(), images=True), crf).fit(grey, labels)
    assert pipe.predict(grey)[0].shape == (5, 6)
    fitted = crf.fit(NodeTransformer(StandardScaler(), images=True).fit_transform(grey), labels)
    chains = NodeTransformer(StandardScaler()).fit_transform(grey)
    with pytest.raises(ValueError, match="GridStructure reads a 2-D sample as a grey image"):
        fitted.predict(chains)  # at prediction too
    with pytest.raises(ValueError, match="GridStructure reads a 2-D sample as a grey image"):
        fitted.predict(chains[1:3])  # a slice keeps the mark
    assert chains[1:3].grey_images_read_as_chains and chains[0].shape == (5, 6)
    with pytest.raises(ValueError, match="GridStructure reads a 2-D sample as a grey image"):
        crf.fit(chains, labels, sample_weight=[1.0, 0.0, 1.0, 1.0])  # samples of weight 0 left


def _dicts(sentences):
    return [[token_features(s, i) for i in range(len(s))] for s in sentences]


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


def test_node_transformer_keeps_sparse_chains_sparse():
    chains, dense, tags = _sparse_and_dense(10)
    scaled = NodeTransformer(MaxAbsScaler()).fit_transform(chains)
    assert all(sparse.issparse(s) for s in scaled)
    np.testing.assert_allclose(
        scaled[0].toarray(), MaxAbsScaler().fit(np.vstack(dense)).transform(dense[0])
    )


def _same_chains(got, want) -> bool:
    return len(got) == len(want) and all(
        a.shape == b.shape
        and a.data.dtype == b.data.dtype
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and np.array_equal(a.data, b.data)
        for a, b in zip(got, want, strict=True)
    )


@pytest.mark.parametrize(
    "params", [{}, {"min_count": 2}, {"n_features": 64}, {"dtype": np.float32}]
)
def test_vectorizer_in_parts_on_workers_gives_the_serial_output(params, monkeypatch):
    """n_jobs=2 vectorises consecutive parts in two processes and merges their vocabularies:
    the vocabulary and every matrix are those of one process, in fit_transform and transform."""
    from pmap_sklearn import preprocessing

    monkeypatch.setattr(preprocessing, "PART_SEQUENCES", 7)
    sentences, _ = _corpus(40, seed=3)
    sentences[5] = sentences[5] + ["zebra"]  # a word only the first part sees
    sentences[-1] = sentences[-1] + ["yak"]  # and one only the last part sees
    serial = SequenceVectorizer(token_features, **params)
    expected = serial.fit_transform(sentences)
    parallel = SequenceVectorizer(token_features, n_jobs=2, **params)
    assert _same_chains(parallel.fit_transform(sentences), expected)
    assert parallel.get_feature_names_out().tolist() == serial.get_feature_names_out().tolist()
    unseen = [["zebra", "yak", "unicorn"], *_corpus(20, seed=4)[0]]
    assert _same_chains(parallel.transform(unseen), serial.transform(unseen))
    refit = SequenceVectorizer(token_features, n_jobs=2, **params).fit(sentences)
    assert _same_chains(refit.transform(sentences), expected)


def test_vectorizer_in_parts_names_the_sequence_and_keeps_sklearn_rules(monkeypatch):
    """A bad sequence in a later part is named by its place in X; values that need
    DictVectorizer's rules (lists of strings) give the serial output; a lambda travels."""
    from pmap_sklearn import preprocessing

    monkeypatch.setattr(preprocessing, "PART_SEQUENCES", 5)
    dicts = [[{"w": word} for word in s] for s in _corpus(20)[0]]
    with pytest.raises(ValueError, match="sequence 13 is a dict"):
        SequenceVectorizer(n_jobs=2).fit(dicts[:13] + [{"w": "the"}] + dicts[14:])
    listed = [[{"w": [token["w"], "x"]} for token in s] for s in dicts]
    assert _same_chains(
        SequenceVectorizer(n_jobs=2).fit_transform(listed),
        SequenceVectorizer().fit_transform(listed),
    )
    sentences = _corpus(20)[0]
    lowered = SequenceVectorizer(lambda s, i: {"w": s[i].lower()}, n_jobs=2)
    assert sum(m.shape[0] for m in lowered.fit_transform(sentences)) == sum(map(len, sentences))
