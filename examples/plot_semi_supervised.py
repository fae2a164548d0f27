"""
Semi-supervised segmentation with bounding boxes
================================================

Only 10 horse images are fully labelled; for 40 more we know a bounding box: superpixels wholly
outside it are background, the others unknown (``-1``). :class:`~pmap_sklearn.MarginalPerturbMAPCRF`
uses them as in Shpakova et al. (2018, Alg. 3–4): a first model is fitted on the labelled
images, it gives the marginals of the unknown superpixels *given the known background*, and
fitting continues on all images with those marginals as targets. We compare with the model of
the 10 labelled images alone, and show one weak image: its box labels and its targets.
"""

import matplotlib.pyplot as plt
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import MarginalPerturbMAPCRF, NodeTransformer, weighted_hamming_loss
from pmap_sklearn.datasets import horse_split, load_weizmann_horses, paint

split = horse_split()
labeled, weak, test = list(split.labeled[:10]), list(split.weak[:40]), list(split.test[:30])
horses = load_weizmann_horses(indices=labeled + weak + test, n_jobs=2)
n_labeled, n_train = len(labeled), len(labeled) + len(weak)
scale = NodeTransformer(StandardScaler()).fit(horses.data[:n_train])
X = scale.transform(horses.data[:n_train])
y = horses.target[:n_labeled] + horses.box_target[n_labeled:n_train]  # full + box labels
X_test, y_test = scale.transform(horses.data[n_train:]), horses.target[n_train:]
sizes = [sample.node_sizes for sample in X_test]

params = dict(class_weight="balanced", alpha=1e-2, batch_size=8, max_iter=200, random_state=0)
supervised = MarginalPerturbMAPCRF("graph", **params).fit(X[:n_labeled], y[:n_labeled])
boxes = MarginalPerturbMAPCRF("graph", unlabeled_weight=0.1, **params).fit(X, y)
for name, model in (("10 labelled images", supervised), ("+ 40 bounding boxes", boxes)):
    error = weighted_hamming_loss(y_test, model.predict(X_test), sizes)
    print(f"{name:22} weighted Hamming x100 on {len(test)} test images: {100 * error:.1f}")

# %%
# A weak image: the known background, the targets q of its unknown superpixels, and the truth.
k = 3
segments = horses.segments[n_labeled + k]
panels = [
    ("box labels (-1 unknown)", paint(segments, y[n_labeled + k]), -1),
    ("targets q(foreground)", paint(segments, boxes.target_distributions_[n_labeled + k][:, 1]), 0),
    ("truth", paint(segments, horses.target[n_labeled + k]), 0),
]
figure, axes = plt.subplots(1, 3, figsize=(10, 3.2))
for axis, (title, image, low) in zip(axes, panels, strict=True):
    axis.imshow(image, cmap="gray", vmin=low, vmax=1)
    axis.set_title(title, fontsize=12)
    axis.axis("off")
figure.tight_layout()
plt.show()
