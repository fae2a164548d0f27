"""Continuous log-supermodular priors: Ishikawa cuts, the exact prox, the bound, learning,
decoding and the scikit-learn contract."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

from pmap_sklearn import ContinuousLogSupermodularDenoiser
from pmap_sklearn._backend import base as solver_base
from pmap_sklearn._backend import ishikawa
from pmap_sklearn._backend.group_prox import prox_group_max
from pmap_sklearn.continuous import haar2d, inverse_haar2d, tree_groups
from pmap_sklearn.solvers import BruteForceSolver, GroupMaxPotentials, IshikawaSolver, Potentials


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
        ({"weights": [1.0, -1.0]}, "2 values >= 0"),
        ({"weights": [1.0, np.nan]}, "2 values >= 0"),
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


def _group_value(costs, levels, groups, weights, z):
    return costs[np.arange(len(z)), z].sum() + sum(
        d * levels[z[g].max()] for g, d in zip(groups, weights, strict=True)
    )


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
        model = GroupMaxPotentials(-costs, n_levels, levels, groups, weights)
        found = IshikawaSolver().map(model)
        for b in range(3):
            best = min(
                _group_value(costs[b], levels, groups, weights, np.array(z))
                for z in itertools.product(*[range(r) for r in n_levels])
            )
            value = _group_value(costs[b], levels, groups, weights, found[b])
            assert value == pytest.approx(best, abs=1e-9)


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


def test_haar_transform_is_orthonormal_and_its_tree_has_one_parent_each(rng):
    x = rng.normal(size=(4, 8, 8))
    coefficients = haar2d(x)
    np.testing.assert_allclose((coefficients**2).sum(axis=(1, 2)), (x**2).sum(axis=(1, 2)))
    np.testing.assert_allclose(inverse_haar2d(coefficients), x, atol=1e-12)
    np.testing.assert_allclose(haar2d(np.ones((1, 8, 8)))[0, 0, 0], 8.0)  # DC = 8 × mean
    pairs = [g for g in tree_groups(8) if len(g) == 2]
    assert len(pairs) == 63 and sorted(int(g[1]) for g in pairs) == list(range(1, 64))


def test_perturb_and_map_bound_is_above_the_discretised_log_partition(rng):
    """Â_G >= log Σ_z π_z exp(−f(u_z)) on a small model, exact by enumeration (thesis §4.4.1)."""
    clean = rng.laplace(scale=1.5, size=(50, 3))
    model = ContinuousLogSupermodularDenoiser(
        groups=[[0], [1], [2], [0, 1], [1, 2, 0]], grid_step=0.5, max_iter=5, random_state=0
    ).fit(clean)
    model.group_weights_ = np.array([0.3, 0.5, 0.2, 0.4, 0.6])
    levels = model._levels()
    n_levels, values, log_weights = levels.n_levels, levels.values, levels.log_weights
    exact = logsumexp(
        [
            log_weights[np.arange(3), z].sum()
            - model._group_max(values[np.array(z)]) @ model.group_weights_
            for z in itertools.product(*[range(r) for r in n_levels])
        ]
    )
    _, maxima = model._perturbed_prior(
        np.random.default_rng(0), 4000, model.group_weights_, model._levels()
    )
    standard_error = maxima.std() / np.sqrt(len(maxima))
    assert maxima.mean() > exact - 3 * standard_error
    assert maxima.mean() < exact + 5.0  # and not absurdly loose


def test_learning_recovers_the_weights_of_a_known_prior():
    rng = np.random.default_rng(3)
    scales = np.array([0.5, 1.0, 2.0])  # d = 2, 1, 0.5
    clean = rng.laplace(scale=scales, size=(4000, 3))
    model = ContinuousLogSupermodularDenoiser(grid_step=0.05, max_iter=200, random_state=0)
    model.fit(clean)
    np.testing.assert_allclose(model.group_weights_, 1.0 / scales, rtol=0.1)


def test_learning_finds_the_coupling_of_correlated_coordinates():
    """Pairs that move together earn a group weight, independent ones do not."""
    rng = np.random.default_rng(4)
    shared = rng.laplace(scale=2.0, size=(3000, 1))
    clean = np.column_stack(
        [shared + 0.1 * rng.normal(size=(3000, 2)), rng.laplace(scale=2.0, size=(3000, 1))]
    )
    model = ContinuousLogSupermodularDenoiser(
        groups=[[0], [1], [2], [0, 1], [1, 2]], grid_step=0.1, max_iter=150, random_state=0
    ).fit(clean)
    d = model.group_weights_
    assert d[3] > 0.2 and d[3] > 3 * d[4]


def test_mmse_beats_map_on_the_one_dimensional_problem():
    """Table 4.1's setting: prior e^{−|α|}, σ = 1; MMSE has the lower squared error."""
    rng = np.random.default_rng(5)
    clean = rng.laplace(size=(3000, 1))
    noisy = clean + rng.normal(size=clean.shape)
    model = ContinuousLogSupermodularDenoiser(
        grid_step=0.05, noise_std=1.0, n_perturbations=50, random_state=0
    ).fit(rng.laplace(size=(3000, 1)))
    errors = {
        decoding: np.mean((model.predict(noisy, decoding=decoding) - clean) ** 2)
        for decoding in ("continuous_map", "map", "mmse")
    }
    assert errors["mmse"] < errors["continuous_map"] - 0.03
    assert errors["map"] == pytest.approx(errors["continuous_map"], abs=0.01)
    assert errors["continuous_map"] < np.mean((noisy - clean) ** 2)


