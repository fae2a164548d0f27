"""The Mulan multi-label loader."""

import numpy as np
import pytest

from pmap_sklearn.datasets import load_multilabel
from pmap_sklearn.datasets._paths import candidate_roots


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
