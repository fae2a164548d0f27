"""The CoNLL-2002 loader."""

import pytest

from pmap_sklearn.datasets import load_conll2002
from pmap_sklearn.datasets._paths import candidate_roots


def _conll_present():
    return any((root / "conll2002" / "esp.testb.gz").is_file() for root in candidate_roots())


@pytest.mark.skipif(not _conll_present(), reason="CoNLL-2002 not in ../shared/data")
def test_conll2002_loader_reads_the_standard_split():
    test = load_conll2002("esp", "testb")
    assert len(test.sentences) == 1517 and test.tags[0][:2] == ["B-LOC", "I-LOC"]
    assert test.tokens[0][0] == (test.sentences[0][0], test.pos[0][0])
    assert {t for tags in test.tags for t in tags} == {
        "O",
        *(f"{p}-{k}" for p in "BI" for k in ("PER", "LOC", "ORG", "MISC")),
    }
    dutch = load_conll2002("ned", "testa")
    assert not any(w == "-DOCSTART-" for s in dutch.sentences for w in s)


def test_conll2002_loader_names_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="language must be one of"):
        load_conll2002("eng")
    with pytest.raises(ValueError, match="split must be one of"):
        load_conll2002("esp", "test")
    with pytest.raises(FileNotFoundError, match=r"esp\.testb"):
        load_conll2002("esp", "testb", path=tmp_path)
    bad = tmp_path / "esp.train"
    bad.write_text("El DA O\nRey NC\n")
    with pytest.raises(ValueError, match="line 2: a CoNLL-2002 token line has 3"):
        load_conll2002(path=bad)
    good = tmp_path / "ned.train"
    good.write_text("-DOCSTART- -DOCSTART- O\nDe Art O\nKoning N B-PER\n\nJa Int O\n")
    loaded = load_conll2002("ned", path=good)
    assert loaded.sentences == [["De", "Koning"], ["Ja"]]
    assert loaded.tags == [["O", "B-PER"], ["O"]] and loaded.pos[1] == ["Int"]


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
