"""Flat and entity (conlleval) scores of tag sequences."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from pmap_sklearn import mean_hamming_loss
from pmap_sklearn.metrics import (
    entity_f1_score,
    entity_precision_recall_fscore_support,
    entity_spans,
    flat_f1_score,
    flat_precision_recall_fscore_support,
    segmentation_scores,
    sequence_accuracy_score,
)

from ..helpers import FAST


def _tag_sequences(rng, n=40):
    tags = np.array(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    y_true = [list(tags[rng.integers(0, 5, size=rng.integers(1, 7))]) for _ in range(n)]
    y_pred = [[t if rng.random() < 0.7 else str(rng.choice(tags)) for t in s] for s in y_true]
    return y_true, y_pred


def test_crfsuite_reports_match_scikit_learn_on_the_pooled_labels(rng):
    from sklearn import metrics as sk

    from pmap_sklearn import metrics

    y_true, y_pred = _tag_sequences(rng)
    true, pred = np.concatenate(y_true), np.concatenate(y_pred)
    labels = ["B-LOC", "B-PER", "I-LOC", "I-PER"]
    assert metrics.flat_accuracy_score(y_true, y_pred) == sk.accuracy_score(true, pred)
    for ours, theirs in [
        (metrics.flat_precision_score, sk.precision_score),
        (metrics.flat_recall_score, sk.recall_score),
        (metrics.flat_f1_score, sk.f1_score),
    ]:
        expected = theirs(true, pred, labels=labels, average="weighted", zero_division=0)
        assert ours(y_true, y_pred, exclude="O") == pytest.approx(expected)
        assert ours(y_true, y_pred, labels=labels, average="macro") == pytest.approx(
            theirs(true, pred, labels=labels, average="macro", zero_division=0)
        )
    assert metrics.flat_fbeta_score(y_true, y_pred, 0.5, labels=labels) == pytest.approx(
        sk.fbeta_score(true, pred, beta=0.5, labels=labels, average="weighted")
    )
    assert metrics.flat_classification_report(
        y_true, y_pred, labels=labels, digits=3
    ) == sk.classification_report(true, pred, labels=labels, digits=3)
    whole = np.mean([list(t) == list(p) for t, p in zip(y_true, y_pred, strict=True)])
    assert metrics.sequence_accuracy_score(y_true, y_pred) == whole


def test_crfsuite_reports_agree_with_sklearn_crfsuite(rng):
    crfsuite_metrics = pytest.importorskip("sklearn_crfsuite.metrics")
    from pmap_sklearn import metrics

    y_true, y_pred = _tag_sequences(rng)
    labels = ["B-LOC", "B-PER", "I-LOC", "I-PER"]
    assert metrics.flat_accuracy_score(y_true, y_pred) == crfsuite_metrics.flat_accuracy_score(
        y_true, y_pred
    )
    assert metrics.sequence_accuracy_score(y_true, y_pred) == pytest.approx(
        crfsuite_metrics.sequence_accuracy_score(y_true, y_pred)
    )
    assert metrics.flat_classification_report(
        y_true, y_pred, labels=labels, digits=3
    ) == crfsuite_metrics.flat_classification_report(y_true, y_pred, labels=labels, digits=3)
    for name in ("flat_precision_score", "flat_recall_score", "flat_f1_score"):
        ours = getattr(metrics, name)(y_true, y_pred, labels=labels, average="weighted")
        theirs = getattr(crfsuite_metrics, name)(y_true, y_pred, labels=labels, average="weighted")
        assert ours == pytest.approx(theirs)


def test_crfsuite_reports_leave_unknown_labels_out():
    from pmap_sklearn import metrics

    y_true = [["B-PER", "?", "O"], ["?"]]
    y_pred = [["B-PER", "O", "B-LOC"], ["O"]]
    assert metrics.flat_accuracy_score(y_true, y_pred, unknown_label="?") == 0.5
    assert metrics.sequence_accuracy_score(y_true, y_pred, unknown_label="?") == 0.5
    report = metrics.flat_classification_report(
        y_true, y_pred, unknown_label="?", output_dict=True, zero_division=0
    )
    assert "?" not in report and report["B-PER"]["support"] == 1
    with pytest.raises(ValueError, match="2 labels but y_pred has 1"):
        metrics.sequence_accuracy_score([["O", "O"]], [["O"]])


@pytest.mark.parametrize(
    "metric",
    [
        sequence_accuracy_score,
        mean_hamming_loss,
        lambda t, p: segmentation_scores(t, p, labels=[0, 1]),
    ],
)
def test_labels_and_predictions_of_one_count_but_other_shapes_are_refused(metric):
    """A (2, 2) labelling against a flat one of 4 was scored node by node, in ravel order."""
    with pytest.raises(ValueError, match=r"sample 0: y_true has shape \(2, 2\) but y_pred has "):
        metric([np.eye(2, dtype=int)], [np.eye(2, dtype=int).ravel()])
    metric([np.eye(2, dtype=int)], [np.eye(2, dtype=int)])  # same shapes are scored


@pytest.mark.parametrize(
    "tags, spans",
    [
        # IOB2: every entity opens with B
        (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
        # IOB1: I opens an entity, B only splits two adjacent ones of one type
        (["I-ORG", "I-ORG", "B-ORG", "I-ORG", "O"], [("ORG", 0, 2), ("ORG", 2, 4)]),
        # BIOES / BILOU: E and S close an entity
        (
            ["S-LOC", "B-ORG", "E-ORG", "U-PER", "B-MISC", "L-MISC"],
            [("LOC", 0, 1), ("ORG", 1, 3), ("PER", 3, 4), ("MISC", 4, 6)],
        ),
        # a change of type closes an entity and opens another; I after E opens one
        (["B-PER", "I-LOC", "E-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3), ("LOC", 3, 4)]),
        (["O", "O"], []),
    ],
)
def test_entity_spans_follow_conlleval(tags, spans):
    assert entity_spans(tags) == spans


@given(st.lists(st.sampled_from(["O", "B-A", "I-A", "B-B", "I-B", "E-A", "S-B"]), max_size=8))
def test_bio_tags_keep_the_entities_and_obey_bio(tags):
    """Any tags (IOB1, BIOES, ill-formed BIO) rewritten in BIO: the same entities, and every
    I-X continues an X entity."""
    from pmap_sklearn.metrics import to_bio_tags

    bio = to_bio_tags(tags)
    assert entity_spans(bio) == entity_spans(tags)
    for before, tag in zip(["O", *bio], bio, strict=False):  # (tag before, tag)
        assert not tag.startswith("I-") or before[2:] == tag[2:]
    assert to_bio_tags(bio) == bio  # BIO stays as it is


def _brute_entity_counts(y_true, y_pred):
    """Correct / predicted / true entity counts from the spans, pooled."""
    correct = predicted = true = 0
    for t, p in zip(y_true, y_pred, strict=True):
        a, b = set(entity_spans(t)), set(entity_spans(p))
        correct, predicted, true = correct + len(a & b), predicted + len(b), true + len(a)
    return correct, predicted, true


def test_entity_scores_count_exact_matches():
    rng = np.random.default_rng(0)
    tags = ["O", "B-A", "I-A", "B-B", "I-B", "E-A", "S-B"]
    y_true = [list(rng.choice(tags, size=rng.integers(1, 9))) for _ in range(40)]
    y_pred = [list(rng.choice(tags, size=len(t))) for t in y_true]
    correct, predicted, true = _brute_entity_counts(y_true, y_pred)
    p, r, f, support, types = entity_precision_recall_fscore_support(y_true, y_pred)
    assert (p, r, support, types) == (correct / predicted, correct / true, true, ["A", "B"])
    assert f == pytest.approx(2 * p * r / (p + r)) == entity_f1_score(y_true, y_pred)
    per_type = entity_precision_recall_fscore_support(y_true, y_pred, average=None)
    assert per_type[3].sum() == true
    macro = entity_precision_recall_fscore_support(y_true, y_pred, average="macro")
    assert macro[2] == pytest.approx(per_type[2].mean())
    # a boundary or type off by one is wrong: one of two entities found
    assert entity_f1_score([["B-A", "I-A", "B-B"]], [["B-A", "O", "B-B"]]) == pytest.approx(0.5)
    assert entity_f1_score([["B-A"]], [["B-B"]]) == 0.0


def test_entity_scores_name_bad_tags():
    with pytest.raises(ValueError, match="tag 'PER' is not a chunk tag"):
        entity_spans(["PER"])
    with pytest.raises(ValueError, match="sample 0: y_true has 2 labels but y_pred has 1"):
        entity_f1_score([["O", "B-A"]], [["O"]])
    with pytest.raises(ValueError, match="unknown labels"):
        entity_f1_score([["?", "B-A"]], [["O", "B-A"]], unknown_label="?")


def test_flat_scores_leave_out_tags():
    y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC", "O"]]
    y_pred = [["B-PER", "O", "O"], ["O", "B-LOC", "B-LOC"]]
    p, r, f, support, labels = flat_precision_recall_fscore_support(y_true, y_pred, exclude="O")
    assert labels == ["B-LOC", "B-PER", "I-PER"]
    np.testing.assert_allclose(p, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(r, [1.0, 1.0, 0.0])
    # weighted by support (1, 1, 1): the mean of the per-tag F1
    assert flat_f1_score(y_true, y_pred, exclude="O") == pytest.approx((2 / 3 + 1 + 0) / 3)
    with pytest.raises(ValueError, match="no label is left"):
        flat_f1_score([["O"]], [["O"]], exclude="O")


@pytest.mark.parametrize("metric", [entity_f1_score, flat_f1_score, mean_hamming_loss])
def test_one_flat_sequence_is_refused_not_read_as_samples(metric):
    with pytest.raises(ValueError, match=r"one flat sequence .* e.g. \[y_true\]"):
        metric(["B-PER", "I-PER"], ["B-PER", "O"])
    assert entity_f1_score([["B-PER", "I-PER"]], [["B-PER", "O"]]) == 0.0


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


def test_the_flat_report_groups_entity_tags_by_type_and_sorts_other_labels():
    from pmap_sklearn.metrics import flat_classification_report

    tags = [["O", "I-PER", "B-PER", "E-PER", "S-LOC", "B-LOC"]]
    report = flat_classification_report(tags, tags)
    rows = [line.split()[0] for line in report.splitlines()[2:8]]
    assert rows == ["B-LOC", "S-LOC", "B-PER", "I-PER", "E-PER", "O"]
    report = flat_classification_report([[2, 0, 1]], [[2, 0, 1]])
    assert [line.split()[0] for line in report.splitlines()[2:5]] == ["0", "1", "2"]
