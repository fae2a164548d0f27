"""IshikawaSolver and GroupMaxPotentials."""

import numpy as np
import pytest

from pmap_sklearn import _parallel as solver_base
from pmap_sklearn._backend import ishikawa
from pmap_sklearn.solvers import BruteForceSolver, GroupMaxPotentials, IshikawaSolver, Potentials

from ..helpers import _assert_level_maps_are_optimal


def _convex_tables(rng, edges, k):
    """Per-edge score tables that are concave in the label difference."""
    d = np.arange(-(k - 1), k)
    a, b = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    tables = []
    for _ in edges:
        kind = rng.integers(3)
        if kind == 0:  # total variation
            cost = rng.random() * np.abs(d)
        elif kind == 1:  # quadratic with a drift
            cost = 0.3 * rng.random() * d**2 + rng.normal() * d
        else:  # dead zone
            cost = np.maximum(2.0 * rng.random() * np.abs(d) - 1.0, 0.0)
        tables.append(-cost[a - b + k - 1])
    return np.array(tables)


def test_ishikawa_map_equals_brute_force(rng):
    for _ in range(25):
        k, n = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.7]
        edges = np.array(edges or [(0, 1)])
        p = Potentials(2.0 * rng.normal(size=(n, k)), edges, _convex_tables(rng, edges, k))
        ishikawa, brute = IshikawaSolver().map(p), BruteForceSolver().map(p)
        assert p.score(ishikawa)[0] == pytest.approx(p.score(brute)[0], abs=1e-9)


def test_ishikawa_handles_attractive_potts_and_refuses_what_is_not_convex(rng):
    edges = np.array([[0, 1], [1, 2], [0, 2]])
    binary = Potentials(rng.normal(size=(3, 2)), edges, -rng.random(3))
    assert (IshikawaSolver().map(binary) == BruteForceSolver().map(binary)).all()
    potts = Potentials(rng.normal(size=(3, 3)), edges, -rng.random(3))  # K = 3: not convex
    with pytest.raises(ValueError, match="concave functions of the label difference"):
        IshikawaSolver().map(potts)


def test_ishikawa_solves_many_samples_in_chunks_and_over_jobs(rng, monkeypatch, always_parallel):
    """Samples of different sizes, some clamped nodes: the same MAPs whether they share one
    max-flow, are cut into chunks of a few samples, or go to two processes."""
    k, parts, edges, tables = 4, [], [], []
    for n in rng.integers(1, 6, size=12):
        chain = np.column_stack([np.arange(n - 1), np.arange(1, n)])
        parts.append(n)
        edges.append(chain + sum(parts[:-1]))
        tables.append(_convex_tables(rng, chain, k).reshape(-1, k, k))
    offsets = np.concatenate([[0], np.cumsum(parts)])
    p = Potentials(
        rng.normal(size=(offsets[-1], k)),
        np.concatenate(edges),
        np.concatenate(tables),
        offsets,
        np.concatenate([[0], np.cumsum([len(e) for e in edges])]),
    )
    clamp = np.where(rng.random(p.n_nodes) < 0.2, rng.integers(k, size=p.n_nodes), -1)
    together = IshikawaSolver().map(p, clamp)
    assert (together[clamp >= 0] == clamp[clamp >= 0]).all()
    brute = BruteForceSolver().map(p, clamp)
    np.testing.assert_allclose(p.score(together), p.score(brute), atol=1e-9)
    monkeypatch.setattr(ishikawa, "CHUNK_NODES", 7)  # two or three samples per max-flow
    monkeypatch.setattr(solver_base, "CHUNK_NODES", 7)
    np.testing.assert_allclose(p.score(IshikawaSolver().map(p, clamp)), p.score(brute), atol=1e-9)
    in_jobs = IshikawaSolver().map(p, clamp, n_jobs=2)
    np.testing.assert_allclose(p.score(in_jobs), p.score(brute), atol=1e-9)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"unary": np.zeros((2, 3, 2))}, r"unary must have shape \(B, 3, 3\)"),
        ({"n_levels": [1, 4, 2]}, r"n_levels must lie in \[1, 3\]"),
        ({"levels": [0.0, 2.0, 1.0]}, "levels must increase"),
        ({"weights": [1.0, -1.0]}, "2 finite values >= 0"),
        ({"weights": [1.0, np.nan]}, "2 finite values >= 0"),
        ({"groups": [[0], [1, 3]]}, r"group 1 must hold node indices in \[0, 3\)"),
    ],
)
def test_group_max_potentials_refuse_malformed_models(change, message):
    model = {
        "unary": np.zeros((2, 3, 3)),
        "n_levels": [1, 3, 2],
        "levels": [0.0, 1.0, 2.0],
        "groups": [[0], [1, 2]],
        "weights": [1.0, 0.5],
    }
    with pytest.raises(ValueError, match=message):
        GroupMaxPotentials(**(model | change))
    with pytest.raises(ValueError, match="take no clamp"):
        IshikawaSolver().map(GroupMaxPotentials(**model), clamp=np.zeros(3, np.intp))


def test_group_max_levels_equal_brute_force(rng):
    """Groups of one, two and more members; nodes with different numbers of levels."""
    for _ in range(25):
        n = int(rng.integers(2, 5))
        n_levels = rng.integers(2, 5, size=n)
        levels = np.concatenate([[0.0], np.cumsum(rng.random(n_levels.max() - 1) + 0.2)])
        groups = [np.array([i]) for i in range(n)] + [
            np.sort(rng.choice(n, size=int(rng.integers(2, n + 1)), replace=False))
            for _ in range(3)
        ]
        weights = 2.0 * rng.random(len(groups))
        costs = 2.0 * rng.normal(size=(3, n, n_levels.max()))
        _assert_level_maps_are_optimal(costs, n_levels, levels, groups, weights)


def test_level_models_of_one_level_each_need_no_cut():
    model = GroupMaxPotentials(np.zeros((2, 3, 1)), [1, 1, 1], [0.0], [[0, 1, 2]], [1.0])
    assert np.array_equal(IshikawaSolver().map(model), np.zeros((2, 3), np.intp))


GROUP_MODEL = dict(
    unary=np.zeros((1, 2, 3)), n_levels=[3, 3], levels=[0, 1, 2], groups=[[0], [1]], weights=[1, 1]
)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("unary", np.full((1, 2, 3), np.nan), "NaN or \\+inf"),
        ("levels", [0, np.nan, 2], "levels must be finite"),
        ("groups", [[0.5], [1]], "group 0 must hold whole numbers"),
        ("groups", [[0, [1]], [1]], "group 0 must be a flat sequence"),
        ("n_levels", [2.5, 3], "n_levels must hold whole numbers"),
        ("weights", [np.inf, 1], "finite values >= 0"),
    ],
)
def test_group_max_potentials_refuse_what_would_be_truncated_or_nan(field, value, message):
    GroupMaxPotentials(**GROUP_MODEL)  # the valid model
    with pytest.raises(ValueError, match=message):
        GroupMaxPotentials(**{**GROUP_MODEL, field: value})
