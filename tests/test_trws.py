"""TRW-S (sequential tree-reweighted message passing): exact on forests, a valid bound and
near-optimal labellings on loopy models, clamps and warm starts honoured — checked against
brute-force enumeration of tiny models."""

import numpy as np
import pytest


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
