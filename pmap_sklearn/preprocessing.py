"""Node-level preprocessing for structured samples."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from .samples import GraphSample


def _node_features(sample) -> np.ndarray:
    features = sample.node_features if isinstance(sample, GraphSample) else np.asarray(sample)
    return features.reshape(-1, features.shape[-1]) if features.ndim > 1 else features[:, None]


def _with_node_features(sample, features):
    if isinstance(sample, GraphSample):
        return GraphSample(features, sample.edges, sample.edge_features, sample.node_sizes)
    shape = np.shape(sample)
    return features.reshape(shape[:-1] + (-1,)) if len(shape) == 3 else features


class NodeTransformer(TransformerMixin, BaseEstimator):
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
    """

    def __init__(self, transformer):
        self.transformer = transformer

    def fit(self, X, y=None):
        """Fit the transformer on the stacked node features of ``X``."""
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        stacked = np.concatenate([_node_features(x) for x in X])
        self.transformer_ = clone(self.transformer).fit(stacked)
        return self

    def transform(self, X):
        """Transform the node features of every sample (returns a list of samples)."""
        check_is_fitted(self, "transformer_")
        features = [_node_features(x) for x in X]
        if not features:
            return []
        lengths = np.cumsum([len(f) for f in features])[:-1]
        transformed = np.split(self.transformer_.transform(np.concatenate(features)), lengths)
        return [_with_node_features(x, f) for x, f in zip(X, transformed, strict=True)]
