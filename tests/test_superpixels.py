"""Photos → superpixel graphs → pixel maps, and the CamVid loader (skipped without the data)."""

import numpy as np
import pytest

from pmap_sklearn import GraphSample, GraphStructure
from pmap_sklearn.superpixels import (
    SuperpixelGraphs,
    node_labels,
    superpixel_sample,
    to_pixels,
)

pytest.importorskip("skimage")


def _photo(rng, shape=(30, 40)):
    photo = np.zeros(shape + (3,))
    photo[:, : shape[1] // 2] = [0.9, 0.1, 0.1]  # red left half, blue right half
    photo[:, shape[1] // 2 :] = [0.1, 0.1, 0.9]
    return np.clip(photo + rng.normal(0, 0.02, photo.shape), 0, 1)


def test_given_segmentation_gives_its_graph_exactly(rng):
    photo = _photo(rng)
    segments = np.zeros((30, 40), int)
    segments[:, 20:] = 7  # two regions with any ids; relabelled 0, 1
    segments[20:, :20] = 3
    graph = superpixel_sample(photo, segments)
    assert graph.n_nodes == 3
    np.testing.assert_array_equal(np.unique(graph.segments), [0, 1, 2])
    np.testing.assert_array_equal(graph.node_sizes, [400, 200, 600])
    # 0 (top left) touches 1 (bottom left) and 2 (right); 1 touches 2
    np.testing.assert_array_equal(graph.edges, [[0, 1], [0, 2], [1, 2]])
    assert graph.edge_features.shape == (3, 3)
    np.testing.assert_allclose(graph.edge_features[:, 0], 1)
    # same colour across 0-1: contrast feature 1; red against blue: near 0
    assert graph.edge_features[0, 1] > 0.9 > 0.5 > graph.edge_features[1, 1]
    np.testing.assert_allclose(graph.edge_features[:, 2].mean(), 1)  # boundary / its mean
    assert graph.node_features.shape == (3, 2 * 70)
    # the neighbours' mean: node 2's context is the boundary-weighted mean of nodes 0 and 1
    own, context = graph.node_features[:, :70], graph.node_features[:, 70:]
    boundary = {(0, 1): 20, (0, 2): 20, (1, 2): 10}
    expected = (own[0] * boundary[0, 2] + own[1] * boundary[1, 2]) / 30
    np.testing.assert_allclose(context[2], expected)


def test_options_change_the_width_and_features_are_finite(rng):
    photo = _photo(rng)
    plain = SuperpixelGraphs(20, filter_bank=False, neighbour_context=False).transform([photo])
    full = SuperpixelGraphs(20).transform([photo, (photo * 255).astype(np.uint8)])
    assert plain[0].node_features.shape[1] == 55
    assert full[0].node_features.shape[1] == 140
    assert all(np.isfinite(g.node_features).all() for g in full)
    # uint8 photos are read as their floats (Lab means agree to the quantisation)
    np.testing.assert_allclose(
        full[0].node_features[:, :3], full[1].node_features[:, :3], atol=0.01
    )
    GraphStructure().fit(full, [np.zeros(g.n_nodes, int) for g in full]).prepare(full)


def test_parallel_transform_matches_serial(rng):
    photos = [_photo(rng) for _ in range(3)]
    serial = SuperpixelGraphs(15).transform(photos)
    parallel = SuperpixelGraphs(15, n_jobs=2).transform(photos)
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a.node_features, b.node_features)
        np.testing.assert_array_equal(a.segments, b.segments)


def test_node_labels_majority_without_void_and_back_to_pixels():
    segments = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 2, 2]])
    labels = np.array([[3, 3, 9, 9], [1, 9, 9, 9], [9, 9, 9, 9]])
    np.testing.assert_array_equal(node_labels(segments, labels), [3, 9, 9])
    # void does not vote: node 0's majority among 3, 3, 1; nodes 1 and 2 are all void
    np.testing.assert_array_equal(node_labels(segments, labels, void=9), [3, 9, 9])
    labels[1, 1] = 1
    np.testing.assert_array_equal(node_labels(segments, labels, void=9), [1, 9, 9])  # tie: 1
    np.testing.assert_array_equal(to_pixels(segments, np.array([5, 6, 7]))[:, 1], [5, 5, 7])
    marginals = to_pixels(segments, np.eye(3))
    assert marginals.shape == (3, 4, 3) and marginals[2, 0, 2] == 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: SuperpixelGraphs().transform([np.zeros((5, 5, 2))]), "3 .RGB. or 4"),
        (lambda: SuperpixelGraphs().transform([np.full((5, 5), 2.0)]), r"must be in \[0, 1\]"),
        (lambda: SuperpixelGraphs().transform([np.full((5, 5), np.nan)]), "NaN"),
        (lambda: SuperpixelGraphs().transform([["a"]]), "array of numbers"),
        (lambda: SuperpixelGraphs(n_segments=0).transform([np.zeros((5, 5))]), "n_segments"),
        (
            lambda: SuperpixelGraphs().transform([np.zeros((5, 5))], [np.zeros((4, 4), int)]),
            "shape",
        ),
        (lambda: SuperpixelGraphs().transform([np.zeros((5, 5))], []), "1 photos but 0"),
        (lambda: to_pixels(GraphSample(np.zeros((2, 1)), np.zeros((0, 2))), [1, 2]), "no segments"),
        (lambda: to_pixels(np.zeros((2, 2), int), [1, 2]), "one entry per superpixel"),
        (lambda: node_labels(np.zeros((2, 2), int), np.zeros((3, 3), int)), "shape"),
        (lambda: node_labels(np.zeros((2, 2), int), -np.ones((2, 2), int)), "negative"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
