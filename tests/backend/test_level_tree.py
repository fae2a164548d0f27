"""The level MAP of group-maximum models on forests."""

import numpy as np
import pytest

from pmap_sklearn._backend import level_tree
from pmap_sklearn.solvers import GroupMaxPotentials, IshikawaSolver

from ..helpers import SHAPES, _assert_level_maps_are_optimal, _groups_of_shape


def _level_map(monkeypatch, model, by_cuts):
    with monkeypatch.context() as patch:
        if by_cuts:
            patch.setattr(level_tree.LevelTree, "from_groups", classmethod(lambda *args: None))
        return IshikawaSolver().map(model)


def _packed(unary, n_levels):
    return np.concatenate([unary[:, i, :r] for i, r in enumerate(n_levels)], axis=1)


@pytest.mark.parametrize("shape", SHAPES)
def test_level_map_on_forests_equals_the_map_by_cuts(rng, monkeypatch, shape):
    """Forest-shaped groups take the min-sum dynamic programme: the cut's minimisers, padded
    or packed scores alike."""
    groups = _groups_of_shape(rng, shape)
    n = 1 + max(int(g.max()) for g in groups)
    weights = 3.0 * rng.random(len(groups)) * (rng.random(len(groups)) < 0.8)
    assert level_tree.forest_shaped(n, groups, weights) == (shape != "grid (loopy)")
    n_levels = rng.integers(1, 9, size=n)
    levels = np.concatenate([[0.0], np.cumsum(rng.random(n_levels.max() - 1) + 0.1)])
    unary = 3.0 * rng.normal(size=(60, n, n_levels.max()))
    model = GroupMaxPotentials(unary, n_levels, levels, groups, weights)
    by_cuts = _level_map(monkeypatch, model, by_cuts=True)
    found = _level_map(monkeypatch, model, by_cuts=False)
    assert np.array_equal(found, by_cuts)
    packed = GroupMaxPotentials(_packed(unary, n_levels), n_levels, levels, groups, weights)
    assert np.array_equal(IshikawaSolver().map(packed), found)


def test_level_map_on_forests_equals_brute_force(rng):
    for _ in range(30):
        n = int(rng.integers(1, 6))
        parent = [-1 if rng.random() < 0.25 else int(rng.integers(i)) for i in range(1, n)]
        groups = [np.array([i]) for i in range(n) if rng.random() < 0.5]
        pairs = [np.array([i + 1, p]) for i, p in enumerate(parent) if p >= 0]
        groups += [pair[:: rng.choice([-1, 1])] for pair in pairs]  # either orientation
        if not groups:
            continue
        weights = 2.0 * rng.random(len(groups))
        n_levels = rng.integers(1, 5, size=n)
        levels = np.concatenate([[0.0], np.cumsum(rng.random(n_levels.max() - 1) + 0.2)])
        costs = 2.0 * rng.normal(size=(3, n, n_levels.max()))
        _assert_level_maps_are_optimal(costs, n_levels, levels, groups, weights)
