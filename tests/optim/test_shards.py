"""The data-parallel SGD's shards (split by size) and their mixing."""

import numpy as np

from pmap_sklearn._optim import shards as _shards
from pmap_sklearn._optim.sgd import SGDState


def test_shards_split_balanced_by_nodes_and_seeded():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 40, size=101)
    parts = _shards.split_by_size(sizes, 3, np.random.default_rng(5))
    assert sorted(np.concatenate(parts).tolist()) == list(range(101))  # each sample once
    loads = [sizes[part].sum() for part in parts]
    assert max(loads) - min(loads) <= sizes.max()
    again = _shards.split_by_size(sizes, 3, np.random.default_rng(5))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    other = _shards.split_by_size(sizes, 3, np.random.default_rng(6))
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other, strict=True))


def test_mixing_weighs_the_shards_states():
    """Arrays by the weighted mean (a shard not averaging yet counts its weights), the step
    count and averaged iterates of the longest path, the samples seen summed."""
    a = SGDState(coef=np.array([1.0, 3.0]), t=4, n_seen=10, squares=np.array([1.0]))
    b = SGDState(coef=np.array([3.0, 5.0]), t=5, n_seen=12, squares=np.array([5.0]))
    b.average, b.n_averaged = np.array([2.0, 2.0]), 3
    mixed = SGDState(coef=np.zeros(2), t=2, n_seen=8, squares=np.zeros(1))
    squares = mixed.squares
    _shards._mix(mixed, [a, b], np.array([0.25, 0.75]))
    np.testing.assert_allclose(mixed.coef, [2.5, 4.5])
    np.testing.assert_allclose(mixed.average, [0.25 * 1.0 + 0.75 * 2.0, 0.25 * 3.0 + 0.75 * 2.0])
    np.testing.assert_allclose(squares, [4.0])  # in place: the step rule holds the array
    assert mixed.squares is squares
    assert (mixed.t, mixed.n_seen, mixed.n_averaged) == (5, 14, 3)
