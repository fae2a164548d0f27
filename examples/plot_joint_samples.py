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
region, the spread of the segmented area, the probability that there is a shape at all.

The test image is a hard one: a small ellipse under strong noise, which the MAP labelling
misses altogether — the single most probable segmentation is (almost) empty — while most
draws contain it. A MAP-only model would report a confident "nothing here".
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import GridStructure, PerturbMAPCRF
from pmap_sklearn.datasets import make_grid_data

data = make_grid_data(n_samples=24, shape=(40, 40), noise=1.2, random_state=0)
X_train, y_train = data.data[:20], data.target[:20]
X_test, y_test = data.data[20:], data.target[20:]
model = PerturbMAPCRF(GridStructure(), random_state=0).fit(X_train, y_train)
print(f"test pixel accuracy {model.score(X_test, y_test):.3f}")

# %%
# 200 draws of the first test image, and its MAP labelling. The frequency of the foreground
# over the draws is ``predict_marginals`` with the same perturbations; its entropy (in bits)
# is 0 where every draw agrees and 1 where they split evenly.
draws = model.sample(X_test[:1], n_draws=200)[0]  # (200, 40, 40)
best = model.predict(X_test[:1])[0]
foreground = draws.mean(axis=0)
with np.errstate(divide="ignore", invalid="ignore"):
    entropy = -np.nansum([p * np.log2(p) for p in (foreground, 1 - foreground)], axis=0)
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
fig, axes = plt.subplots(1, 7, figsize=(14, 2.6))
panels = [
    (X_test[0][..., 0], "noisy input", "gray"),
    (y_test[0], "truth", "gray"),
    (best, "MAP", "gray"),
    (draws[0], "draw 1", "gray"),
    (draws[1], "draw 2", "gray"),
    (foreground, "P(foreground)", "viridis"),
    (entropy, "entropy (bits)", "magma"),
]
for axis, (image, title, cmap) in zip(axes, panels, strict=True):
    axis.imshow(image, cmap=cmap)
    axis.set_title(title, fontsize=9)
    axis.axis("off")
fig.tight_layout()
plt.show()
