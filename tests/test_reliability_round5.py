"""Hostile inputs of the newest surfaces: inputs read as something else, numerics at the edge of
double precision, metrics given what is not a probability, memory asked for by one label, and
cryptic or lenient meta-estimator arguments. Each gets a named error or a correct result;
property tests (hypothesis) pin the metrics and the superpixel helpers against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import NodeTransformer, SequenceVectorizer
from pmap_sklearn.datasets import load_camvid, load_conll2002
from pmap_sklearn.metrics import (
    balanced_node_weights,
    entity_f1_score,
    entity_spans,
    expected_calibration_error,
    flat_f1_score,
    mean_hamming_loss,
    segmentation_confusion,
    segmentation_scores,
)
from pmap_sklearn.superpixels import SuperpixelGraphs, node_labels, to_pixels

from .helpers import FAST


# ---- metrics: inputs read as something else, probabilities that are not -----------------------
@pytest.mark.parametrize("metric", [entity_f1_score, flat_f1_score, mean_hamming_loss])
def test_one_flat_sequence_is_refused_not_read_as_samples(metric):
    with pytest.raises(ValueError, match=r"one flat sequence .* e.g. \[y_true\]"):
        metric(["B-PER", "I-PER"], ["B-PER", "O"])
    assert entity_f1_score([["B-PER", "I-PER"]], [["B-PER", "O"]]) == 0.0


@pytest.mark.parametrize(
    "proba, message",
    [
        ([[[3.0, -1.0], [0.5, 2.0]]], r"outside \[0, 1\].*logits"),  # logits
        ([[[1.5, 0.0], [0.0, 1.0]]], r"outside \[0, 1\]"),
        ([[[0.5, 0.2], [0.0, 1.0]]], "sums to 0.7"),
        ([[[np.nan, 0.5], [0.0, 1.0]]], "NaN"),
    ],
)
def test_ece_refuses_what_is_not_a_probability(proba, message):
    with pytest.raises(ValueError, match=message):
        expected_calibration_error([[0, 1]], proba)


def test_balanced_node_weights_take_distributions_only():
    with pytest.raises(ValueError, match="label_distribution: row 1 sums to 2"):
        balanced_node_weights([[1.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(
        balanced_node_weights([[1.0, 0.0], [0.0, 1.0]]), balanced_node_weights([0, 1])
    )


def test_ece_refuses_ragged_classes_and_takes_any_number_of_bins():
    with pytest.raises(ValueError, match="same classes"):
        expected_calibration_error([[0], [1]], [[[0.5, 0.5]], [[0.2, 0.3, 0.5]]])
    proba = [[[0.9, 0.1], [0.2, 0.8]]]
    # one node per bin once the bins are fine: the mean of |correct - confidence|
    assert expected_calibration_error([[0, 1]], proba, n_bins=10**9) == pytest.approx(0.15)
    assert expected_calibration_error([[0, 1]], proba, n_bins=10**18) == pytest.approx(0.15)


def _ece_brute(labels, proba, n_bins):
    """Guo et al.'s ECE by its definition: a loop over the bins."""
    confidence, correct = proba.max(axis=1), proba.argmax(axis=1) == labels
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        inside = bins == b
        if inside.any():
            total += inside.sum() * abs(correct[inside].mean() - confidence[inside].mean())
    return total / len(labels)


@FAST
@given(
    st.integers(1, 30),
    st.integers(2, 5),
    st.integers(1, 40),
    st.integers(0, 2**31 - 1),
)
def test_ece_matches_its_definition(n_nodes, n_classes, n_bins, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_nodes, n_classes)) * rng.uniform(0.1, 5)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = rng.integers(n_classes, size=n_nodes)
    split = rng.integers(0, n_nodes + 1)  # the same nodes as two samples
    ece = expected_calibration_error(
        [labels[:split], labels[split:]], [proba[:split], proba[split:]], n_bins=n_bins
    )
    assert ece == pytest.approx(_ece_brute(labels, proba, n_bins), abs=1e-12)
    assert 0.0 <= ece <= 1.0


