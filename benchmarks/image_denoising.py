"""Whole grey-level photos: the continuous log-supermodular priors against scikit-image's
classic denoisers.

The prior (Shpakova 2019, Ch. 4) is learned on the 8×8 patches of four photos (astronaut,
coffee, chelsea and rocket, in grey levels 0–255) and tested on three others (camera, moon,
coins) with Gaussian noise of σ ∈ {10, 15, 25, 50} (one draw, seed 0):

- continuous MAP, Haar quad-tree prior (``groups="tree"``, ``basis="haar"``), every overlapping
  patch (stride 1), the learned prior as it is (``prior_scale=1.0``) and with its scale chosen
  for each photo by Stein's unbiased risk estimate (``prior_scale="sure"``, the default on
  photos); and with one group per coefficient on centred patches
  (``groups="unary"``, ``center=True``);
- MMSE (perturb-and-MAP posterior mean, 10 perturbations, levels of step σ/2), tree prior,
  patches at stride 2 (stride 1 takes about 4 times as long); the same with the prior's scale
  chosen by Stein's risk estimate of the MMSE (``prior_scale="sure"``, its divergence from the
  posterior variance);
- scikit-image: ``denoise_tv_chambolle`` with the weight of best mean PSNR on the training
  photos (noised alike), ``denoise_wavelet`` BayesShrink (db2, soft thresholds) and
  ``denoise_nl_means`` (5×5 patches, distance 6, h = 0.8σ, fast mode: the scikit-image
  tutorial's setting). All are given the true σ.

Reported: PSNR (dB, data range 255), SSIM and seconds per photo; then a 512² photo (camera,
σ = 25) in a fresh process with ``n_jobs=2``: seconds of each decoding and the peak resident
memory.

Run: ``python benchmarks/image_denoising.py [--quick]`` (needs ``pip install ".[benchmarks]"``);
writes ``docs/results/image_denoising.{md,json}`` and ``image_denoising.png`` (``--quick``:
camera at σ = 25 and one decoding of the 512² photo; writes nothing).
"""

import copy
import sys
from pathlib import Path

import numpy as np
from _common import Run, parser, pyplot, rerun, run_child, save_figure, timed

TRAIN = ["astronaut", "coffee", "chelsea", "rocket"]
TEST = ["camera", "moon", "coins"]
SIGMAS = [10, 15, 25, 50]
TV_WEIGHTS = [0.02, 0.03, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3]
PRIOR = dict(patch_size=8, max_patches=40_000, max_iter=100, random_state=0, n_jobs=2)
MODELS = {
    "continuous MAP, tree prior, scale 1": (
        dict(groups="tree", basis="haar"),
        dict(decoding="continuous_map", prior_scale=1.0),
    ),
    "continuous MAP, tree prior, SURE scale (defaults)": (
        dict(groups="tree", basis="haar"),
        dict(decoding="continuous_map", prior_scale="sure"),
    ),
    "continuous MAP, unary prior (centred), scale 1": (
        dict(groups="unary", basis="haar", center=True),
        dict(decoding="continuous_map", prior_scale=1.0),
    ),
    "MMSE, tree prior (stride 2, M = 10), scale 1": (
        dict(groups="tree", basis="haar"),
        dict(decoding="mmse", patch_stride=2, n_perturbations=10, prior_scale=1.0),
    ),
    "MMSE, tree prior, SURE scale (stride 2, M = 10)": (
        dict(groups="tree", basis="haar"),
        dict(decoding="mmse", patch_stride=2, n_perturbations=10, prior_scale="sure"),
    ),
}


def photo(name):
    from skimage import color, data

    image = getattr(data, name)()
    return (color.rgb2gray(image) * 255.0 if image.ndim == 3 else image).astype(float)


def noised(image, sigma, seed=0):
    return image + np.random.default_rng(seed).normal(0.0, sigma, image.shape)


def classic(name, noisy, sigma, tv_weight):
    """The scikit-image denoisers on grey levels (they work on [0, 1]: scaled there and back)."""
    from skimage import restoration

    scaled, s = noisy / 255.0, sigma / 255.0
    if name == "TV (Chambolle)":
        return restoration.denoise_tv_chambolle(scaled, weight=tv_weight) * 255.0
    if name == "wavelet BayesShrink":
        return (
            restoration.denoise_wavelet(
                scaled,
                sigma=s,
                wavelet="db2",
                mode="soft",
                method="BayesShrink",
                rescale_sigma=True,
            )
            * 255.0
        )
    return (
        restoration.denoise_nl_means(
            scaled, h=0.8 * s, sigma=s, patch_size=5, patch_distance=6, fast_mode=True
        )
        * 255.0
    )


