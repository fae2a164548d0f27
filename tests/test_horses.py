"""Weizmann horse superpixel graphs (real data tests skip when the shared data is absent)."""

import numpy as np
import pytest

from pmap_sklearn import GraphStructure
from pmap_sklearn.datasets import horse_split, load_weizmann_horses, paint
from pmap_sklearn.datasets._paths import candidate_roots

pytest.importorskip("skimage")


@pytest.fixture(scope="module")
def horses():
    roots = [r / "weizmann_horse" for r in candidate_roots()]
    if not any((r / "rgb").is_dir() for r in roots):
        pytest.skip(f"Weizmann horses not found (tried {', '.join(map(str, roots))})")
    return load_weizmann_horses(indices=[0, 1, 2], cache=False)


def test_superpixel_graphs_are_valid_samples(horses):
    from skimage import io

    assert len(horses.data) == 3
    GraphStructure().fit(horses.data, horses.target).prepare(horses.data)  # validates
    for sample, labels, box, segments, photo in zip(
        horses.data,
        horses.target,
        horses.box_target,
        horses.segments,
        horses.filenames,
        strict=True,
    ):
        mask = io.imread(photo.replace("rgb", "figure_ground")) >= 128
        assert segments.shape == mask.shape[:2]
        assert sample.node_features.shape == (sample.n_nodes, 55)
        assert np.all(np.isfinite(sample.node_features))
        assert np.all(sample.edge_features >= 0) and sample.edge_features.shape[1] == 3
        np.testing.assert_array_equal(np.bincount(segments.ravel()), sample.node_sizes)
        # majority labels paint back to (almost) the mask
        assert np.mean(paint(segments, labels) == mask.reshape(segments.shape)) > 0.9
        # the bounding box is a partial labelling consistent with the truth
        assert np.all(labels[box == 0] == 0) and (box == -1).any()


def test_split_is_the_spec_permutation():
    split = horse_split()
    perm = np.random.default_rng(0).permutation(328)
    np.testing.assert_array_equal(split.test, perm[:100])
    np.testing.assert_array_equal(split.labeled, perm[100:150])
    np.testing.assert_array_equal(split.small, perm[100:105])
    assert len(split.weak) == 178


def test_bad_data_folders(tmp_path):
    from skimage import io

    with pytest.raises(FileNotFoundError, match="tried: .*nowhere"):
        load_weizmann_horses(tmp_path / "nowhere", cache=False)
    (tmp_path / "rgb").mkdir()
    (tmp_path / "figure_ground").mkdir()
    mask = np.zeros((8, 8), np.uint8)
    mask[2:6, 2:6] = 255
    io.imsave(tmp_path / "figure_ground" / "horse001.jpg", mask, check_contrast=False)
    with pytest.raises(FileNotFoundError, match="has no photo"):
        load_weizmann_horses(tmp_path, cache=False)
    (tmp_path / "rgb" / "horse001.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match="cannot read image .*horse001.jpg"):
        load_weizmann_horses(tmp_path, cache=False)
