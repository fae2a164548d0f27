"""Node-level preprocessing for structured samples."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted

from .samples import GraphSample


def _node_features(sample, index: int) -> np.ndarray:
    features = sample.node_features if isinstance(sample, GraphSample) else np.asarray(sample)
    if features.ndim == 0 or features.dtype.kind not in "biuf":
        raise ValueError(
            f"sample {index}: expected numeric node features — a (D, F) array, an (H, W, F) image "
            f"or a GraphSample — got {type(sample).__name__} {features!r:.40}"
        )
    return features.reshape(-1, features.shape[-1]) if features.ndim > 1 else features[:, None]


def _with_node_features(sample, features):
    if isinstance(sample, GraphSample):
        return GraphSample(features, sample.edges, sample.edge_features, sample.node_sizes)
    shape = np.shape(sample)
    return features.reshape(shape[:-1] + (-1,)) if len(shape) == 3 else features


class NodeTransformer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Apply a scikit-learn transformer to the node features of structured samples.

    The transformer is fitted on the node features of all samples stacked together and applied
    to each sample, so ``Pipeline([("scale", NodeTransformer(StandardScaler())), ("crf",
    PerturbMAPCRF())])`` works. Chains ((D, F) arrays), images ((H, W, F)) and
    :class:`~pmap_sklearn.structures.GraphSample` are supported.

    Parameters
    ----------
    transformer : transformer
        Any scikit-learn transformer (cloned at fit).

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

    _parameter_constraints: dict = {"transformer": [HasMethods(["fit", "transform"])]}

    def __init__(self, transformer):
        self.transformer = transformer

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
        stacked = np.concatenate([_node_features(x, i) for i, x in enumerate(X)])
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

    def set_output(self, *, transform=None):
        """Accept the default output container only: the output is a list of structured
        samples, which has no pandas / polars form.

        Parameters
        ----------
        transform : {"default"} or None

        Returns
        -------
        self : object
        """
        if transform not in (None, "default"):
            raise ValueError(
                f"NodeTransformer returns structured samples (arrays per sample), so the "
                f"{transform!r} output container is not available; use transform='default'"
            )
        return self

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
        features = [_node_features(x, i) for i, x in enumerate(X)]
        if not features:
            return []
        lengths = np.cumsum([len(f) for f in features])[:-1]
        transformed = np.split(self.transformer_.transform(np.concatenate(features)), lengths)
        return [_with_node_features(x, f) for x, f in zip(X, transformed, strict=True)]
