"""
Training on a stream of chunks
==============================

``partial_fit`` runs one pass of the fit's optimiser over the chunk it is given and keeps the
rest — step sizes, the average of the iterates, the random stream — for the next chunk, so a
data set that does not fit in memory trains one chunk at a time (see "Out-of-core training"
in the user guide). Here chains are handed over chunk by chunk, as a reader of a large file
would: each chunk is used for one pass, every epoch reads the same chunks again, and the
held-out error after each chunk is compared with that of ``fit`` on all the chains at once.
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import PerturbMAPCRF, mean_hamming_loss
from pmap_sklearn.datasets import make_chain_data

N_CHUNKS, CHUNK, N_EPOCHS = 8, 60, 4
# chains of one model (held out: the last 200), standing for a file too large to load
data = make_chain_data(
    n_samples=N_CHUNKS * CHUNK + 200, n_states=4, n_features=8, noise=1.5, random_state=0
)
X_all, y_all = data.data[: N_CHUNKS * CHUNK], data.target[: N_CHUNKS * CHUNK]
X_test, y_test = data.data[N_CHUNKS * CHUNK :], data.target[N_CHUNKS * CHUNK :]


def read(i):
    """Chunk ``i`` as a reader of a large file would hand it over."""
    start = i * CHUNK
    return X_all[start : start + CHUNK], y_all[start : start + CHUNK]


model = PerturbMAPCRF(random_state=0)
errors = []
for _ in range(N_EPOCHS):
    for i in range(N_CHUNKS):
        X, y = read(i)
        model.partial_fit(X, y, classes=np.arange(4))
        errors.append(100 * mean_hamming_loss(y_test, model.predict(X_test)))
fit = PerturbMAPCRF(random_state=0).fit(X_all, y_all)
fit_error = 100 * mean_hamming_loss(y_test, fit.predict(X_test))
print(f"after {N_EPOCHS} epochs of {N_CHUNKS} chunks: test error {errors[-1]:.1f} %")
print(f"fit on every chain at once ({fit.n_iter_} epochs): test error {fit_error:.1f} %")

# %%
figure, axis = plt.subplots(figsize=(6.5, 3.6))
calls = np.arange(1, len(errors) + 1)
axis.plot(calls / N_CHUNKS, errors, "o-", markersize=3, label="partial_fit, chunk by chunk")
axis.axhline(fit_error, color="k", linestyle="--", label="fit on all chains")
axis.set_xlabel("epochs over the stream")
axis.set_ylabel("test Hamming error %")
axis.legend()
figure.tight_layout()
plt.show()
