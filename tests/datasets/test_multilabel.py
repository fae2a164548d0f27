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


_SCENE_LABELS = ["Beach", "Sunset", "FallFoliage", "Field", "Mountain", "Urban"]


def _scene_header() -> str:
    """The header of Mulan's scene ARFF: 294 numeric features, then the 6 labels."""
    features = [f"@attribute Att{i} numeric" for i in range(1, 295)]
    labels = [f"@attribute {label} {{0,1}}" for label in _SCENE_LABELS]
    return "@relation scene\n" + "\n".join(features + labels) + "\n\n@data\n"


def _row(rng) -> str:
    return ",".join([f"{v:.4f}" for v in rng.random(294)] + ["0", "1", "0", "0", "1", "0"])


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda rows: "", "not a complete ARFF file"),
        (lambda rows: "\x00\x01 garbage\n" * 5, "not a complete ARFF file"),
        (lambda rows: _scene_header().replace("@data\n", ""), "no @data section"),
        (lambda rows: _scene_header() + rows[0] + "\n1,2,3\n", "row cut short"),
        (lambda rows: _scene_header() + rows[0] + "\n" + rows[1][:50], "row cut short"),
        (
            lambda rows: _scene_header() + "\n".join(rows) + "\n",
            "holds 3 samples, but Mulan's scene train set has 1211",
        ),
        (
            lambda rows: _scene_header().replace("@attribute", "@atribute", 1),
            r"not an ARFF file \(.*line @atribute Att1 numeric\); download",
        ),
    ],
    ids=["empty", "garbage", "no data", "short row", "cut mid row", "truncated", "bad header"],
)
def test_a_corrupt_arff_is_a_value_error_naming_the_file(tmp_path, make, match):
    """scipy's parser raises StopIteration or IndexError on a truncated file: the loader
    names the file and where to download it again."""
    rng = np.random.default_rng(0)
    labels = "".join(f'<label name="{label}"></label>' for label in _SCENE_LABELS)
    (tmp_path / "scene.xml").write_text(
        f'<labels xmlns="http://mulan.sourceforge.net/labels">{labels}</labels>'
    )
    file = tmp_path / "scene-train.arff"
    file.write_text(make([_row(rng) for _ in range(3)]))
    with pytest.raises(ValueError, match=match) as error:
        load_multilabel("scene", "train", path=tmp_path)
    assert str(file) in str(error.value) and "download it again" in str(error.value)
    assert "\n" not in str(error.value)  # scipy's header errors end with the line's newline
