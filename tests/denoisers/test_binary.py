"""LogSupermodularDenoiser: gradients, parameter recovery, denoising, the scikit-learn contract."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from pmap_sklearn import LogSupermodularDenoiser, Potentials, _parallel
from pmap_sklearn._backend import GraphCutSolver
from pmap_sklearn.bounds import log_partition_exact
from pmap_sklearn.datasets import add_flip_noise
from pmap_sklearn.denoisers.binary import FlipChannelGrid, _marginal_oracle, _signs
from pmap_sklearn.learners.perturb_map import perturb_and_map_oracle
from pmap_sklearn.perturbation import draw

from ..helpers import _assert_chunking_invariant, blobs


def grid_model(gain, cut_weights):
    """The denoiser's posterior as (unary, edges, Potts weights), built by hand."""
    height, width = gain.shape
    ids = np.arange(gain.size).reshape(gain.shape)
    edges = np.concatenate(
        [
            np.column_stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()]),
            np.column_stack([ids[:-1, :].ravel(), ids[1:, :].ravel()]),
        ]
    )
    weights = np.concatenate(
        [
            np.full(height * (width - 1), -cut_weights[0]),
            np.full((height - 1) * width, -cut_weights[1]),
        ]
    )
    return np.column_stack([np.zeros(gain.size), gain.ravel()]), edges, weights


def denoiser_with(field, cut_weights, noise_level, **params):
    """A fitted shared-field denoiser whose parameters are set to the given ones."""
    model = LogSupermodularDenoiser(field="shared", max_iter=1, random_state=0, **params)
    model.fit(np.zeros((1, 2, 2), dtype=int))
    u = np.log(noise_level / (1 - noise_level))
    model.coef_ = np.array([field, u, -cut_weights[0], -cut_weights[1]])
    return model


def perturbed_posterior_maps(model, noisy, rng):
    """One logistic-perturbed posterior MAP per image, by the graph-cut solver."""
    potentials = model.potentials(noisy)
    perturbation = draw(rng, potentials.n_nodes, 2, "logistic")
    labels = GraphCutSolver().map(potentials.add_unary(perturbation))
    return np.stack(model.structure_.prepare(_signs(list(noisy))).split(labels))


def test_map_is_exact_and_parameters_round_trip(rng):
    for _ in range(5):
        noisy = rng.integers(0, 2, size=(1, 3, 4))
        field, cut_weights = rng.normal(), rng.exponential(1.0, size=2)
        model = denoiser_with(field, cut_weights, 0.2)
        assert model.field_ == field and model.noise_level_ == pytest.approx(0.2)
        np.testing.assert_array_equal(model.cut_weights_, cut_weights)
        gain = field + np.log(0.2 / 0.8) * (1 - 2 * noisy[0])
        unary, edges, weights = grid_model(gain, cut_weights)
        best = max(
            (np.array(bits) for bits in np.ndindex(*([2] * 12))),
            key=lambda y: (
                unary[np.arange(12), y].sum() + weights @ (y[edges[:, 0]] != y[edges[:, 1]])
            ),
        )
        np.testing.assert_array_equal(model.predict(noisy)[0].ravel(), best)
        by_hand = Potentials(unary, edges, weights)
        posterior = model.potentials(noisy)
        for bits in [best, 1 - best, rng.integers(0, 2, 12)]:
            assert posterior.score(bits)[0] == pytest.approx(by_hand.score(bits)[0])


