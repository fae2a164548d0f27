"""Weizmann horse superpixel graphs (real data tests skip when the shared data is absent)."""

import warnings

import numpy as np
import pytest

from pmap_sklearn import GraphStructure
from pmap_sklearn.datasets import (
    horse_split,
    load_weizmann_horse_masks,
    load_weizmann_horses,
    paint,
)
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
    with warnings.catch_warnings():  # imageio's DICOM deprecation is not the reason given
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(ValueError, match="cannot read image .*horse001.jpg") as info:
            load_weizmann_horses(tmp_path, cache=False)
    assert "DICOM" not in str(info.value)


def _fake_horses(folder, rng, n_images=2):
    from skimage import io

    (folder / "rgb").mkdir(parents=True)
    (folder / "figure_ground").mkdir()
    for i in range(n_images):
        mask = np.zeros((24, 32), np.uint8)
        mask[6:18, 8:24] = 255
        photo = (rng.random((24, 32, 3)) * 255).astype(np.uint8)
        io.imsave(folder / "figure_ground" / f"horse{i:03d}.jpg", mask, check_contrast=False)
        io.imsave(folder / "rgb" / f"horse{i:03d}.jpg", photo, check_contrast=False)
    return folder


def test_loader_arguments_are_checked(tmp_path, rng):
    folder = _fake_horses(tmp_path / "horses", rng)
    with pytest.raises(ValueError, match="index 2 is out of range: there are 2 horse images"):
        load_weizmann_horses(folder, indices=[0, 2], cache=False)
    with pytest.raises(ValueError, match="n_segments must be an int >= 1"):
        load_weizmann_horses(folder, n_segments=0, cache=False)
    with pytest.raises(ValueError, match="compactness must be > 0"):
        load_weizmann_horses(folder, compactness=-1.0, cache=False)
    from pmap_sklearn.datasets import load_weizmann_horse_masks

    for index in (-3, -1, 2):  # positions 0..1 only: -1 is not "the last one"
        with pytest.raises(ValueError, match=f"index {index} is out of range: there are 2 horse"):
            load_weizmann_horse_masks(folder, indices=[index])


def test_feature_cache_follows_the_files_and_shows_progress(tmp_path, rng, capsys):
    from skimage import io

    folder = _fake_horses(tmp_path / "horses", rng)
    cache = tmp_path / "cache"
    first = load_weizmann_horses(folder, n_segments=20, cache=cache)
    message = capsys.readouterr().err  # computed: says what and where (counts in terminals)
    assert message == f"superpixel features of 2 images, cached in {cache}\n"
    again = load_weizmann_horses(folder, n_segments=20, cache=cache)
    assert capsys.readouterr().err == ""  # all cached: silent
    np.testing.assert_array_equal(again.data[0].node_features, first.data[0].node_features)
    photo = folder / "rgb" / "horse000.jpg"
    io.imsave(photo, 255 - io.imread(photo), check_contrast=False)  # the image changes
    changed = load_weizmann_horses(folder, n_segments=20, cache=cache)
    assert "superpixel features" in capsys.readouterr().err  # one image recomputed
    old, new = first.data[0].node_features, changed.data[0].node_features
    assert old.shape != new.shape or not np.allclose(old, new)
    np.testing.assert_array_equal(changed.data[1].node_features, first.data[1].node_features)


def test_missing_scikit_image_names_the_extra(tmp_path, rng, monkeypatch):
    import importlib

    folder = _fake_horses(tmp_path / "horses", rng, n_images=1)
    real = importlib.import_module

    def without_skimage(name, *args, **kwargs):
        if name.startswith("skimage"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", without_skimage)
    with pytest.raises(ImportError, match=r"pip install 'pmap_sklearn\[datasets\]'"):
        load_weizmann_horses(folder, cache=False)


def test_horse_masks(tmp_path):
    roots = [r / "weizmann_horse" for r in candidate_roots()]
    with pytest.raises(FileNotFoundError, match="tried"):
        load_weizmann_horse_masks(path=tmp_path)
    if not any((r / "figure_ground").is_dir() for r in roots):
        pytest.skip(f"Weizmann horses not found (tried {', '.join(map(str, roots))})")
    pytest.importorskip("skimage")
    masks = load_weizmann_horse_masks(indices=[0, 1, 2], size=(40, 30))
    assert masks.images.shape == (3, 40, 30)
    assert set(np.unique(masks.images)) == {0, 1}
    assert 0.05 < masks.images.mean() < 0.8
