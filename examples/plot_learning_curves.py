"""
Learning curves
===============

The SGD learners record the estimate of their regularised objective after every epoch
(``loss_curve_``, lower is better). Warm starts continue a fit with the same schedule, average
and random stream, so fitting a few epochs at a time and scoring held-out samples in between
gives the validation error along one run — here for the perturb-and-MAP likelihood and its
marginal variant, with the exact CRF's error as a reference.
"""

import matplotlib.pyplot as plt

from pmap_sklearn import ChainCRF, MarginalPerturbMAPCRF, PerturbMAPCRF, mean_hamming_loss
from pmap_sklearn.datasets import make_chain_data

data = make_chain_data(n_samples=400, n_states=5, n_features=10, noise=2.0, random_state=0)
X, y, X_test, y_test = data.data[:250], data.target[:250], data.data[250:], data.target[250:]

curves = {}
for model in (
    PerturbMAPCRF(alpha=1e-3, tol=None, random_state=0),
    MarginalPerturbMAPCRF(alpha=1e-3, random_state=0),
):
    model.set_params(max_iter=2, warm_start=True)
    errors = []
    for _ in range(20):  # 20 rounds of 2 epochs: one run of 40 epochs
        model.fit(X, y)
        errors.append(100 * mean_hamming_loss(y_test, model.predict(X_test)))
    curves[type(model).__name__] = (model.loss_curve_, errors)
exact = 100 * mean_hamming_loss(y_test, ChainCRF(alpha=1e-3).fit(X, y).predict(X_test))
print(f"exact CRF test error {exact:.1f} %")

# %%
figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
for name, (loss, errors) in curves.items():
    left.plot(range(1, len(loss) + 1), loss, label=name)
    right.plot(range(2, 2 * len(errors) + 1, 2), errors, "o-", label=name)
right.axhline(exact, color="k", linestyle="--", label="ChainCRF (exact)")
left.set_xlabel("epoch")
left.set_ylabel("loss_curve_ (training objective)")
right.set_xlabel("epoch")
right.set_ylabel("test Hamming error %")
left.legend()
right.legend()
figure.tight_layout()
plt.show()
