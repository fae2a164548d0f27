"""
Grey-level denoising with continuous log-supermodular priors
============================================================

:class:`~pmap_sklearn.ContinuousLogSupermodularDenoiser` (Shpakova 2019, Ch. 4) learns a prior
``p(α) ∝ exp(−Σ_A d_A max_{a∈A} |α_a|)`` on the Haar wavelet coefficients of clean 8×8 patches
by perturb-and-MAP (every MAP an Ishikawa cut), then removes Gaussian noise from a held-out
part of the image by the exact continuous MAP, the MAP on levels of step 10, and the
perturb-and-MAP posterior mean (MMSE).
"""

import matplotlib.pyplot as plt
import numpy as np
from skimage.data import camera

from pmap_sklearn import ContinuousLogSupermodularDenoiser


def to_patches(image):
    h, w = image.shape
    return image.reshape(h // 8, 8, w // 8, 8).swapaxes(1, 2).reshape(-1, 8, 8)


def from_patches(patches, shape):
    h, w = shape
    return patches.reshape(h // 8, w // 8, 8, 8).swapaxes(1, 2).reshape(h, w)


image = camera().astype(float)
test_image = image[64:192, 192:320]  # the photographer's head and camera, held out
train = to_patches(image[256:])  # the lower half of the image
sigma = np.linalg.norm(image) / np.sqrt(image.size) / 10 ** (22.33 / 20)
rng = np.random.default_rng(0)
noisy_image = test_image + sigma * rng.normal(size=test_image.shape)
clean, noisy = to_patches(test_image), to_patches(noisy_image)

model = ContinuousLogSupermodularDenoiser(
    groups="tree", basis="haar", noise_std=sigma, max_iter=40, n_perturbations=30, random_state=0
).fit(train)
input_snr = 20 * np.log10(np.linalg.norm(clean) / np.linalg.norm(noisy - clean))
print(f"noisy input: {input_snr:.2f} dB")
results = {"noisy": noisy_image}
for title, decoding, step in [
    ("continuous MAP", "continuous_map", 1.0),
    ("MAP, levels Δ = 10", "map", 10.0),
    ("MMSE, levels Δ = 10", "mmse", 10.0),
]:
    model.set_params(decoding=decoding, grid_step=step)
    print(f"{title}: {model.score(noisy, clean):.2f} dB")
    results[title] = from_patches(model.predict(noisy), test_image.shape)

figure, axes = plt.subplots(1, 5, figsize=(14, 3.2))
for axis, (title, picture) in zip(axes, [("clean", test_image), *results.items()], strict=True):
    axis.imshow(picture, cmap="gray", vmin=0, vmax=255)
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
