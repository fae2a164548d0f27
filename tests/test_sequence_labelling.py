"""Sequence labelling with token features: sparse chains, the vectorizer, lazy sparse SGD,
constrained decoding, weight inspection and the treebank loader."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler

from pmap_sklearn import (
    ChainCRF,
    GraphSample,
    MarginalPerturbMAPCRF,
    NodeTransformer,
    PerturbMAPCRF,
    SequenceVectorizer,
    StructuredSVM,
    _base,
    _utils,
    grid_edges,
)
from pmap_sklearn._base import bucket_by_length
from pmap_sklearn.datasets import (
    load_ud_treebank,
    make_chain_data,
    make_grid_data,
    token_features,
)
from pmap_sklearn.datasets._paths import candidate_roots
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
@pytest.mark.parametrize(
    "make",
    [
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=5, tol=None, learning_rate="optimal", average=True, alpha=1e-4
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=4, tol=None, average=30, alpha=0.05, learning_rate="optimal"
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=3, tol=None, learning_rate="constant", average=True, alpha=1e-4
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=4, tol=None, learning_rate="adagrad", average=True, alpha=1e-4
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=4, tol=None, learning_rate="adagrad", average=50, alpha=0.05
        ),
        lambda: MarginalPerturbMAPCRF(
            random_state=0,
            max_iter=3,
            tol=None,
            learning_rate="adagrad",
            eta0=0.5,
            average=True,
            alpha=1e-4,
        ),
        lambda: MarginalPerturbMAPCRF(
            random_state=0, max_iter=3, tol=None, learning_rate="optimal", average=True, alpha=1e-4
        ),
        lambda: ChainCRF(max_iter=30, alpha=1e-4),
        lambda: StructuredSVM(random_state=0, max_iter=5, alpha=1e-3, batch_size=1),
        lambda: StructuredSVM(random_state=0, max_iter=4, batch_size=4, average=False, alpha=1e-3),
    ],
)
def test_sparse_features_fit_exactly_like_dense(make, monkeypatch):
    """Lazy sparse SGD steps (shrinkage and averaging caught up when a row is read) give the
    weights of the dense steps — in the fit and in the step-size search, given the same search
    (by default sparse features judge it on held-out samples, dense ones on the pass's) and the
    same settings (``"auto"`` resolves to others on sparse features)."""
    monkeypatch.setattr(_base, "SPARSE_CALIBRATION", {})
    chains, dense, tags = _sparse_and_dense()
    on_sparse, on_dense = make().fit(chains, tags), make().fit(dense, tags)
    np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)
    assert on_sparse.score(chains, tags) == on_dense.score(dense, tags)
    if isinstance(on_sparse, StructuredSVM):  # its dual blocks live on their sample's rows
        width = on_sparse.structure_.weight_row_width_
        n_pairwise_rows = (
            on_sparse.structure_.size_ - on_sparse.structure_.n_unary_weights_
        ) // width
        for chain, block in zip(chains, on_sparse._state.blocks, strict=True):
            assert len(block.index) <= len(np.unique(chain.indices)) + 1 + n_pairwise_rows


def test_sparse_structured_svm_warm_starts_and_partial_labels_like_dense():
    """The S-SVM's row blocks carry over a warm start (two fits of 2 passes are one of 4), and
    with unknown labels (the second, refitted stage) give the dense blocks' iterates. (Not
    always their weighted average: sparse and dense products round differently, so the
    loss-augmented MAP may pick another of two tied maximisers, whose step is zero in one run
    and skipped in the other — the average counts the steps.)"""
    chains, dense, tags = _sparse_and_dense(30, seed=3)
    params = dict(random_state=0, tol=0.0, alpha=0.01, batch_size=1)
    twice = StructuredSVM(max_iter=2, warm_start=True, **params).fit(chains, tags)
    twice.fit(chains, tags)
    once = StructuredSVM(max_iter=4, **params).fit(chains, tags)
    np.testing.assert_allclose(twice.coef_, once.coef_, rtol=1e-9, atol=1e-12)
    partial = [list(t) for t in tags]
    for t in partial[::3]:
        t[0] = "?"
    params = dict(params, max_iter=3, unknown_label="?", average=False)
    on_sparse = StructuredSVM(**params).fit(chains, partial)
    on_dense = StructuredSVM(**params).fit(dense, partial)
    assert "?" not in on_sparse.classes_
    np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        on_sparse.supervised_coef_, on_dense.supervised_coef_, rtol=1e-9, atol=1e-12
    )


def test_bucketing_keeps_a_permutation_of_similar_lengths():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=1000)
    order = rng.permutation(1000)
    bucketed = bucket_by_length(order, lengths, 16, rng)
    assert sorted(bucketed.tolist()) == list(range(1000))
    spread = [np.ptp(lengths[bucketed[i : i + 16]]) for i in range(0, 992, 16)]
    random_spread = [np.ptp(lengths[order[i : i + 16]]) for i in range(0, 992, 16)]
    assert np.mean(spread) < np.mean(random_spread) / 4


def test_node_transformer_keeps_sparse_chains_sparse():
    chains, dense, tags = _sparse_and_dense(10)
    scaled = NodeTransformer(MaxAbsScaler()).fit_transform(chains)
    assert all(sparse.issparse(s) for s in scaled)
    np.testing.assert_allclose(
        scaled[0].toarray(), MaxAbsScaler().fit(np.vstack(dense)).transform(dense[0])
    )


def test_non_finite_sparse_features_are_named():
    chains, _, tags = _sparse_and_dense(5)
    bad = chains[2].copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="sample 2: node features contain non-finite"):
        PerturbMAPCRF().fit(chains[:2] + [bad] + chains[3:], tags)


# ---- pipelines on crfsuite-style input --------------------------------------------------------
def test_pipeline_learns_string_tags_in_model_selection():
    sentences, tags = _corpus(60)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    scores = cross_validate(pipe, sentences, tags, cv=3)["test_score"]
    assert scores.mean() > 0.9  # a majority tag per word would get ~0.84 ("runs")
    search = GridSearchCV(pipe, {"perturbmapcrf__alpha": [1e-4, 1e-2]}, cv=2).fit(sentences, tags)
    predicted = search.predict([["the", "runs", "sees", "a", "cat"]])[0]
    assert predicted.tolist() == ["DET", "NOUN", "VERB", "DET", "NOUN"]


# ---- constrained decoding ---------------------------------------------------------------------
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


# ---- the treebank loader ----------------------------------------------------------------------
def _treebank_present():
    return any(
        (root / "ud_english_ewt" / "en_ewt-ud-dev.conllu.gz").is_file()
        for root in candidate_roots()
    )


@pytest.mark.skipif(not _treebank_present(), reason="UD English EWT not in ../shared/data")
def test_treebank_loader_reads_the_standard_split():
    dev = load_ud_treebank("dev")
    assert len(dev.sentences) == 2001
    assert sum(len(s) for s in dev.sentences) == 25148 or sum(map(len, dev.sentences)) > 25000
    assert all(len(s) == len(t) for s, t in zip(dev.sentences, dev.tags, strict=True))
    assert len({t for tags in dev.tags for t in tags}) == 17
    xpos = load_ud_treebank("dev", tagset="xpos")
    assert len({t for tags in xpos.tags for t in tags}) > 40


def test_treebank_loader_names_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="split must be one of"):
        load_ud_treebank("validation")
    with pytest.raises(ValueError, match="tagset must be one of"):
        load_ud_treebank(tagset="pos")
    with pytest.raises(FileNotFoundError, match="en_ewt-ud-test.conllu"):
        load_ud_treebank("test", path=tmp_path)
    bad = tmp_path / "bad.conllu"
    bad.write_text("# text\n1\tThe\tthe\tDET\n")
    with pytest.raises(ValueError, match="line 2: a CoNLL-U token line has 10"):
        load_ud_treebank(path=bad)
    good = tmp_path / "good.conllu"
    good.write_text(
        "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\tVBP\t_\t0\troot\t_\t_\n"
        "2\tn't\tnot\tPART\tRB\t_\t1\tadvmod\t_\t_\n2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n\n"
    )
    loaded = load_ud_treebank(path=good, tagset="xpos")
    assert loaded.sentences == [["do", "n't"]] and loaded.tags == [["VBP", "RB"]]


def test_graphs_take_sparse_node_features_too(monkeypatch):
    monkeypatch.setattr(_base, "SPARSE_CALIBRATION", {})  # the same step-size search
    images = make_grid_data(n_samples=8, shape=(6, 6), noise=1.0, random_state=0)
    edges = grid_edges((6, 6))
    dense = [GraphSample(np.c_[x.reshape(-1, 1), x.reshape(-1, 1) > 0], edges) for x in images.data]
    sparse_graphs = [GraphSample(sparse.csr_matrix(g.node_features), g.edges) for g in dense]
    y = [t.ravel() for t in images.target]
    for make in (
        lambda: PerturbMAPCRF(
            "graph",
            random_state=0,
            max_iter=4,
            tol=None,
            average=True,
            learning_rate="optimal",
            alpha=1e-4,
        ),
        lambda: PerturbMAPCRF(
            "graph", learning_rate="adagrad", random_state=0, max_iter=4, average=True, alpha=1e-4
        ),
        lambda: MarginalPerturbMAPCRF(
            "graph",
            random_state=0,
            max_iter=3,
            tol=None,
            learning_rate="optimal",
            average=True,
            alpha=1e-4,
        ),
        # graph cuts: the S-SVM's sparse blocks read the projected (attractive) iterate
        lambda: StructuredSVM("graph", random_state=0, max_iter=4, alpha=1e-3, batch_size=1),
    ):
        on_sparse, on_dense = make().fit(sparse_graphs, y), make().fit(dense, y)
        np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(
    not Path("/proc/self/status").exists() or _utils._malloc_trim() is None,
    reason="needs glibc's malloc_trim and /proc (Linux)",
)
def test_fit_hands_freed_heap_memory_back():
    """glibc keeps freed blocks below its mmap threshold resident; a fit ends with
    release_freed_memory, which returns them (what a treebank fit leaves behind drops from
    ~170 MB to ~50 MB, the model)."""

    def resident_mb():
        return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024

    blocks = [np.ones(12_000) for _ in range(800)]  # 75 MB in 96 kB blocks, from the heap
    last = blocks[-1]  # the heap's top stays in use, so free() alone cannot shrink it
    del blocks
    before = resident_mb()
    data = make_chain_data(n_samples=6, n_features=3, random_state=0)
    PerturbMAPCRF(max_iter=1, random_state=0).fit(data.data, data.target)
    assert before - resident_mb() > 30
    del last
