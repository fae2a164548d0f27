"""
A Pipeline and GridSearchCV on structured samples
=================================================

Structured estimators follow the scikit-learn contract, so they compose with its tools.
:class:`~pmap_sklearn.NodeTransformer` applies a scikit-learn transformer to the node features
of every sample (here ``StandardScaler``: the raw features are on a large scale), and
``GridSearchCV`` tunes the regularisation together with a parameter of the structure (its bias
feature), scored by the mean Hamming loss of the samples (``hamming_scorer``). Each fit runs a
fixed budget of 20 epochs (``tol=None``: no stopping rule, so no convergence warning).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import ChainStructure, NodeTransformer, PerturbMAPCRF, hamming_scorer
from pmap_sklearn.datasets import make_chain_data

data = make_chain_data(n_samples=300, n_states=5, n_features=10, noise=2.0, random_state=0)
X = [100 + 25 * x for x in data.data]  # features far from zero mean and unit scale
y = data.target

pipe = Pipeline(
    [
        ("scale", NodeTransformer(StandardScaler())),
        ("crf", PerturbMAPCRF(ChainStructure(), max_iter=20, tol=None, random_state=0)),
    ]
)
grid = {"crf__alpha": [1e-4, 1e-3, 1e-2, 1e-1], "crf__structure__bias": [True, False]}
search = GridSearchCV(pipe, grid, scoring=hamming_scorer, cv=KFold(3, shuffle=True, random_state=0))
search.fit(X[:200], y[:200])
print("best parameters:", search.best_params_)
print(f"held-out 1 - Hamming loss: {search.score(X[200:], y[200:]):.3f}")

# %%
results = search.cv_results_
figure, axis = plt.subplots(figsize=(6, 3.6))
for bias in (True, False):
    keep = np.array(results["param_crf__structure__bias"], dtype=bool) == bias
    axis.errorbar(
        np.array(results["param_crf__alpha"], dtype=float)[keep],
        results["mean_test_score"][keep],
        results["std_test_score"][keep],
        fmt="o-",
        label=f"bias={bias}",
    )
axis.set_xscale("log")
axis.margins(x=0.1, y=0.2)  # room for the error bars and the legend
axis.set_xlabel("alpha")
axis.set_ylabel("1 - Hamming loss (3-fold CV)")
axis.legend()
figure.tight_layout()
plt.show()
