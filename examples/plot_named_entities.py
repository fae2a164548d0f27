"""
Named entities with the defaults
================================

sklearn-crfsuite's named-entity tutorial (CoNLL-2002 Spanish: persons, locations,
organisations and miscellaneous entities in IOB2 tags) with nothing chosen by hand: a
:class:`~pmap_sklearn.SequenceVectorizer` turns the tutorial's token features — words with
their part-of-speech tags, :func:`~pmap_sklearn.datasets.token_features` on ``(word, pos)``
pairs — into sparse chains, and :class:`~pmap_sklearn.PerturbMAPCRF` decides its own settings
from them (AdaGrad steps, mini-batches of 32, 8 epochs with their second half averaged,
``alpha = 0.2 / n_samples``). Scored on ``esp.testb`` with the shared task's entity F1 and the
tutorial's token F1 (:mod:`pmap_sklearn.metrics`); the figure shows the per-type scores and
the marginals of one sentence's tags, read through the pipeline with ``predict_proba``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.metrics import (
    entity_precision_recall_fscore_support,
    flat_f1_score,
)

train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
tagger = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
tagger.fit(train.tokens, train.tags)
chosen = tagger[-1].sgd_settings_
print(
    f"chosen: {chosen['learning_rate']} steps, alpha {chosen['alpha']:.1e}, batches of "
    f"{chosen['batch_size']}, {chosen['max_iter']} epochs, "
    f"averaged after {chosen['average']} samples"
)
predicted = tagger.predict(test.tokens)
print(f"token F1 (tags other than O): {flat_f1_score(test.tags, predicted, exclude='O'):.3f}")
precision, recall, f1, support, types = entity_precision_recall_fscore_support(
    test.tags, predicted, average=None
)
for name, p, r, f, n in zip(types, precision, recall, f1, support, strict=True):
    print(f"{name:5s} precision {p:.3f} recall {r:.3f} F1 {f:.3f} ({n} entities)")

# %%
# Per-type entity scores, and the marginals of a test sentence's tags (exact, by
# forward–backward on the chain: one pass per sentence).
sentence = test.tokens[5]  # "Arévalo ( Avila ) , 23 may ( EFE ) .": two places, an agency
marginals = tagger.predict_proba([sentence])[0]
classes = list(tagger[-1].classes_)
figure, (left, right) = plt.subplots(
    1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 2.4]}
)
positions = np.arange(len(types))
for offset, values, label in (
    (-0.25, precision, "precision"),
    (0, recall, "recall"),
    (0.25, f1, "F1"),
):
    left.bar(positions + offset, values, width=0.25, label=label)
left.set_xticks(positions, types, fontsize=11)
left.legend(fontsize=10, loc="upper left", ncols=3)
left.set_ylim(0, 1.15)
left.set_title("entity scores on esp.testb", fontsize=12)
words = [word for word, _ in sentence]
right.imshow(marginals.T, cmap="Blues", vmin=0, vmax=1, aspect="auto")
right.set_xticks(range(len(words)), words, rotation=60, fontsize=10)
right.set_yticks(range(len(classes)), classes, fontsize=10)
right.set_title("P(tag | sentence)", fontsize=12)
figure.tight_layout()
plt.show()
