"""LogSupermodularDenoiser: gradients, parameter recovery, denoising, the scikit-learn contract."""

import numpy as np
import pytest

from pmap_sklearn.datasets import add_flip_noise, load_weizmann_horse_masks
from pmap_sklearn.datasets._paths import candidate_roots

from .helpers import blobs


def test_flip_noise(rng):
    clean = blobs(rng, 20, shape=(30, 30))
    noisy = add_flip_noise(clean, 0.2, random_state=0)
    assert isinstance(noisy, np.ndarray) and noisy.shape == clean.shape
    assert np.mean(noisy != clean) == pytest.approx(0.2, abs=0.01)
    assert np.array_equal(noisy, add_flip_noise(clean, 0.2, random_state=0))
    assert isinstance(add_flip_noise(list(clean), 0.1), list)
    assert np.array_equal(add_flip_noise(clean, 0.0), clean)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        add_flip_noise(clean, 1.5)
    with pytest.raises(ValueError, match="binary"):
        add_flip_noise(clean + 1, 0.1)


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
