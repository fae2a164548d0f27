"""
Region confidence and uncertainty maps on superpixels
=====================================================

How sure is a segmentation model of what it segmented? Node marginals say it superpixel by
superpixel; :func:`~pmap_sklearn.inspection.region_probabilities` says it for each region of
the predicted segmentation as a whole: the probability that a labelling drawn from the model
keeps every superpixel of the region with its label (:ref:`region-confidence`). A
:class:`~pmap_sklearn.PerturbMAPCRF` with its defaults is trained on the 50 labelled
Weizmann-horse photos of the fixed split (Borenstein & Ullman 2002; the protocol of
:ref:`sphx_glr_auto_examples_plot_horse_segmentation.py`) and its test photos are shown with
two maps painted back on the pixels by :func:`~pmap_sklearn.superpixels.to_pixels`: each
region's probability and each superpixel's entropy
(:func:`~pmap_sklearn.inspection.marginal_entropy`). Reliability diagrams over the 100 test
photos then compare the region probabilities with the usual shortcut, the mean of the region's
node marginals.
"""

import matplotlib.pyplot as plt
import numpy as np
from skimage import io
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import NodeTransformer, PerturbMAPCRF
from pmap_sklearn.datasets import horse_split, load_weizmann_horses
from pmap_sklearn.inspection import marginal_entropy, region_probabilities
from pmap_sklearn.metrics import expected_calibration_error, reliability_curve
from pmap_sklearn.superpixels import to_pixels

split = horse_split()
horses = load_weizmann_horses(indices=list(split.labeled) + list(split.test), n_jobs=2)
n_train = len(split.labeled)
X, y = horses.data[:n_train], horses.target[:n_train]
X_test, y_test = horses.data[n_train:], horses.target[n_train:]
model = make_pipeline(NodeTransformer(StandardScaler()), PerturbMAPCRF("graph", random_state=0))
model.fit(X, y)
print(f"test superpixel accuracy {model.score(X_test, y_test):.3f}")

# %%
# The regions of each predicted segmentation (connected superpixels of one label) and the
# probability of each, the frequency of the event over 300 perturbed MAPs; the entropy of the
# node marginals (in nats, at most log 2 here) flags the superpixels the model hesitates on.
regions, probabilities = region_probabilities(model, X_test, n_draws=300, random_state=0)
entropy = marginal_entropy(model, X_test)
predicted = model.predict(X_test)
for k in range(3):
    described = ", ".join(
        f"{'horse' if predicted[k][regions[k] == r][0] else 'background'} {p:.2f}"
        for r, p in enumerate(probabilities[k])
    )
    print(f"test photo {k}: regions kept whole with probability {described}")

figure, axes = plt.subplots(3, 4, figsize=(11, 6.4))
for row, k in enumerate(range(3)):
    graph = X_test[k]  # a GraphSample with its superpixel map
    confidence = probabilities[k][regions[k]]  # each superpixel: its region's probability
    panels = [
        ("photo", io.imread(horses.filenames[n_train + k]), None, None),
        ("MAP", to_pixels(graph, predicted[k]), "gray", 1),
        ("P(region kept whole)", to_pixels(graph, confidence), "viridis", 1),
        ("entropy (nats)", to_pixels(graph, entropy[k]), "magma", np.log(2)),
    ]
    for axis, (title, image, cmap, top) in zip(axes[row], panels, strict=True):
        shown = axis.imshow(image, cmap=cmap, vmin=0, vmax=top)
        axis.set_title(title, fontsize=11)
        axis.axis("off")
        if cmap in ("viridis", "magma"):
            figure.colorbar(shown, ax=axis, fraction=0.035, pad=0.02)
figure.tight_layout()

# %%
# Reliability diagrams over the 100 test photos. Nodes: the top label of each superpixel's
# marginals, right when it is the true label. Regions: right when every superpixel of the
# region has the predicted label in the ground truth — the event whose probability
# ``region_probabilities`` gives. The mean of the region's node marginals answers another
# question (the expected share of the region that is right) and is far too sure of whole
# regions.
marginals = model.predict_proba(X_test)
right, mean = [], []
for labels, truth, region, marginal in zip(predicted, y_test, regions, marginals, strict=True):
    wrong = np.bincount(region, labels != truth)
    right.append(wrong == 0)
    at_label = marginal[np.arange(len(labels)), labels]
    mean.append(np.bincount(region, at_label) / np.bincount(region))
right, mean = np.concatenate(right), np.concatenate(mean)
confidence = np.concatenate(list(probabilities))
curves = {
    "node marginals": (reliability_curve(y_test, marginals, n_bins=10), y_test, marginals),
    "region_probabilities": (reliability_curve(right, confidence, n_bins=10), right, confidence),
    "mean of node marginals": (reliability_curve(right, mean, n_bins=10), right, mean),
}
figure, axis = plt.subplots(figsize=(4.5, 4.5))
axis.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
for name, (curve, truth, proba) in curves.items():
    ece = expected_calibration_error(truth, proba, n_bins=10)
    kept = curve.count > 0
    axis.plot(curve.confidence[kept], curve.accuracy[kept], "o-", label=f"{name} (ECE {ece:.2f})")
    print(f"{name}: ECE {ece:.3f} over {curve.count.sum()} items")
axis.set(xlabel="confidence", ylabel="fraction right", xlim=(0, 1), ylim=(0, 1))
axis.legend(fontsize=8, loc="lower right")
figure.tight_layout()
plt.show()
