"""The OCR letters loader."""

import gzip

import numpy as np
import pytest

from pmap_sklearn.datasets import load_ocr
from pmap_sklearn.datasets._paths import candidate_roots, find_data_file


def test_load_ocr_shared_data(ocr):
    assert len(ocr.data) == len(ocr.target) == len(ocr.folds) == 6877
    assert sum(len(t) for t in ocr.target) == 52152
    assert set(np.unique(ocr.folds)) == set(range(10))
    assert all(x.shape == (len(t), 128) for x, t in zip(ocr.data, ocr.target, strict=True))
    assert set(np.unique(np.concatenate(ocr.data))) == {0.0, 1.0}
    assert min(len(t) for t in ocr.target) >= 3


def _write_letters(path, rows):
    with gzip.open(path, "wt") as handle:
        for row in rows:
            handle.write("\t".join(map(str, row)) + "\t\n")


def test_load_ocr_parses_the_letter_data_layout(tmp_path):
    pixels = [0] * 127 + [1]
    rows = [
        [1, "c", 2, 1, 1, 3, *pixels],
        [2, "a", 3, 1, 2, 3, *pixels],
        [3, "t", -1, 1, 3, 3, *pixels],
        [4, "o", 5, 2, 1, 7, *([1] * 128)],
        [5, "x", -1, 2, 2, 7, *([1] * 128)],
    ]
    _write_letters(tmp_path / "letter.data.gz", rows)
    data = load_ocr(tmp_path)
    np.testing.assert_array_equal(data.target[0], [2, 0, 19])
    np.testing.assert_array_equal(data.target[1], [14, 23])
    np.testing.assert_array_equal(data.folds, [3, 7])
    assert data.data[0].shape == (3, 128) and data.data[0][0, -1] == 1
    _write_letters(tmp_path / "bad.gz", [[1, "c", -1, 1, 1, 3, 0, 1]])
    with pytest.raises(ValueError, match="not in the letter.data layout"):
        load_ocr(tmp_path / "bad.gz")
    for cut in (1, 4):  # inside the first word, inside the second
        _write_letters(tmp_path / "cut.gz", rows[:cut])
        with pytest.raises(ValueError, match="ends inside a word.*truncated"):
            load_ocr(tmp_path / "cut.gz")


def test_load_ocr_missing_file_names_the_places_tried(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="tried: .*nowhere.*download"):
        load_ocr(tmp_path / "nowhere" / "letter.data.gz")
    monkeypatch.setenv("PMAP_SKLEARN_DATA", str(tmp_path / "env-root"))
    assert candidate_roots()[0] == tmp_path / "env-root"  # the variable is tried first
    with pytest.raises(FileNotFoundError, match="env-root.ocr.missing.gz"):
        find_data_file(None, ["ocr/missing.gz"], "OCR", "the original page")


@pytest.mark.parametrize("damage", ["empty", "truncated", "corrupted", "not gzip"])
def test_load_ocr_damaged_files_name_the_file(tmp_path, damage):
    good = tmp_path / "good.gz"
    _write_letters(good, [[i + 1, "a", -1, i + 1, 1, 0, *([0] * 128)] for i in range(300)])
    content = good.read_bytes()
    damaged = tmp_path / "letter.data.gz"
    damaged.write_bytes(
        {
            "empty": b"",
            "truncated": content[: len(content) // 2],
            "corrupted": content[:20] + bytes(range(256)) * 4 + content[-20:],
            "not gzip": b"this is not a gzip file\n" * 10,
        }[damage]
    )
    with pytest.raises(ValueError, match="letter.data.gz"):
        load_ocr(damaged)
