"""The synthetic data generators and noise models."""

import numpy as np
import pytest

from pmap_sklearn.datasets import (
    add_flip_noise,
    add_kumar_hebert_noise,
    make_chain_data,
    make_grid_data,
)

from ..helpers import blobs


def test_generators_shapes():
    chains = make_chain_data(n_samples=5, n_states=3, n_features=4, random_state=0)
    assert len(chains.data) == 5 and chains.data[0].shape == (len(chains.target[0]), 4)
    assert max(t.max() for t in chains.target) < 3
    grids = make_grid_data(n_samples=2, shape=(8, 6), random_state=0)
    assert grids.data[0].shape == (8, 6, 1) and grids.target[0].shape == (8, 6)
    assert set(np.unique(grids.target[0])) <= {0, 1}


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


def test_kumar_hebert_noise_statistics():
    clean = np.zeros((40, 30, 30), dtype=int)
    clean[:, :, 15:] = 1
    gaussian = add_kumar_hebert_noise(clean, "gaussian", random_state=0)
    assert np.std(gaussian - clean) == pytest.approx(0.3, rel=0.02)
    bimodal = add_kumar_hebert_noise(clean, "bimodal", random_state=0)
    assert bimodal[clean == 0].mean() == pytest.approx((0.08 + 0.46) / 2, abs=0.01)
    assert bimodal[clean == 1].mean() == pytest.approx((0.55 + 0.42) / 2, abs=0.01)
    with pytest.raises(ValueError, match="kind"):
        add_kumar_hebert_noise(clean, "laplace")


def test_snake_data():
    """Snakes are self-avoiding paths labelled 1..L from the head; without noise each cell's
    colour points to the next cell and the pointing feature says which end points to the
    other."""
    from pmap_sklearn.datasets import make_snake_data

    snakes = make_snake_data(n_samples=20, shape=(5, 7), length=9, noise=0.0, random_state=0)
    steps = {"up": -7, "down": 7, "left": -1, "right": 1}
    for x, y, path, colours in zip(
        snakes.data, snakes.target, snakes.paths, snakes.colours, strict=True
    ):
        assert len(set(path.tolist())) == 9 and x.node_features.shape == (35, 25)
        rows, cols = np.divmod(path, 7)
        assert np.all(np.abs(np.diff(rows)) + np.abs(np.diff(cols)) == 1)
        np.testing.assert_array_equal(y[path], np.arange(1, 10))
        assert np.count_nonzero(y) == 9
        shown = colours.ravel()
        for cell, following in zip(path[:-1], path[1:], strict=True):
            assert following - cell == steps[snakes.colour_names[shown[cell]]]
        np.testing.assert_array_equal(x.node_features[:, :5].argmax(axis=1), shown)
        pointing = x.edge_features[:, 2]
        first, second = x.edges.T
        along = (y[first] > 0) & (y[second] > 0) & (np.abs(y[first] - y[second]) == 1)
        np.testing.assert_array_equal(pointing[along], np.sign(y[second] - y[first])[along])
    noisy = make_snake_data(n_samples=20, noise=0.5, random_state=0)
    assert np.mean(np.concatenate(noisy.colours).ravel() == 4) < 0.75
    with pytest.raises(ValueError, match="length"):
        make_snake_data(shape=(2, 2), length=5)
    with pytest.raises(ValueError, match="noise"):
        make_snake_data(noise=1.5)
