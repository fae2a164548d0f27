"""Transition constraints of chains: tagging schemes (BIO, IOB1, BIOES) and allowed pairs,
resolved against the labels seen in ``fit``.

The rules of the schemes are those of Ramshaw & Marcus (1995, IOB1), Tjong Kim Sang & Veenstra
(1999, IOB2 / BIO) and Ratinov & Roth (2009, BILOU), as AllenNLP's ``allowed_transitions``
reads them: a label is ``O`` or ``<prefix>-<type>``.
"""

from __future__ import annotations

import numpy as np

from .._backend import TransitionConstraints

#: Scheme names and their prefixes: (begin, inside, end, single); None where there is none.
_SCHEMES = {
    "BIO": ("B", "I", None, None),
    "IOB2": ("B", "I", None, None),
    "IOB1": ("B", "I", None, None),
    "BIOES": ("B", "I", "E", "S"),
    "BILOU": ("B", "I", "L", "U"),
    "BIOUL": ("B", "I", "L", "U"),
}
_KEYS = {"transitions", "start", "end"}


def resolve_constraints(constraints, classes) -> TransitionConstraints:
    """The allowed transitions and first / last labels of ``constraints`` over ``classes``.

    Parameters
    ----------
    constraints : str or dict
        A scheme name (``"BIO"`` / ``"IOB2"``, ``"IOB1"``, ``"BIOES"``, ``"BILOU"`` /
        ``"BIOUL"``), or a dict with ``"transitions"``: the allowed ``(from, to)`` label
        pairs, and optionally ``"start"`` / ``"end"``: the labels a chain may start / end with
        (all when absent).
    classes : ndarray of shape (K,)
        The labels, in code order.

    Returns
    -------
    TransitionConstraints

    Raises
    ------
    ValueError
        For an unknown scheme or key, a label that does not fit the scheme, a label not among
        ``classes``, or constraints that leave no label to start or end with.
    """
    labels = list(classes.tolist() if isinstance(classes, np.ndarray) else classes)
    if isinstance(constraints, str):
        scheme = constraints.upper()
        if scheme not in _SCHEMES:
            raise ValueError(
                f"constraints={constraints!r} is not a tagging scheme: use one of "
                f"{sorted(_SCHEMES)}, or a dict of allowed 'transitions' (and 'start', 'end')"
            )
        resolved = _scheme(scheme, labels)
    elif isinstance(constraints, dict):
        resolved = _explicit(constraints, labels)
    else:
        raise ValueError(
            "constraints must be None, a tagging scheme name (e.g. 'BIO') or a dict of allowed "
            f"'transitions' (and 'start', 'end'), got {type(constraints).__name__}"
        )
    for where, allowed in (("start", resolved.start), ("end", resolved.end)):
        if not allowed.any():
            raise ValueError(f"constraints={constraints!r} leave no label a chain may {where} with")
    return resolved


def _scheme(scheme: str, labels: list) -> TransitionConstraints:
    """The constraints of a tagging scheme, each label read as ``O`` or ``prefix-type``."""
    begin, inside, end, single = _SCHEMES[scheme]
    prefixes = [p for p in (begin, inside, end, single) if p is not None]
    parts = []
    for label in labels:
        if label == "O":
            parts.append(("O", None))
            continue
        prefix, dash, kind = label.partition("-") if isinstance(label, str) else ("", "", "")
        if not dash or prefix not in prefixes or not kind:
            raise ValueError(
                f"label {label!r} does not fit the {scheme} scheme: its labels are 'O' or "
                f"'<prefix>-<type>' with prefix {', '.join(prefixes)}"
            )
        parts.append((prefix, kind))
    prefix = np.array([p for p, _ in parts], dtype=object)
    kind = np.array([k for _, k in parts], dtype=object)
    same = kind[:, None] == kind[None, :]
    to, came = prefix[None, :], prefix[:, None]
    if end is None:  # BIO / IOB1: no end markers
        if scheme == "IOB1":  # B-X only separates two entities of type X; I-X opens one
            allowed = (to != begin) | (same & np.isin(came, [begin, inside]))
            start = prefix != begin
        else:  # I-X only continues an entity of type X
            allowed = (to != inside) | (same & np.isin(came, [begin, inside]))
            start = prefix != inside
        return TransitionConstraints(allowed, start, np.ones(len(labels), dtype=bool))
    # BIOES: an open entity (B-X, I-X) continues with I-X or closes with E-X; a closed one
    # (O, E-*, S-*) is followed by O, B-* or S-*.
    open_ = np.isin(prefix, [begin, inside])
    continues = np.isin(prefix, [inside, end])
    allowed = np.where(open_[:, None], same & continues[None, :], ~continues[None, :])
    return TransitionConstraints(allowed, ~continues, ~open_)


def _explicit(constraints: dict, labels: list) -> TransitionConstraints:
    """The constraints of a dict of allowed ``transitions`` (and ``start``, ``end``)."""
    unknown = set(constraints) - _KEYS
    if unknown or "transitions" not in constraints:
        raise ValueError(
            "constraints as a dict takes 'transitions' (the allowed (from, to) label pairs) and "
            f"optionally 'start' and 'end'; got keys {sorted(map(str, constraints))}"
        )
    index = {label: k for k, label in enumerate(labels)}

    def code(label):
        if label not in index:
            raise ValueError(f"constraints name label {label!r}, not among the labels {labels}")
        return index[label]

    n = len(labels)
    allowed = np.zeros((n, n), dtype=bool)
    for pair in constraints["transitions"]:
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise ValueError(f"constraints['transitions'] holds (from, to) pairs, got {pair!r}")
        allowed[code(pair[0]), code(pair[1])] = True
    ends = []
    for key in ("start", "end"):
        mask = np.ones(n, dtype=bool)
        if constraints.get(key) is not None:
            mask[:] = False
            mask[[code(label) for label in constraints[key]]] = True
        ends.append(mask)
    return TransitionConstraints(allowed, *ends)


def over_states(constraints: TransitionConstraints, state_labels: np.ndarray):
    """The label constraints read on the states of the labels (hidden states of a label share
    its constraints)."""
    return TransitionConstraints(
        constraints.transitions[np.ix_(state_labels, state_labels)],
        constraints.start[state_labels],
        constraints.end[state_labels],
    )
