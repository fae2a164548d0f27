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
tutorial's token F1 (:mod:`pmap_sklearn.metrics`), beside the same tagger held to the BIO
scheme; each found entity gets its probability; the
figure shows the per-type scores and the marginals of one sentence's tags, read through the
pipeline with ``predict_proba``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from pmap_sklearn import ChainStructure, PerturbMAPCRF, SequenceVectorizer
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.inspection import entity_probabilities
from pmap_sklearn.metrics import (
    entity_precision_recall_fscore_support,
    entity_spans,
    flat_f1_score,
    to_bio_tags,
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
# Tags that no entity reading allows: an ``I-X`` that does not continue an ``X`` entity (after
# ``O``, after another type, or at a sentence's start). ``ChainStructure(constraints="BIO")``
# gives such labellings probability zero, in training as in prediction
# (:ref:`tagging-constraints`). The broken tags are those that ``to_bio_tags``, which reads
# tags as conlleval does, rewrites.
def broken_tags(tag_sequences):
    return sum(int(np.sum(np.asarray(tags) != to_bio_tags(tags))) for tags in tag_sequences)


bio_tagger = make_pipeline(
    SequenceVectorizer(token_features),
    PerturbMAPCRF(ChainStructure(constraints="BIO"), random_state=0),
)
# CoNLL-2002 Spanish has one training tag that breaks BIO (an I-LOC opening a sentence):
# to_bio_tags reads it as conlleval does, as B-LOC
bio_tagger.fit(train.tokens, [to_bio_tags(tags) for tags in train.tags])
bio_predicted = bio_tagger.predict(test.tokens)
for name, tags in (("defaults", predicted), ('constraints="BIO"', bio_predicted)):
    entity_f1 = entity_precision_recall_fscore_support(test.tags, tags)[2]
    print(f"{name:18s} entity F1 {entity_f1:.3f}, {broken_tags(tags)} tags break BIO")

# %%
# How sure the model is of each entity it found: the probability of the entity with its
# tags (:func:`~pmap_sklearn.inspection.entity_probabilities`; :ref:`entity-confidence`).
# ``method="exact"`` takes the Gibbs distribution of the weights, exact by forward–backward
# constrained to the span, in a second; the default, the entity's frequency over 1,000
# perturbed MAP labellings, is the better calibrated but costs 1,000 MAP calls per sentence.
# Keeping only the surest entities trades recall for precision.
confidences = entity_probabilities(tagger, test.tokens, method="exact")
for kind, start, end, probability in confidences[5]:
    words = " ".join(word for word, _ in test.tokens[5][start:end])
    print(f"{kind:4s} {words!r}: {probability:.3f}")
gold = [set(entity_spans(tags)) for tags in test.tags]
found = [(p, (k, s, e) in g) for c, g in zip(confidences, gold, strict=True) for k, s, e, p in c]
confidence, right = np.array(found).T
for threshold in (0.5, 0.9):
    kept = confidence >= threshold
    share, precision_kept = kept.mean(), right[kept].mean()
    print(f"entities with P >= {threshold}: {share:.0%} kept, precision {precision_kept:.3f}")

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
