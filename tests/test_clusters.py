"""TokenClusters: one-hot k-means cluster ids of a token's word and of its neighbours."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from pmap_sklearn import PerturbMAPCRF, SequenceUnion, SequenceVectorizer, TokenClusters

from .test_embeddings import _synonym_task, features

VECTORS = {
    "cow": [1.0, 0.0],
    "pig": [0.9, 0.1],
    "runs": [0.0, 1.0],
    "sleeps": [0.1, 0.9],
    "the": [-1.0, -1.0],
}
SENTENCES = [["The", "cow", "runs"], ["a", "pig", "sleeps", "now"], ["pig"]]


def _by_loops(clusters, X, n_clusters, offsets):
    """The expected dense matrices, token by token, offset by offset."""
    out = []
    for sentence in X:
        matrix = np.zeros((len(sentence), len(offsets) * sum(n_clusters)))
        for i in range(len(sentence)):
            start = 0
            for offset in offsets:
                for g, k in enumerate(n_clusters):
                    j = i + offset
                    word = sentence[j].lower() if 0 <= j < len(sentence) else None
                    if word in clusters.vocabulary_:
                        matrix[i, start + clusters.clusters_[clusters.vocabulary_[word], g]] = 1
                    start += k
        out.append(matrix)
    return out


@pytest.mark.parametrize("n_clusters, offsets", [((2, 3), (-1, 0, 1)), (4, 0), ((2,), (2, -1))])
def test_clusters_equal_kmeans_and_the_token_by_token_indicators(n_clusters, offsets):
    clusters = TokenClusters(VECTORS, n_clusters=n_clusters, offsets=offsets, lowercase=True)
    out = clusters.fit_transform(SENTENCES)
    ks = (n_clusters,) if isinstance(n_clusters, int) else n_clusters
    matrix = np.array(list(VECTORS.values()))
    for g, k in enumerate(ks):  # the clusters are seeded k-means of the vectors
        labels = KMeans(k, n_init=1, random_state=0).fit(matrix).labels_
        np.testing.assert_array_equal(clusters.clusters_[:-1, g], labels)
    assert (clusters.clusters_[-1] == -1).all()  # the unknown words' row
    expected = _by_loops(
        clusters, SENTENCES, ks, (offsets,) if isinstance(offsets, int) else offsets
    )
    assert clusters.n_features_out_ == expected[0].shape[1]
    for block, dense in zip(out, expected, strict=True):
        assert block.format == "csr"
        np.testing.assert_array_equal(block.toarray(), dense)
    for block, dense in zip(clusters.transform(SENTENCES), expected, strict=True):
        np.testing.assert_array_equal(block.toarray(), dense)
    assert clusters.unknown_rate_ == pytest.approx(2 / 8)  # "a" and "now"
    assert len(clusters.get_feature_names_out()) == clusters.n_features_out_


def test_unknown_words_and_sentence_ends_have_no_column():
    clusters = TokenClusters(VECTORS, n_clusters=2, lowercase=True).fit(SENTENCES)
    out = clusters.transform([["now"], ["cow", "xyz"]])
    assert out[0].nnz == 0  # unknown, and no neighbours
    # "cow": its own cluster and that of nothing on its left, none for "xyz" on its right
    np.testing.assert_array_equal(out[1].getnnz(axis=1), [1, 1])
    names = clusters.get_feature_names_out()
    assert names[out[1][0].indices[0]].startswith("c2[+0]=")
    assert names[out[1][1].indices[0]].startswith("c2[-1]=")  # "cow" is token 1's left word


def test_clusters_in_a_union_pickle_clone_and_grid_search(rng):
    vectors, (X, y), (X_test, y_test) = _synonym_task(rng)
    plain = make_pipeline(SequenceVectorizer(features), PerturbMAPCRF(random_state=0))
    joined = make_pipeline(
        SequenceUnion(
            [
                ("tokens", SequenceVectorizer(features)),
                ("clusters", TokenClusters(vectors, n_clusters=(3, 6), offsets=0)),
            ]
        ),
        PerturbMAPCRF(random_state=0),
    )
    plain_score = plain.fit(X, y).score(X_test, y_test)
    joined_score = joined.fit(X, y).score(X_test, y_test)
    # the clusters of the words unseen in training carry their tags
    assert joined_score > 0.9 and joined_score > plain_score + 0.4
    loaded = pickle.loads(pickle.dumps(joined))
    assert loaded.score(X_test, y_test) == joined_score
    assert not hasattr(clone(joined[0].named_transformers_.clusters), "clusters_")
    search = GridSearchCV(joined, {"sequenceunion__clusters__n_clusters": [2, (3, 6)]}, cv=2)
    search.fit(X + X_test, y + y_test)
    assert search.best_params_["sequenceunion__clusters__n_clusters"] == (3, 6)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_clusters": 6}, "6 clusters of 5 words"),
        ({"n_clusters": 1}, "n_clusters must be ints >= 2"),
        ({"n_clusters": ()}, "n_clusters must be an int or a non-empty tuple"),
        ({"n_clusters": (2, 2.5)}, "n_clusters must be an int or a non-empty tuple"),
        ({"offsets": (0, 0)}, "offsets holds a value twice"),
        ({"offsets": "0"}, "offsets must be an int or a non-empty tuple"),
        ({"vectors": {"a": [np.nan]}}, "the vector of 'a' holds non-finite"),
        ({"dtype": np.int64}, "not a float dtype"),
    ],
)
def test_bad_parameters_are_named(params, message):
    with pytest.raises(ValueError, match=message):
        TokenClusters(**{"vectors": VECTORS, "n_clusters": 2, **params}).fit(SENTENCES)


def test_scikit_learn_api_checks():
    from sklearn.utils import estimator_checks as checks

    from .test_contract import APPLICABLE_CHECKS

    estimator = TokenClusters(VECTORS, n_clusters=2)
    for check in APPLICABLE_CHECKS:
        getattr(checks, check)(type(estimator).__name__, estimator)
