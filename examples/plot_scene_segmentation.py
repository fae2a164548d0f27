"""
Road scenes on superpixel graphs
================================

CamVid's road scenes (11 classes at 480×360) segmented by a CRF over superpixels, the
two-stage recipe of the "Scene segmentation" guide on a sixth of the training frames:
:class:`~pmap_sklearn.superpixels.SuperpixelGraphs` (inside
:func:`~pmap_sklearn.datasets.load_camvid`) turns each frame into a graph of about 1,000 SLIC
superpixels with colour, texture and position features and contrast-sensitive edges; a
class-balanced gradient-boosted classifier gives each superpixel out-of-fold class
probabilities; :class:`~pmap_sklearn.PerturbMAPCRF` learns, with its defaults, how far to trust
them and how strongly neighbours agree. Void superpixels (label 11) are ignored, not filled in.
A second CRF is the guide's recipe for class-average accuracy: ``unary="scale"`` learns one
weight on the classifier's log-probabilities (no per-class bias) and ``class_weight="balanced"``
balances the likelihood of stage two as stage one's. On the whole training set it keeps most of
stage one's balance (the guide's table); on a sixth of it, as here, it learns to trust the
classifier less (one weight of about 0.3 instead of 0.7) and smooths more, and three test frames
are too few to rank the two CRFs. The figure paints node labels and the entropy of the
perturb-and-MAP marginals back onto the pixels with
:func:`~pmap_sklearn.superpixels.to_pixels`.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from skimage import io
from sklearn.ensemble import HistGradientBoostingClassifier

from pmap_sklearn import PerturbMAPCRF, TwoStageCRF
from pmap_sklearn.datasets import load_camvid
from pmap_sklearn.metrics import segmentation_scores
from pmap_sklearn.superpixels import to_pixels

train = load_camvid("train", indices=range(0, 367, 6))  # 62 frames
test = load_camvid("test", indices=[10, 120, 200])

model = TwoStageCRF(
    HistGradientBoostingClassifier(class_weight="balanced", random_state=0),
    PerturbMAPCRF("graph", random_state=0),
    cv=3,
    ignore_label=train.void,
    random_state=0,
)
model.fit(train.data, train.target)
predicted = model.predict(test.data)
alone = [model.classifier_.predict(g.node_features) for g in test.data]
balanced = TwoStageCRF(
    HistGradientBoostingClassifier(random_state=0),
    PerturbMAPCRF("graph", random_state=0),
    cv=3,
    ignore_label=train.void,
    random_state=0,
    class_weight="balanced",  # both stages
    unary="scale",  # one weight on the log-probabilities: the balance is kept
).fit(train.data, train.target)
predicted_balanced = balanced.predict(test.data)


def pixel_scores(node_labels):
    painted = [to_pixels(g, labels) for g, labels in zip(test.data, node_labels, strict=True)]
    s = segmentation_scores(test.pixel_target, painted, labels=np.arange(11), void=test.void)
    return f"global {s['global_accuracy']:.1%}, class average {s['class_average_accuracy']:.1%}"


print(f"{'classifier alone:':<28}{pixel_scores(alone)}")
print(f"{'two-stage CRF:':<28}{pixel_scores(predicted)}")
print(f"{'balanced, one unary weight:':<28}{pixel_scores(predicted_balanced)}")
_, pairwise = model.crf_.structure_.unpack(model.crf_.coef_)
print("learned Potts weights on [1, contrast, boundary length]:", pairwise.round(2))
scale, pairwise = balanced.crf_.structure_.unpack(balanced.crf_.coef_)
print("one unary weight:", scale.round(2), "and Potts weights:", pairwise.round(2))

# %%
# Each row: the frame, its labels (black: void), the classifier alone, the two CRFs, and the
# entropy of the first CRF's marginals (100 perturbed MAPs): uncertainty sits on object
# boundaries and on the small classes.
marginals = model.predict_proba(test.data)
colours = ListedColormap(
    np.array(
        [
            [128, 128, 128], [128, 0, 0], [192, 192, 128], [128, 64, 128], [60, 40, 222],
            [128, 128, 0], [192, 128, 128], [64, 64, 128], [64, 0, 128], [64, 64, 0],
            [0, 128, 192], [0, 0, 0],
        ]
    ) / 255.0
)  # fmt: skip
titles = [
    "frame",
    "truth",
    "classifier alone",
    "two-stage CRF",
    "balanced, one weight",
    "marginal entropy",
]
figure, axes = plt.subplots(3, 6, figsize=(18, 6.4))
for row, graph in enumerate(test.data):
    entropy = -(marginals[row] * np.log(np.maximum(marginals[row], 1e-12))).sum(axis=1)
    panels = [
        io.imread(test.filenames[row]),
        test.pixel_target[row],
        to_pixels(graph, alone[row]),
        to_pixels(graph, predicted[row]),
        to_pixels(graph, predicted_balanced[row]),
        to_pixels(graph, entropy),
    ]
    for col, panel in enumerate(panels):
        ax = axes[row, col]
        if col == 0:
            ax.imshow(panel)
        elif col == 5:
            ax.imshow(panel, cmap="magma", vmin=0, vmax=np.log(11))
        else:
            ax.imshow(panel, cmap=colours, vmin=0, vmax=11, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if row == 0:
            ax.set_title(titles[col])
figure.tight_layout()
plt.show()
