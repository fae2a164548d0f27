"""ContinuousLogSupermodularDenoiser: learning, decoding, whole photos."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import ContinuousLogSupermodularDenoiser
from pmap_sklearn._backend import level_tree
from pmap_sklearn._optim.defaults import SURE_SCALES
from pmap_sklearn.denoisers import _decoding
from pmap_sklearn.denoisers._haar import haar2d, inverse_haar2d, tree_groups
from pmap_sklearn.denoisers._sure import sure_scale


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


def _images(rng, shapes, noise=0.0):
    """Piecewise-constant images (blocks of random grey levels) plus Gaussian noise."""
    images = []
    for h, w in shapes:
        blocks = rng.uniform(0, 100, size=(h // 5 + 2, w // 5 + 2))
        top, left = rng.integers(5, size=2)  # not aligned with the patches
        image = np.kron(blocks, np.ones((5, 5)))[top : top + h, left : left + w]
        images.append(image + noise * rng.normal(size=(h, w)))
    return images


def _tree_model_of_images(train):
    """The Haar-tree prior of the 4×4 patches of ``train``, decoding noise of σ = 12."""
    return ContinuousLogSupermodularDenoiser(
        groups="tree",
        basis="haar",
        patch_size=4,
        noise_std=12.0,
        decoding="continuous_map",
        max_iter=30,
        random_state=0,
    ).fit(train)


def test_whole_images_are_denoised_by_averaged_overlapping_patches(rng):
    train = _images(rng, [(40, 36), (33, 48)])
    clean = _images(rng, [(24, 20), (19, 27)])
    noisy = [image + 12.0 * rng.normal(size=image.shape) for image in clean]
    model = _tree_model_of_images(train).set_params(prior_scale=1.0)  # one prior for all
    assert model.patch_shape_ == (4, 4)
    denoised = model.predict(noisy)
    assert isinstance(denoised, list) and [d.shape for d in denoised] == [(24, 20), (19, 27)]
    # one image in, one image out; a stack in, a stack out
    assert model.predict(noisy[0]).shape == (24, 20)
    stacked = model.predict(np.stack([noisy[0], noisy[0]]))
    assert stacked.shape == (2, 24, 20) and np.allclose(stacked[1], denoised[0])
    # every pixel is the mean of the estimates of the patches covering it
    signals = ContinuousLogSupermodularDenoiser(
        **{k: v for k, v in model.get_params().items() if k not in ("patch_size", "max_patches")}
    )
    vars(signals).update({k: v for k, v in vars(model).items() if k.endswith("_")})
    windows = np.lib.stride_tricks.sliding_window_view(noisy[1], (4, 4))
    estimates = signals.predict(windows.reshape(-1, 4, 4)).reshape(windows.shape)
    total, count = np.zeros((19, 27)), np.zeros((19, 27))
    for i, j in itertools.product(range(16), range(24)):
        total[i : i + 4, j : j + 4] += estimates[i, j]
        count[i : i + 4, j : j + 4] += 1
    assert np.allclose(denoised[1], total / count)
    # overlapping patches beat tiles, and both beat the noisy input
    clean_all = np.concatenate([c.ravel() for c in clean])

    def snr(images):
        flat = np.concatenate([i.ravel() for i in images])
        return 20 * np.log10(np.linalg.norm(clean_all) / np.linalg.norm(flat - clean_all))

    overlapping = model.score(noisy, clean)
    assert np.isclose(overlapping, snr(denoised))
    tiles = model.set_params(patch_stride=4).score(noisy, clean)
    assert snr(noisy) + 2.0 < tiles < overlapping - 1.0


def test_whole_image_decodings_and_patch_sampling(rng):
    train = _images(rng, [(20, 20)] * 3)
    model = ContinuousLogSupermodularDenoiser(
        patch_size=(2, 3),
        patch_stride=2,
        max_patches=17,
        noise_std=5.0,
        max_iter=10,
        n_perturbations=3,
        random_state=0,
    )
    picked = model._training_signals(train, np.random.default_rng(0))
    assert picked.shape == (17, 2, 3)
    windows = [np.lib.stride_tricks.sliding_window_view(i, (2, 3)).reshape(-1, 2, 3) for i in train]
    pool = np.concatenate(windows)
    assert all(np.isclose(pool, patch).all(axis=(1, 2)).any() for patch in picked)
    model.fit(train)
    noisy = _images(rng, [(9, 11)], noise=5.0)[0]
    for decoding in ("map", "mmse", "continuous_map"):
        out = model.predict(noisy, decoding=decoding)
        assert out.shape == (9, 11) and np.isfinite(out).all()


def test_level_decodings_of_a_tree_prior_do_not_depend_on_n_jobs(rng, monkeypatch):
    """Chunks decoded in threads, each with its own random stream; the level MAP of the tree
    prior (dynamic programming) is the one of the cuts."""
    train = _images(rng, [(24, 24)] * 2)
    noisy = _images(rng, [(14, 17)], noise=12.0)[0]
    model = _tree_model_of_images(train).set_params(n_perturbations=4)
    monkeypatch.setattr(_decoding, "CHUNK_COSTS", 4000)  # several chunks
    assert len(model._chunks(np.zeros((200, 16)), "mmse")) > 1
    mmse = [model.set_params(n_jobs=n).predict(noisy, decoding="mmse") for n in (1, 2, 1)]
    assert np.array_equal(mmse[0], mmse[1]) and np.array_equal(mmse[0], mmse[2])
    level_map = model.predict(noisy, decoding="map")
    with monkeypatch.context() as patch:
        patch.setattr(level_tree.LevelTree, "from_groups", classmethod(lambda *args: None))
        assert np.array_equal(model.predict(noisy, decoding="map"), level_map)


def _all_sure_scales():
    """Every factor ``prior_scale="sure"`` may try: the grid and the half-way points."""
    return np.exp2(np.arange(2 * np.log2(SURE_SCALES[0]), 2 * np.log2(SURE_SCALES[-1]) + 2) / 2)


def test_sure_picks_the_soft_threshold_of_least_error(rng):
    """Stein's estimate with a Monte-Carlo divergence ranks soft thresholds as their true error."""
    clean = rng.laplace(scale=1.0, size=20000) * (rng.random(20000) < 0.2)
    for sigma in (0.5, 2.0):
        noisy = clean + sigma * rng.normal(size=clean.shape)

        def soft(y, weights):
            return np.sign(y) * np.maximum(np.abs(y) - weights[0], 0.0)

        def soft_both(inputs, weights):
            return [soft(y, weights) for y in inputs]

        chosen = sure_scale(soft_both, noisy, sigma**2, np.array([sigma]), rng)
        errors = {s: np.mean((soft(noisy, [s * sigma]) - clean) ** 2) for s in _all_sure_scales()}
        assert np.isclose(list(errors), chosen).any()
        assert np.mean((soft(noisy, [chosen * sigma]) - clean) ** 2) <= 1.02 * min(errors.values())