def scores(clean, estimate):
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    return (
        float(peak_signal_noise_ratio(clean, estimate, data_range=255)),
        float(structural_similarity(clean, estimate, data_range=255)),
    )


def best_tv_weight(train, sigma):
    from skimage.metrics import peak_signal_noise_ratio

    def mean_psnr(weight):
        return np.mean(
            [
                peak_signal_noise_ratio(
                    image,
                    classic("TV (Chambolle)", noised(image, sigma, 1), sigma, weight),
                    data_range=255,
                )
                for image in train
            ]
        )

    return max(TV_WEIGHTS, key=mean_psnr)


def fit_priors(train):
    from pmap_sklearn import ContinuousLogSupermodularDenoiser

    fitted, seconds = {}, {}
    for params, _ in MODELS.values():
        key = tuple(sorted(params.items()))
        if key not in fitted:
            model = ContinuousLogSupermodularDenoiser(**PRIOR, **params)
            fitted[key], seconds[key] = timed(model.fit, train)
    return fitted, seconds


def table(quick):
    sigmas = [25] if quick else SIGMAS
    tests = TEST[:1] if quick else TEST
    train = [photo(name) for name in TRAIN]
    priors, fit_seconds = fit_priors(train)
    rows = []
    for sigma in sigmas:
        weight = best_tv_weight(train, sigma)
        for test in tests:
            clean = photo(test)
            noisy = noised(clean, sigma)
            row = {"photo": test, "sigma": sigma, "noisy": scores(clean, noisy)[0]}
            for name, (params, decoding) in MODELS.items():
                model = copy.deepcopy(priors[tuple(sorted(params.items()))])
                model.set_params(noise_std=sigma, **decoding)
                estimate, seconds = timed(model.predict, noisy)
                row[name] = (*scores(clean, estimate), seconds)
            for name in ["TV (Chambolle)", "wavelet BayesShrink", "NL-means"]:
                estimate, seconds = timed(classic, name, noisy, sigma, weight)
                row[name] = (*scores(clean, estimate), seconds)
            row["tv_weight"] = weight
            rows.append(row)
            print(
                f"{test} σ={sigma}: "
                + ", ".join(f"{k} {v[0]:.2f}" for k, v in row.items() if isinstance(v, tuple))
            )
    return rows, {str(dict(k)): v for k, v in fit_seconds.items()}


TIMING = """
import numpy as np
sys_path = {path!r}
import sys; sys.path.insert(0, sys_path)
from _common import peak_mb, print_result, timed
from image_denoising import photo, noised, TRAIN
from pmap_sklearn import ContinuousLogSupermodularDenoiser
train = [photo(name) for name in TRAIN]
model = ContinuousLogSupermodularDenoiser(
    groups="tree", basis="haar", patch_size=8, max_patches=40_000, random_state=0, n_jobs=2
).fit(train)
noisy = noised(photo("camera"), 25)
model.set_params(noise_std=25)
out = {{}}
for label, params in {decodings!r}.items():
    model.set_params(**params)
    out[label] = timed(model.predict, noisy)[1]
out["peak MB"] = peak_mb()
print_result(out)
"""

DECODINGS = {
    "continuous MAP (stride 1)": dict(decoding="continuous_map", patch_stride=1, prior_scale=1.0),
    "continuous MAP (stride 1, prior_scale='sure', the default)": dict(
        decoding="continuous_map", patch_stride=1, prior_scale="sure"
    ),
    "continuous MAP (stride 2)": dict(decoding="continuous_map", patch_stride=2, prior_scale=1.0),
    "level MAP (stride 1, step σ/2)": dict(decoding="map", patch_stride=1, prior_scale=1.0),
    "MMSE (stride 4, M = 10)": dict(
        decoding="mmse", patch_stride=4, n_perturbations=10, prior_scale=1.0
    ),
    "MMSE (stride 2, M = 10)": dict(
        decoding="mmse", patch_stride=2, n_perturbations=10, prior_scale=1.0
    ),
    "MMSE (stride 2, M = 10, prior_scale='sure')": dict(
        decoding="mmse", patch_stride=2, n_perturbations=10, prior_scale="sure"
    ),
}


