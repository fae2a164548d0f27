"""Sequence-labelling scores: flat per-tag scores (sklearn-crfsuite's ``flat_*``), whole
sequences, and entity (chunk) scores of IOB / BIOES tags as conlleval computes them."""

from __future__ import annotations

import numpy as np

from .._labels import unknown_mask
from .hamming import _pairs


def _flat(y_true, y_pred, unknown_label=-1) -> tuple[np.ndarray, np.ndarray]:
    """Every known node's true and predicted label, pooled over the samples."""
    pairs = [(true, pred) for _, true, pred in _pairs(y_true, y_pred)]
    if not pairs:
        raise ValueError("y_true holds no samples")
    true = np.concatenate([t for t, _ in pairs])
    pred = np.concatenate([p for _, p in pairs])
    known = ~unknown_mask(true, unknown_label)
    if not known.any():
        raise ValueError("no known labels in y_true")
    return true[known], pred[known]


def _flat_labels(true, pred, labels, exclude) -> list:
    """The labels scored: ``labels``, or every label seen, less ``exclude``."""
    if labels is None:
        labels = np.unique(np.concatenate([true, pred])).tolist()
    if isinstance(exclude, str):
        exclude = [exclude]
    left_out = set(exclude or ())
    kept = [label for label in labels if label not in left_out]
    if not kept:
        raise ValueError(f"no label is left to score once {sorted(left_out)} are left out")
    return kept


def flat_precision_recall_fscore_support(
    y_true, y_pred, *, labels=None, exclude=None, average=None, unknown_label=-1
):
    """Per-tag precision, recall, F1 and support of the labels pooled over every node.

    The flat scores of sklearn-crfsuite's ``metrics`` module: scikit-learn's
    :func:`~sklearn.metrics.precision_recall_fscore_support` of the concatenated labellings,
    with tags to leave out (``exclude=["O"]`` scores the entity tags of a named-entity task, as
    the crfsuite tutorial does).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    labels : list, optional
        The labels to score, in this order; by default every label in ``y_true`` or
        ``y_pred``, sorted.
    exclude : label or list of labels, optional
        Labels left out of ``labels`` (e.g. ``"O"``).
    average : {None, "micro", "macro", "weighted"}, default=None
        None: one value per label; otherwise averaged over the labels as scikit-learn does
        (``"weighted"`` by support).
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.

    Returns
    -------
    precision, recall, fscore : float or ndarray of shape (n_labels,)
    support : ndarray of shape (n_labels,) or None
    labels : list
        The labels scored.

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_precision_recall_fscore_support
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> p, r, f, support, labels = flat_precision_recall_fscore_support(
    ...     y_true, y_pred, exclude="O")
    >>> labels, r.tolist()
    (['B-LOC', 'B-PER', 'I-PER'], [1.0, 1.0, 0.0])
    """
    from sklearn.metrics import precision_recall_fscore_support

    true, pred = _flat(y_true, y_pred, unknown_label)
    kept = _flat_labels(true, pred, labels, exclude)
    precision, recall, fscore, support = precision_recall_fscore_support(
        true, pred, labels=kept, average=average, zero_division=0
    )
    return precision, recall, fscore, support, kept


_FLAT_SCORE_SECTIONS = """Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    BETAlabels : list, optional
        The labels to score (by default every label seen).
    exclude : label or list of labels, optional
        Labels left out (e.g. ``"O"``).
    average : {"micro", "macro", "weighted"}, default="weighted"
        How the per-label scores are averaged (as scikit-learn does).
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.

    Returns
    -------
    float
        The averaged SCORE.
"""


def _flat_score_doc(score: str, beta: bool = False):
    """Write the shared Parameters and Returns sections of an averaged flat score into its
    docstring (at ``FLAT_SCORE_SECTIONS``)."""
    beta_entry = "beta : float\n        The weight of recall against precision.\n    "
    sections = _FLAT_SCORE_SECTIONS.replace("BETA", beta_entry if beta else "")
    sections = sections.replace("SCORE", score)

    def decorate(function):
        function.__doc__ = function.__doc__.replace("FLAT_SCORE_SECTIONS\n", sections)
        return function

    return decorate


