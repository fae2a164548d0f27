import numpy as np
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import GraphSample, NodeTransformer


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