def _assert_sure_adapts_to_sparsity(model, rng, cases, n_signals, tolerance):
    """Test signals sparser (denser) than the training ones — Laplace of a smaller (larger)
    ``scale`` — need a stronger (weaker) prior. For each ``(scale, direction)`` of ``cases``:
    ``prior_scale="sure"`` errs within ``tolerance`` of the best factor tried and less than
    the learned prior, and that best factor lies above 1 (direction 1) or below (−1)."""
    for scale, direction in cases:
        clean = rng.laplace(scale=scale, size=(n_signals, 2))
        noisy = clean + rng.normal(size=clean.shape)
        errors = {
            s: np.mean((model.set_params(prior_scale=s).predict(noisy) - clean) ** 2)
            for s in _all_sure_scales()
        }
        error = np.mean((model.set_params(prior_scale="sure").predict(noisy) - clean) ** 2)
        assert error <= tolerance * min(errors.values())
        assert error < errors[1.0] and np.sign(min(errors, key=errors.get) - 1.0) == direction


def test_prior_scale_multiplies_the_prior_and_sure_adapts_it_to_the_test_data(rng):
    model = ContinuousLogSupermodularDenoiser(
        grid_step=0.05, noise_std=1.0, max_iter=50, random_state=0
    ).fit(rng.laplace(scale=2.0, size=(3000, 2)))
    noisy = rng.laplace(scale=2.0, size=(50, 2)) + rng.normal(size=(50, 2))
    doubled = ContinuousLogSupermodularDenoiser(**model.get_params())
    vars(doubled).update({k: v for k, v in vars(model).items() if k.endswith("_")})
    doubled.group_weights_ = 2.0 * model.group_weights_
    for decoding in ("continuous_map", "map"):
        expected = doubled.predict(noisy, decoding=decoding)
        model.set_params(prior_scale=2.0)
        np.testing.assert_allclose(model.predict(noisy, decoding=decoding), expected)
    model.set_params(decoding="continuous_map")
    _assert_sure_adapts_to_sparsity(model, rng, ((1.0, 1), (4.0, -1)), 20000, 1.02)
    # the chosen factor serves the level decodings too
    model.set_params(prior_scale="sure")
    assert np.isfinite(model.predict(noisy[:10], decoding="map")).all()


