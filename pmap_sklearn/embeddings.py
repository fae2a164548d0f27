"""Dense vectors beside sparse token features: :class:`TokenEmbeddings` maps each token of a
sequence to its vector (word embeddings), :class:`SequenceUnion` joins per-sequence blocks of
several transformers column-wise (the sequence form of scikit-learn's
:class:`~sklearn.pipeline.FeatureUnion`), and :func:`cooccurrence_vectors` makes word vectors
from a corpus (a truncated SVD of its word co-occurrences)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context, clone
from sklearn.utils import Bunch
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.extmath import randomized_svd
from sklearn.utils.metaestimators import _BaseComposition
from sklearn.utils.validation import check_is_fitted

from ._utils import stack_rows, store_parameters
from .preprocessing import _SampleListOutput, _split_rows

__all__ = ["TokenEmbeddings", "SequenceUnion", "cooccurrence_vectors"]


def _check_sequences(X) -> list[int]:
    """The length of each sequence of ``X``, or a ValueError naming the first one that is not
    a non-empty sequence of tokens."""
    if isinstance(X, Mapping | str) or not hasattr(X, "__len__"):
        raise ValueError(
            "X must be a list of sequences (one per sentence); got "
            f"{type(X).__name__}: wrap one sequence as [sequence]"
        )
    if len(X) == 0:
        raise ValueError("X is empty: at least one sequence is needed")
    lengths = []
    for n, sequence in enumerate(X):
        if isinstance(sequence, Mapping | str) or not hasattr(sequence, "__len__"):
            raise ValueError(
                f"sequence {n} is {type(sequence).__name__} {sequence!r:.40}, not a sequence of "
                "tokens: X is a list of sequences; pass a single sequence as [sequence]"
            )
        if len(sequence) == 0:
            raise ValueError(f"sequence {n} is empty: every sequence needs a token")
        lengths.append(len(sequence))
    return lengths


def _where(lengths, t: int) -> str:
    """``"sequence n, token i"`` of the t-th token of sequences of ``lengths``."""
    ends = np.cumsum(lengths)
    n = int(np.searchsorted(ends, t, side="right"))
    return f"sequence {n}, token {t - (int(ends[n - 1]) if n else 0)}"


class _WordLookup(_SampleListOutput, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """The word of each token and its row in a table of word vectors: the lookup that
    :class:`TokenEmbeddings` and :class:`~pmap_sklearn.TokenClusters` share (parameters
    ``vectors``, ``key``, ``lowercase`` and ``dtype``)."""

    def _vector_table(self, indicator: bool = False) -> tuple[dict, np.ndarray]:
        """The vocabulary and the (V + 1, d) matrix of ``vectors``, checked: the unknown
        words' row last, zero (and one more column, 1 on that row only, with ``indicator``)."""
        vectors = self.vectors
        if hasattr(vectors, "index_to_key") and hasattr(vectors, "vectors"):
            words, rows = list(vectors.index_to_key), vectors.vectors
        elif isinstance(vectors, Mapping):
            words, rows = list(vectors), list(vectors.values())
        elif isinstance(vectors, tuple | list) and len(vectors) == 2:
            words, rows = list(vectors[0]), vectors[1]
        else:
            raise ValueError(
                "vectors must be a dict {word: vector}, a pair (words, matrix) or gensim "
                f"KeyedVectors; got {type(vectors).__name__}"
            )
        if not words:
            raise ValueError("vectors holds no word: at least one vector is needed")
        lengths = {np.shape(row) for row in rows} if isinstance(rows, list) else None
        if lengths is not None and len(lengths) > 1:
            first = np.shape(rows[0])
            n = next(i for i, row in enumerate(rows) if np.shape(row) != first)
            raise ValueError(
                f"the vector of {words[n]!r} has shape {np.shape(rows[n])} but that of "
                f"{words[0]!r} {first}: every vector has the same length"
            )
        try:
            matrix = np.asarray(rows, dtype=float)
        except (TypeError, ValueError) as error:
            raise ValueError(f"vectors must be numeric: {error}") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise ValueError(
                f"vectors must be 1-D arrays of one length d >= 1 (a (V, d) matrix), got shape "
                f"{matrix.shape}"
            )
        if matrix.shape[0] != len(words):
            raise ValueError(
                f"{len(words)} words but {matrix.shape[0]} vectors: one row per word is needed"
            )
        bad = ~np.isfinite(matrix).all(axis=1)
        if bad.any():
            n = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"the vector of {words[n]!r} holds non-finite values (NaN or inf), as do "
                f"{int(bad.sum())} vectors in all: drop or repair them"
            )
        for word in words:
            if not isinstance(word, str):
                raise ValueError(f"the word {word!r} ({type(word).__name__}) is not a string")
        vocabulary = dict(zip(words, range(len(words)), strict=True))
        if len(vocabulary) < len(words):
            seen: set = set()
            twice = next(w for w in words if w in seen or seen.add(w))
            raise ValueError(f"the word {twice!r} has two vectors: words must be unique")
        table = np.zeros((len(words) + 1, matrix.shape[1] + indicator))
        table[:-1, : matrix.shape[1]] = matrix
        if indicator:
            table[-1, -1] = 1.0
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind != "f":
            raise ValueError(f"dtype={self.dtype!r} is not a float dtype (e.g. np.float64)")
        return vocabulary, table.astype(dtype)

    def _words(self, X, lengths) -> list:
        """The word of every token of ``X``, in order (checked to be strings)."""
        key = self.key
        tokens = itertools.chain.from_iterable(X)
        if key is None:
            words = [t if t.__class__ is str else _first(t) for t in tokens]
        elif isinstance(key, str):
            try:
                words = [t[key] for t in tokens]
            except (KeyError, TypeError, IndexError):
                self._raise_key_error(X, lengths)
        else:
            words = list(map(key, tokens))
        if not all(w.__class__ is str for w in words):
            t = next((t for t, w in enumerate(words) if not isinstance(w, str)), None)
            if t is not None:
                how = "key(token)" if callable(key) else "its word"
                hint = (
                    "; tokens are words or (word, ...) tuples — for feature dicts pass key=... "
                    "naming the entry holding the word"
                )
                raise ValueError(
                    f"{_where(lengths, t)}: {how} is {type(words[t]).__name__} "
                    f"{words[t]!r:.40}, not a string" + (hint if key is None else "")
                )
        return list(map(str.lower, words)) if self.lowercase else words

    def _raise_key_error(self, X, lengths):
        for t, token in enumerate(itertools.chain.from_iterable(X)):
            if not isinstance(token, Mapping):
                raise ValueError(
                    f"{_where(lengths, t)}: key={self.key!r} reads a feature dict but the "
                    f"token is {type(token).__name__} {token!r:.40}"
                )
            if self.key not in token:
                raise ValueError(
                    f"{_where(lengths, t)}: the token's dict has no entry {self.key!r} (it has "
                    f"{sorted(map(str, token))[:6]})"
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _rows(self, X, vocabulary) -> tuple[np.ndarray, list[int]]:
        """Row of the vector table of every token (the last row for unknown words), and the
        sequences' lengths."""
        lengths = _check_sequences(X)
        words = self._words(X, lengths)
        unknown = len(vocabulary)
        rows = np.fromiter(
            map(vocabulary.get, words, itertools.repeat(unknown, len(words))),
            dtype=np.intp,
            count=len(words),
        )
        return rows, lengths

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # X is a sequence of token sequences
        tags.input_tags.string = True
        return tags


class TokenEmbeddings(_WordLookup):
    """Map each token of a sequence to a dense vector (word embeddings).

    Each sequence becomes a (n_tokens, d) array, row i the vector of token i's word. The
    chain learners take it alone, and :class:`SequenceUnion` joins it to
    :class:`~pmap_sklearn.SequenceVectorizer`'s sparse features (:ref:`dense-vectors`).

    Parameters
    ----------
    vectors : mapping or (words, matrix) pair
        The word vectors: a dict ``{word: 1-D array}``, a pair ``(words, matrix)`` of V words
        and a (V, d) array (row v is word v's vector), or an object with ``index_to_key`` and
        ``vectors`` attributes (gensim's ``KeyedVectors``). Every vector has the same length d
        and finite values; words are unique strings.
    key : str or callable, optional
        How the word of a token is found. By default the token itself when it is a string, its
        first item when it is a tuple or list (the ``(word, pos)`` pairs of
        :func:`~pmap_sklearn.datasets.load_conll2002`); a string: the entry of that name in the
        token's feature dict (e.g. ``"word.lower()"`` of
        :func:`~pmap_sklearn.datasets.token_features`' dicts); a callable: ``key(token) ->
        str``.
    lowercase : bool, default=False
        Lower-case the word before looking it up (for vectors of lower-cased words).
    unknown : {"zero", "indicator"}, default="zero"
        The vector of a word that has none: ``"zero"``, the zero vector (the word adds nothing
        to the token's scores); ``"indicator"``, the zero vector and one more column, 1 for such
        words and 0 for the others, whose weights the learner fits with the rest — a learned
        vector of the unknown words, in the model's weights.
    dtype : dtype, default=np.float64
        Type of the output arrays.

    Attributes
    ----------
    vocabulary_ : dict
        Word → row of ``vectors_``.
    vectors_ : ndarray of shape (n_words + 1, n_features_out)
        The vectors, the unknown words' row last.
    n_features_out_ : int
        Columns of the output arrays: d, plus one with ``unknown="indicator"``.
    unknown_rate_ : float
        Share of the training tokens whose word has no vector.

    See Also
    --------
    SequenceUnion : Join these arrays to the sparse token features of each sequence.

    Examples
    --------
    >>> from pmap_sklearn import TokenEmbeddings
    >>> vectors = {"the": [1.0, 0.0], "dog": [0.0, 2.0]}
    >>> embedded = TokenEmbeddings(vectors, lowercase=True).fit_transform([["The", "cat"]])
    >>> embedded[0]
    array([[1., 0.],
           [0., 0.]])
    """

    _parameter_constraints: dict = {
        "vectors": "no_validation",  # checked in fit, naming the word
        "key": [str, callable, None],
        "lowercase": ["boolean"],
        "unknown": [StrOptions({"zero", "indicator"})],
        "dtype": "no_validation",
    }

    def __init__(self, vectors, *, key=None, lowercase=False, unknown="zero", dtype=np.float64):
        store_parameters(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check the vectors and read the words of ``X``.

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
        """Check the vectors and map every token of ``X`` to its vector.

        Parameters
        ----------
        X : sequence of sequences
        y : ignored

        Returns
        -------
        list of ndarray
            One array of shape (n_tokens, ``n_features_out_``) per sequence.
        """
        rows, lengths = self._fit(X)
        return _split_rows(self.vectors_[rows], lengths)

    def _fit(self, X):
        vocabulary, table = self._vector_table(self.unknown == "indicator")
        rows, lengths = self._rows(X, vocabulary)
        # the fitted state is replaced only now, when the whole fit has succeeded
        self.vocabulary_, self.vectors_ = vocabulary, table
        self.n_features_out_ = table.shape[1]
        self.unknown_rate_ = float(np.mean(rows == len(vocabulary)))
        return rows, lengths

    def transform(self, X) -> list:
        """Map every token to its vector (unknown words by ``unknown``).

        Parameters
        ----------
        X : sequence of sequences

        Returns
        -------
        list of ndarray
            One array of shape (n_tokens, ``n_features_out_``) per sequence.
        """
        check_is_fitted(self, "vectors_")
        rows, lengths = self._rows(X, self.vocabulary_)
        return _split_rows(self.vectors_[rows], lengths)

    def __getstate__(self):
        # A pickle holds the parameter ``vectors`` already: the fitted table (as large) is
        # left out and rebuilt from it on loading, where the parameter still gives the fitted
        # table (not set or changed since the fit).
        state = dict(super().__getstate__())
        if "vectors_" in state:
            vocabulary, table = self._vector_table(self.unknown == "indicator")
            if vocabulary == self.vocabulary_ and np.array_equal(table, self.vectors_):
                del state["vectors_"], state["vocabulary_"]
                state["_table_from_vectors"] = True
        return state

    def __setstate__(self, state):
        rebuild = state.pop("_table_from_vectors", False)
        super().__setstate__(state)
        if rebuild:
            self.vocabulary_, self.vectors_ = self._vector_table(self.unknown == "indicator")

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: ``vector0, vector1, ...`` (and ``unknown``).

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        ndarray of str
        """
        check_is_fitted(self, "vectors_")
        d = self.n_features_out_ - (self.unknown == "indicator")
        names = [f"vector{i}" for i in range(d)]
        return np.array(names + ["unknown"] * (self.unknown == "indicator"), dtype=object)


def _first(token):
    """The word of a ``(word, ...)`` tuple token (anything else is returned as it is, and
    refused by the caller)."""
    return token[0] if isinstance(token, tuple | list) and token else token


class SequenceUnion(_SampleListOutput, TransformerMixin, _BaseComposition):
    """Join the per-sequence outputs of several transformers column-wise.

    scikit-learn's :class:`~sklearn.pipeline.FeatureUnion` for sequences: every transformer
    gets the same ``X`` and returns one (n_tokens, F_j) block per sequence; sequence n of the
    output is the blocks of sequence n side by side, (n_tokens, sum F_j). The output is
    sparse (CSR) when any block is, so ``SequenceUnion([("tokens",
    SequenceVectorizer(token_features)), ("vectors", TokenEmbeddings(vectors))])`` keeps the
    sparse token features sparse beside dense word vectors (:ref:`dense-vectors`). The blocks
    of all sequences are joined at once (one ``hstack`` of the stacked rows, cut back into
    sequences).

    Parameters
    ----------
    transformer_list : list of (str, transformer)
        Named transformers of sequences (cloned at fit); ``"drop"`` leaves one out (e.g. in a
        grid search over ``"<name>": ["drop", transformer]``).
    transformer_weights : dict, optional
        Multiplier of each transformer's block, by name (FeatureUnion's): with an L2 penalty
        the same for every weight, the scale of a block sets how strongly its weights are
        held back.

    Attributes
    ----------
    transformers_ : list of (str, transformer)
        The fitted clones (the dropped ones left out).
    named_transformers_ : Bunch
        The fitted clones by name.
    n_features_out_ : int
        Columns of the output blocks.

    See Also
    --------
    TokenEmbeddings : Dense word vectors of the tokens.
    SequenceVectorizer : Sparse features of token feature dicts.

    Examples
    --------
    >>> from pmap_sklearn import SequenceUnion, SequenceVectorizer, TokenEmbeddings
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}]]
    >>> union = SequenceUnion([
    ...     ("tokens", SequenceVectorizer()),
    ...     ("vectors", TokenEmbeddings({"the": [0.5], "a": [0.5]}, key="w")),
    ... ])
    >>> blocks = union.fit_transform(X)
    >>> blocks[0].toarray()
    array([[0. , 0. , 1. , 0.5],
           [0. , 1. , 0. , 0. ]])
    >>> union.get_feature_names_out().tolist()
    ['tokens__w=a', 'tokens__w=dog', 'tokens__w=the', 'vectors__vector0']
    """

    _parameter_constraints: dict = {
        "transformer_list": [list],
        "transformer_weights": [dict, None],
    }

    def __init__(self, transformer_list, *, transformer_weights=None):
        store_parameters(self, locals())

    def get_params(self, deep=True):
        """Parameters of the union and, with ``deep``, of its transformers (``name__param``).

        Parameters
        ----------
        deep : bool, default=True

        Returns
        -------
        dict
        """
        return self._get_params("transformer_list", deep=deep)

    def set_params(self, **params):
        """Set parameters of the union or of its transformers (``name__param``; ``name``
        replaces a transformer).

        Parameters
        ----------
        **params : dict

        Returns
        -------
        self : object
        """
        self._set_params("transformer_list", **params)
        return self

    def _kept(self) -> list:
        """The (name, transformer, weight) of the transformers not dropped, checked."""
        names = [name for name, _ in self.transformer_list] if self.transformer_list else []
        if not names:
            raise ValueError("transformer_list is empty: give at least one (name, transformer)")
        for item in self.transformer_list:
            if not (isinstance(item, tuple | list) and len(item) == 2):
                raise ValueError(
                    f"transformer_list holds {item!r:.40}: expected (name, transformer)"
                )
        self._validate_names(names)
        weights = self.transformer_weights or {}
        unknown = set(weights).difference(names)
        if unknown:
            raise ValueError(
                f"transformer_weights names {sorted(unknown)}, not in transformer_list {names}"
            )
        kept = []
        for name, transformer in self.transformer_list:
            if isinstance(transformer, str) and transformer == "drop":
                continue
            if not (hasattr(transformer, "fit") and hasattr(transformer, "transform")):
                raise ValueError(
                    f"transformer {name!r} ({type(transformer).__name__}) has no fit and "
                    "transform: give a transformer of sequences or 'drop'"
                )
            weight = weights.get(name)
            if weight is not None and not (
                isinstance(weight, Real) and not isinstance(weight, bool) and np.isfinite(weight)
            ):
                raise ValueError(
                    f"transformer_weights[{name!r}] = {weight!r} is not a finite number"
                )
            kept.append((name, transformer, weight))
        if not kept:
            raise ValueError("every transformer is 'drop': keep at least one")
        return kept

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit every transformer on ``X``.

        Parameters
        ----------
        X : sequence of sequences
        y : ignored (passed to the transformers)

        Returns
        -------
        self : object
        """
        self._fit(X, y)
        return self

    @_fit_context(prefer_skip_nested_validation=False)
    def fit_transform(self, X, y=None) -> list:
        """Fit every transformer on ``X`` and join their blocks.

        Parameters
        ----------
        X : sequence of sequences
        y : ignored (passed to the transformers)

        Returns
        -------
        list of arrays or scipy.sparse.csr_matrix
            One (n_tokens, ``n_features_out_``) block per sequence, CSR if any block is
            sparse.
        """
        return self._fit(X, y)

    def _fit(self, X, y):
        kept = self._kept()
        fitted, outputs = [], []
        for name, transformer, weight in kept:
            transformer = clone(transformer)
            outputs.append(transformer.fit_transform(X, y))
            fitted.append((name, transformer, weight))
        blocks = self._join(outputs, fitted, len(X))
        # the fitted state is replaced only now, when every transformer has been fitted
        self.transformers_ = [(name, transformer) for name, transformer, _ in fitted]
        self._weights = [weight for _, _, weight in fitted]
        self.n_features_out_ = blocks[0].shape[1]
        return blocks

    def transform(self, X) -> list:
        """Transform ``X`` by every transformer and join their blocks.

        Parameters
        ----------
        X : sequence of sequences

        Returns
        -------
        list of arrays or scipy.sparse.csr_matrix
            One (n_tokens, ``n_features_out_``) block per sequence, CSR if any block is
            sparse.
        """
        check_is_fitted(self, "transformers_")
        fitted = [
            (name, transformer, weight)
            for (name, transformer), weight in zip(self.transformers_, self._weights, strict=True)
        ]
        outputs = [transformer.transform(X) for _, transformer, _ in fitted]
        return self._join(outputs, fitted, len(X))

    @staticmethod
    def _join(outputs, fitted, n_sequences: int) -> list:
        """Sequence n's blocks of every output side by side, checked to hold one block per
        sequence and the same rows."""
        lengths = None
        stacked = []
        for (name, _, weight), blocks in zip(fitted, outputs, strict=True):
            if not isinstance(blocks, list | tuple) or len(blocks) != n_sequences:
                what = f"{len(blocks)} blocks" if hasattr(blocks, "__len__") else "no list"
                raise ValueError(
                    f"transformer {name!r} returned {what} of type {type(blocks).__name__} for "
                    f"{n_sequences} sequences: each transformer returns one block per sequence"
                )
            shapes = [np.shape(block) for block in blocks]
            if any(len(shape) != 2 for shape in shapes):
                n = next(i for i, shape in enumerate(shapes) if len(shape) != 2)
                raise ValueError(
                    f"transformer {name!r} returned a block of shape {shapes[n]} for sequence "
                    f"{n}: blocks are (n_tokens, n_features)"
                )
            rows = np.array([shape[0] for shape in shapes])
            if lengths is None:
                lengths, first = rows, name
            elif not np.array_equal(rows, lengths):
                n = int(np.flatnonzero(rows != lengths)[0])
                raise ValueError(
                    f"sequence {n}: transformer {name!r} gave {rows[n]} rows but {first!r} "
                    f"{lengths[n]}: every block has one row per token"
                )
            block = stack_rows(list(blocks))
            stacked.append(block if weight is None else block * weight)
        if any(sparse.issparse(block) for block in stacked):
            joined = sparse.hstack(stacked, format="csr")
        else:
            joined = np.hstack(stacked)
        return _split_rows(joined, lengths)

    @property
    def named_transformers_(self) -> Bunch:
        """The fitted transformers by name."""
        check_is_fitted(self, "transformers_")
        return Bunch(**dict(self.transformers_))

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns: ``<transformer name>__<its column name>``.

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        ndarray of str
        """
        check_is_fitted(self, "transformers_")
        names = []
        for name, transformer in self.transformers_:
            if not hasattr(transformer, "get_feature_names_out"):
                raise AttributeError(
                    f"transformer {name!r} ({type(transformer).__name__}) does not provide "
                    "get_feature_names_out"
                )
            names.extend(f"{name}__{column}" for column in transformer.get_feature_names_out())
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # X is a sequence of token sequences
        tags.input_tags.dict = True
        tags.input_tags.string = True
        return tags


def cooccurrence_vectors(
    sentences, n_components=50, *, window=2, lowercase=True, random_state=0
) -> tuple[list, np.ndarray]:
    """Word vectors of a corpus: the truncated SVD of its positive pointwise mutual
    information (PPMI) matrix of word co-occurrences.

    Two words co-occur when they are at most ``window`` tokens apart in a sentence. The PPMI
    of word w and context word c is ``max(0, log(P(w, c) / (P(w) P_α(c))))`` with the context
    counts raised to α = 0.75 (the smoothing of word2vec's negative samples), and a word's
    vector is its row of ``U_d Σ_d^{1/2}``, the rank-d truncated SVD with the singular values'
    square roots ("eigenvalue weighting" p = 0.5), scaled to unit length (Levy, Goldberg &
    Dagan, "Improving distributional similarity with lessons learned from word embeddings",
    TACL 2015, sections 3.2-3.3). No download: the vectors of a training corpus's own words,
    for :class:`TokenEmbeddings` (:ref:`dense-vectors`).

    Parameters
    ----------
    sentences : sequence of sequences of str
        The corpus, as lists of words.
    n_components : int, default=50
        Dimension d of the vectors (at most the vocabulary's size minus one).
    window : int, default=2
        Largest distance between co-occurring words.
    lowercase : bool, default=True
        Count lower-cased words (then look them up with ``TokenEmbeddings(lowercase=True)``).
    random_state : int, Generator or None, default=0
        Seed of the randomised SVD.

    Returns
    -------
    words : list of str
        The vocabulary, sorted.
    vectors : ndarray of shape (n_words, n_components)
        Row v: the unit-length vector of ``words[v]`` (zero for a word without a positive
        PPMI).

    Examples
    --------
    >>> from pmap_sklearn.embeddings import cooccurrence_vectors
    >>> corpus = [["the", "dog", "runs"], ["the", "cat", "runs"], ["a", "dog", "sleeps"]]
    >>> words, vectors = cooccurrence_vectors(corpus, n_components=2)
    >>> words, vectors.shape
    (['a', 'cat', 'dog', 'runs', 'sleeps', 'the'], (6, 2))
    """
    if not (isinstance(window, Integral) and not isinstance(window, bool) and window >= 1):
        raise ValueError(f"window must be an int >= 1, got {window!r}")
    lengths = _check_sequences(sentences)
    words = list(itertools.chain.from_iterable(sentences))
    t = next((t for t, w in enumerate(words) if not isinstance(w, str)), None)
    if t is not None:
        raise ValueError(f"{_where(lengths, t)}: {words[t]!r:.40} is not a string (a word)")
    vocabulary, ids = np.unique(
        list(map(str.lower, words)) if lowercase else words, return_inverse=True
    )
    size = len(vocabulary)
    if not (
        isinstance(n_components, Integral)
        and not isinstance(n_components, bool)
        and 1 <= n_components < size
    ):
        raise ValueError(
            f"n_components must be an int in [1, {size - 1}] (below the {size} words), got "
            f"{n_components!r}"
        )
    sentence = np.repeat(np.arange(len(lengths)), lengths)
    pairs = []
    for distance in range(1, window + 1):  # a loop over distances, not over tokens
        same = sentence[distance:] == sentence[:-distance]
        left, right = ids[:-distance][same], ids[distance:][same]
        pairs += [(left, right), (right, left)]
    rows = np.concatenate([p[0] for p in pairs])
    columns = np.concatenate([p[1] for p in pairs])
    counts = sparse.csr_matrix(
        (np.ones(len(rows)), (rows, columns)), shape=(size, size)
    ).tocoo()  # duplicates summed
    total = counts.data.sum()
    word_counts = np.bincount(counts.row, counts.data, minlength=size)
    context = np.bincount(counts.col, counts.data, minlength=size) ** 0.75
    context *= total / context.sum()
    pmi = np.log(counts.data * total / (word_counts[counts.row] * context[counts.col]))
    positive = pmi > 0
    ppmi = sparse.csr_matrix(
        (pmi[positive], (counts.row[positive], counts.col[positive])), shape=(size, size)
    )
    U, S, _ = randomized_svd(ppmi, n_components, random_state=random_state)
    vectors = U * np.sqrt(S)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vocabulary.tolist(), np.divide(
        vectors, norms, out=np.zeros_like(vectors), where=norms > 0
    )
