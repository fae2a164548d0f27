"""What the tagging benchmarks (``ud_tagging.py``, ``ner.py``) share: crfsuite's tutorial
model, timing, peak memory, the calibration of per-token marginals and the fit-times line."""

import gc
import time
from pathlib import Path

import numpy as np


def crfsuite_tutorial_model():
    """sklearn-crfsuite with its tutorial's setting: L-BFGS, c1 = c2 = 0.1, 100 iterations."""
    import sklearn_crfsuite

    return sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True
    )


#: Predictions and marginals are timed as the best of this many calls, for every learner.
PREDICT_REPEATS = 3


def timed(function, *args, repeat: int = 1):
    """``(function(*args), seconds)``: the fewest seconds of ``repeat`` calls (timeit's rule:
    the slower calls measure what else the machine was doing)."""
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        result = function(*args)
        best = min(best, time.perf_counter() - start)
    return result, best


def _status_mb(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def peak_mb() -> float:
    """The peak resident memory of this process."""
    return _status_mb("VmHWM")


def fit_and_measure(model, X, y) -> tuple[float, float]:
    """Fit ``model``; return the fit's seconds and how much the process's resident memory
    grew (MB): what the fitted model keeps, plus freed memory the allocator did not return."""
    gc.collect()
    before = _status_mb("VmRSS")
    _, seconds = timed(model.fit, X, y)
    gc.collect()
    return seconds, _status_mb("VmRSS") - before


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