@pytest.mark.parametrize("decoding", ["continuous_map", "mmse"])
def test_sure_prior_scale_on_whole_images(rng, decoding):
    """The factor of each decoding's own risk (the MMSE's on non-overlapping patches) is one
    of those tried, within 0.5 dB of the best of them."""
    train = _images(rng, [(40, 36), (33, 48)])
    clean = _images(rng, [(32, 30)])[0]
    noisy = clean + 12.0 * rng.normal(size=clean.shape)
    model = _tree_model_of_images(train).set_params(decoding=decoding, n_perturbations=10)
    scores = {s: model.set_params(prior_scale=s).score(noisy, clean) for s in _all_sure_scales()}
    chosen = model.set_params(prior_scale="sure").score(noisy, clean)
    assert np.isclose(list(scores.values()), chosen).any()  # one of the factors tried
    assert chosen >= max(scores.values()) - 0.5
    assert model.predict([noisy, noisy[:20]])[1].shape == (20, 30)
    with pytest.raises(ValueError, match="prior_scale"):
        model.set_params(prior_scale=0.0).predict(noisy)


def test_default_prior_scale_is_sure_on_photos_and_one_on_signals(rng):
    """``prior_scale="auto"``: Stein's choice on whole images, the learned prior on signals."""
    train = _images(rng, [(40, 36), (33, 48)])
    noisy = _images(rng, [(32, 30)])[0] + 12.0 * rng.normal(size=(32, 30))
    photos = _tree_model_of_images(train)
    assert photos.prior_scale == "auto"
    np.testing.assert_array_equal(
        photos.predict(noisy), photos.set_params(prior_scale="sure").predict(noisy)
    )
    signals = ContinuousLogSupermodularDenoiser(
        grid_step=0.05, noise_std=1.0, max_iter=20, random_state=0
    ).fit(rng.laplace(scale=2.0, size=(500, 2)))
    noisy = rng.normal(size=(20, 2))
    np.testing.assert_array_equal(
        signals.predict(noisy), signals.set_params(prior_scale=1.0).predict(noisy)
    )


def test_mmse_posterior_variance_is_exact_on_independent_coefficients(rng):
    """One group per coefficient: the perturbed MAPs are exact posterior samples, so their
    mean and variance match the discretised posterior's, enumerated level by level."""
    model = ContinuousLogSupermodularDenoiser(
        grid_step=0.25, noise_std=1.0, n_perturbations=4000, max_iter=20, random_state=0
    ).fit(rng.laplace(scale=2.0, size=(2000, 3)))
    y = np.array([[0.3, -2.5, 6.0], [-1.0, 0.0, 3.0]])
    weights = model.group_weights_
    alpha, variance = model._decode(y, "mmse", 1.0, weights)
    levels = model._levels(1.0)
    for i in range(3):
        u = levels.values[: levels.n_levels[i]]
        signed = np.concatenate([-u[::-1], u])  # both signs of every magnitude
        log_weights = levels.log_weights[i, : len(u)]
        log_prior = np.concatenate([log_weights[::-1], log_weights]) - weights[i] * np.abs(signed)
        for n in range(2):
            log_p = log_prior - (signed - y[n, i]) ** 2 / 2.0
            p = np.exp(log_p - logsumexp(log_p))
            mean = p @ signed
            exact_variance = p @ signed**2 - mean**2
            assert alpha[n, i] == pytest.approx(mean, abs=4 * np.sqrt(exact_variance / 4000))
            assert variance[n, i] == pytest.approx(exact_variance, rel=0.1)


