"""
Binary image denoising with a log-supermodular prior
====================================================

:class:`~pmap_sklearn.LogSupermodularDenoiser` (Shpakova & Bach 2016) learns a prior on binary
images — a field and horizontal / vertical cut penalties — from noisy images, with the clean
ones (conditional likelihood) or without them (marginal likelihood, the flip rate learned too).
Denoising is the posterior MAP (one graph cut) or the mean of 100 perturbed posterior MAPs
thresholded at 1/2. The images are generated ellipses flipped with probability 0.1.
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import LogSupermodularDenoiser
from pmap_sklearn.datasets import add_flip_noise, make_grid_data

clean = np.stack(make_grid_data(n_samples=80, shape=(48, 48), random_state=0).target)
noisy = add_flip_noise(clean, 0.1, random_state=0)
train, test = slice(0, 60), slice(60, 80)

supervised = LogSupermodularDenoiser(field="shared", noise_level=0.1, random_state=0)
supervised.fit(noisy[train], clean[train])
unsupervised = LogSupermodularDenoiser(
    field="shared", alpha_field=1e-2, alpha_cut=1e-2, random_state=0
).fit(noisy[train])
print(f"noisy input: {100 * np.mean(noisy[test] != clean[test]):.2f} % wrong pixels")
for name, model in (("supervised", supervised), ("unsupervised", unsupervised)):
    for decoding in ("map", "marginal"):
        error = np.mean(model.predict(noisy[test], decoding=decoding) != clean[test])
        print(f"{name:12} {decoding:8}: {100 * error:.2f} %")
print(f"learned flip rate {unsupervised.noise_level_:.3f}, cut weights {unsupervised.cut_weights_}")

# %%
# Noisy input, MAP, mean of perturbed MAPs (P(pixel = 1)) and its threshold, truth.
k = 2
panels = [
    ("noisy", noisy[test][k]),
    ("MAP", supervised.predict(noisy[test][k : k + 1])[0]),
    ("P(pixel = 1)", supervised.predict_marginals(noisy[test][k : k + 1])[0][..., 1]),
    ("marginal decoding", supervised.predict(noisy[test][k : k + 1], decoding="marginal")[0]),
    ("clean", clean[test][k]),
]
figure, axes = plt.subplots(1, 5, figsize=(12, 2.8))
for axis, (title, image) in zip(axes, panels, strict=True):
    axis.imshow(image, cmap="gray", vmin=0, vmax=1)
    axis.set_title(title, fontsize=12)
    axis.axis("off")
figure.tight_layout()
plt.show()
