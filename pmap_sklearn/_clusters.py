"""Word clusters as sparse token features: :class:`TokenClusters`, the discrete form of word
vectors that linear taggers take (one-hot cluster ids of a word and of its neighbours)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy import sparse
from sklearn.base import _fit_context
from sklearn.cluster import KMeans
from sklearn.utils.validation import check_is_fitted

from ._utils import store_parameters
from .embeddings import _WordLookup
from .preprocessing import _split_rows

__all__ = ["TokenClusters"]


def _int_tuple(value, name: str, low: int | None) -> tuple:
    """``value`` as a non-empty tuple of distinct ints (each >= ``low``), or a ValueError."""
    items = (value,) if isinstance(value, Integral) else value
    try:
        items = tuple(items)
    except TypeError:
        items = ()
    if not items or not all(isinstance(v, Integral) and not isinstance(v, bool) for v in items):
        raise ValueError(f"{name} must be an int or a non-empty tuple of ints, got {value!r}")
    if low is not None and min(items) < low:
        raise ValueError(f"{name} must be ints >= {low}, got {value!r}")
    if len(set(items)) < len(items):
        raise ValueError(f"{name} holds a value twice: {value!r}")
    return tuple(int(v) for v in items)


class TokenClusters(_WordLookup):
    """One-hot cluster ids of each token's word and of its neighbours' words, from word
    vectors clustered at several granularities.

    A linear tagger gains more from word vectors made discrete than from their raw dimensions:
    the cluster of a word at a few granularities, for the token and its neighbours, as sparse
    indicator features (Miller, Guinness & Zamanian 2004 and Koo, Carreras & Collins 2008 with
    Brown clusters; Turian, Ratinov & Bengio 2010, section 7, with clustered embeddings too).
    ``fit`` runs k-means (:class:`~sklearn.cluster.KMeans`, seeded) on the vectors once per
    entry of ``n_clusters``; each sequence becomes a CSR matrix with one column per (offset,
    granularity, cluster): token i's row has a 1 in the column of the cluster of token ``i +
    offset``'s word, for each offset and granularity — none where that token is outside the
    sequence or its word has no vector. :class:`~pmap_sklearn.SequenceUnion` joins it to
    :class:`~pmap_sklearn.SequenceVectorizer`'s features (:ref:`dense-vectors`).

    Parameters
    ----------
    vectors : mapping or (words, matrix) pair
        The word vectors, as for :class:`~pmap_sklearn.TokenEmbeddings`: a dict ``{word: 1-D
        array}``, a pair ``(words, matrix)`` or gensim's ``KeyedVectors``.
    n_clusters : int or tuple of int, default=(50, 200, 1000)
        The granularities: k-means into this many clusters, each at least 2 and at most the
        number of words.
    offsets : int or tuple of int, default=(-1, 0, 1)
        Positions, relative to the token, of the words whose clusters become its features
        (0: its own word; -1 and 1: the previous and next words).
    key : str or callable, optional
        How the word of a token is found, as for :class:`~pmap_sklearn.TokenEmbeddings`.
    lowercase : bool, default=False
        Lower-case the word before looking it up.
    random_state : int, RandomState instance or None, default=0
        Seed of k-means.
    dtype : dtype, default=np.float64
        Type of the output matrices.

    Attributes
    ----------
    vocabulary_ : dict
        Word → row of ``clusters_``.
    clusters_ : ndarray of shape (n_words + 1, len(n_clusters))
        The cluster of each word at each granularity; -1 on the last row (unknown words).
    n_features_out_ : int
        Columns of the output: ``len(offsets) * sum(n_clusters)``.
    unknown_rate_ : float
        Share of the training tokens whose word has no vector.

    See Also
    --------
    TokenEmbeddings : The vectors themselves as dense columns.
    SequenceUnion : Join these matrices to the sparse token features of each sequence.

    Examples
    --------
    >>> from pmap_sklearn import TokenClusters
    >>> vectors = {"cow": [1.0, 0.0], "pig": [0.9, 0.0], "runs": [0.0, 1.0]}
    >>> clusters = TokenClusters(vectors, n_clusters=2, offsets=(0, 1)).fit([["pig", "runs"]])
    >>> clusters.transform([["cow", "runs"]])[0].toarray()
    array([[1., 0., 0., 1.],
           [0., 1., 0., 0.]])
    >>> clusters.get_feature_names_out().tolist()
    ['c2[+0]=0', 'c2[+0]=1', 'c2[+1]=0', 'c2[+1]=1']
    """

    _parameter_constraints: dict = {
        "vectors": "no_validation",  # checked in fit, naming the word
        "n_clusters": "no_validation",  # checked in fit
        "offsets": "no_validation",
        "key": [str, callable, None],
        "lowercase": ["boolean"],
        "random_state": ["random_state"],
        "dtype": "no_validation",
    }

    def __init__(
        self,
        vectors,
        *,
        n_clusters=(50, 200, 1000),
        offsets=(-1, 0, 1),
        key=None,
        lowercase=False,
        random_state=0,
        dtype=np.float64,
    ):
        store_parameters(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Cluster the vectors at every granularity and read the words of ``X``.

        Parameters
        ----------
        X : sequence of sequences
            Sequences of tokens (words, ``(word, ...)`` tuples or feature dicts, by ``key``).
        y : ignored

        Returns
        -------
        self : object
        """
        self._fit(X)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None) -> list:
        """Cluster the vectors and give each token of ``X`` its clusters' indicators.

        Parameters
        ----------
        X : sequence of sequences
        y : ignored

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One matrix of shape (n_tokens, ``n_features_out_``) per sequence.
        """
        rows, lengths = self._fit(X)
        return self._indicators(rows, lengths)

    def _fit(self, X):
        n_clusters = _int_tuple(self.n_clusters, "n_clusters", 2)
        offsets = _int_tuple(self.offsets, "offsets", None)
        vocabulary, table = self._vector_table()
        if max(n_clusters) > len(vocabulary):
            raise ValueError(
                f"n_clusters={self.n_clusters!r}: {max(n_clusters)} clusters of "
                f"{len(vocabulary)} words — give at most one cluster per word"
            )
        rows, lengths = self._rows(X, vocabulary)
        clusters = np.full((len(vocabulary) + 1, len(n_clusters)), -1, dtype=np.intp)
        for g, k in enumerate(n_clusters):  # a loop over granularities
            kmeans = KMeans(k, n_init=1, random_state=self.random_state).fit(table[:-1])
            clusters[:-1, g] = kmeans.labels_
        # the fitted state is replaced only now, when the whole fit has succeeded
        self.vocabulary_, self.clusters_ = vocabulary, clusters
        self._n_clusters, self._offsets = n_clusters, offsets
        self.n_features_out_ = len(offsets) * sum(n_clusters)
        self.unknown_rate_ = float(np.mean(rows == len(vocabulary)))
        return rows, lengths

    def transform(self, X) -> list:
        """Give each token the indicators of its own and its neighbours' clusters.

        Parameters
        ----------
        X : sequence of sequences

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One matrix of shape (n_tokens, ``n_features_out_``) per sequence.
        """
        check_is_fitted(self, "clusters_")
        rows, lengths = self._rows(X, self.vocabulary_)
        return self._indicators(rows, lengths)

    def _indicators(self, rows, lengths) -> list:
        """The one-hot (offset, granularity, cluster) columns of every token, cut into
        sequences: one vectorised pass per offset and granularity."""
        n = len(rows)
        sequence = np.repeat(np.arange(len(lengths)), lengths)
        positions = np.arange(n)
        token_rows, columns = [], []
        start = 0
        for offset in self._offsets:
            source = positions + offset
            inside = (source >= 0) & (source < n)
            inside[inside] = sequence[source[inside]] == sequence[inside]
            for g, k in enumerate(self._n_clusters):
                cluster = np.full(n, -1, dtype=np.intp)
                cluster[inside] = self.clusters_[rows[source[inside]], g]
                known = cluster >= 0
                token_rows.append(positions[known])
                columns.append(start + cluster[known])
                start += k
        token_rows, columns = np.concatenate(token_rows), np.concatenate(columns)
        matrix = sparse.csr_matrix(
            (np.ones(len(columns), dtype=self.dtype), (token_rows, columns)),
            shape=(n, self.n_features_out_),
        )
        matrix.sort_indices()
        return _split_rows(matrix, lengths)

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: ``c<k>[<offset>]=<cluster>``.

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        ndarray of str
        """
        check_is_fitted(self, "clusters_")
        names = [
            f"c{k}[{offset:+d}]={c}"
            for offset in self._offsets
            for k in self._n_clusters
            for c in range(k)
        ]
        return np.asarray(names, dtype=object)