def test_sure_scale_of_the_mmse_follows_its_own_risk(rng):
    """``prior_scale="sure"`` with the MMSE: Stein's estimate with the posterior variance as
    divergence (Tweedie's formula) ranks the factors as the MMSE's true error does."""
    model = ContinuousLogSupermodularDenoiser(
        grid_step=0.2, noise_std=1.0, n_perturbations=20, max_iter=50, random_state=0
    ).fit(rng.laplace(scale=2.0, size=(3000, 2)))
    model.set_params(decoding="mmse")
    _assert_sure_adapts_to_sparsity(model, rng, ((0.7, 1), (5.0, -1)), 1000, 1.03)


def test_auto_grid_step_follows_the_scale_and_bad_scales_get_clear_errors(rng):
    clean = rng.laplace(scale=2.0, size=(300, 4))
    noisy = clean + rng.normal(size=clean.shape)
    model = ContinuousLogSupermodularDenoiser(noise_std=1.0, max_iter=20, random_state=0)
    model.fit(clean)
    for scale in (1e-8, 1e8):  # the same model in other units
        scaled = ContinuousLogSupermodularDenoiser(noise_std=scale, max_iter=20, random_state=0)
        scaled.fit(clean * scale)
        assert np.isclose(scaled.grid_step_, model.grid_step_ * scale)
        assert np.allclose(scaled.group_weights_ * scale, model.group_weights_)
        for decoding in ("map", "continuous_map"):
            assert np.allclose(
                scaled.predict(noisy * scale, decoding=decoding) / scale,
                model.predict(noisy, decoding=decoding),
            )
    with pytest.raises(ValueError, match="grid_step=1e-07 gives .* more than 4096: use a larger"):
        ContinuousLogSupermodularDenoiser(grid_step=1e-7).fit(clean)
    with pytest.raises(ValueError, match="noise_std=1e-200 is out of float64's range"):
        model.set_params(noise_std=1e-200).predict(noisy)
    with pytest.raises(ValueError, match="overflow float64"):
        ContinuousLogSupermodularDenoiser(basis="haar").fit(np.full((3, 4, 4), 1e308))


def test_a_failed_refit_leaves_the_model_as_it_was_and_a_zero_prior_warns(rng):
    clean = rng.laplace(scale=2.0, size=(200, 4))
    model = ContinuousLogSupermodularDenoiser(max_iter=10, random_state=0).fit(clean)
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in vars(model).items()}
    with pytest.raises(ValueError, match="more than 4096"):
        model.set_params(grid_step=1e-6).fit(clean * 100)
    assert vars(model).keys() == before.keys()
    assert np.array_equal(model.group_weights_, before["group_weights_"])
    assert np.array_equal(model.domain_, before["domain_"])
    with pytest.warns(ConvergenceWarning, match="the learned prior is all zero"):
        ContinuousLogSupermodularDenoiser(max_iter=10, random_state=0).fit(clean[:1])


def test_whole_image_bad_input_gets_clear_errors(rng):
    model = ContinuousLogSupermodularDenoiser(patch_size=4, noise_std=1.0, max_iter=2)
    with pytest.raises(ValueError, match="smaller than one patch"):
        model.fit([rng.normal(size=(10, 10)), rng.normal(size=(3, 10))])
    with pytest.raises(ValueError, match="one 2-D image, a 3-D stack"):
        model.fit(rng.normal(size=(2, 2, 5, 5)))
    with pytest.raises(ValueError, match="holds no image"):
        model.fit([])
    with pytest.raises(ValueError, match="patch_size must be an int or a pair"):
        model.set_params(patch_size=(4, 0)).fit([rng.normal(size=(10, 10))])
    model.set_params(patch_size=4).fit([rng.normal(size=(10, 10))])
    with pytest.raises(ValueError, match="y's images have shapes"):
        model.score([rng.normal(size=(8, 8))], [rng.normal(size=(8, 9))])
    with pytest.raises(ValueError, match="NaN"):
        model.predict(np.full((6, 6), np.nan))


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


