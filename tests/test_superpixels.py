"""pmap_sklearn.superpixels: photos to superpixel graphs to pixel maps."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmap_sklearn import GraphSample, GraphStructure
from pmap_sklearn.superpixels import (
    SuperpixelGraphs,
    node_labels,
    superpixel_sample,
    to_pixels,
)

from .helpers import FAST

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


def test_a_raw_superpixel_map_with_gaps_is_refused_not_given_phantom_nodes():
    """Ids 1, 3 and 4 label no pixel: they were nodes of label 0 (node_labels gave six
    labels for three superpixels)."""
    segments = np.array([[0, 0, 2], [5, 5, 2]])
    labels = np.array([[1, 1, 2], [2, 2, 2]])
    for call in (lambda s: node_labels(s, labels), lambda s: to_pixels(s, np.arange(6))):
        with pytest.raises(
            ValueError, match=r"ids run to 5 but 3 of them label no pixel \(1, 3, 4\)"
        ):
            call(segments)
    relabelled = np.unique(segments, return_inverse=True)[1].reshape(segments.shape)  # the remedy
    np.testing.assert_array_equal(node_labels(relabelled, labels), [1, 2, 2])


def _node_labels_brute(segments, labels, void):
    result = []
    for node in range(segments.max() + 1):
        votes = [v for v in labels[segments == node].tolist() if v != void]
        if not votes:
            result.append(void)
            continue
        counts = {v: votes.count(v) for v in votes}
        best = max(counts.values())
        result.append(min(v for v, c in counts.items() if c == best))
    return np.array(result)


SEGMENT_MAPS = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 5)).flatmap(
    lambda shape: st.tuples(
        st.just(shape),
        st.lists(
            st.integers(0, shape[2] - 1), min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]
        ),
    )
)


@FAST
@given(
    SEGMENT_MAPS,
    st.lists(st.sampled_from([0, 1, 2, 7, 2**31 - 1, -1]), min_size=36, max_size=36),
    st.sampled_from([None, -1, 2, 2**31 - 1]),
)
def test_node_labels_is_the_majority_of_the_voting_pixels(segment_map, pool, void):
    (height, width, _), ids = segment_map
    _, segments = np.unique(ids, return_inverse=True)  # ids 0..n-1, every one present
    segments = segments.reshape(height, width)
    labels = np.array(pool[: height * width]).reshape(height, width)
    if void != -1:
        labels = np.abs(labels)  # -1 is a label only as the void marker
    result = node_labels(segments, labels, void=void)
    np.testing.assert_array_equal(result, _node_labels_brute(segments, labels, void))
    values = np.arange(segments.max() + 1) * 10
    painted = to_pixels(segments, values)
    for (row, col), node in np.ndenumerate(segments):
        assert painted[row, col] == values[node]


def test_node_labels_and_to_pixels_refuse_or_handle_hostile_maps():
    segments = np.repeat(np.arange(4), 6).reshape(4, 6)
    labels = np.full((4, 6), 3)
    labels[0] = -1
    # void=-1 no longer wipes the largest label's votes
    assert node_labels(segments, labels, void=-1).tolist() == [-1, 3, 3, 3]
    with pytest.raises(ValueError, match="negative labels"):
        node_labels(segments, labels)
    with pytest.raises(ValueError, match="void must be an int"):
        node_labels(segments, labels, void=1.5)
    huge = np.full((4, 6), 2**31 - 1)  # a vote table of the labels present: no 256 GiB
    assert node_labels(segments, huge).tolist() == [2**31 - 1] * 4
    with pytest.raises(ValueError, match="negative id -2"):
        to_pixels(segments - 2, np.arange(2))


def test_one_photo_without_a_list_is_refused():
    photo = np.random.default_rng(0).random((12, 14, 3))
    for one in (photo, photo[..., 0]):
        with pytest.raises(ValueError, match=r"pass \[photo\]"):
            SuperpixelGraphs(n_segments=4).transform(one)
        with pytest.raises(ValueError, match=r"pass \[photo\]"):
            SuperpixelGraphs(n_segments=4).fit(one)
    with pytest.raises(ValueError, match=r"pass \[segments\]"):
        SuperpixelGraphs().transform([photo], segments=np.zeros((12, 14), int))


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["uint8", "uint16", "int64", "float", "grey"]))
def test_superpixel_graphs_read_each_photo_kind_on_its_own_scale(seed, kind):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 120, size=(10, 12, 3))  # a dark photo
    reference = pixels / 255.0
    photo = {
        "uint8": pixels.astype(np.uint8),
        "uint16": (pixels * 257).astype(np.uint16),  # the same photo as 16-bit: 1/255 = 257/65535
        "int64": pixels.astype(np.int64),
        "float": reference,
        "grey": pixels[..., 0].astype(np.uint8),
    }[kind]
    if kind == "grey":
        reference = np.repeat(reference[..., :1], 3, axis=2)
    segments = [np.arange(120).reshape(10, 12) // 30]
    graph = SuperpixelGraphs().transform([photo], segments=segments)[0]
    expected = SuperpixelGraphs().transform([reference], segments=segments)[0]
    np.testing.assert_allclose(graph.node_features, expected.node_features, atol=1e-9)
    assert graph.node_sizes.sum() == 120 and graph.segments.shape == (10, 12)


def test_integer_photos_beyond_8_bit_need_uint16():
    photo = np.full((6, 6, 3), 1000, dtype=np.int64)
    with pytest.raises(ValueError, match="give 16-bit photos as uint16"):
        SuperpixelGraphs().transform([photo], segments=[np.zeros((6, 6), int)])


def test_slic_making_far_fewer_superpixels_than_asked_warns():
    """A photo of two colours speckled pixel by pixel: SLIC at compactness 10 merged it into
    one superpixel for n_segments=10, with no word."""
    rng = np.random.default_rng(0)
    speckled = np.where(rng.random((40, 60, 1)) < 0.5, [1.0, 0.0, 0.0], [0.0, 0.0, 1.0])
    with pytest.warns(UserWarning, match=r"n_segments=10 \(photo 0: 1 superpixel\).*compactness"):
        [graph] = SuperpixelGraphs(10).transform([speckled])
    assert graph.n_nodes == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        [regular] = SuperpixelGraphs(10, compactness=1000.0).transform([speckled])  # the remedy
        SuperpixelGraphs(10).transform([speckled], [np.zeros((40, 60), int)])  # given segments
    assert regular.n_nodes >= 10 / 4
