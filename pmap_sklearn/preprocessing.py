"""Node-level preprocessing for structured samples: transformers of node features, and the
vectorizer of token feature dicts (crfsuite's input) into sparse chains."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context, clone
from sklearn.feature_extraction import DictVectorizer, FeatureHasher
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted

from ._parallel import N_JOBS_CONSTRAINT, run_on_workers
from ._utils import stack_rows, store_parameters
from ._validation import NumberInterval
from .samples import GraphSample

__all__ = ["NodeTransformer", "SequenceVectorizer"]


def _node_features(sample, index: int):
    if isinstance(sample, GraphSample):
        sample = sample.node_features
    if sparse.issparse(sample):
        return sparse.csr_matrix(sample)
    features = np.asarray(sample)
    if features.ndim == 0 or features.dtype.kind not in "biuf":
        raise ValueError(
            f"sample {index}: expected numeric node features — a (D, F) array, an (H, W, F) image "
            f"or a GraphSample — got {type(sample).__name__} {features!r:.40}"
        )
    return features.reshape(-1, features.shape[-1]) if features.ndim > 1 else features[:, None]


def _with_node_features(sample, features):
    if isinstance(sample, GraphSample):
        return dataclasses.replace(sample, node_features=features)
    shape = np.shape(sample)
    return features.reshape(shape[:-1] + (-1,)) if len(shape) == 3 else features


#: Tokens whose feature strings :func:`_vectorise` holds at once (a corpus's millions of
#: ``name=value`` strings never exist together).
CHUNK_TOKENS = 8192
#: Fewest sequences a worker of :class:`SequenceVectorizer` takes: smaller parts would cost
#: more to send than building their dicts (about 70 µs a treebank sentence).
PART_SEQUENCES = 1000


def _plain_values(chunk) -> np.ndarray:
    """The values of a chunk of token dicts as floats, 1 for a string (at C speed); NaN
    for bytes and None, TypeError / ValueError for other kinds."""
    values = np.array(
        [
            1.0 if value.__class__ is str else (None if value.__class__ is bytes else value)
            for token in chunk
            for value in token.values()
        ],
        dtype=float,
    )
    if values.ndim != 1:  # sequences of the same length, e.g. [] or [1]
        raise ValueError("values that are sequences")
    return values


def _plain_tokens(tokens) -> bool:
    """Whether every feature name is a string and every value a string or a finite number
    (the fast path's test, without the vocabulary)."""
    try:
        for start in range(0, len(tokens), CHUNK_TOKENS):
            chunk = tokens[start : start + CHUNK_TOKENS]
            for _ in (name + "" for token in chunk for name in token):
                pass
            if not np.isfinite(_plain_values(chunk)).all():
                return False
    except (TypeError, ValueError):
        return False
    return True


def _vectorise(blocks, dtype, vocabulary: dict | None = None):
    """The CSR matrix (one row per token) of token feature dicts, by DictVectorizer's rules — a
    string value is the feature ``name=value`` with value 1, a number (or bool) is the feature
    ``name`` with its value — and the vocabulary: learned (sorted names) when ``vocabulary`` is
    None, else the one given (features it lacks are left out).

    Several times faster than :class:`~sklearn.feature_extraction.DictVectorizer`'s loop:
    comprehensions over blocks of tokens (``blocks``: an iterable of lists of dicts, e.g.
    :meth:`SequenceVectorizer._token_blocks`, which makes each block's dicts only when it is
    read) whose keys become column numbers at once. Returns None when a name is not a string or
    a value is neither a string nor a number (DictVectorizer's own rules, and errors, then
    apply).
    """
    learning = vocabulary is None
    index: dict = {} if learning else vocabulary
    columns, values, counts = [], [], []
    for chunk in blocks:
        try:
            keys = [
                name + "=" + value if value.__class__ is str else name + ""
                for token in chunk
                for name, value in token.items()
            ]
            chunk_values = _plain_values(chunk)
        except (TypeError, ValueError):
            return None
        if not np.isfinite(chunk_values).all():  # None, NaN, bytes: named by the slow check
            return None
        if learning:  # new keys take the next numbers (renumbered in sorted order below)
            new = set(keys).difference(index)
            index.update(zip(new, range(len(index), len(index) + len(new)), strict=True))
            numbers = map(index.__getitem__, keys)
        else:  # (map's loop runs in C)
            numbers = map(index.get, keys, itertools.repeat(-1, len(keys)))
        columns.append(np.fromiter(numbers, dtype=np.intp, count=len(keys)))
        values.append(chunk_values)
        counts.append(np.fromiter(map(len, chunk), dtype=np.intp, count=len(chunk)))
    columns = np.concatenate(columns) if columns else np.zeros(0, dtype=np.intp)
    values = np.concatenate(values) if values else np.zeros(0)
    if learning:  # number the features in sorted order, as DictVectorizer does
        names = sorted(index)
        rank = np.empty(len(names), dtype=np.intp)
        rank[_columns_in(index, names)] = np.arange(len(names))
        columns = rank[columns]
        vocabulary = {name: i for i, name in enumerate(names)}
    counts = np.concatenate(counts) if counts else np.zeros(0, dtype=np.intp)
    # features the vocabulary lacks are left out of their rows, and so are zero values (False
    # booleans): stored zeros would cost every product with the weights (a third of the
    # entries of sklearn-crfsuite's tutorial features) and change nothing
    known = (columns >= 0) & (values != 0)
    if not known.all():
        counts = np.bincount(
            np.repeat(np.arange(len(counts)), counts)[known], minlength=len(counts)
        )
        columns, values = columns[known], values[known]
    indptr = np.concatenate([[0], np.cumsum(counts)])
    matrix = sparse.csr_matrix(
        (_cast_values(values, dtype), columns, indptr),
        shape=(len(counts), len(vocabulary)),
    )
    matrix.sum_duplicates()
    return matrix, vocabulary


def _vectorise_part(maker, X, first: int, dtype, hasher, vocabulary):
    """One worker's part of :meth:`SequenceVectorizer._vectorise_parts`: the matrix of the
    sequences ``X`` (numbered from ``first`` in errors), the sorted names of its columns
    (learning a vocabulary; else None) and the sequences' lengths; None when a value needs
    scikit-learn's rules."""
    lengths: list[int] = []
    blocks = maker._token_blocks(X, lengths, first)
    if hasher is not None:
        tokens = [token for block in blocks for token in block]
        if not _plain_tokens(tokens):
            return None
        return hasher.transform(tokens), None, lengths
    learned = _vectorise(blocks, dtype, vocabulary)
    if learned is None:
        return None
    matrix, learned_vocabulary = learned
    return matrix, list(learned_vocabulary) if vocabulary is None else None, lengths


def _columns_in(vocabulary: dict, names: list) -> np.ndarray:
    """The columns of ``names`` in ``vocabulary``."""
    return np.fromiter(map(vocabulary.__getitem__, names), dtype=np.intp, count=len(names))


def _cast_values(values: np.ndarray, dtype) -> np.ndarray:
    """Feature values cast to ``dtype``, or a ValueError naming a value the type cannot hold
    (1000 as int8, 0.5 as an integer type, 1e300 as float32)."""
    with np.errstate(over="ignore", invalid="ignore"):
        cast = values.astype(dtype, copy=False)
        lost = cast.astype(float) != values
    if np.dtype(dtype).kind == "f":
        lost = ~np.isfinite(cast)  # rounding to fewer digits is what a float dtype is for
    if lost.any():
        raise ValueError(
            f"the feature value {float(values[lost][0])!r} does not fit dtype="
            f"{np.dtype(dtype).name}: "
            "give a wider dtype (e.g. np.float64) or scale the values"
        )
    return cast


def _reiterable(X):
    """``X``, or a list of it when it can be read only once (a generator): the slow paths
    read it a second time."""
    return X if isinstance(X, Mapping | str) or hasattr(X, "__len__") else list(X)


def _with_named_errors(vectorise, tokens, lengths):
    """``vectorise(tokens)`` (DictVectorizer's or FeatureHasher's) once the tokens are checked:
    a feature whose name is not a string or whose value is not a string, a finite number, a
    bool or a sequence of strings is refused with an error naming its sequence and token."""
    if not _plain_tokens(tokens):
        _check_token_dicts(tokens, lengths)
    try:
        return vectorise(tokens)
    except (TypeError, ValueError, OverflowError) as error:
        raise ValueError(f"the token dicts could not be vectorised: {error}") from error


def _check_token_dicts(tokens, lengths) -> None:
    """Raise a ValueError naming the first feature whose name is not a string or whose value
    is not a string, a finite number, a bool or a sequence of strings."""
    ends = np.cumsum(lengths)
    for t, token in enumerate(tokens):
        for name, value in token.items():
            problem = None
            if not isinstance(name, str):
                problem = f"has the name {name!r} ({type(name).__name__}): names must be strings"
            elif value is None:
                problem = f"{name!r} is None: leave the feature out of the dict instead"
            elif isinstance(value, bytes | bytearray):
                problem = f"{name!r} is bytes {value!r:.30}: decode it to a string"
            elif isinstance(value, Real):
                if not np.isfinite(value):
                    problem = f"{name!r} is {value!r}: values must be finite"
            elif isinstance(value, str):
                pass
            elif isinstance(value, Mapping) or not (
                isinstance(value, Iterable) and all(isinstance(v, str) for v in value)
            ):
                problem = (
                    f"{name!r} is {type(value).__name__} {value!r:.30}: values must be strings, "
                    f"numbers, bools or sequences of strings"
                )
            if problem:
                n = int(np.searchsorted(ends, t, side="right"))
                i = t - (int(ends[n - 1]) if n else 0)
                raise ValueError(f"sequence {n}, token {i}: the feature {problem}")


#: The attributes of a CSR matrix made from ``(data, indices, indptr)``: a copy of such a
#: matrix with its three arrays replaced is the matrix of those arrays.
_CSR_STATE = {"_shape", "maxprint", "data", "indices", "indptr"}


def _split_rows(stacked, lengths) -> list:
    """Cut stacked rows into consecutive blocks of ``lengths`` rows (sparse stays sparse).

    A CSR block holds views of the stacked arrays. It is a copy of a checked block of its shape
    (one per distinct length, made by scipy's constructor) with the three arrays replaced:
    2 µs a block instead of the constructor's 15 (a treebank's test set is 2,077 sentences)."""
    ends = np.cumsum(lengths)
    if not sparse.isspmatrix_csr(stacked):
        return [stacked[end - n : end] for n, end in zip(lengths, ends, strict=True)]
    data, indices, indptr, width = stacked.data, stacked.indices, stacked.indptr, stacked.shape[1]
    shaped: dict = {}
    blocks = []
    for start, end in zip((ends - lengths).tolist(), ends.tolist(), strict=True):
        low, high = indptr[start], indptr[end]
        rows = (data[low:high], indices[low:high], indptr[start : end + 1] - low)
        prototype = shaped.get(end - start)
        if prototype is None:
            block = sparse.csr_matrix(rows, shape=(end - start, width), copy=False)
            if set(vars(block)) == _CSR_STATE:  # nothing cached about its arrays
                shaped[end - start] = block
        else:
            block = copy.copy(prototype)
            block.data, block.indices, block.indptr = rows
        blocks.append(block)
    return blocks


class _SampleListOutput:
    """``set_output`` of transformers whose output is a list of per-sample arrays, which has no
    pandas / polars form: only the default container is accepted."""

    def set_output(self, *, transform=None):
        """Accept the default output container only: the output is a list of per-sample
        arrays, which has no pandas / polars form.

        Parameters
        ----------
        transform : {"default"} or None

        Returns
        -------
        self : object
        """
        if transform not in (None, "default"):
            raise ValueError(
                f"{type(self).__name__} returns a list of per-sample arrays, so the "
                f"{transform!r} output container is not available; use transform='default'"
            )
        return self


class _TransformedSamples(list):
    """The samples :class:`NodeTransformer` returns, with how it read their 2-D arrays:
    ``grey_images_read_as_chains`` is True when some 2-D array was read as a chain (D, F) (the
    default, ``images=False``), which a grid structure reads as a grey image (H, W) — so a
    grid structure after it in a pipeline can refuse features transformed column by column."""

    grey_images_read_as_chains = False

    def __getitem__(self, index):
        """A sample, or a slice of them that keeps the mark."""
        got = super().__getitem__(index)
        if isinstance(index, slice):
            got = _TransformedSamples(got)
            got.grey_images_read_as_chains = self.grey_images_read_as_chains
        return got


class NodeTransformer(
    _SampleListOutput, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None
):
    """Apply a scikit-learn transformer to the node features of structured samples.

    The transformer is fitted on the node features of all samples stacked together and applied
    to each sample, so ``Pipeline([("scale", NodeTransformer(StandardScaler())), ("crf",
    PerturbMAPCRF())])`` works. Chains ((D, F) arrays or sparse matrices), images ((H, W, F)) and
    :class:`~pmap_sklearn.structures.GraphSample` are supported.

    Parameters
    ----------
    transformer : transformer
        Any scikit-learn transformer (cloned at fit).
    images : bool, default=False
        Whether the samples are images: then a 2-D sample is a grey image (H, W), one feature
        per pixel, as :class:`~pmap_sklearn.GridStructure` reads it (and comes back as
        (H, W, F')). By default a 2-D sample is a chain (D, F) of D nodes with F features —
        grey images then need ``images=True`` or the shape (H, W, 1); a grid structure after
        it (in a pipeline) refuses 2-D samples read as chains, whose image columns were
        transformed as separate features.

    Attributes
    ----------
    transformer_ : transformer
        The fitted clone.
    n_features_in_ : int
        Number of node features.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.preprocessing import StandardScaler
    >>> from pmap_sklearn import NodeTransformer
    >>> chains = [np.array([[0.0, 10.0], [2.0, 30.0]]), np.array([[4.0, 20.0]])]
    >>> scaled = NodeTransformer(StandardScaler()).fit_transform(chains)
    >>> [s.shape for s in scaled]
    [(2, 2), (1, 2)]
    """

    _parameter_constraints: dict = {
        "transformer": [HasMethods(["fit", "transform"])],
        "images": ["boolean"],
    }

    def __init__(self, transformer, *, images=False):
        store_parameters(self, locals())

    def _features(self, sample, index: int):
        """The node features of a sample; with ``images``, a 2-D sample is a grey image."""
        if self.images and not isinstance(sample, GraphSample) and np.ndim(sample) == 2:
            sample = np.asarray(sample)[..., None]
        return _node_features(sample, index)

    def _with_features(self, sample, features):
        if self.images and not isinstance(sample, GraphSample) and np.ndim(sample) == 2:
            return features.reshape(np.shape(sample) + (-1,))
        return _with_node_features(sample, features)

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the transformer on the stacked node features of ``X``.

        Parameters
        ----------
        X : sequence of samples
        y : ignored

        Returns
        -------
        self : object
        """
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        stacked = stack_rows([self._features(x, i) for i, x in enumerate(X)])
        self.transformer_ = clone(self.transformer).fit(stacked)
        self.n_features_in_ = stacked.shape[1]
        return self

    def get_feature_names_out(self, input_features=None):
        """Names of the transformed node features (those of the inner transformer).

        Parameters
        ----------
        input_features : array-like of str, optional

        Returns
        -------
        ndarray of str
        """
        check_is_fitted(self, "transformer_")
        if hasattr(self.transformer_, "get_feature_names_out"):
            return self.transformer_.get_feature_names_out(input_features)
        return np.array([f"x{i}" for i in range(self.n_features_in_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # X is a sequence of structured samples
        return tags

    def transform(self, X):
        """Transform the node features of every sample.

        Parameters
        ----------
        X : sequence of samples

        Returns
        -------
        list of samples
            Each sample with its node features transformed (same kind as the input sample).
        """
        check_is_fitted(self, "transformer_")
        features = [self._features(x, i) for i, x in enumerate(X)]
        if not features:
            return []
        lengths = [f.shape[0] for f in features]
        transformed = _split_rows(self.transformer_.transform(stack_rows(features)), lengths)
        out = _TransformedSamples(
            self._with_features(x, f) for x, f in zip(X, transformed, strict=True)
        )
        out.grey_images_read_as_chains = not self.images and any(
            isinstance(x, np.ndarray | list) and np.ndim(x) == 2 for x in X
        )
        return out


class SequenceVectorizer(
    _SampleListOutput, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None
):
    """Turn sequences of per-token feature dicts (sklearn-crfsuite's input) into sparse chains.

    Each token is a dict of features: a string value becomes a one-hot feature ``name=value``,
    a number stays its value and a boolean becomes 0 / 1 (the rules of scikit-learn's
    :class:`~sklearn.feature_extraction.DictVectorizer`). Each sequence becomes a CSR matrix of
    shape (n_tokens, n_features), which the chain learners take as they are, so
    ``make_pipeline(SequenceVectorizer(), PerturbMAPCRF())`` fits on crfsuite-style input
    (string tags included) and works in ``GridSearchCV`` / ``cross_validate``.

    Parameters
    ----------
    token_features : callable, optional
        ``token_features(sequence, i) -> dict``: with it, ``X`` holds raw sequences (e.g. lists
        of words) and the dicts are built here (e.g.
        :func:`~pmap_sklearn.datasets.token_features`); without it, ``X`` holds sequences of
        dicts.
    n_features : int, optional
        Hash the features into this many columns (scikit-learn's
        :class:`~sklearn.feature_extraction.FeatureHasher`, no vocabulary to store: for
        unbounded vocabularies); by default a vocabulary is learned at ``fit``
        (:class:`~sklearn.feature_extraction.DictVectorizer`), and features not seen in training
        are ignored.
    min_count : int, default=1
        With a vocabulary, keep the features seen in at least this many training tokens (2
        drops the features of words seen once, about halving the weights on a treebank).
    dtype : dtype, default=np.float64
        Type of the feature values.
    n_jobs : int, default=None
        Workers (joblib's ``n_jobs``) that build and vectorise the token dicts of consecutive
        parts of ``X`` (of at least a thousand sequences each) in ``fit``, ``fit_transform``
        and ``transform``; the output and the vocabulary are the same for any ``n_jobs``.
        ``token_features`` must then be picklable by joblib (a lambda is, through
        cloudpickle).

    Attributes
    ----------
    vectorizer_ : DictVectorizer or FeatureHasher
        The fitted vectorizer of single tokens.
    n_features_out_ : int
        Columns of the output matrices.

    Examples
    --------
    >>> from pmap_sklearn import SequenceVectorizer
    >>> X = [[{"w": "the", "title": True}, {"w": "dog"}], [{"w": "a", "title": False}]]
    >>> chains = SequenceVectorizer().fit_transform(X)
    >>> [c.shape for c in chains]
    [(2, 4), (1, 4)]
    >>> SequenceVectorizer().fit(X).get_feature_names_out().tolist()
    ['title', 'w=a', 'w=dog', 'w=the']
    """

    _parameter_constraints: dict = {
        "token_features": [callable, None],
        # FeatureHasher's limit: its column indices are int32
        "n_features": [NumberInterval(Integral, 1, 2**31 - 1, closed="both"), None],
        "min_count": [NumberInterval(Integral, 1, None, closed="left")],
        "dtype": "no_validation",
        "n_jobs": N_JOBS_CONSTRAINT,
    }

    def __init__(
        self, token_features=None, n_features=None, min_count=1, dtype=np.float64, n_jobs=None
    ):
        store_parameters(self, locals())

    def _tokens(self, X) -> tuple[list, list[int]]:
        """All tokens' feature dicts in order, and the length of each sequence."""
        lengths: list[int] = []
        tokens = [token for block in self._token_blocks(X, lengths) for token in block]
        return tokens, lengths

    def _token_blocks(self, X, lengths: list, first: int = 0):
        """The tokens' feature dicts in order, in blocks of whole sequences of about
        ``CHUNK_TOKENS`` tokens, each made (and checked) only when it is read: the dicts of a
        corpus, several times its vectors in memory, never exist together. ``lengths``
        receives the length of each sequence; errors number the sequences from ``first``."""
        if isinstance(X, Mapping) or isinstance(X, str):
            raise ValueError(
                "X must be a list of sequences (one per sentence); got a single "
                f"{type(X).__name__}: wrap one sequence as [sequence]"
            )
        make: Callable | None = self.token_features
        tokens: list = []
        for n, sequence in enumerate(X, start=first):
            if isinstance(sequence, Mapping | str):
                hint = "a dict" if isinstance(sequence, Mapping) else "a string"
                raise ValueError(
                    f"sequence {n} is {hint}, not a sequence of tokens: X is a list of "
                    "sequences; pass a single sequence as [sequence]"
                )
            if not hasattr(sequence, "__len__"):
                raise ValueError(
                    f"sequence {n} is {type(sequence).__name__} {sequence!r:.40}, not a sequence "
                    "of tokens: X is a list of sequences (one per sentence)"
                )
            if len(sequence) == 0:
                raise ValueError(f"sequence {n} is empty: every sequence needs a token")
            if make is None:
                for i, token in enumerate(sequence):
                    if not isinstance(token, Mapping):
                        raise ValueError(
                            f"sequence {n}, token {i}: expected a dict of features, got "
                            f"{type(token).__name__} {token!r:.40}; pass "
                            "token_features=... to build the dicts from raw tokens"
                        )
                tokens.extend(sequence)
            else:
                made = [make(sequence, i) for i in range(len(sequence))]
                for i, token in enumerate(made):
                    if not isinstance(token, Mapping):
                        raise ValueError(
                            f"token_features(sequence {n}, {i}) returned {type(token).__name__} "
                            f"{token!r:.40}: it must return a dict of features"
                        )
                tokens.extend(made)
            lengths.append(len(sequence))
            if len(tokens) >= CHUNK_TOKENS:
                yield tokens
                tokens = []
        if not lengths:
            raise ValueError("X is empty: at least one sequence is needed")
        if tokens:
            yield tokens

    def _vectorise_parts(self, X, hasher=None, vocabulary=None):
        """``(matrix, vocabulary, lengths)`` of ``X`` (a list or tuple) vectorised in
        consecutive parts on ``n_jobs`` workers (one of them the calling process), by
        ``hasher`` (a FeatureHasher) or else into ``vocabulary`` (learned when None: the
        sorted union of the parts' names, so the same as in one process); None when ``X``
        is too short for several parts of :data:`PART_SEQUENCES`, or when a part holds values
        that the fast path leaves to scikit-learn's rules (its own errors then apply)."""
        n_parts = 1
        if isinstance(X, list | tuple):
            n_parts = min(effective_n_jobs(self.n_jobs), len(X) // PART_SEQUENCES)
        if n_parts < 2:
            return None
        bounds = np.linspace(0, len(X), n_parts + 1).astype(int).tolist()
        maker = SequenceVectorizer(self.token_features)  # all a worker needs to build dicts
        jobs = [
            (maker, X[start:end], start, self.dtype, hasher, vocabulary)
            for start, end in itertools.pairwise(bounds)
        ]
        parts = run_on_workers(_vectorise_part, jobs, self.n_jobs, share_with_caller=True)
        if any(part is None for part in parts):
            return None
        matrices, names, lengths = zip(*parts, strict=True)
        if hasher is None and vocabulary is None:  # each part's columns: its sorted names
            vocabulary = {name: i for i, name in enumerate(sorted(set().union(*names)))}
            width = len(vocabulary)
            matrices = [
                sparse.csr_matrix(
                    (part.data, _columns_in(vocabulary, part_names)[part.indices], part.indptr),
                    shape=(part.shape[0], width),
                )
                for part, part_names in zip(matrices, names, strict=True)
            ]
        stacked = sparse.vstack(matrices, format="csr", dtype=self.dtype)
        return stacked, vocabulary, [n for part in lengths for n in part]

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the feature vocabulary (nothing to learn when hashing).

        Parameters
        ----------
        X : sequence of sequences
            Sequences of token feature dicts (or raw sequences with ``token_features``).
        y : ignored

        Returns
        -------
        self : object
        """
        self._fit(X)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None) -> list:
        """Learn the vocabulary and vectorise ``X`` in one pass over the tokens.

        Parameters
        ----------
        X : sequence of sequences
        y : ignored

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One matrix of shape (n_tokens, ``n_features_out_``) per sequence.
        """
        stacked, lengths = self._fit(X)
        return _split_rows(stacked, lengths)

    def _fit(self, X):
        """Fit the token vectorizer; return the training tokens' matrix and the lengths."""
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in "iuf":
            raise ValueError(
                f"dtype={self.dtype!r} is not a numeric numpy dtype (e.g. np.float64, np.float32)"
            )
        X = _reiterable(X)
        if self.n_features is not None:
            vectorizer = FeatureHasher(
                self.n_features, input_type="dict", alternate_sign=False, dtype=self.dtype
            )
            parts = self._vectorise_parts(X, vectorizer)
            if parts is None:
                tokens, lengths = self._tokens(X)
                stacked = _with_named_errors(vectorizer.transform, tokens, lengths)
            else:
                stacked, _, lengths = parts
        else:
            vectorizer = DictVectorizer(dtype=self.dtype)
            parts = self._vectorise_parts(X)
            if parts is None:
                lengths = []
                learned = _vectorise(self._token_blocks(X, lengths), self.dtype)
            else:
                learned, lengths = parts[:2], parts[2]
            if learned is None:  # values of other kinds: DictVectorizer's own rules
                tokens, lengths = self._tokens(X)
                stacked = _with_named_errors(vectorizer.fit_transform, tokens, lengths)
            else:
                stacked, vectorizer.vocabulary_ = learned
                vectorizer.feature_names_ = list(vectorizer.vocabulary_)
            if self.min_count > 1:
                keep = (stacked != 0).sum(axis=0).A1 >= self.min_count
                vectorizer.restrict(keep)
                stacked = stacked[:, np.flatnonzero(keep)]
            if not vectorizer.vocabulary_:
                raise ValueError(
                    f"no feature is seen in {self.min_count} training tokens: lower min_count"
                )
        # the fitted vocabulary is replaced only now, when the whole fit has succeeded
        self.vectorizer_, self.n_features_out_ = vectorizer, stacked.shape[1]
        return sparse.csr_matrix(stacked, dtype=self.dtype), lengths

    def transform(self, X) -> list:
        """Vectorise every sequence.

        Parameters
        ----------
        X : sequence of sequences

        Returns
        -------
        list of scipy.sparse.csr_matrix
            One matrix of shape (n_tokens, ``n_features_out_``) per sequence.
        """
        check_is_fitted(self, "vectorizer_")
        X = _reiterable(X)
        if isinstance(self.vectorizer_, DictVectorizer):
            parts = self._vectorise_parts(X, vocabulary=self.vectorizer_.vocabulary_)
        else:
            parts = self._vectorise_parts(X, self.vectorizer_)
        if parts is not None:
            return _split_rows(parts[0], parts[2])
        vectorised, lengths = None, []
        if isinstance(self.vectorizer_, DictVectorizer):
            blocks = self._token_blocks(X, lengths)
            vectorised = _vectorise(blocks, self.dtype, self.vectorizer_.vocabulary_)
        if vectorised is None:
            tokens, lengths = self._tokens(X)
            stacked = _with_named_errors(self.vectorizer_.transform, tokens, lengths)
            stacked = sparse.csr_matrix(stacked, dtype=self.dtype)
        else:
            stacked = vectorised[0]
        return _split_rows(stacked, lengths)

    def __getstate__(self):
        """Pickle a learned vocabulary as one string of its names in column order (the
        vocabulary dict and DictVectorizer's name list are rebuilt from it on loading: 1.8 MB
        instead of 2.6 for the 76,684 features of sklearn-crfsuite's tutorial)."""
        state = dict(super().__getstate__())  # object's own is the live __dict__
        vectorizer = state.get("vectorizer_")
        names = getattr(vectorizer, "feature_names_", None)
        if (
            isinstance(vectorizer, DictVectorizer)
            and names is not None
            and all(isinstance(name, str) and "\0" not in name for name in names)
            and all(vectorizer.vocabulary_.get(name) == i for i, name in enumerate(names))
        ):
            vectorizer = copy.copy(vectorizer)
            del vectorizer.vocabulary_, vectorizer.feature_names_
            state["vectorizer_"], state["_feature_names"] = vectorizer, "\0".join(names)
        return state

    def __setstate__(self, state):
        names = state.pop("_feature_names", None)
        super().__setstate__(state)
        if names is not None:
            names = names.split("\0")
            self.vectorizer_.feature_names_ = names
            self.vectorizer_.vocabulary_ = {name: i for i, name in enumerate(names)}

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns (``name=value`` for string features).

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        ndarray of str
            The vocabulary in column order; ``hash0, hash1, ...`` when hashing.
        """
        check_is_fitted(self, "vectorizer_")
        if self.n_features is not None:
            return np.array([f"hash{i}" for i in range(self.n_features)], dtype=object)
        return np.asarray(self.vectorizer_.feature_names_, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        tags.input_tags.sparse = True
        tags.requires_fit = True
        return tags