def timing(quick):
    decodings = dict(list(DECODINGS.items())[:1]) if quick else DECODINGS
    script = TIMING.format(path=str(Path(__file__).parent), decodings=decodings)
    return run_child("512² photo", [sys.executable, "-c", script])


def figure(path):
    plt = pyplot()

    from pmap_sklearn import ContinuousLogSupermodularDenoiser

    train = [photo(name) for name in TRAIN]
    clean = photo("camera")
    noisy = noised(clean, 25)
    model = ContinuousLogSupermodularDenoiser(groups="tree", basis="haar", **PRIOR).fit(train)
    model.set_params(noise_std=25)  # fitted as in the table (the levels of fit ignore σ)
    crop = (slice(60, 260), slice(150, 350))
    pictures = {
        "clean": clean,
        f"noisy σ = 25 ({scores(clean, noisy)[0]:.1f} dB)": noisy,
    }
    estimate = model.set_params(prior_scale=1.0).predict(noisy, decoding="continuous_map")
    pictures[f"continuous MAP ({scores(clean, estimate)[0]:.1f} dB)"] = estimate
    estimate = model.set_params(prior_scale="sure").predict(noisy, decoding="continuous_map")
    pictures[f"SURE scale ({scores(clean, estimate)[0]:.1f} dB)"] = estimate
    weight = best_tv_weight(train, 25)
    for name in ["TV (Chambolle)", "NL-means"]:
        estimate = classic(name, noisy, 25, weight)
        pictures[f"{name} ({scores(clean, estimate)[0]:.1f} dB)"] = estimate
    fig, axes = plt.subplots(1, len(pictures), figsize=(18, 3.4))
    for axis, (title, picture) in zip(axes, pictures.items(), strict=True):
        axis.imshow(picture[crop], cmap="gray", vmin=0, vmax=255)
        axis.set_title(title, fontsize=10)
        axis.axis("off")
    save_figure(fig, path, 90)


def markdown(rows, fit_seconds, times, notes):
    methods = [k for k in rows[0] if isinstance(rows[0][k], tuple)]
    lines = [
        "Grey-level photos (scikit-image), the prior learned on astronaut, coffee, chelsea and "
        "rocket; PSNR in dB (SSIM) per test photo and noise level.",
        "",
        "| photo | σ | noisy | " + " | ".join(methods) + " |",
        "|---|---|---|" + "---|" * len(methods),
    ]
    for row in rows:
        cells = [f"{row[m][0]:.2f} ({row[m][1]:.3f})" for m in methods]
        lines.append(
            f"| {row['photo']} | {row['sigma']} | {row['noisy']:.2f} | " + " | ".join(cells) + " |"
        )
    means = [np.mean([row[m][0] for row in rows]) for m in methods]
    seconds = [np.mean([row[m][2] for row in rows]) for m in methods]
    lines.append("| **mean PSNR** | | | " + " | ".join(f"**{v:.2f}**" for v in means) + " |")
    lines.append("| seconds per photo | | | " + " | ".join(f"{v:.2f}" for v in seconds) + " |")
    lines += [
        "",
        "TV weights (chosen on the training photos): "
        + ", ".join(
            f"σ={row['sigma']}: {row['tv_weight']}"
            for row in rows
            if row["photo"] == rows[0]["photo"]
        )
        + ". Prior fits (seconds): "
        + ", ".join(f"{k}: {v:.1f}" for k, v in fit_seconds.items())
        + ".",
        "",
        "A 512² photo (camera, σ = 25), fresh process, `n_jobs=2`:",
        "",
        "| decoding | seconds |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:.1f} |" for k, v in times.items() if k != "peak MB"]
    lines += ["", f"Peak resident memory of that process: {times['peak MB']:.0f} MB."]
    lines += ["", rerun(notes), ""]
    return "\n".join(lines)


def main():
    args = parser(__doc__, "camera, σ = 25 only; writes nothing").parse_args()
    run = Run(__file__, args.quick)
    rows, fit_seconds = table(args.quick)
    times = timing(args.quick)
    print(times)
    notes = run.notes()
    text = markdown(rows, fit_seconds, times, notes)
    print(text)
    if not args.quick:
        payload = {"rows": rows, "fit_seconds": fit_seconds, "timing": times, "run": notes}
        run.save("image_denoising", text, payload)
        figure(run.path("image_denoising.png"))


if __name__ == "__main__":
    main()
