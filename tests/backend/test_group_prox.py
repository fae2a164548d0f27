"""The exact proximal operator of a sum of group maxima."""

import numpy as np
import pytest
from scipy.optimize import minimize

from pmap_sklearn._backend import group_prox
from pmap_sklearn._backend.group_prox import prox_group_max

from ..helpers import SHAPES, _groups_of_shape


def _prox_by_quadratic_program(z, groups, weights):
    """``min ½‖w − z‖² + Σ d_A t_A`` s.t. ``t_A >= w_a`` (the epigraph form), by SLSQP."""
    n = len(z)
    constraints = [
        {"type": "ineq", "fun": lambda v, g=g, a=a: v[n + g] - v[a]}
        for g, members in enumerate(groups)
        for a in members
    ]
    start = np.concatenate([z, [z[g].max() for g in groups]])
    result = minimize(
        lambda v: 0.5 * np.sum((v[:n] - z) ** 2) + weights @ v[n:],
        start,
        constraints=constraints,
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return result.x[:n]


def test_prox_of_group_maxima_is_the_quadratic_programs_optimum(rng):
    for _ in range(25):
        n = int(rng.integers(1, 7))
        groups = [np.array([i]) for i in range(n) if rng.random() < 0.7] + [
            np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
            for _ in range(int(rng.integers(1, 4)))
        ]
        weights = 2.0 * rng.random(len(groups))
        z = 2.0 * rng.normal(size=(2, n))
        found = prox_group_max(z, groups, weights)
        for b in range(2):
            reference = _prox_by_quadratic_program(z[b], groups, weights)
            values = [
                0.5 * np.sum((w - z[b]) ** 2)
                + sum(d * w[g].max() for g, d in zip(groups, weights, strict=True))
                for w in (found[b], reference)
            ]
            assert values[0] <= values[1] + 1e-8


def _prox_by_cuts(monkeypatch, z, groups, weights):
    with monkeypatch.context() as patch:
        patch.setattr(group_prox, "_as_forest", lambda *args: None)
        return prox_group_max(z, groups, weights)


@pytest.mark.parametrize("shape", SHAPES)
def test_prox_on_forests_equals_the_prox_by_cuts(rng, monkeypatch, shape):
    """Singletons and pairs forming a forest take the tree dynamic programme (exact)."""
    groups = _groups_of_shape(rng, shape)
    n = 1 + max(int(g.max()) for g in groups)
    forest = group_prox._as_forest(n, groups, np.ones(len(groups)))
    assert (forest is None) == (shape == "grid (loopy)")
    weights = 3.0 * rng.random(len(groups)) * (rng.random(len(groups)) < 0.8)
    z = 4.0 * rng.normal(size=(40, n))
    z[:5] = np.round(z[:5])  # ties between breakpoints
    assert np.allclose(
        prox_group_max(z, groups, weights),
        _prox_by_cuts(monkeypatch, z, groups, weights),
        atol=1e-9,
    )
