"""
OCR words: predictions and per-letter marginals
===============================================

A :class:`~pmap_sklearn.PerturbMAPCRF` on the OCR words of Taskar et al. (2003), trained on one
fold (the "small" protocol of Shpakova et al. 2018) and tested on another. For a few test
words we show the letter images, the MAP labelling (Viterbi) and the marginals of every letter:
the frequencies over 500 Gumbel-perturbed MAPs next to the exact marginals of the same model
(forward-backward). With transitions the perturb-and-MAP model differs from the Gibbs
distribution of the same weights, so the two need not match exactly.
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import PerturbMAPCRF, mean_hamming_loss
from pmap_sklearn.datasets import load_ocr

ocr = load_ocr()
train = [i for i, fold in enumerate(ocr.folds) if fold == 0]
test = [i for i, fold in enumerate(ocr.folds) if fold == 1]
X, y = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
X_test, y_test = [ocr.data[i] for i in test], [ocr.target[i] for i in test]

crf = PerturbMAPCRF(alpha=3e-3, max_iter=100, tol=None, random_state=0).fit(X, y)
print(
    f"{len(X)} training words; test Hamming error "
    f"{100 * mean_hamming_loss(y_test, crf.predict(X_test)):.1f} % on {len(X_test)} words"
)

# %%
# Three test words: images, MAP letters and marginals.
words = [X_test[i] for i in (0, 5, 12)]
truth = [y_test[i] for i in (0, 5, 12)]
predicted = crf.predict(words)
perturbed = crf.predict_marginals(words, n_perturbations=500)
exact = crf.predict_marginals(words, method="exact")
letters = np.array(list(ocr.letters))

figure, axes = plt.subplots(3, 3, figsize=(12, 12), gridspec_kw={"width_ratios": [1, 2, 2]})
for row, (word, labels, guess, q, p) in enumerate(
    zip(words, truth, predicted, perturbed, exact, strict=True)
):
    axes[row, 0].imshow(np.hstack([letter.reshape(16, 8) for letter in word]), cmap="gray_r")
    axes[row, 0].set_title(f"truth '{''.join(letters[labels])}'\nMAP '{''.join(letters[guess])}'")
    for axis, marginals, name in ((axes[row, 1], q, "perturb-and-MAP"), (axes[row, 2], p, "exact")):
        axis.imshow(marginals.T, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        axis.set_yticks(range(26), letters, fontsize=10)
        axis.set_title(f"{name} marginals", fontsize=13)
for axis in axes.ravel():
    axis.set_xticks([])
for axis in axes[:, 0]:
    axis.set_yticks([])
figure.tight_layout()
plt.show()
