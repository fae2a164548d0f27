"""Multi-label classification on plain (X, Y): the label graphs, exact inference on them, the
scikit-learn forms of the outputs, every learner, bad input and the Mulan loader."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import accuracy_score, f1_score, hamming_loss

from pmap_sklearn import (
    MultiLabelStructure,
    PerturbMAPCRF,
    hamming_scorer,
)
from pmap_sklearn.datasets import load_multilabel
from pmap_sklearn.datasets._paths import candidate_roots
from pmap_sklearn.metrics import example_f1_scorer, multilabel_scores

from .helpers import _correlated


# ---- every learner, and what the label graph buys ----------------------------------------------
def test_multi_label_metrics_are_scikit_learns():
    X, Y = _correlated(120)
    model = PerturbMAPCRF(MultiLabelStructure("tree"), random_state=0).fit(X, Y)
    predicted = model.predict(X)
    scores = multilabel_scores(Y, predicted)
    assert scores["hamming_loss"] == pytest.approx(hamming_loss(Y, predicted))
    assert scores["subset_accuracy"] == pytest.approx(accuracy_score(Y, predicted))
    assert scores["example_f1"] == pytest.approx(
        f1_score(Y, predicted, average="samples", zero_division=1.0)
    )
    assert example_f1_scorer(model, X, Y) == pytest.approx(scores["example_f1"])
    assert hamming_scorer(model, X, sparse.csr_matrix(Y)) == pytest.approx(
        1 - scores["hamming_loss"]
    )
    empty = np.zeros((2, 3), int)  # no label, none predicted: a perfect example-based F1
    assert multilabel_scores(empty, empty)["example_f1"] == 1.0


# ---- the Mulan data ---------------------------------------------------------------------------
def _multilabel_root():
    for root in candidate_roots():
        if (root / "multilabel" / "scene-train.arff.gz").is_file():
            return root
    tried = ", ".join(str(root) for root in candidate_roots())
    pytest.skip(f"the shared data's multilabel/ was not found (tried {tried})")


@pytest.mark.parametrize("name, shape", [("scene", (1211, 294, 6)), ("yeast", (1500, 103, 14))])
def test_load_multilabel(name, shape):
    _multilabel_root()
    data = load_multilabel(name, "train")
    assert data.data.shape == shape[:2] and data.target.shape == (shape[0], shape[2])
    assert set(np.unique(data.target)) == {0, 1}
    assert len(data.target_names) == shape[2]


def test_a_missing_data_file_names_the_paths_tried(tmp_path):
    with pytest.raises(FileNotFoundError, match="tried"):
        load_multilabel("scene", "train", path=tmp_path)
    with pytest.raises(ValueError, match="yeast.*scene|scene.*yeast"):
        load_multilabel("birds")
