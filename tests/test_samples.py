"""pmap_sklearn.samples: subsets of a batch of samples."""

import numpy as np
import pytest

from .helpers import _samples


def test_subset_matches_preparing_the_subset(rng):
    structure, X = _samples("graph", rng)
    X = X + [X[0]]
    structure.fit(X)
    batch = structure.prepare(X)
    sub = batch.subset([2, 1])
    direct = structure.prepare([X[2], X[1]])
    for name in (
        "features",
        "node_offsets",
        "edges",
        "edge_offsets",
        "edge_features",
        "node_sizes",
    ):
        np.testing.assert_array_equal(getattr(sub, name), getattr(direct, name))


@pytest.mark.parametrize("kind", ["chain", "grid", "graph"])
def test_slice_subset_is_the_indexed_subset_without_copies(kind, rng):
    structure, X = _samples(kind, rng)
    X = X + X[:2]
    structure.fit(X)
    batch = structure.prepare(X)
    for part in (slice(1, 3), slice(0, len(X)), slice(2, 2)):
        by_slice = batch.subset(part)
        by_index = batch.subset(np.arange(len(X))[part])
        for name in ("features", "node_offsets", "edges", "edge_offsets", "edge_features"):
            np.testing.assert_array_equal(getattr(by_slice, name), getattr(by_index, name))
        assert by_slice.label_shapes == by_index.label_shapes
        assert np.shares_memory(by_slice.features, batch.features) or by_slice.n_nodes == 0
        nodes = np.arange(batch.n_nodes)
        np.testing.assert_array_equal(
            nodes[batch.node_index(part)], batch.node_index(np.arange(len(X))[part])
        )
    with pytest.raises(ValueError, match="step 1"):
        batch.subset(slice(0, 3, 2))
