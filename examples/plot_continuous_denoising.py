"""
Denoising a whole photo with a continuous log-supermodular prior
================================================================

:class:`~pmap_sklearn.ContinuousLogSupermodularDenoiser` (Shpakova 2019, Ch. 4) learns a prior
``p(α) ∝ exp(−Σ_A d_A max_{a∈A} |α_a|)`` on the Haar wavelet coefficients of 8×8 patches
(the quad-tree prior: one group per coefficient and one per parent–child pair) by
perturb-and-MAP, here from the patches of two other photos. With ``patch_size`` it takes whole
photos: every overlapping patch of the noisy camera is denoised by the exact continuous MAP and
each pixel gets the mean of its patches' estimates. Tiles (``patch_stride=8``) show the block
artefacts that the overlap removes. A prior learned on other photos may shrink too much or too
little for this one: by default (``prior_scale="auto"``, here ``"sure"``) it is scaled by the
factor of least estimated error (Stein's unbiased risk estimate, no clean image needed);
``prior_scale=1.0`` keeps it as learned. The perturb-and-MAP posterior mean
(MMSE, 10 perturbed MAPs per patch, each solved exactly by dynamic programming on the
quad-tree) is computed at stride 4, its prior scaled by SURE too — the MMSE's own risk, whose
divergence is the posterior variance over σ² (Tweedie's formula), read from the perturbed MAPs.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from skimage import data

from pmap_sklearn import ContinuousLogSupermodularDenoiser


def psnr(clean, estimate):
    return 10 * np.log10(255**2 / np.mean((estimate - clean) ** 2))


clean = data.camera().astype(float)
sigma = 25.0
noisy = clean + np.random.default_rng(0).normal(0, sigma, clean.shape)
model = ContinuousLogSupermodularDenoiser(
    groups="tree",
    basis="haar",
    patch_size=8,
    max_patches=20_000,
    noise_std=sigma,
    decoding="continuous_map",
    random_state=0,
    n_jobs=2,
).fit([data.moon(), data.coins()])

results = {f"noisy σ = {sigma:.0f}": noisy}
for title, params in [
    ("tiles (stride 8)", dict(patch_stride=8, prior_scale=1.0)),
    ("overlapping patches", dict(patch_stride=1, prior_scale=1.0)),
    ("prior scaled by SURE (default)", dict(patch_stride=1, prior_scale="auto")),
]:
    start = time.perf_counter()
    estimate = model.set_params(**params).predict(noisy)
    print(f"{title}: {psnr(clean, estimate):.2f} dB in {time.perf_counter() - start:.1f} s")
    results[title] = estimate

start = time.perf_counter()
model.set_params(decoding="mmse", patch_stride=4, n_perturbations=10, prior_scale="sure")
results["MMSE, SURE (stride 4)"] = estimate = model.predict(noisy)
seconds = time.perf_counter() - start
print(f"MMSE, SURE (stride 4): {psnr(clean, estimate):.2f} dB in {seconds:.1f} s")

crop = (slice(64, 192), slice(192, 320))  # the photographer's head and camera
figure, axes = plt.subplots(1, 6, figsize=(18, 3.4))
pictures = [("clean", clean[crop])] + [(t, p[crop]) for t, p in results.items()]
for axis, (title, picture) in zip(axes, pictures, strict=True):
    axis.imshow(picture, cmap="gray", vmin=0, vmax=255)
    if title != "clean":
        reference = clean[crop]
        title = f"{title}\n{psnr(reference, picture):.1f} dB on the crop"
    axis.set_title(title, fontsize=12)
    axis.axis("off")
figure.tight_layout()
plt.show()

# %%
# The learned weights: each unary ``d_i`` is the rate of coefficient i's Laplace prior (the
# larger, the stronger the shrinkage), each pair weight couples a coefficient to its parent.
d = model.group_weights_
print(f"unary weights: {np.round(np.percentile(d[:64], [0, 50, 100]), 3)}")
print(f"pair weights: {np.round(np.percentile(d[64:], [0, 50, 100]), 3)}")
