"""Universal Dependencies treebanks (CoNLL-U) for sequence labelling, and the token features of
the sklearn-crfsuite tutorial."""

from __future__ import annotations

from numbers import Integral

from sklearn.utils import Bunch

from ._paths import find_data_file, read_data_file

UD_URL = (
    "the UniversalDependencies/UD_English-EWT repository on GitHub "
    "(en_ewt-ud-{train,dev,test}.conllu); CC BY-SA 4.0"
)
SPLITS = ("train", "dev", "test")
TAGSETS = {"upos": 3, "xpos": 4}  # column of the tag in a CoNLL-U token line


def load_ud_treebank(split: str = "train", tagset: str = "upos", path=None) -> Bunch:
    """Load a split of the Universal Dependencies English Web Treebank for tagging.

    Parameters
    ----------
    split : {"train", "dev", "test"}, default="train"
        The standard split (12,544 / 2,001 / 2,077 sentences).
    tagset : {"upos", "xpos"}, default="upos"
        Universal part-of-speech tags (17) or the Penn Treebank tags (about 50).
    path : str or Path, optional
        A ``.conllu`` / ``.conllu.gz`` file, or a folder holding
        ``en_ewt-ud-<split>.conllu(.gz)``. By default ``$PMAP_SKLEARN_DATA/ud_english_ewt/``
        then ``../shared/data/ud_english_ewt/`` beside the repository.

    Returns
    -------
    data : Bunch
        ``sentences``: list of lists of token strings; ``tags``: list of lists of tag strings
        (multi-word token lines ``3-4`` and empty nodes ``5.1`` are skipped, as usual for
        tagging); ``tagset``; ``path``: the file read. The treebank is CC BY-SA 4.0: its
        licence and attribution travel with any copy of the files.

    Raises
    ------
    FileNotFoundError
        Naming every place the file was looked for and where to get it.
    ValueError
        A bad ``split`` / ``tagset``, or a file that is not CoNLL-U (naming the line).

    Examples
    --------
    >>> from pmap_sklearn.datasets import load_ud_treebank
    >>> dev = load_ud_treebank("dev")  # doctest: +SKIP
    >>> dev.sentences[0][:4], dev.tags[0][:4]  # doctest: +SKIP
    (['From', 'the', 'AP', 'comes'], ['ADP', 'DET', 'PROPN', 'VERB'])
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if tagset not in TAGSETS:
        raise ValueError(f"tagset must be one of {list(TAGSETS)}, got {tagset!r}")
    names = [f"ud_english_ewt/en_ewt-ud-{split}.conllu{ext}" for ext in (".gz", "")]
    file = find_data_file(path, names, f"UD English EWT {split} file", UD_URL)
    sentences, tags = read_data_file(
        file, lambda handle: _read_conllu(handle, TAGSETS[tagset], file), UD_URL
    )
    if not sentences:
        raise ValueError(f"{file} holds no sentences (empty file)")
    return Bunch(sentences=sentences, tags=tags, tagset=tagset, path=str(file))


def _read_conllu(lines, column: int, file):
    sentences, tags, words, labels = [], [], [], []
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\n")
        if not line:
            if words:
                sentences.append(words)
                tags.append(labels)
                words, labels = [], []
            continue
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise ValueError(
                f"{file}, line {number}: a CoNLL-U token line has 10 tab-separated fields, "
                f"got {len(fields)}"
            )
        if not fields[0].isdigit():  # multi-word token (3-4) or empty node (5.1)
            continue
        words.append(fields[1])
        labels.append(fields[column])
    if words:
        sentences.append(words)
        tags.append(labels)
    return sentences, tags


def token_features(sentence, i: int) -> dict:
    """The token features of the sklearn-crfsuite tutorial, for token ``i`` of a sentence.

    The word lower-cased, its 2- and 3-letter suffixes, whether it is upper-case, title-case or
    a number, the same (lower-case, title, upper) for the previous and next words, and ``BOS``
    / ``EOS`` at the sentence ends. When the tokens are ``(word, pos)`` pairs (as
    :func:`~pmap_sklearn.datasets.load_conll2002` gives them) the tutorial's part-of-speech
    features join them: the tag and its first two letters, for the word and its neighbours.
    The tutorial's constant ``bias`` feature is left out: the chain structures add their own
    (``bias=True``). Turn a corpus into model input with
    :class:`~pmap_sklearn.preprocessing.SequenceVectorizer`.

    Parameters
    ----------
    sentence : sequence of str or of (str, str) pairs
        The tokens: words, or ``(word, pos)`` pairs.
    i : int
        The position.

    Returns
    -------
    dict
        Feature name to value (a string, which becomes a one-hot feature, a bool or a number).

    Examples
    --------
    >>> from pmap_sklearn.datasets import token_features
    >>> features = token_features(["The", "dog", "barks"], 1)
    >>> features["word.lower()"], features["word[-2:]"], features["-1:word.istitle()"]
    ('dog', 'og', True)
    >>> token_features([("El", "DA"), ("Rey", "NC")], 1)["-1:postag"]
    'DA'
    """
    if isinstance(i, bool) or not isinstance(i, Integral) or not 0 <= i < len(sentence):
        raise ValueError(
            f"i={i!r} is not a token position of this {len(sentence)}-token sentence: positions "
            f"are ints from 0 to {len(sentence) - 1} (no negative ones: the neighbours and "
            f"BOS / EOS would be those of the wrong end)"
        )
    word, pos = _word_and_pos(sentence[i])
    features = {
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word[-2:]": word[-2:],
        "word.isupper()": word.isupper(),
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
    }
    if pos is not None:
        features["postag"], features["postag[:2]"] = pos, pos[:2]
    for offset, edge in ((-1, "BOS"), (1, "EOS")):
        j = i + offset
        if 0 <= j < len(sentence):
            other, other_pos = _word_and_pos(sentence[j])
            features[f"{offset:+d}:word.lower()"] = other.lower()
            features[f"{offset:+d}:word.istitle()"] = other.istitle()
            features[f"{offset:+d}:word.isupper()"] = other.isupper()
            if other_pos is not None:
                features[f"{offset:+d}:postag"] = other_pos
                features[f"{offset:+d}:postag[:2]"] = other_pos[:2]
        else:
            features[edge] = True
    return features


def _word_and_pos(token) -> tuple[str, str | None]:
    """A token's word and part-of-speech tag (None for a bare word)."""
    if isinstance(token, str):
        return token, None
    if (
        isinstance(token, tuple | list)
        and len(token) == 2
        and all(isinstance(t, str) for t in token)
    ):
        return token[0], token[1]
    raise ValueError(
        f"a token must be a word (str) or a (word, pos) pair of strings, got "
        f"{type(token).__name__} {token!r:.40}"
    )
