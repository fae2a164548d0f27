"""
Learners compared on one problem: two-stage, piecewise, S-SVM, mean field, perturb-and-MAP
==========================================================================================

The learners of the parameter-learning lecture (Domokos, lecture 11) on blocky 4-class images
seen through heavy noise:

- a classifier of the pixels alone, the usual first stage of a segmentation CRF;
- :class:`~pmap_sklearn.TwoStageCRF`, which fits that classifier out of fold, turns its class
  probabilities into the node features of a CRF (their logarithms) and learns the CRF's
  weights on them: how much to trust each probability, and the Potts weight between
  neighbours;
- :class:`~pmap_sklearn.PiecewiseCRF`, every factor normalised on its own (no inference while
  learning);
- :class:`~pmap_sklearn.StructuredSVM` by stochastic subgradient descent;
- :class:`~pmap_sklearn.MeanFieldCRF`, mean field unrolled and learned end to end (CRF as RNN);
- the one-stage :class:`~pmap_sklearn.PerturbMAPCRF` on the raw features.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression

from pmap_sklearn import (
    GridStructure,
    MeanFieldCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    StructuredSVM,
    TwoStageCRF,
)


def blocky_images(rng, n, size=24, k=4, noise=1.0):
    """Random rectangles of K classes; features one-hot plus Gaussian noise."""
    images, labels = [], []
    for _ in range(n):
        truth = rng.integers(k) * np.ones((size, size), dtype=int)
        for _ in range(6):
            r, c = rng.integers(0, size - 4, 2)
            h, w = rng.integers(4, size // 2, 2)
            truth[r : r + h, c : c + w] = rng.integers(k)
        images.append(np.eye(k)[truth] + noise * rng.normal(size=(size, size, k)))
        labels.append(truth)
    return images, labels


rng = np.random.default_rng(1)
X, y = blocky_images(rng, 20)
X_test, y_test = blocky_images(rng, 20)

pixels = LogisticRegression(max_iter=1000).fit(
    np.concatenate([x.reshape(-1, 4) for x in X]), np.concatenate(y).ravel()
)
models = {
    "two-stage": TwoStageCRF(crf=PerturbMAPCRF(GridStructure(), random_state=0), random_state=0),
    "piecewise": PiecewiseCRF(GridStructure()),
    "S-SVM, subgradient": StructuredSVM(
        GridStructure(), algorithm="subgradient", alpha=1e-2, max_iter=30, random_state=0
    ),
    "mean field": MeanFieldCRF(GridStructure(), random_state=0),
    "perturb-and-MAP": PerturbMAPCRF(GridStructure(), random_state=0),
}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X, y)
    print(f"{name}: fitted in {time.perf_counter() - start:.1f} s")


def error(predictions):
    return 100 * np.mean([np.mean(p != t) for p, t in zip(predictions, y_test, strict=True)])


alone = [pixels.predict(x.reshape(-1, 4)).reshape(24, 24) for x in X_test]
print(f"pixel classifier alone: {error(alone):.1f} % test error")
for name, model in models.items():
    print(f"{name}: {error(model.predict(X_test)):.1f} % test error")

# %%
# What stage two learned: the weights of the four log-probabilities for each class (close to
# a scaled identity: trust each class's own probability) and the Potts weights.
unary, pairwise = models["two-stage"].crf_.structure_.unpack(models["two-stage"].crf_.coef_)
print("log-probability weights (rows: feature log p_j, then the bias; columns: class k)")
print(np.round(unary, 2))
print(f"Potts weights (one per edge feature of the grid): {pairwise.round(2)}")

# %%
# Three test images: the noisy features' argmax, the truth, the classifier alone and three of
# the learned CRFs. Piecewise training over-counts the agreement of neighbours (its pairwise
# piece does not know how much the unary terms explain): its Potts weights come out too strong.
names = ("two-stage", "piecewise", "perturb-and-MAP")
predictions = {name: models[name].predict(X_test[:3]) for name in names}
figure, axes = plt.subplots(3, 6, figsize=(13, 7))
for row in range(3):
    panels = (X_test[row].argmax(axis=2), y_test[row], alone[row]) + tuple(
        predictions[name][row] for name in names
    )
    titles = ("noisy features (argmax)", "truth", "pixel classifier") + names
    for axis, image, title in zip(axes[row], panels, titles, strict=True):
        axis.imshow(image, cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
        axis.set_title(title, fontsize=11)
        axis.set_axis_off()
figure.tight_layout()
plt.show()