@pytest.mark.parametrize("supervised", [True, False])
@pytest.mark.parametrize("field", ["pixel", "shared"])
def test_stochastic_gradient_matches_finite_differences(rng, supervised, field):
    """With the perturbations fixed, the objective estimate is piecewise linear in the weights
    ``[t, u, -α_h, -α_v]``; its finite differences equal the returned gradient."""
    clean = blobs(rng, 4, shape=(5, 6))
    noisy = add_flip_noise(clean, 0.2, random_state=rng)
    images, truth = list(noisy), list(clean)
    if field == "shared":  # a shared field allows images of several shapes
        images[2:] = [z[:4] for z in images[2:]]
        truth = truth[:2] + [x[:4] for x in truth[2:]]
    structure = FlipChannelGrid(clean.shape[1:] if field == "pixel" else None)
    structure.fit(_signs(images[:1]))
    batch = structure.prepare(_signs(images))
    per_pixel = 1.0 / batch.lengths
    if supervised:
        labels = np.concatenate([x.ravel() for x in truth]).astype(np.intp)
        oracle = perturb_and_map_oracle(structure, batch, labels, "logistic", per_pixel)
    else:
        flips = np.concatenate([z.ravel() for z in images]).astype(float)
        oracle = _marginal_oracle(structure, batch, flips, per_pixel)
    w = np.zeros(structure.size_)
    w[: structure.n_field] = rng.normal(scale=0.5, size=structure.n_field)
    w[structure.n_field :] = [np.log(0.2 / 0.8), -0.7, -0.4]

    def estimate(v):
        return oracle(np.arange(4), v, np.random.default_rng(7))

    gradient, _ = estimate(w)
    step = 1e-6
    for i in list(range(structure.n_field, structure.size_)) + list(
        range(min(5, structure.n_field))
    ):
        shift = np.zeros_like(w)
        shift[i] = step
        numeric = (estimate(w + shift)[1] - estimate(w - shift)[1]) / (2 * step)
        assert gradient[i] == pytest.approx(numeric, rel=1e-4, abs=1e-6), i


def test_recovers_known_parameters_from_model_samples(rng):
    """Data drawn from the perturb-and-MAP model itself: the logistic-bound likelihood is
    consistent for it (moment matching), so the fit must recover α and t (within 10 %)."""
    cut_weights, field, noise = np.array([0.8, 0.4]), -0.3, 0.2
    noisy = rng.integers(0, 2, size=(120, 10, 10))
    clean = perturbed_posterior_maps(denoiser_with(field, cut_weights, noise), noisy, rng)
    model = LogSupermodularDenoiser(
        field="shared",
        noise_level=noise,
        alpha_field=0.0,
        alpha_cut=0.0,
        max_iter=25,
        random_state=0,
    ).fit(noisy, clean)
    assert model.cut_weights_ == pytest.approx(cut_weights, rel=0.1)
    assert model.field_ == pytest.approx(field, abs=0.05)
    learned = LogSupermodularDenoiser(
        field="shared", alpha_field=0.0, alpha_cut=0.0, max_iter=25, random_state=0
    ).fit(noisy, clean)
    assert learned.noise_level_ == pytest.approx(noise, abs=0.02)


def test_supervised_denoising_beats_the_noise_and_mean_decoding_agrees(rng):
    clean = blobs(rng, 60)
    noisy = add_flip_noise(clean, 0.1, random_state=rng)
    model = LogSupermodularDenoiser(
        noise_level=0.1, max_iter=15, n_perturbations=30, random_state=0
    ).fit(noisy[:40], clean[:40])
    test_noise = np.mean(noisy[40:] != clean[40:])
    map_error = np.mean(model.predict(noisy[40:]) != clean[40:])
    mean_error = np.mean(model.predict(noisy[40:], decoding="marginal") != clean[40:])
    assert map_error < 0.5 * test_noise
    assert mean_error < 0.5 * test_noise
    assert model.score(noisy[40:], clean[40:]) == pytest.approx(1 - map_error)
    assert model.cut_weights_.min() > 0
    assert model.loss_curve_[-1] < model.loss_curve_[0]


