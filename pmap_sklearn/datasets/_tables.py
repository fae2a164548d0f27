"""Token tables (one row per token: a sentence id, the token, its tag) to the sequences the
sequence learners take."""

from __future__ import annotations

import numpy as np

__all__ = ["sentences_from_table"]


def _column(table, name, what: str) -> np.ndarray:
    """Column ``name`` of ``table`` as a 1-D array, or a ValueError naming it."""
    try:
        values = table[name]
    except (KeyError, IndexError, TypeError, ValueError):
        columns = getattr(table, "columns", None)
        if columns is None and hasattr(table, "keys"):
            columns = table.keys()
        held = f" (it has {list(columns)[:10]})" if columns is not None else ""
        raise ValueError(
            f"the table has no column {name!r} for the {what}{held}: pass {what}=<column>"
        ) from None
    values = np.asarray(getattr(values, "to_numpy", lambda: values)())
    if values.ndim != 1:
        raise ValueError(
            f"the {what} column {name!r} has shape {values.shape}: columns are 1-D, one value "
            "per token"
        )
    return values


def _missing(values: np.ndarray) -> np.ndarray:
    """Whether each value is missing (None or NaN, as pandas marks empty cells)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind == "O":
        return np.fromiter(
            (v is None or (isinstance(v, float) and v != v) for v in values),
            dtype=bool,
            count=len(values),
        )
    return np.zeros(len(values), dtype=bool)


def sentences_from_table(table, sentence="sentence_id", token="token", tag="tag"):
    """Group a token table (one row per token) into sentences, the input of the sequence
    learners.

    A pandas :class:`~pandas.DataFrame` such as ``pd.read_csv("ner_dataset.csv")`` works, and
    so does any object whose ``table[column]`` gives a 1-D array (a dict of arrays or lists):
    pandas is not needed. Sentences come in the order of their first row and keep the order of
    their rows; a sentence's rows need not be consecutive.

    Parameters
    ----------
    table : DataFrame or mapping of str to 1-D array-like
        The token table.
    sentence : str, default="sentence_id"
        The column of sentence ids (any values that compare: numbers, strings). Tables that
        name a sentence on its first row only (the rest left empty) need the column filled
        forward first (``table[sentence].ffill()`` in pandas).
    token : str or list of str, default="token"
        The column of the tokens; several columns make each token a tuple of their values
        (``["word", "pos"]`` gives the ``(word, pos)`` pairs that
        :func:`~pmap_sklearn.datasets.token_features` reads).
    tag : str or None, default="tag"
        The column of the tags, or None for a table without them.

    Returns
    -------
    sentences : list of lists
        The tokens of each sentence.
    tags : list of lists
        The tags of each sentence (only when ``tag`` is not None).

    Raises
    ------
    ValueError
        A missing column (naming the columns the table has), columns of unequal lengths, a
        column that is not 1-D, or a missing sentence id (naming its row).

    Examples
    --------
    >>> from pmap_sklearn.datasets import sentences_from_table
    >>> table = {
    ...     "sentence_id": [1, 1, 2, 2, 2],
    ...     "token": ["Ana", "ríe", "en", "La", "Paz"],
    ...     "tag": ["B-PER", "O", "O", "B-LOC", "I-LOC"],
    ... }
    >>> sentences, tags = sentences_from_table(table)
    >>> sentences
    [['Ana', 'ríe'], ['en', 'La', 'Paz']]
    >>> tags[1]
    ['O', 'B-LOC', 'I-LOC']
    """
    token_columns = [token] if isinstance(token, str) else list(token)
    if not token_columns:
        raise ValueError("token names no column: give a column name or a list of them")
    ids = _column(table, sentence, "sentence")
    columns = {("token", name): _column(table, name, "token") for name in token_columns}
    if tag is not None:
        columns[("tag", tag)] = _column(table, tag, "tag")
    for (what, name), values in columns.items():
        if len(values) != len(ids):
            raise ValueError(
                f"the {what} column {name!r} has {len(values)} rows but the sentence column "
                f"{sentence!r} {len(ids)}: the columns must have equal lengths"
            )
    missing = _missing(ids)
    if missing.any():
        rows = np.flatnonzero(missing)
        raise ValueError(
            f"{len(rows)} rows have no sentence id (None or NaN), the first at row "
            f"{int(rows[0])}: fill the {sentence!r} column first (in pandas: "
            f"table[{sentence!r}].ffill() when a sentence's id is on its first row only)"
        )
    if len(ids) == 0:
        return ([], []) if tag is not None else []
    try:
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    except TypeError as error:
        raise ValueError(
            f"the sentence ids of column {sentence!r} do not compare ({error}): give ids of "
            "one kind (numbers or strings)"
        ) from None
    rank = np.empty(len(first), dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    sentence_of_row = rank[inverse.ravel()]
    order = np.argsort(sentence_of_row, kind="stable")  # keeps the rows' order in a sentence
    cuts = np.cumsum(np.bincount(sentence_of_row))[:-1]

    def grouped(values) -> list:
        return [part.tolist() for part in np.split(values[order], cuts)]

    token_values = [columns[("token", name)] for name in token_columns]
    if len(token_values) == 1:
        sentences = grouped(token_values[0])
    else:
        tuples = np.empty(len(ids), dtype=object)
        tuples[:] = list(zip(*(values.tolist() for values in token_values), strict=True))
        sentences = grouped(tuples)
    if tag is None:
        return sentences
    return sentences, grouped(columns[("tag", tag)])