@FAST
@given(st.integers(1, 25), st.integers(1, 4), st.integers(0, 2**31 - 1), st.booleans())
def test_segmentation_scores_match_a_brute_force_confusion(n_nodes, n_classes, seed, weighted):
    rng = np.random.default_rng(seed)
    true = rng.integers(n_classes, size=n_nodes)
    pred = rng.integers(n_classes, size=n_nodes)
    weight = rng.uniform(0, 3, size=n_nodes) if weighted else np.ones(n_nodes)
    labels = rng.permutation(n_classes)  # any order: the matrix's rows and columns
    expected = np.zeros((n_classes, n_classes))
    for t, p, c in zip(true, pred, weight, strict=True):
        expected[list(labels).index(t), list(labels).index(p)] += c
    confusion = segmentation_confusion([true], [pred], labels=labels, sample_weight=[weight])
    np.testing.assert_allclose(confusion, expected)
    if expected.sum() > 0:
        scores = segmentation_scores([true], [pred], labels=labels, sample_weight=[weight])
        assert scores["global_accuracy"] == pytest.approx(np.trace(expected) / expected.sum())
        assert 0.0 <= scores["mean_iou"] <= scores["class_average_accuracy"] + 1e-12 <= 1 + 1e-9


def test_segmentation_scores_refuse_negative_weights_and_read_labels_in_their_order():
    with pytest.raises(ValueError, match="sample_weight must hold finite weights >= 0"):
        segmentation_scores([[0, 1]], [[0, 0]], sample_weight=[[1.0, -1.0]])
    scores = segmentation_scores([[0, 1, 2]], [[0, 1, 1]], labels=[2, 0, 1])
    assert scores["confusion"].tolist() == [[0, 0, 1], [0, 1, 0], [0, 0, 1]]
    assert scores["labels"].tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="distinct"):
        segmentation_scores([[0, 1]], [[0, 1]], labels=[0, 1, 0])


TAGS = st.sampled_from(["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-PER"])


def _hamming_brute(y_true, y_pred):
    return np.mean(
        [
            np.mean([a != b for a, b in zip(t, p, strict=True)])
            for t, p in zip(y_true, y_pred, strict=True)
        ]
    )


@FAST
@given(st.lists(st.lists(st.tuples(TAGS, TAGS), min_size=1, max_size=8), min_size=1, max_size=5))
def test_entity_and_flat_scores_match_their_definitions(sentences):
    y_true = [[t for t, _ in s] for s in sentences]
    y_pred = [[p for _, p in s] for s in sentences]
    true = {(i, *span) for i, tags in enumerate(y_true) for span in entity_spans(tags)}
    pred = {(i, *span) for i, tags in enumerate(y_pred) for span in entity_spans(tags)}
    correct = len(true & pred)
    expected = 2 * correct / (len(true) + len(pred)) if true or pred else 0.0
    assert entity_f1_score(y_true, y_pred) == pytest.approx(expected)
    assert entity_f1_score(y_true, y_true) == (1.0 if true else 0.0)
    assert mean_hamming_loss(y_true, y_pred) == pytest.approx(_hamming_brute(y_true, y_pred))
    pooled_true, pooled_pred = np.concatenate(y_true), np.concatenate(y_pred)
    labels = sorted(set(pooled_true) | set(pooled_pred))
    expected_flat = f1_score(
        pooled_true, pooled_pred, labels=labels, average="weighted", zero_division=0
    )
    assert flat_f1_score(y_true, y_pred) == pytest.approx(expected_flat)


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
def test_load_camvid_refuses_one_index_without_a_list(tmp_path):
    for split in ("train", "val", "test"):
        for folder in (split, f"{split}annot"):
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "0001.png").write_bytes(b"")
    with pytest.raises(ValueError, match=r"indices must be a sequence of ints \(e.g. \[0\]"):
        load_camvid("train", tmp_path, indices=0, cache=False)


def test_load_conll2002_reports_the_files_language_and_split(tmp_path):
    file = tmp_path / "ned.testa"
    file.write_text("De Art O\nKoning N B-PER\n")
    loaded = load_conll2002(path=file)  # the file's language and split, not the defaults
    assert (loaded.language, loaded.split) == ("ned", "testa")
    assert load_conll2002("ned", "testa", path=file).tags == [["O", "B-PER"]]
    with pytest.raises(ValueError, match=r"ned.testa file but split='testb'.*split='testa'"):
        load_conll2002(split="testb", path=file)
    with pytest.raises(ValueError, match=r"ned.testa file but language='esp'"):
        load_conll2002("esp", path=file)
    other = tmp_path / "my_sentences.txt"  # a name that says nothing: the language asked
    other.write_text("El DA O\n")
    assert load_conll2002("esp", "testb", path=other).split == "testb"
    assert load_conll2002(path=tmp_path / "ned.testa").language == "ned"


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