def test_auto_settings_follow_what_the_input_is(rng):
    """With a patch size the defaults are the user guide's whole-photo setting (Haar quad-tree
    prior, continuous MAP, at most 40,000 training patches); on signals the thesis's (one
    group per pixel, level MAP)."""
    image = rng.normal(size=(24, 24)).cumsum(axis=0).cumsum(axis=1)
    photo = ContinuousLogSupermodularDenoiser(
        patch_size=8, noise_std=1.0, max_iter=5, random_state=0
    )
    photo.fit(image)
    assert (photo.basis_, photo.group_kind_) == ("haar", "tree")
    assert len(photo.groups_) == len(tree_groups(8))
    noisy = image + rng.normal(size=image.shape)
    np.testing.assert_array_equal(
        photo.predict(noisy), photo.predict(noisy, decoding="continuous_map")
    )
    odd = ContinuousLogSupermodularDenoiser(patch_size=6, noise_std=1.0, max_iter=5).fit(image)
    assert (odd.basis_, odd.group_kind_) == ("identity", "grid")
    signals = ContinuousLogSupermodularDenoiser(noise_std=1.0, max_iter=5)
    signals.fit(rng.laplace(size=(50, 4)))
    assert (signals.basis_, signals.group_kind_) == ("identity", "unary")
    X = rng.laplace(size=(5, 4))
    np.testing.assert_array_equal(signals.predict(X), signals.predict(X, decoding="map"))
    documented = ContinuousLogSupermodularDenoiser(
        groups="tree",
        basis="haar",
        patch_size=8,
        max_patches=40_000,
        noise_std=1.0,
        decoding="continuous_map",
        max_iter=5,
        random_state=0,
    ).fit(image)  # the whole-photo benchmark's setting: the same prior and the same output
    np.testing.assert_array_equal(documented.group_weights_, photo.group_weights_)
    np.testing.assert_array_equal(documented.predict(noisy), photo.predict(noisy))
    many = rng.normal(size=(240, 240))  # 54,289 patches: 40,000 drawn
    sampled = ContinuousLogSupermodularDenoiser(patch_size=8, max_iter=1, random_state=0)
    assert len(sampled._training_signals(many, np.random.default_rng(0))) == 40_000


RNG = np.random.default_rng(0)
PHOTO = RNG.random((24, 24))


def _photo_model(**params):
    defaults = dict(patch_size=4, noise_std=0.1, max_iter=3, random_state=0)
    return ContinuousLogSupermodularDenoiser(**{**defaults, **params})


# ---- whole photos ------------------------------------------------------------------------------
@pytest.mark.parametrize("stride", [5, 7])
def test_a_stride_beyond_the_patch_is_refused(stride):
    """Patches 4 apart at stride 5 leave pixels no patch covers (they came out NaN)."""
    with pytest.raises(ValueError, match=f"patch_stride={stride} is larger than the 4×4"):
        _photo_model(patch_stride=stride).fit([PHOTO])
    model = _photo_model().fit([PHOTO]).set_params(patch_stride=stride)
    with pytest.raises(ValueError, match="at most 4"):
        model.predict(PHOTO)


