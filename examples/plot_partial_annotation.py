"""
Learning from partial annotation: sets of allowed labels
========================================================

An annotator who is unsure between two tags can say so: a node's label in ``y`` may be a
``set`` of labels, the node taking one of them (:ref:`label-sets`). :class:`~pmap_sklearn.ChainCRF`
then maximises the probability of the annotation, :math:`\\log P(y_d \\in S_d \\text{ for
every } d \\mid x)`, by forward–backward restricted to the sets.

On synthetic chains we replace a growing share of the training labels by a two-label set that
holds the true label, and compare with the same nodes left unknown (``-1``) and with every label
given. A two-label set says less than a label and more than nothing, and the accuracy lands in
between (up to the noise of a small training set). The same sets restrict a prediction:
``known_labels`` may hold them too.
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import ChainCRF
from pmap_sklearn.datasets import make_chain_data

N_TRAIN, K = 20, 5
data = make_chain_data(n_samples=N_TRAIN + 400, n_states=K, n_features=6, noise=1.5, random_state=0)
X, y = list(data.data[:N_TRAIN]), list(data.target[:N_TRAIN])
X_test, y_test = list(data.data[N_TRAIN:]), list(data.target[N_TRAIN:])
truth = np.concatenate(y_test)


def annotate(share, rng):
    """The labels with ``share`` of the nodes as a two-label set, and the same nodes unknown."""
    with_sets, unknown = [], []
    for labels in y:
        sets, hidden = np.array(labels, dtype=object), np.array(labels).copy()
        for d in np.flatnonzero(rng.random(len(labels)) < share):
            other = rng.choice([k for k in range(K) if k != labels[d]])
            sets[d], hidden[d] = {int(labels[d]), int(other)}, -1
        with_sets.append(sets)
        unknown.append(hidden)
    return with_sets, unknown


def accuracy(labels):
    return np.mean(np.concatenate(ChainCRF().fit(X, labels).predict(X_test)) == truth)


full = accuracy(y)
shares = [0.2, 0.4, 0.6, 0.8]
rng = np.random.default_rng(0)
results = {"two-label sets": [], "unknown (-1)": []}
for share in shares:
    with_sets, unknown = annotate(share, rng)
    results["two-label sets"].append(accuracy(with_sets))
    results["unknown (-1)"].append(accuracy(unknown))
    print(
        f"{share:.0%} partial: sets {results['two-label sets'][-1]:.3f}, "
        f"unknown {results['unknown (-1)'][-1]:.3f} (every label {full:.3f})"
    )

# %%
# Test accuracy against the share of training nodes annotated partially.
figure, axis = plt.subplots(figsize=(6, 3.6))
axis.axhline(full, color="k", linestyle="--", label="every label")
for name, values in results.items():
    axis.plot(shares, values, marker="o", label=name)
axis.set_xlabel("share of training nodes not labelled exactly")
axis.set_ylabel("test accuracy")
axis.legend()
figure.tight_layout()

# %%
# Sets restrict a prediction as well: here the first node of a test chain must be 0 or 1.
model = ChainCRF().fit(X, y)
known = np.full(len(X_test[0]), None, dtype=object)
known[0] = {0, 1}
print("free:       ", model.predict(X_test[:1])[0])
print("first in {0, 1}:", model.predict(X_test[:1], known_labels=[known])[0])
print("P(y_0):", model.predict_marginals(X_test[:1], known_labels=[known])[0][0].round(3))
