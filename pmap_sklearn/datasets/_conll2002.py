"""CoNLL-2002 named-entity recognition (Spanish and Dutch), the data of sklearn-crfsuite's
tutorial."""

from __future__ import annotations

from pathlib import Path

from sklearn.utils import Bunch

from ._paths import find_data_file, read_data_file

CONLL2002_URL = (
    "the nltk_data repository on GitHub (packages/corpora/conll2002.zip; research use in the "
    "context of the CoNLL-2002 shared task only, see its README)"
)
LANGUAGES = ("esp", "ned")
SPLITS = ("train", "testa", "testb")


def load_conll2002(language: str | None = None, split: str | None = None, path=None) -> Bunch:
    """Load a split of the CoNLL-2002 named-entity data (Tjong Kim Sang 2002).

    Parameters
    ----------
    language : {"esp", "ned"}, optional
        Spanish (8,323 / 1,915 / 1,517 sentences) or Dutch; by default the language of the
        ``<language>.<split>`` file ``path`` names, else ``"esp"``.
    split : {"train", "testa", "testb"}, optional
        The shared task's split: train on ``train``, tune on ``testa``, report on ``testb``; by
        default the split of the file ``path`` names, else ``"train"``.
    path : str or Path, optional
        A ``<language>.<split>`` file (gzipped or not), or a folder holding one. By default
        ``$PMAP_SKLEARN_DATA/conll2002/`` then ``../shared/data/conll2002/`` beside the
        repository. A file named for another language or split than the ones asked is
        refused; a file named otherwise is taken as the language and split asked.

    Returns
    -------
    data : Bunch
        ``sentences``: lists of words; ``pos``: their part-of-speech tags; ``tokens``: lists
        of ``(word, pos)`` pairs, the input of :func:`~pmap_sklearn.datasets.token_features`
        with the tutorial's part-of-speech features; ``tags``: IOB2 entity tags (``B-PER``,
        ``I-LOC``, …, ``O``) over PER / LOC / ORG / MISC; ``language``, ``split``, ``path``.
        The Dutch ``-DOCSTART-`` lines (article boundaries) are skipped. The data may be used
        for research in the context of the shared task only.

    Raises
    ------
    FileNotFoundError
        Naming every place the file was looked for and where to get it.
    ValueError
        A bad ``language`` / ``split``, a file named for another one, or a line that is not
        ``WORD POS TAG`` (naming it).

    Examples
    --------
    >>> from pmap_sklearn.datasets import load_conll2002
    >>> test = load_conll2002("esp", "testb")  # doctest: +SKIP
    >>> test.tokens[0][:3], test.tags[0][:3]  # doctest: +SKIP
    ([('La', 'DA'), ('Coruña', 'NC'), (',', 'Fc')], ['B-LOC', 'I-LOC', 'O'])
    """
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language must be one of {list(LANGUAGES)}, got {language!r}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    named = _named_split(path)
    if named is not None:  # a <language>.<split> file: it says what it holds
        for what, asked, held in (("language", language, named[0]), ("split", split, named[1])):
            if asked is not None and asked != held:
                raise ValueError(
                    f"path {path} is the {named[0]}.{named[1]} file but {what}={asked!r} was "
                    f"asked: pass {what}={held!r}, or the {asked!r} file"
                )
        language, split = named
    language, split = language or "esp", split or "train"
    names = [f"conll2002/{language}.{split}{ext}" for ext in (".gz", "")]
    file = find_data_file(path, names, f"CoNLL-2002 {language}.{split} file", CONLL2002_URL)
    sentences, pos, tags = read_data_file(file, lambda h: _read_columns(h, file), CONLL2002_URL)
    if not sentences:
        raise ValueError(f"{file} holds no sentences (empty file)")
    return Bunch(
        sentences=sentences,
        pos=pos,
        tokens=[list(zip(w, p, strict=True)) for w, p in zip(sentences, pos, strict=True)],
        tags=tags,
        language=language,
        split=split,
        path=str(file),
    )


def _named_split(path) -> tuple[str, str] | None:
    """(language, split) of a file named ``<language>.<split>[.gz]``, or None."""
    if path is None or Path(path).is_dir():
        return None
    parts = Path(path).name.removesuffix(".gz").split(".")
    if len(parts) == 2 and parts[0] in LANGUAGES and parts[1] in SPLITS:
        return parts[0], parts[1]
    return None


def _read_columns(lines, file):
    sentences, pos, tags = [], [], []
    words, parts, labels = [], [], []
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words:
                sentences.append(words)
                pos.append(parts)
                tags.append(labels)
                words, parts, labels = [], [], []
            continue
        if len(fields) != 3:
            raise ValueError(
                f"{file}, line {number}: a CoNLL-2002 token line has 3 space-separated fields "
                f"(WORD POS TAG), got {len(fields)}"
            )
        words.append(fields[0])
        parts.append(fields[1])
        labels.append(fields[2])
    if words:
        sentences.append(words)
        pos.append(parts)
        tags.append(labels)
    return sentences, pos, tags
