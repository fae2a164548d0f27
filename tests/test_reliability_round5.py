"""Hostile inputs of the newest surfaces: inputs read as something else, numerics at the edge of
double precision, metrics given what is not a probability, memory asked for by one label, and
cryptic or lenient meta-estimator arguments. Each gets a named error or a correct result;
property tests (hypothesis) pin the metrics and the superpixel helpers against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import NodeTransformer, SequenceVectorizer
from pmap_sklearn.superpixels import SuperpixelGraphs, node_labels, to_pixels

from .helpers import FAST


# ---- superpixel graphs: photos, node labels and pixels -------------------------------------
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


# ---- sequence vectoriser: a dtype that cannot hold the values -------------------------------
@pytest.mark.parametrize("dtype, value", [(np.int8, 1000), (np.int16, 0.5), (np.float32, 1e300)])
def test_sequence_vectorizer_refuses_values_its_dtype_cannot_hold(dtype, value):
    with pytest.raises(ValueError, match=f"does not fit dtype={np.dtype(dtype).name}"):
        SequenceVectorizer(dtype=dtype).fit_transform([[{"a": value, "w": "x"}]])
    vectorizer = SequenceVectorizer(dtype=dtype).fit([[{"a": 1, "w": "x"}]])
    with pytest.raises(ValueError, match="does not fit"):
        vectorizer.transform([[{"a": value}]])
    assert vectorizer.transform([[{"a": 7}]])[0].toarray().tolist() == [[7, 0]]


# ---- loaders: arguments read as something else ----------------------------------------------
def test_node_transformer_reads_grey_images_when_told():
    rng = np.random.default_rng(0)
    grey = [rng.random((6, 5)) * 10 + 3 for _ in range(3)]
    scaled = NodeTransformer(StandardScaler(), images=True).fit_transform(grey)
    as_channel = NodeTransformer(StandardScaler()).fit_transform([g[..., None] for g in grey])
    for a, b in zip(scaled, as_channel, strict=True):
        assert a.shape == (6, 5, 1)
        np.testing.assert_allclose(a, b)
    pooled = np.concatenate([s.ravel() for s in scaled])  # one feature over every pixel
    assert abs(pooled.mean()) < 1e-12 and abs(pooled.std() - 1) < 1e-12
    chains = NodeTransformer(StandardScaler()).fit_transform(grey)  # (D, F) chains by default
    assert chains[0].shape == (6, 5)
