"""The UD treebank loader and token features."""

import pytest

from pmap_sklearn.datasets import load_ud_treebank, token_features
from pmap_sklearn.datasets._paths import candidate_roots


@pytest.mark.parametrize("i", [-1, 3, 1.0, True])
def test_token_features_refuses_positions_outside_the_sentence(i):
    """-1 wrapped round to the last token (with BOS set)."""
    with pytest.raises(ValueError, match="is not a token position of this 3-token sentence"):
        token_features(["a", "b", "c"], i)


def test_token_features_read_part_of_speech_pairs():
    sentence = [("El", "DA0"), ("Rey", "NC"), ("habla", "VMI")]
    features = token_features(sentence, 1)
    assert features["postag"] == "NC" and features["postag[:2]"] == "NC"
    assert features["-1:postag"] == "DA0" and features["+1:postag[:2]"] == "VM"
    words = token_features([w for w, _ in sentence], 1)
    assert {k: v for k, v in features.items() if "postag" not in k} == words
    with pytest.raises(ValueError, match=r"a \(word, pos\) pair"):
        token_features([("El", "DA", "O")], 0)


def _treebank_present():
    return any(
        (root / "ud_english_ewt" / "en_ewt-ud-dev.conllu.gz").is_file()
        for root in candidate_roots()
    )


@pytest.mark.skipif(not _treebank_present(), reason="UD English EWT not in ../shared/data")
def test_treebank_loader_reads_the_standard_split():
    dev = load_ud_treebank("dev")
    assert len(dev.sentences) == 2001
    assert sum(len(s) for s in dev.sentences) == 25148 or sum(map(len, dev.sentences)) > 25000
    assert all(len(s) == len(t) for s, t in zip(dev.sentences, dev.tags, strict=True))
    assert len({t for tags in dev.tags for t in tags}) == 17
    xpos = load_ud_treebank("dev", tagset="xpos")
    assert len({t for tags in xpos.tags for t in tags}) > 40


def test_treebank_loader_names_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="split must be one of"):
        load_ud_treebank("validation")
    with pytest.raises(ValueError, match="tagset must be one of"):
        load_ud_treebank(tagset="pos")
    with pytest.raises(FileNotFoundError, match="en_ewt-ud-test.conllu"):
        load_ud_treebank("test", path=tmp_path)
    bad = tmp_path / "bad.conllu"
    bad.write_text("# text\n1\tThe\tthe\tDET\n")
    with pytest.raises(ValueError, match="line 2: a CoNLL-U token line has 10"):
        load_ud_treebank(path=bad)
    good = tmp_path / "good.conllu"
    good.write_text(
        "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tdo\tdo\tAUX\tVBP\t_\t0\troot\t_\t_\n"
        "2\tn't\tnot\tPART\tRB\t_\t1\tadvmod\t_\t_\n2.1\tx\tx\tX\tX\t_\t_\t_\t_\t_\n\n"
    )
    loaded = load_ud_treebank(path=good, tagset="xpos")
    assert loaded.sentences == [["do", "n't"]] and loaded.tags == [["VBP", "RB"]]