@pytest.mark.parametrize("size", [2, 3])
def test_sure_on_small_patches_covers_the_image(size):
    """The SURE factor's sparser patches must still cover the photo (they left gaps: NaN
    risks and a factor picked from them)."""
    model = _photo_model(patch_size=size, prior_scale="sure").fit([PHOTO])
    noisy = PHOTO + 0.1 * RNG.normal(size=PHOTO.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's "invalid value" included
        denoised = model.predict(noisy)
    assert np.isfinite(denoised).all()
    assert np.mean((denoised - PHOTO) ** 2) < np.mean((noisy - PHOTO) ** 2)


def test_a_colour_image_is_refused():
    model = _photo_model().fit([PHOTO])
    colour = RNG.random((24, 24, 3))
    for call in (model.predict, _photo_model().fit):
        with pytest.raises(ValueError, match="colour image.*rgb2gray"):
            call(colour)
    assert model.predict(list(colour.transpose(2, 0, 1)))[0].shape == (24, 24)  # channel-wise


@pytest.mark.parametrize("scale", [1e20, 1e150])
def test_the_map_decoding_clips_huge_inputs_like_the_others(scale):
    """Scaled far beyond the domain U, every decoding returns ±U (the MAP returned 0: its
    levels' squared distances tied in float64)."""
    signals = RNG.normal(size=(300, 4))
    model = ContinuousLogSupermodularDenoiser(noise_std=0.5, max_iter=10, random_state=0)
    model.fit(signals)
    noisy = signals[:5] * scale
    for decoding in ("map", "mmse", "continuous_map"):
        np.testing.assert_allclose(
            model.predict(noisy, decoding=decoding), np.sign(noisy) * model.domain_
        )


def test_a_grid_step_coarser_than_the_domain_is_refused():
    """All levels but 0 beyond the data: every coefficient decoded as 0, silently."""
    signals = RNG.normal(size=(100, 4))
    with pytest.raises(ValueError, match="grid_step=1000000000.0 is larger than the largest"):
        ContinuousLogSupermodularDenoiser(noise_std=0.5, grid_step=1e9).fit(signals)
    model = ContinuousLogSupermodularDenoiser(noise_std=0.5, max_iter=5).fit(signals)
    with pytest.raises(ValueError, match="grid_step='auto'"):
        model.set_params(grid_step=1e6).predict(signals)


def test_the_prior_learns_at_any_scale_of_the_data():
    """Signals ×1e200 learn the same prior (in their units) instead of d = 0 with a warning
    that blamed the sample count (AdaGrad's sum of squares overflowed)."""
    signals = RNG.normal(size=(200, 4))
    model = ContinuousLogSupermodularDenoiser(noise_std=0.5, max_iter=20, random_state=0)
    unit = model.fit(signals).group_weights_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        scaled = model.set_params(noise_std=0.5e200).fit(signals * 1e200).group_weights_
    np.testing.assert_allclose(scaled * 1e200, unit, rtol=1e-9)


def test_signals_at_the_edge_of_float64_are_refused_with_the_denoisers_own_remedy():
    """×1e307 overflows: the error names the signals' scale and this estimator's parameters
    (not an SGD learner's eta0), with no numpy warning on the way."""
    model = ContinuousLogSupermodularDenoiser(noise_std=1e307, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="rescale the signals \\(and noise_std\\)") as error:
            model.fit(RNG.normal(size=(50, 4)) * 1e307)
    assert "eta0" not in str(error.value)


def test_an_overflowing_noise_std_is_named():
    model = ContinuousLogSupermodularDenoiser(noise_std=1.0, max_iter=5).fit(
        RNG.normal(size=(50, 4))
    )
    with pytest.raises(ValueError, match="noise_std=1e\\+200 is out of float64's range"):
        model.set_params(noise_std=1e200).predict(RNG.normal(size=(3, 4)))


def test_ragged_groups_are_named():
    with pytest.raises(ValueError, match="group 0 must be a non-empty sequence of int"):
        ContinuousLogSupermodularDenoiser(groups=[[0, [1, 2]], [3]], noise_std=1).fit(
            RNG.normal(size=(50, 4))
        )


# ---- property tests -------------------------------------------------------------------------
FITTED = {size: _photo_model(patch_size=size).fit([PHOTO]) for size in (2, 4)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.sampled_from([2, 4]),
    stride=st.integers(1, 6),
    height=st.integers(1, 30),
    width=st.integers(1, 30),
    scale=st.sampled_from([1e-3, 1.0, 1e3, 1e6]),
    dtype=st.sampled_from([np.float64, np.float32, np.uint8, np.int16]),
)
def test_whole_photo_path_is_finite_or_refused(size, stride, height, width, scale, dtype):
    """Any shape, stride, scale and dtype: a finite photo of the input's shape, or a
    ValueError that names the problem."""
    model = FITTED[size].set_params(patch_stride=stride)
    image = np.random.default_rng(height * 31 + width).random((height, width)) * scale
    image = image.astype(dtype)
    try:
        denoised = model.predict(image)
    except ValueError as error:
        assert any(
            words in str(error)
            for words in ("patch_stride", "smaller than one patch", "out of float64")
        ), error
        return
    assert denoised.shape == image.shape and np.isfinite(denoised).all()