def test_fine_levels_approach_the_continuous_map(rng):
    clean = rng.laplace(scale=3.0, size=(200, 4, 4))
    noisy = clean + rng.normal(size=clean.shape)
    model = ContinuousLogSupermodularDenoiser(
        groups="grid", grid_step=0.05, noise_std=1.0, max_iter=20, random_state=0
    ).fit(clean)
    exact = model.predict(noisy[:20], decoding="continuous_map")
    discrete = model.predict(noisy[:20], decoding="map")
    assert np.abs(exact - discrete).max() <= 0.05 + 1e-9


def test_grid_prior_denoises_image_patches():
    """A learned grid prior on centred patches beats the noisy input and the unary prior."""
    rng = np.random.default_rng(6)
    ramp = np.linspace(0, 40, 8)
    clean = ramp[None, :, None] * rng.choice([-1, 1], size=(400, 1, 1)) + np.zeros((1, 8, 8))
    clean += 10.0 * rng.normal(size=(400, 1, 1))
    noisy = clean + 5.0 * rng.normal(size=clean.shape)
    scores = {}
    for groups in ("unary", "grid"):
        model = ContinuousLogSupermodularDenoiser(
            groups=groups,
            center=True,
            grid_step=1.0,
            noise_std=5.0,
            decoding="continuous_map",
            max_iter=40,
            random_state=0,
        ).fit(clean[:300])
        scores[groups] = model.score(noisy[300:], clean[300:])
    noisy_snr = 20 * np.log10(np.linalg.norm(clean[300:]) / np.linalg.norm((noisy - clean)[300:]))
    assert scores["grid"] > scores["unary"] and scores["grid"] > noisy_snr


def test_bad_input_gets_clear_errors(rng):
    X = rng.normal(size=(10, 4, 4))
    with pytest.raises(ValueError, match="set basis='haar'"):
        ContinuousLogSupermodularDenoiser(groups="tree").fit(X)
    with pytest.raises(ValueError, match="side 2\\^L"):
        ContinuousLogSupermodularDenoiser(basis="haar").fit(rng.normal(size=(10, 3, 3)))
    with pytest.raises(ValueError, match="need image patches"):
        ContinuousLogSupermodularDenoiser(groups="grid").fit(rng.normal(size=(10, 5)))
    with pytest.raises(ValueError, match="outside \\[0, 16\\)"):
        ContinuousLogSupermodularDenoiser(groups=[[0, 16]]).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        ContinuousLogSupermodularDenoiser().fit(np.full((3, 4), np.nan))
    model = ContinuousLogSupermodularDenoiser(max_iter=2).fit(X)
    with pytest.raises(ValueError, match="set noise_std"):
        model.predict(X)
    with pytest.raises(ValueError, match="X has 9 features, but"):
        model.set_params(noise_std=1.0).predict(rng.normal(size=(2, 3, 3)))
    with pytest.raises(ValueError, match="unknown decoding"):
        model.predict(X, decoding="median")


#: scikit-learn checks that cannot pass: ``score(X, y)`` takes the clean signals as y (same
#: shape as X), not one target per row.
SCORE_TAKES_CLEAN_SIGNALS = {"check_fit_score_takes_y", "check_pipeline_consistency"}


def test_scikit_learn_estimator_checks():
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(
            ContinuousLogSupermodularDenoiser(noise_std=1.0, max_iter=3, n_perturbations=5),
            on_fail=None,
        )
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed == SCORE_TAKES_CLEAN_SIGNALS