def test_marginals_estimate_the_perturb_and_map_distribution(rng):
    """predict_marginals is the frequency of each label among logistic-perturbed posterior MAPs:
    compare with an independent Monte Carlo, and with the exact sigmoid when nothing couples
    the pixels (then perturbed MAPs are exact samples)."""
    model = denoiser_with(0.1, [0.6, 0.3], 0.2, n_perturbations=4000)
    noisy = np.array([[[1, 0, 1], [1, 1, 0]]])
    marginals = model.predict_marginals(noisy)[0]
    assert marginals.shape == (2, 3, 2)
    np.testing.assert_allclose(marginals.sum(-1), 1.0)
    draws = np.mean([perturbed_posterior_maps(model, noisy, rng)[0] for _ in range(4000)], axis=0)
    assert marginals[..., 1] == pytest.approx(draws, abs=0.04)
    gain = 0.1 + np.log(0.2 / 0.8) * (1 - 2 * noisy[0])
    separable = denoiser_with(0.1, [0.0, 0.0], 0.2, n_perturbations=4000)
    assert separable.predict_marginals(noisy)[0][..., 1] == pytest.approx(
        1 / (1 + np.exp(-gain)), abs=0.03
    )
    potentials = separable.potentials(noisy)
    assert log_partition_exact(potentials) == pytest.approx(np.logaddexp(0, gain).sum())


def test_unsupervised_fit_improves_on_the_noisy_input(rng):
    clean = blobs(rng, 60)
    noisy = add_flip_noise(clean, 0.05, random_state=rng)
    for noise_level in (0.05, "learn"):
        model = LogSupermodularDenoiser(
            field="shared",
            noise_level=noise_level,
            alpha_field=1e-2,
            alpha_cut=1e-2,
            max_iter=20,
            random_state=0,
        ).fit(noisy)
        error = np.mean(model.predict(noisy) != clean)
        assert error < 0.6 * np.mean(noisy != clean), noise_level


def test_results_do_not_depend_on_n_jobs(rng):
    clean = blobs(rng, 12, shape=(10, 10))
    noisy = add_flip_noise(clean, 0.1, random_state=rng)
    model = LogSupermodularDenoiser(max_iter=3, n_perturbations=5, random_state=0).fit(noisy, clean)
    one = model.predict_marginals(noisy)
    model.set_params(n_jobs=2)
    assert np.array_equal(one, model.predict_marginals(noisy))
    assert np.array_equal(model.predict(noisy), model.set_params(n_jobs=1).predict(noisy))


def test_scikit_learn_contract(rng):
    clean = blobs(rng, 18, shape=(8, 8))
    noisy = add_flip_noise(clean, 0.1, random_state=rng)
    model = LogSupermodularDenoiser(max_iter=3, random_state=0)
    search = GridSearchCV(model, {"alpha_cut": [1e-3, 1e-1]}, cv=3).fit(noisy, clean)
    assert search.best_params_["alpha_cut"] in (1e-3, 1e-1)
    fitted = clone(model).fit(list(noisy), list(clean))
    restored = pickle.loads(pickle.dumps(fitted))
    assert isinstance(fitted.predict(list(noisy)), list)
    assert np.array_equal(
        np.stack(restored.predict(list(noisy))), model.fit(noisy, clean).predict(noisy)
    )


def test_bad_input_gets_clear_errors(rng):
    clean = blobs(rng, 4, shape=(6, 6))
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    model = LogSupermodularDenoiser(max_iter=1)
    with pytest.raises(ValueError, match="binary"):
        model.fit(noisy * 2, clean)
    with pytest.raises(ValueError, match="binary"):
        model.fit(noisy.astype(float) * np.nan, clean)
    with pytest.raises(ValueError, match="same shape"):
        model.set_params(field="pixel").fit([noisy[0], noisy[1][:5]], [clean[0], clean[1][:5]])
    model.set_params(field="auto").fit([noisy[0], noisy[1][:5]], [clean[0], clean[1][:5]])
    assert np.ndim(model.field_) == 0  # images of several shapes: a shared field
    with pytest.raises(ValueError, match="shape"):
        model.fit(noisy, clean[:, :5])
    with pytest.raises(ValueError, match="images"):
        model.fit(noisy, clean[:3])
    with pytest.raises(ValueError, match="one image"):
        model.fit(noisy[0], clean[0])
    with pytest.raises(ValueError, match="noise_level"):
        LogSupermodularDenoiser(noise_level=0.7).fit(noisy, clean)
    with pytest.raises(Exception, match="not fitted"):
        LogSupermodularDenoiser().predict(noisy)
    fitted = model.fit(noisy, clean)
    with pytest.raises(ValueError, match="learned on images of shape"):
        fitted.predict(noisy[:, :5])
    shared = LogSupermodularDenoiser(field="shared", max_iter=1).fit(
        [noisy[0], noisy[1][:5]], [clean[0], clean[1][:5]]
    )
    assert shared.predict([noisy[2][:3]])[0].shape == (3, 6)
    with pytest.raises(ValueError, match="decoding"):
        fitted.predict(noisy, decoding="mean")


