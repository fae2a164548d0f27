"""The tagging protocol the tagging benchmarks (``ud_tagging.py``, ``ner.py``,
``entity_confidence.py``, ``sequence_confidence.py``) share: the tutorial's feature dicts,
crfsuite's tutorial model, our chain learners' settings, the fit's memory, the calibration of
per-token marginals and the lines and cells of their tables. Timing and memory readings are the
harness's (``_common.py``)."""

import gc

import numpy as np
from _common import resident_mb, timed


def feature_dicts(sentences):
    """The tutorial's token features (``token_features``) of every token of ``sentences``,
    crfsuite's constant ``bias`` included."""
    from pmap_sklearn.datasets import token_features

    return [[dict(token_features(s, i), bias=1.0) for i in range(len(s))] for s in sentences]


def first(data, n: int):
    """``data`` (a loaded corpus) cut to its first ``n`` sentences: a ``--quick`` run's."""
    from sklearn.utils import Bunch

    keys = ("sentences", "tokens", "pos", "tags")
    return Bunch(**{k: v[:n] if k in keys else v for k, v in data.items()})


def crfsuite_tutorial_model():
    """sklearn-crfsuite with its tutorial's setting: L-BFGS, c1 = c2 = 0.1, 100 iterations."""
    import sklearn_crfsuite

    return sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True
    )


#: Predictions and marginals are timed as the best of this many calls, for every learner.
PREDICT_REPEATS = 3


def fit_and_measure(model, X, y) -> tuple[float, float]:
    """Fit ``model``; return the fit's seconds and how much the process's resident memory
    grew (MB): what the fitted model keeps, plus freed memory the allocator did not return."""
    gc.collect()
    before = resident_mb()
    _, seconds = timed(model.fit, X, y)
    gc.collect()
    return seconds, resident_mb() - before


def fit_crfsuite(train_dicts, train_tags, test_dicts) -> dict:
    """crfsuite's tutorial model fitted on the feature dicts (:func:`fit_and_measure`), then
    its predictions and per-token marginals of ``test_dicts``, each timed as the best of
    :data:`PREDICT_REPEATS` calls: the model, ``seconds``, ``held``, ``predicted``,
    ``predict_seconds``, ``marginals`` (n_tokens, K), ``marginal_seconds`` and the sorted
    ``classes``."""
    model = crfsuite_tutorial_model()
    seconds, held = fit_and_measure(model, train_dicts, train_tags)
    predicted, predict_seconds = timed(model.predict, test_dicts, repeat=PREDICT_REPEATS)
    dicts, marginal_seconds = timed(model.predict_marginals, test_dicts, repeat=PREDICT_REPEATS)
    classes = np.array(sorted(model.classes_))
    return dict(
        model=model,
        seconds=seconds,
        held=held,
        predicted=predicted,
        predict_seconds=predict_seconds,
        marginals=crfsuite_marginals(dicts, classes),
        marginal_seconds=marginal_seconds,
        classes=classes,
    )


def measure_learners(measure, names, twice) -> dict:
    """``{name: row}``: each learner of ``names`` measured by ``measure(name)`` (in its own
    process), then those of ``twice`` once more, after all the others: their ``seconds`` the
    faster of their two ``runs``."""
    rows = {}
    for name in names:
        rows[name] = measure(name)
        print(name, rows[name], flush=True)
    for name in twice:  # a second pass: the faster of the two runs is reported
        again = measure(name)
        rows[name]["runs"] = [rows[name]["seconds"], again["seconds"]]
        rows[name]["seconds"] = min(rows[name]["runs"])
        print(name, "again", again, flush=True)
    return rows


def token_marginals(model, X):
    """``model``'s default per-token marginals of ``X`` as one (n_tokens, K) array and their
    seconds (the best of :data:`PREDICT_REPEATS` calls); ``(None, None)`` for a model without
    marginals."""
    if not hasattr(model, "predict_proba"):
        return None, None
    marginals, seconds = timed(model.predict_proba, X, repeat=PREDICT_REPEATS)
    return np.concatenate(list(marginals)), seconds


def learner_params(params: dict, n_train: int) -> dict:
    """Our chain learner's parameters from a benchmark's table of learners: ``crfsuite_c=(c1,
    c2)``, crfsuite's penalty on its summed objective, becomes ``alpha`` and ``l1_ratio``
    (``crfsuite_penalty`` over ``n_train`` sentences); ``structure_bias`` and
    ``constraints`` a chain structure with (or without) its own bias column, and with
    transition constraints (a tagging scheme's name)."""
    import pmap_sklearn

    params = dict(params)
    if "crfsuite_c" in params:  # crfsuite's c1, c2 on its summed objective
        c1, c2 = params.pop("crfsuite_c")
        params["alpha"], params["l1_ratio"] = pmap_sklearn.crfsuite_penalty(c1, c2, n_train)
    chain = {key: params.pop(key) for key in ("structure_bias", "constraints") if key in params}
    if chain:
        bias = chain.get("structure_bias", True)
        params["structure"] = pmap_sklearn.ChainStructure(
            bias=bias, constraints=chain.get("constraints")
        )
    return params


