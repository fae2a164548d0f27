"""The OCR handwritten-words data set of Taskar, Guestrin & Koller (2003)."""

from __future__ import annotations

import string

import numpy as np
from sklearn.utils import Bunch

from ._paths import find_data_file, read_data_file

OCR_URL = "Ben Taskar's OCR page (http://ai.stanford.edu/~btaskar/ocr/), file letter.data.gz"


def load_ocr(path=None) -> Bunch:
    """Load the OCR words: 6,877 words of 16×8 binary letter images, 10 folds.

    Parameters
    ----------
    path : str or Path, optional
        ``letter.data`` / ``letter.data.gz`` or a folder holding it. By default
        ``$PMAP_SKLEARN_DATA/ocr/`` then ``../shared/data/ocr/`` beside the repository.

    Returns
    -------
    data : Bunch
        ``data``: list of (D, 128) float arrays (pixels, row-major 16×8) — one per word;
        ``target``: list of (D,) int arrays, letters a..z as 0..25;
        ``folds``: (n_words,) int array with the fold (0..9) of each word;
        ``letters``: the string ``"abc...z"``; ``path``: the file read.

    Raises
    ------
    FileNotFoundError
        Naming every place the file was looked for and where to download it.
    ValueError
        An empty, truncated or corrupted file (naming it).
    """
    file = find_data_file(
        path, ["ocr/letter.data.gz", "ocr/letter.data"], "OCR file letter.data(.gz)", OCR_URL
    )
    rows = read_data_file(
        file,
        lambda handle: [line.rstrip("\t\n").split("\t") for line in handle if line.strip()],
        OCR_URL,
    )
    if not rows:
        raise ValueError(f"{file} holds no letters (empty file); download it again from {OCR_URL}")
    try:
        letters = np.array([ord(row[1]) - ord("a") for row in rows])
        numbers = np.array([row[2:6] for row in rows], dtype=np.int64)
        pixels = np.array([row[6:] for row in rows], dtype=np.float64)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"{file} is not in the letter.data layout: {exc}") from None
    if pixels.shape[1] != 128 or letters.min() < 0 or letters.max() > 25:
        raise ValueError(f"{file} is not in the letter.data layout (128 pixels, letters a..z)")
    next_id, word_id, fold = numbers[:, 0], numbers[:, 1], numbers[:, 3]
    # Words are runs of letters ending where next_id == -1.
    ends = np.flatnonzero(next_id == -1) + 1
    starts = np.concatenate([[0], ends[:-1]])
    if len(ends) == 0 or ends[-1] != len(rows):
        raise ValueError(
            f"{file} ends inside a word (its last letter has no next_id = -1): the file is "
            f"truncated; download it again from {OCR_URL}"
        )
    if np.any(word_id[starts] != word_id[ends - 1]):
        raise ValueError(f"{file}: words are not contiguous runs ending with next_id = -1")
    return Bunch(
        data=np.split(pixels, ends[:-1]),
        target=np.split(letters, ends[:-1]),
        folds=fold[starts],
        letters=string.ascii_lowercase,
        path=str(file),
    )
