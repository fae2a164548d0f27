"""Named-entity recognition: CoNLL-2002 loader, flat and entity scores, the defaults on sparse
token features, marginals through a pipeline, class weights and the errors a crfsuite user
meets first."""

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from pmap_sklearn import ChainCRF, PerturbMAPCRF, SequenceVectorizer, StructuredSVM
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.datasets._paths import candidate_roots
from pmap_sklearn.metrics import entity_f1_scorer, flat_f1_scorer

from .helpers import _ner_corpus


# ---- the loader --------------------------------------------------------------------------------
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


def test_token_features_read_part_of_speech_pairs():
    sentence = [("El", "DA0"), ("Rey", "NC"), ("habla", "VMI")]
    features = token_features(sentence, 1)
    assert features["postag"] == "NC" and features["postag[:2]"] == "NC"
    assert features["-1:postag"] == "DA0" and features["+1:postag[:2]"] == "VM"
    words = token_features([w for w, _ in sentence], 1)
    assert {k: v for k, v in features.items() if "postag" not in k} == words
    with pytest.raises(ValueError, match=r"a \(word, pos\) pair"):
        token_features([("El", "DA", "O")], 0)


# ---- a small NER task ---------------------------------------------------------------------------
def test_scorers_work_in_model_selection():
    sentences, tags = _ner_corpus(60)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    search = GridSearchCV(
        pipe,
        {"perturbmapcrf__alpha": [1e-4, 1e-2]},
        cv=2,
        scoring={"entity": entity_f1_scorer, "flat": flat_f1_scorer},
        refit="entity",
    ).fit(sentences, tags)
    assert search.best_score_ > 0.9
    assert np.all(np.isfinite(search.cv_results_["mean_test_flat"]))


def test_pipeline_gives_marginals_as_arrays_and_dicts():
    sentences, tags = _ner_corpus(80)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    pipe.fit(sentences, tags)
    model = pipe[-1]
    arrays = pipe.predict_proba(sentences[:3])
    exact = model.predict_marginals(pipe[0].transform(sentences[:3]), method="exact")
    for a, b in zip(arrays, exact, strict=True):  # exact marginals by default on chains
        np.testing.assert_allclose(a, b)
    dicts = pipe.predict_proba(sentences[:3], as_dicts=True)
    assert [len(d) for d in dicts] == [len(s) for s in sentences[:3]]
    first = dicts[0][0]
    assert list(first) == model.classes_.tolist()
    assert sum(first.values()) == pytest.approx(1.0)
    np.testing.assert_allclose(list(first.values()), arrays[0][0])
    perturbed = pipe.predict_proba(sentences[:1], method="perturb", n_perturbations=10)
    assert np.all(np.isin(np.round(perturbed[0] * 10, 9) % 1, [0.0]))  # frequencies of 10
    # a learner without marginals has no predict_proba: the pipeline says so too
    svm = make_pipeline(SequenceVectorizer(token_features), StructuredSVM(max_iter=2))
    assert not hasattr(svm.fit(sentences, tags), "predict_proba")
    assert hasattr(ChainCRF(), "predict_proba")


def test_class_weight_balances_the_tags():
    sentences, tags = _ner_corpus(60)
    vectorizer = SequenceVectorizer(token_features)
    X = vectorizer.fit_transform(sentences)
    model = PerturbMAPCRF(class_weight="balanced", random_state=0, max_iter=2).fit(X, tags)
    flat = np.concatenate(tags)
    counts = {c: np.sum(flat == c) for c in model.classes_}
    expected = np.array([len(flat) / (len(counts) * counts[c]) for c in model.classes_])
    np.testing.assert_allclose(model._label_weights, expected)
    with pytest.raises(ValueError, match="not classes"):
        PerturbMAPCRF(class_weight={"B-XYZ": 2.0}).fit(X, tags)
    # a dict weighs the rare tags up: more of them are predicted
    rare = {c: 5.0 for c in model.classes_ if c != "O"}
    up = PerturbMAPCRF(class_weight=rare, random_state=0, max_iter=2).fit(X, tags)
    base = PerturbMAPCRF(random_state=0, max_iter=2).fit(X, tags)
    assert np.sum(np.concatenate(up.predict(X)) != "O") >= np.sum(
        np.concatenate(base.predict(X)) != "O"
    )
