"""pmap_sklearn._labels: samples without their ignored nodes."""

import numpy as np
import pytest

from pmap_sklearn import GraphSample
from pmap_sklearn._labels import without_ignored


def test_without_ignored_keeps_the_subgraph_and_cuts_chains():
    features = np.arange(10.0).reshape(5, 2)
    graph = GraphSample(
        features,
        [[0, 1], [1, 2], [2, 3], [3, 4], [0, 4]],
        [[1], [2], [3], [4], [5]],
        [1, 2, 3, 4, 5],
    )
    (kept,), (labels,) = without_ignored([graph], [[0, 1, 9, 1, 0]], 9, "graph")
    np.testing.assert_array_equal(kept.node_features, features[[0, 1, 3, 4]])
    np.testing.assert_array_equal(kept.edges, [[0, 1], [2, 3], [0, 3]])  # renumbered
    np.testing.assert_array_equal(kept.edge_features.ravel(), [1, 4, 5])
    np.testing.assert_array_equal(kept.node_sizes, [1, 2, 4, 5])
    np.testing.assert_array_equal(labels, [0, 1, 1, 0])
    X, y = without_ignored([features, features[:2]], [[9, 1, 2, 9, 3], [9, 9]], 9, "chain")
    assert [x.tolist() for x in X] == [features[1:3].tolist(), features[4:].tolist()]
    assert [t.tolist() for t in y] == [[1, 2], [3]]  # the all-void chain is dropped
    with pytest.raises(ValueError, match="grid cannot lose"):
        without_ignored([np.zeros((2, 2, 1))], [[[0, 9], [1, 0]]], 9, "grid")
    with pytest.raises(ValueError, match="every node is ignored"):
        without_ignored([features], [[9] * 5], 9, "chain")