def broken_bio_transitions(tag_sequences) -> int:
    """How many tags break the BIO (IOB2) scheme: an ``I-X`` that does not follow ``B-X`` or
    ``I-X`` (a sentence's first tag included) — the tags ``to_bio_tags`` rewrites."""
    from pmap_sklearn.metrics import to_bio_tags

    return sum(
        int(np.sum(np.asarray(tags, dtype=str) != to_bio_tags(tags))) for tags in tag_sequences
    )


def crfsuite_marginals(dicts, classes) -> np.ndarray:
    """crfsuite's list of lists of ``{tag: probability}`` as a (n_tokens, K) array."""
    return np.array([[token[c] for c in classes] for sentence in dicts for token in sentence])


def calibration(marginals, truth, classes, bins: int = 15) -> tuple[float, float]:
    """Expected calibration error of the top probability and log-loss of the true tags, per
    token (``marginals``: (n_tokens, K) over the sorted ``classes``)."""
    index = np.searchsorted(classes, truth)
    top, correct = marginals.max(axis=1), marginals.argmax(axis=1) == index
    which = np.minimum((top * bins).astype(int), bins - 1)
    gap = sum(
        abs(correct[which == b].mean() - top[which == b].mean()) * np.mean(which == b)
        for b in range(bins)
        if np.any(which == b)
    )
    at_truth = marginals[np.arange(len(index)), index]
    return float(gap), float(-np.mean(np.log(np.clip(at_truth, 1e-12, None))))


def fit_times_line(rows: dict, names) -> str:
    """The footnote naming both fit times of the learners timed twice."""
    return (
        "Fit times of the two runs (the faster one is in the table): "
        + "; ".join(
            f"{name}: {' and '.join(f'{t:.1f}' for t in rows[name]['runs'])} s" for name in names
        )
        + "."
    )


def crfsuite_size(model) -> dict:
    """crfsuite's non-zero state (attribute, label) and transition weights, and its model file
    (MB)."""
    import os

    return dict(
        state_weights=sum(1 for w in model.state_features_.values() if w != 0),
        transition_weights=sum(1 for w in model.transition_features_.values() if w != 0),
        saved_mb=os.path.getsize(model.modelfile.name) / 1e6,
    )


def model_size(model, vectorizer=None) -> dict:
    """Our chain model's non-zero node (feature, label) and transition weights, and the pickle
    of the fitted pipeline (MB): ``model`` a pipeline, or a learner and its vectoriser."""
    import pickle

    from sklearn.pipeline import Pipeline

    from pmap_sklearn.inspection import state_features, transition_features

    if vectorizer is not None:
        model = Pipeline([("vectorizer", vectorizer), ("learner", model)])
    return dict(
        state_weights=len(state_features(model)),
        transition_weights=len(transition_features(model)),
        saved_mb=len(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)) / 1e6,
    )


def size_cells(row: dict) -> str:
    """The table cells of :func:`crfsuite_size` / :func:`model_size`."""
    if "state_weights" not in row:
        return "— | — |"
    return f"{row['state_weights']:,} / {row['transition_weights']} | {row['saved_mb']:.2f} |"


def sparse_line(rows: dict, sparse: str, dense: str, crfsuite: dict, key: str, percent=False):
    """One sentence: the rows named ``sparse…`` (an L1 setting, seeds 0-2) against the first
    three named ``dense…`` (the defaults' seeds 0-2): their ``key`` scores (in % with
    ``percent``), non-zero state weights against crfsuite's, saved size and fit time (of the
    first row of each)."""
    sparse_rows = [row for name, row in rows.items() if name.startswith(sparse)]
    dense_rows = [row for name, row in rows.items() if name.startswith(dense)][:3]
    scale, digits, unit = (100, 2, " %") if percent else (1, 4, "")

    def scores(some):
        return " / ".join(f"{scale * row[key]:.{digits}f}" for row in some) + unit

    def mean(some, name):
        return float(np.mean([row[name] for row in some]))

    gain = scale * (mean(sparse_rows, key) - mean(dense_rows, key))
    weights = crfsuite["state_weights"]
    return (
        f"{sparse} against {dense}, seeds 0-2: {key} {scores(sparse_rows)} against "
        f"{scores(dense_rows)} (mean {gain:+.{digits}f}); "
        f"{mean(sparse_rows, 'state_weights') / weights:.2f}× crfsuite's non-zero state "
        f"weights (the defaults {mean(dense_rows, 'state_weights') / weights:.2f}×), "
        f"{sparse_rows[0]['saved_mb']:.2f} MB saved against {dense_rows[0]['saved_mb']:.2f} "
        f"(crfsuite {crfsuite['saved_mb']:.2f}), fit {sparse_rows[0]['seconds']:.1f} s against "
        f"{dense_rows[0]['seconds']:.1f} s."
    )
