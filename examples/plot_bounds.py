"""
Log-partition bounds as the coupling grows
==========================================

For a binary model with attractive pairwise terms the exact log-partition function is bounded
by the logistic perturb-and-MAP bound, itself bounded by the L-field bound (Shpakova 2019,
Prop. 2.1). On a 4×4 grid (2^16 labellings, so the exact value is at hand) with random unary
scores, we let the coupling :math:`c` of every edge grow: all three agree without coupling, and
the gaps grow with it.
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import Potentials, grid_edges
from pmap_sklearn.bounds import log_partition_exact, log_partition_lfield, log_partition_perturb

rng = np.random.default_rng(0)
side = 4
edges = grid_edges((side, side))
unary = np.column_stack([np.zeros(side * side), rng.normal(size=side * side)])
couplings = np.linspace(0, 2, 9)
rows = []
for c in couplings:
    model = Potentials(unary, edges, np.full(len(edges), -c))  # score -c when ends disagree
    estimate, error = log_partition_perturb(model, n_samples=400, random_state=0)
    rows.append((log_partition_exact(model), estimate, error, log_partition_lfield(model)))
exact, logistic, error, lfield = map(np.array, zip(*rows, strict=True))
for c, row in zip(couplings, rows, strict=True):
    print(
        f"c = {c:.2f}: exact {row[0]:.3f}, logistic {row[1]:.3f} ± {row[2]:.3f}, "
        f"L-field {row[3]:.3f}"
    )

# %%
figure, axis = plt.subplots(figsize=(6, 4))
axis.plot(couplings, exact, "k-o", label="exact A")
axis.errorbar(couplings, logistic, 2 * error, fmt="s-", label="logistic perturb-and-MAP (±2 se)")
axis.plot(couplings, lfield, "^-", label="L-field")
axis.set_xlabel("coupling c (score −c when neighbours disagree)")
axis.set_ylabel("log-partition function")
axis.legend()
figure.tight_layout()
plt.show()
