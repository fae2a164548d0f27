"""
Joint samples: alternative segmentations and where the model is unsure
=======================================================================

A perturb-and-MAP model is a distribution over whole labellings, and ``sample`` draws from it
(:ref:`joint-samples`): each draw is a perturbed MAP, a complete segmentation that respects
the pairwise terms, unlike labels drawn node by node from the marginals. Here a grid CRF is
fitted to noisy binary images of ellipses; for a test image we look at its MAP segmentation,
a few draws, each pixel's probability of the foreground (the draws' frequency) and the
entropy of that probability — the pixels to check by hand. Functions of whole labellings come
from the same draws: the probability that the MAP segmentation is right everywhere within a
region, the spread of the segmented area, the probability that there is a shape at all, the
probability that each region of the MAP segmentation is kept whole. Last, the reliability
diagram of the pixel marginals says whether they are right as often as they claim.

The test image is a hard one: a small ellipse under strong noise, which the MAP labelling
misses altogether — the single most probable segmentation is (almost) empty — while most
draws contain it. A MAP-only model would report a confident "nothing here".
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import GridStructure, PerturbMAPCRF
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.inspection import marginal_entropy, region_probabilities
from pmap_sklearn.metrics import expected_calibration_error, reliability_curve

data = make_grid_data(n_samples=24, shape=(40, 40), noise=1.2, random_state=0)
X_train, y_train = data.data[:20], data.target[:20]
X_test, y_test = data.data[20:], data.target[20:]
model = PerturbMAPCRF(GridStructure(), random_state=0).fit(X_train, y_train)
print(f"test pixel accuracy {model.score(X_test, y_test):.3f}")

# %%
# 200 draws of the first test image, and its MAP labelling. The frequency of the foreground
# over the draws is ``predict_marginals`` with the same perturbations; its entropy
# (:func:`~pmap_sklearn.inspection.marginal_entropy`, in nats: divided by log 2 for bits) is 0
# where every draw agrees and 1 bit where they split evenly.
draws = model.sample(X_test[:1], n_draws=200)[0]  # (200, 40, 40)
best = model.predict(X_test[:1])[0]
foreground = draws.mean(axis=0)
entropy = marginal_entropy(model, X_test[:1], n_perturbations=200)[0] / np.log(2)
unsure = entropy > 0.5
print(f"pixels with entropy > 0.5 bit: {unsure.sum()} of {unsure.size}")
print(f"MAP errors among them: {(best != y_test[0])[unsure].sum()} of {(best != y_test[0]).sum()}")

# %%
# Whole-labelling questions, answered by counting draws: how often the MAP segmentation is
# right on every pixel of the uncertain band, and how much the segmented area varies.
inside = (draws == best)[:, unsure].all(axis=1).mean()
area = draws.sum(axis=(1, 2))
print(f"P(every uncertain pixel as in the MAP) = {inside:.2f}")
print(f"segmented area: MAP {best.sum()}, draws {area.mean():.0f} ± {area.std():.0f} pixels")
shape = (area >= 20).mean()
print(f"truth {y_test[0].sum()} pixels; P(a shape of 20 pixels or more) = {shape:.2f}")

# %%
# The regions of the MAP segmentation with the probability that a draw keeps each whole
# (:func:`~pmap_sklearn.inspection.region_probabilities`, :ref:`region-confidence`): the MAP's
# background of this image is a confident-looking "nothing here" that almost no draw keeps.
# On pixel grids a large region is rarely kept pixel for pixel — its boundary moves from draw
# to draw — so its probability is small even where the segmentation is good: whole-region
# questions fit coarser units (superpixels) or the part of a region that matters.
regions, probabilities = region_probabilities(model, X_test[:1], n_draws=200)
for r, p in enumerate(probabilities[0]):
    inside = regions[0] == r
    label = "foreground" if best[inside][0] else "background"
    print(f"MAP region {r}: {inside.sum():4d} {label} pixels, kept whole by P = {p:.2f}")

# %%
# Are the pixel marginals right as often as they say? The reliability diagram of the four
# test images (:func:`~pmap_sklearn.metrics.reliability_curve`): the fraction of pixels whose
# most probable label is right, per bin of that label's probability.
marginals = model.predict_marginals(X_test)
curve = reliability_curve(y_test, marginals, n_bins=10)
ece = expected_calibration_error(y_test, marginals, n_bins=10)
print(f"expected calibration error of the test pixels: {ece:.3f}")

# %%
fig, axes = plt.subplots(1, 8, figsize=(16, 2.6))
panels = [
    (X_test[0][..., 0], "noisy input", "gray"),
    (y_test[0], "truth", "gray"),
    (best, "MAP", "gray"),
    (draws[0], "draw 1", "gray"),
    (draws[1], "draw 2", "gray"),
    (foreground, "P(foreground)", "viridis"),
    (entropy, "entropy (bits)", "magma"),
]
for axis, (image, title, cmap) in zip(axes[:-1], panels, strict=True):
    axis.imshow(image, cmap=cmap)
    axis.set_title(title, fontsize=9)
    axis.axis("off")
kept = curve.count > 0
axes[-1].plot([0, 1], [0, 1], color="grey", linewidth=0.8)
axes[-1].plot(curve.confidence[kept], curve.accuracy[kept], "o-", markersize=3)
axes[-1].set(xlim=(0.45, 1), ylim=(0.45, 1), xlabel="confidence", ylabel="accuracy")
axes[-1].set_title(f"reliability (ECE {ece:.3f})", fontsize=9)
fig.tight_layout()
plt.show()
