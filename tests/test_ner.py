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
from pmap_sklearn.metrics import (
    entity_f1_score,
    entity_f1_scorer,
    entity_precision_recall_fscore_support,
    entity_spans,
    flat_f1_score,
    flat_f1_scorer,
    flat_precision_recall_fscore_support,
)

from .helpers import _ner_corpus


# ---- entity spans and scores -----------------------------------------------------------------
@pytest.mark.parametrize(
    "tags, spans",
    [
        # IOB2: every entity opens with B
        (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
        # IOB1: I opens an entity, B only splits two adjacent ones of one type
        (["I-ORG", "I-ORG", "B-ORG", "I-ORG", "O"], [("ORG", 0, 2), ("ORG", 2, 4)]),
        # BIOES / BILOU: E and S close an entity
        (
            ["S-LOC", "B-ORG", "E-ORG", "U-PER", "B-MISC", "L-MISC"],
            [("LOC", 0, 1), ("ORG", 1, 3), ("PER", 3, 4), ("MISC", 4, 6)],
        ),
        # a change of type closes an entity and opens another; I after E opens one
        (["B-PER", "I-LOC", "E-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3), ("LOC", 3, 4)]),
        (["O", "O"], []),
    ],
)
def test_entity_spans_follow_conlleval(tags, spans):
    assert entity_spans(tags) == spans


def _brute_entity_counts(y_true, y_pred):
    """Correct / predicted / true entity counts from the spans, pooled."""
    correct = predicted = true = 0
    for t, p in zip(y_true, y_pred, strict=True):
        a, b = set(entity_spans(t)), set(entity_spans(p))
        correct, predicted, true = correct + len(a & b), predicted + len(b), true + len(a)
    return correct, predicted, true


def test_entity_scores_count_exact_matches():
    rng = np.random.default_rng(0)
    tags = ["O", "B-A", "I-A", "B-B", "I-B", "E-A", "S-B"]
    y_true = [list(rng.choice(tags, size=rng.integers(1, 9))) for _ in range(40)]
    y_pred = [list(rng.choice(tags, size=len(t))) for t in y_true]
    correct, predicted, true = _brute_entity_counts(y_true, y_pred)
    p, r, f, support, types = entity_precision_recall_fscore_support(y_true, y_pred)
    assert (p, r, support, types) == (correct / predicted, correct / true, true, ["A", "B"])
    assert f == pytest.approx(2 * p * r / (p + r)) == entity_f1_score(y_true, y_pred)
    per_type = entity_precision_recall_fscore_support(y_true, y_pred, average=None)
    assert per_type[3].sum() == true
    macro = entity_precision_recall_fscore_support(y_true, y_pred, average="macro")
    assert macro[2] == pytest.approx(per_type[2].mean())
    # a boundary or type off by one is wrong: one of two entities found
    assert entity_f1_score([["B-A", "I-A", "B-B"]], [["B-A", "O", "B-B"]]) == pytest.approx(0.5)
    assert entity_f1_score([["B-A"]], [["B-B"]]) == 0.0


def test_entity_scores_name_bad_tags():
    with pytest.raises(ValueError, match="tag 'PER' is not a chunk tag"):
        entity_spans(["PER"])
    with pytest.raises(ValueError, match="sample 0: y_true has 2 labels but y_pred has 1"):
        entity_f1_score([["O", "B-A"]], [["O"]])
    with pytest.raises(ValueError, match="unknown labels"):
        entity_f1_score([["?", "B-A"]], [["O", "B-A"]], unknown_label="?")


def test_flat_scores_leave_out_tags():
    y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC", "O"]]
    y_pred = [["B-PER", "O", "O"], ["O", "B-LOC", "B-LOC"]]
    p, r, f, support, labels = flat_precision_recall_fscore_support(y_true, y_pred, exclude="O")
    assert labels == ["B-LOC", "B-PER", "I-PER"]
    np.testing.assert_allclose(p, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(r, [1.0, 1.0, 0.0])
    # weighted by support (1, 1, 1): the mean of the per-tag F1
    assert flat_f1_score(y_true, y_pred, exclude="O") == pytest.approx((2 / 3 + 1 + 0) / 3)
    with pytest.raises(ValueError, match="no label is left"):
        flat_f1_score([["O"]], [["O"]], exclude="O")


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