@_flat_score_doc("F1")
def flat_f1_score(
    y_true, y_pred, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """F1 of the labels pooled over every node, averaged over the tags scored.

    With ``exclude=["O"]`` and the default ``average="weighted"`` this is the token-level score
    of sklearn-crfsuite's named-entity tutorial (``flat_f1_score(..., labels=tags other than
    O)``).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_f1_score
    >>> flat_f1_score([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]], exclude="O")
    0.5
    """
    if average is None:
        raise ValueError("flat_f1_score returns one number: average must not be None")
    return float(
        flat_precision_recall_fscore_support(
            y_true,
            y_pred,
            labels=labels,
            exclude=exclude,
            average=average,
            unknown_label=unknown_label,
        )[2]
    )


def _flat_average(which: int, y_true, y_pred, labels, exclude, average, unknown_label, beta=1.0):
    """One averaged score (0 precision, 1 recall, 2 F-beta) of the pooled labels."""
    from sklearn.metrics import precision_recall_fscore_support

    if average is None:
        raise ValueError("a flat score returns one number: average must not be None")
    true, pred = _flat(y_true, y_pred, unknown_label)
    kept = _flat_labels(true, pred, labels, exclude)
    scores = precision_recall_fscore_support(
        true, pred, beta=beta, labels=kept, average=average, zero_division=0
    )
    return float(scores[which])


@_flat_score_doc("precision")
def flat_precision_score(
    y_true, y_pred, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """Precision of the labels pooled over every node, averaged over the tags scored
    (sklearn-crfsuite's ``metrics.flat_precision_score``; the arguments of
    :func:`flat_f1_score`).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_precision_score
    >>> flat_precision_score([["B-PER", "I-PER", "O"]], [["B-PER", "B-PER", "O"]], exclude="O")
    0.25
    """
    return _flat_average(0, y_true, y_pred, labels, exclude, average, unknown_label)


@_flat_score_doc("recall")
def flat_recall_score(
    y_true, y_pred, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """Recall of the labels pooled over every node, averaged over the tags scored
    (sklearn-crfsuite's ``metrics.flat_recall_score``; the arguments of :func:`flat_f1_score`).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_recall_score
    >>> flat_recall_score([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]], exclude="O")
    0.5
    """
    return _flat_average(1, y_true, y_pred, labels, exclude, average, unknown_label)


@_flat_score_doc("F-beta", beta=True)
def flat_fbeta_score(
    y_true, y_pred, beta, *, labels=None, exclude=None, average="weighted", unknown_label=-1
) -> float:
    """F-beta of the labels pooled over every node, averaged over the tags scored
    (sklearn-crfsuite's ``metrics.flat_fbeta_score``; ``beta = 1`` is :func:`flat_f1_score`).

    FLAT_SCORE_SECTIONS

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_fbeta_score
    >>> round(flat_fbeta_score([["B-PER", "I-PER"]], [["B-PER", "B-PER"]], beta=2), 4)
    0.4167
    """
    return _flat_average(2, y_true, y_pred, labels, exclude, average, unknown_label, beta)


def flat_accuracy_score(y_true, y_pred, *, unknown_label=-1) -> float:
    """The fraction of correct labels pooled over every known node (sklearn-crfsuite's
    ``metrics.flat_accuracy_score``): a long sequence counts more than a short one, unlike
    ``1 −`` :func:`mean_hamming_loss`.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_accuracy_score
    >>> flat_accuracy_score([["B-PER", "I-PER", "O"], ["O"]], [["B-PER", "O", "O"], ["O"]])
    0.75
    """
    true, pred = _flat(y_true, y_pred, unknown_label)
    return float(np.mean(true == pred))


def flat_classification_report(y_true, y_pred, labels=None, *, unknown_label=-1, **kwargs):
    """scikit-learn's :func:`~sklearn.metrics.classification_report` of the labels pooled over
    every known node (sklearn-crfsuite's ``metrics.flat_classification_report``).

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    labels : list, optional
        The labels reported, in this order (e.g. the entity tags without ``"O"``). By default
        every label; entity tags (``"O"`` or ``PREFIX-TYPE``) grouped by type as crfsuite's
        users read them (``B-LOC, I-LOC, B-PER, I-PER, ..., O``), other labels sorted.
    unknown_label : scalar or None, default=-1
        Nodes with this label in ``y_true`` are not counted.
    **kwargs
        Passed on to :func:`~sklearn.metrics.classification_report` (``digits``,
        ``output_dict``, ``zero_division``, ...).

    Returns
    -------
    str or dict
        The report.

    Examples
    --------
    >>> from pmap_sklearn.metrics import flat_classification_report
    >>> report = flat_classification_report(
    ...     [["B-PER", "O"]], [["B-PER", "B-PER"]], digits=2, zero_division=0.0
    ... )
    >>> report.split()[:4]
    ['precision', 'recall', 'f1-score', 'support']
    >>> tags = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]]
    >>> report = flat_classification_report(tags, tags)
    >>> [line.split()[0] for line in report.splitlines()[2:7]]
    ['B-LOC', 'I-LOC', 'B-PER', 'I-PER', 'O']
    """
    from sklearn.metrics import classification_report

    true, pred = _flat(y_true, y_pred, unknown_label)
    if labels is None:
        labels = _grouped_by_type(np.union1d(true, pred).tolist())
    return classification_report(true, pred, labels=labels, **kwargs)


#: The order of one entity type's tags (their prefixes as :func:`_split_tag` reads them).
_PREFIX_RANK = {"B": 0, "I": 1, "E": 2, "S": 3, "O": 4}


def _grouped_by_type(labels: list) -> list:
    """Entity tags grouped by type (B before I, E / L, S / U), ``O`` last; other labels as
    they are (sorted)."""
    try:
        parts = [_split_tag(tag, "O") for tag in labels]
    except ValueError:  # not entity tags
        return labels
    rank = [(prefix == "O", kind, _PREFIX_RANK[prefix]) for prefix, kind in parts]
    return [labels[i] for i in sorted(range(len(labels)), key=rank.__getitem__)]


def sequence_accuracy_score(y_true, y_pred, *, unknown_label=-1) -> float:
    """The fraction of sequences labelled entirely right (sklearn-crfsuite's
    ``metrics.sequence_accuracy_score``); unknown labels in ``y_true`` match any prediction.

    Parameters
    ----------
    y_true, y_pred : sequence of label arrays
    unknown_label : scalar or None, default=-1

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import sequence_accuracy_score
    >>> sequence_accuracy_score([["B-PER", "O"], ["O"]], [["B-PER", "O"], ["B-LOC"]])
    0.5
    """
    right = [
        bool(np.all((true == pred) | unknown_mask(true, unknown_label)))
        for _, true, pred in _pairs(y_true, y_pred)
    ]
    if not right:
        raise ValueError("y_true holds no samples")
    return float(np.mean(right))


#: Chunk prefixes the entity scores read: IOB1 / IOB2 (B, I), BIOES / IOBES (also E, S) and
#: BILOU's L and U (the same as E and S).
_PREFIXES = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S"}


def _split_tag(tag, outside) -> tuple[str, str]:
    """``(prefix, type)`` of a chunk tag such as ``B-PER``; ``("O", "")`` outside."""
    if tag == outside:
        return "O", ""
    text = str(tag)
    prefix, dash, kind = text.partition("-")
    if not dash or prefix.upper() not in _PREFIXES or not kind:
        raise ValueError(
            f"tag {tag!r} is not a chunk tag: entity scores read tags PREFIX-TYPE with PREFIX "
            f"one of B, I, E, S (IOB1, IOB2, BIOES; L and U of BILOU) and {outside!r} outside "
            "an entity"
        )
    return _PREFIXES[prefix.upper()], kind


def entity_spans(tags, outside="O") -> list[tuple[str, int, int]]:
    """The entities (chunks) of one tagged sequence, read as ``conlleval`` reads them.

    An entity starts at a ``B`` or ``S`` tag, at an ``I`` or ``E`` tag that follows ``O``, the
    end of an entity or a tag of another type, and ends before the next start or ``O``, or
    after an ``E`` or ``S`` tag. These are the rules of the CoNLL shared tasks' ``conlleval``
    script (Tjong Kim Sang 2002), which read IOB1 (``I`` opens an entity, ``B`` only splits
    two adjacent entities of one type), IOB2 (every entity opens with ``B``) and BIOES alike;
    an ill-formed sequence (``I-PER`` after ``O``) is read the lenient way conlleval reads it.

    Parameters
    ----------
    tags : sequence of str
        One tag per token: ``PREFIX-TYPE`` or ``outside``.
    outside : str, default="O"
        The tag of tokens outside every entity.

    Returns
    -------
    list of (type, start, end)
        ``end`` is one past the last token.

    Examples
    --------
    >>> from pmap_sklearn.metrics import entity_spans
    >>> entity_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG"])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    >>> entity_spans(["I-PER", "I-PER", "B-PER", "O"])  # IOB1
    [('PER', 0, 2), ('PER', 2, 3)]
    >>> entity_spans(["S-LOC", "B-ORG", "E-ORG"])  # BIOES
    [('LOC', 0, 1), ('ORG', 1, 3)]
    """
    spans, start, kind = [], None, ""
    previous = "O"
    for position, tag in enumerate(np.asarray(tags, dtype=object).ravel().tolist()):
        prefix, current = _split_tag(tag, outside)
        ends = start is not None and (
            prefix in ("B", "S", "O") or previous in ("E", "S") or current != kind
        )
        if ends:
            spans.append((kind, start, position))
            start = None
        if prefix != "O" and start is None:
            start, kind = position, current
        previous = prefix
    if start is not None:
        spans.append((kind, start, position + 1))
    return spans


def to_bio_tags(tags, outside="O") -> list[str]:
    """One tagged sequence rewritten in BIO (IOB2): its entities as :func:`entity_spans` reads
    them, each opened by ``B-TYPE`` and continued by ``I-TYPE``.

    Converts IOB1 and BIOES tags to BIO, and repairs ill-formed BIO (an ``I-X`` that opens an
    entity becomes ``B-X``, as ``conlleval`` reads it) — what training under
    ``ChainStructure(constraints="BIO")`` needs.

    Parameters
    ----------
    tags : sequence of str
        One tag per token: ``PREFIX-TYPE`` or ``outside``.
    outside : str, default="O"
        The tag of tokens outside every entity.

    Returns
    -------
    list of str

    Examples
    --------
    >>> from pmap_sklearn.metrics import to_bio_tags
    >>> to_bio_tags(["I-PER", "I-PER", "B-PER", "O", "I-LOC"])  # IOB1, or ill-formed BIO
    ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC']
    >>> to_bio_tags(["S-LOC", "B-ORG", "E-ORG"])  # BIOES
    ['B-LOC', 'B-ORG', 'I-ORG']
    """
    out = [outside] * len(np.asarray(tags, dtype=object).ravel())
    for kind, start, end in entity_spans(tags, outside):
        out[start:end] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start - 1)
    return out


def entity_precision_recall_fscore_support(
    y_true, y_pred, *, average="micro", outside="O", unknown_label=-1
):
    """Entity-level precision, recall, F1 and support, the CoNLL shared tasks' score.

    An entity of ``y_pred`` counts as correct only if ``y_true`` has an entity of the same type
    with the same first and last token (see :func:`entity_spans` for how IOB1, IOB2 and BIOES
    tags are read). Precision is the share of predicted entities that are correct, recall the
    share of true entities found.

    Parameters
    ----------
    y_true, y_pred : sequence of tag arrays
    average : {"micro", "macro", None}, default="micro"
        ``"micro"``: entities of every type pooled (``conlleval``'s overall score);
        ``"macro"``: the mean of the per-type scores; None: per type.
    outside : str, default="O"
        The tag outside every entity.
    unknown_label : scalar or None, default=-1
        A sample whose ``y_true`` holds this label is refused: entities are read from whole
        sequences.

    Returns
    -------
    precision, recall, fscore : float, or ndarray of shape (n_types,) when ``average`` is None
    support : int or ndarray of shape (n_types,)
        True entities (of each type).
    types : list of str
        The entity types in ``y_true`` or ``y_pred``, sorted.

    Examples
    --------
    >>> from pmap_sklearn.metrics import entity_precision_recall_fscore_support
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O", "B-LOC"]]
    >>> p, r, f, support, types = entity_precision_recall_fscore_support(y_true, y_pred)
    >>> p, r, support
    (0.5, 0.5, 2)
    """
    if average not in ("micro", "macro", None):
        raise ValueError(f"average must be 'micro', 'macro' or None, got {average!r}")
    counts: dict[str, np.ndarray] = {}  # type -> [correct, predicted, true]
    for i, true, pred in _pairs(y_true, y_pred):
        if unknown_mask(true, unknown_label).any():
            raise ValueError(
                f"sample {i} of y_true has unknown labels ({unknown_label!r}): entity scores "
                "need whole tag sequences"
            )
        true_spans, pred_spans = set(entity_spans(true, outside)), set(entity_spans(pred, outside))
        for index, spans in ((0, true_spans & pred_spans), (1, pred_spans), (2, true_spans)):
            for kind, _, _ in spans:
                counts.setdefault(kind, np.zeros(3, dtype=np.int64))[index] += 1
    types = sorted(counts)
    table = np.array([counts[kind] for kind in types]).reshape(-1, 3)
    if average == "micro":
        table = table.sum(axis=0, keepdims=True)
    correct, predicted, true = table.T
    precision = np.divide(correct, predicted, out=np.zeros(len(table)), where=predicted > 0)
    recall = np.divide(correct, true, out=np.zeros(len(table)), where=true > 0)
    total = precision + recall
    fscore = np.divide(2 * precision * recall, total, out=np.zeros(len(table)), where=total > 0)
    if average is None:
        return precision, recall, fscore, true, types
    if average == "micro":
        return float(precision[0]), float(recall[0]), float(fscore[0]), int(true[0]), types
    means = [float(v.mean()) if len(v) else 0.0 for v in (precision, recall, fscore)]
    return (*means, int(true.sum()), types)


def entity_f1_score(y_true, y_pred, *, average="micro", outside="O", unknown_label=-1) -> float:
    """Entity-level F1 (``conlleval``'s overall score with ``average="micro"``).

    See :func:`entity_precision_recall_fscore_support`.

    Parameters
    ----------
    y_true, y_pred : sequence of tag arrays
    average : {"micro", "macro"}, default="micro"
        Entities of every type pooled, or the mean of the per-type F1.
    outside : str, default="O"
        The tag outside every entity.
    unknown_label : scalar or None, default=-1
        Samples of ``y_true`` holding it are refused.

    Returns
    -------
    float

    Examples
    --------
    >>> from pmap_sklearn.metrics import entity_f1_score
    >>> entity_f1_score([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "O", "O", "B-LOC"]])
    0.5
    """
    if average is None:
        raise ValueError("entity_f1_score returns one number: average must not be None")
    return entity_precision_recall_fscore_support(
        y_true, y_pred, average=average, outside=outside, unknown_label=unknown_label
    )[2]
