"""
Road scenes on superpixel graphs
================================

CamVid's road scenes (11 classes at 480×360) segmented by a CRF over superpixels, the
two-stage recipe of :ref:`scene-segmentation` on 19 training frames (a twentieth of
the training split, so that the gallery builds in seconds; ``benchmarks/camvid.py`` runs the
whole split, its table is in the guide):
:class:`~pmap_sklearn.superpixels.SuperpixelGraphs` (inside
:func:`~pmap_sklearn.datasets.load_camvid`, which caches each frame's graph) turns each frame
into a graph of about 1,000 SLIC superpixels with colour, texture and position features and
contrast-sensitive edges; a class-balanced logistic regression gives each superpixel
out-of-fold class probabilities (the benchmark's gradient-boosted classifier is better and
ten times slower), over folds of consecutive frames (``cv=KFold(3)``: a frame's neighbours
in time stay on its side); :class:`~pmap_sklearn.PerturbMAPCRF` learns, with its defaults,
how far to trust them and how strongly neighbours agree, and
:class:`~pmap_sklearn.TwoStageCRF` keeps the unary form, the smoothing (a share of the
learned pairwise weights, or a uniform Potts weight) and the class offsets that score best on
the last fold's frames (none: the classifier's own decisions). Void superpixels (label 11)
are ignored, not filled in. The figure paints node labels and the entropy of the
perturb-and-MAP marginals back onto the pixels with
:func:`~pmap_sklearn.superpixels.to_pixels`. Two test frames show the effect, not a ranking:
the scores printed are those of 12 test frames, those on the 233 test frames are measured by
the benchmark.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from skimage import io
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import PerturbMAPCRF, TwoStageCRF
from pmap_sklearn.datasets import load_camvid
from pmap_sklearn.metrics import segmentation_scores
from pmap_sklearn.superpixels import to_pixels

train = load_camvid("train", indices=range(0, 367, 20))  # 19 frames
test = load_camvid("test", indices=range(5, 233, 20))  # 12 frames, two of them shown

model = TwoStageCRF(
    # C=0.1: a penalty at which L-BFGS converges on these 19 frames' superpixels
    make_pipeline(
        StandardScaler(), LogisticRegression(C=0.1, class_weight="balanced", max_iter=500)
    ),
    PerturbMAPCRF("graph", random_state=0),
    cv=KFold(3),
    ignore_label=train.void,
    random_state=0,
)
model.fit(train.data, train.target)
predicted = model.predict(test.data)
alone = [model.classifier_.predict(g.node_features) for g in test.data]


def pixel_scores(node_labels):
    painted = [to_pixels(g, labels) for g, labels in zip(test.data, node_labels, strict=True)]
    s = segmentation_scores(test.pixel_target, painted, labels=np.arange(11), void=test.void)
    return (
        f"global {s['global_accuracy']:.1%}, class average {s['class_average_accuracy']:.1%}, "
        f"mean IoU {s['mean_iou']:.1%}"
    )


print(f"{'classifier alone:':<20}{pixel_scores(alone)}")
print(f"{'two-stage CRF:':<20}{pixel_scores(predicted)}")
_, pairwise = model.crf_.structure_.unpack(model.crf_.coef_)
print(f"stage two: unary={model.unary_!r}, {model.pairwise_} pairwise x {model.pairwise_scale_:g}")
print("class offsets on the log-probabilities:", model.class_offsets_.round(2))
print("Potts weights on [1, contrast, boundary length]:", pairwise.round(2))

# %%
# Each row: the frame, its labels (black: void), the classifier alone, the CRF, and the
# entropy of the CRF's marginals (100 perturbed MAPs): uncertainty sits on object boundaries
# and on the small classes.
shown = [0, 6]
marginals = model.predict_proba([test.data[i] for i in shown])
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
    "marginal entropy",
]
figure, axes = plt.subplots(2, 5, figsize=(15, 4.4))
for row, (frame, marginal) in enumerate(zip(shown, marginals, strict=True)):
    graph = test.data[frame]
    entropy = -(marginal * np.log(np.maximum(marginal, 1e-12))).sum(axis=1)
    panels = [
        io.imread(test.filenames[frame]),
        test.pixel_target[frame],
        to_pixels(graph, alone[frame]),
        to_pixels(graph, predicted[frame]),
        to_pixels(graph, entropy),
    ]
    for col, panel in enumerate(panels):
        ax = axes[row, col]
        if col == 0:
            ax.imshow(panel)
        elif col == 4:
            ax.imshow(panel, cmap="magma", vmin=0, vmax=np.log(11))
        else:
            ax.imshow(panel, cmap=colours, vmin=0, vmax=11, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if row == 0:
            ax.set_title(titles[col])
figure.tight_layout()
plt.show()