def test_the_default_field_suits_one_image_and_many(rng):
    """field="auto": one noisy image alone gets a shared field (a per-pixel field would learn
    the noisy pixels back), many images of one shape a per-pixel one."""
    clean = blobs(rng, 1)[0]
    clean = np.kron(clean, np.ones((3, 3), int))  # one larger image
    noisy = add_flip_noise(clean[None], 0.1, random_state=rng)
    errors = {}
    for field in ("auto", "pixel"):
        model = LogSupermodularDenoiser(field=field, noise_level=0.1, random_state=0).fit(noisy)
        errors[field] = np.mean(model.predict(noisy)[0] != clean)
    assert np.ndim(LogSupermodularDenoiser(noise_level=0.1, max_iter=2).fit(noisy).field_) == 0
    assert errors["auto"] < 0.5 * np.mean(noisy[0] != clean) and errors["auto"] < errors["pixel"]
    several = add_flip_noise(blobs(rng, 4), 0.1, random_state=rng)
    model = LogSupermodularDenoiser(noise_level=0.1, max_iter=2).fit(several)
    assert model.field_.shape == several[0].shape


def test_unsupervised_denoiser_scores_without_clean_images(rng):
    clean = np.zeros((12, 8, 8), int)
    clean[:, 2:6, 1:7] = 1
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    model = LogSupermodularDenoiser(field="shared", max_iter=5, n_perturbations=20, random_state=0)
    model.fit(noisy)
    per_image = model.score_samples(noisy)
    assert per_image.shape == (12,) and np.all(per_image < 0)
    assert model.score(noisy) == pytest.approx(per_image.mean())
    assert model.score(noisy, clean) > 0.5  # with clean images: pixel accuracy
    search = GridSearchCV(model, {"alpha_cut": [1e-3, 1e2]}, cv=3).fit(noisy)
    assert search.best_params_["alpha_cut"] == 1e-3  # a huge cut penalty fits worse


def test_denoiser_predictions_do_not_depend_on_the_chunks(monkeypatch):
    """LogSupermodularDenoiser takes its images in the same chunks: the same denoised images
    and marginals (arrays in, arrays out; lists in, lists out), also with a Generator."""
    from pmap_sklearn import LogSupermodularDenoiser
    from pmap_sklearn.datasets import add_flip_noise

    rng = np.random.default_rng(7)
    clean = (rng.random((6, 7, 9)) < 0.5).astype(int)
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    model = LogSupermodularDenoiser(noise_level=0.1, max_iter=2, n_perturbations=5)
    model.set_params(random_state=0).fit(noisy, clean)
    calls = [
        lambda m, X: m.predict(X),
        lambda m, X: m.predict(list(X)),
        lambda m, X: m.predict(X, decoding="marginal"),
        lambda m, X: m.predict_marginals(list(X)),
    ]
    _assert_chunking_invariant(model, noisy, calls, monkeypatch)
    out = []
    for limit in (10**9, 70):
        monkeypatch.setattr(_parallel, "PREDICT_NODES", limit)
        model.set_params(random_state=np.random.default_rng(3))
        out.append([model.predict_marginals(noisy) for _ in range(2)])
    for got, expected in zip(out[1], out[0], strict=True):
        np.testing.assert_array_equal(got, expected)
