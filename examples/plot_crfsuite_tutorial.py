"""
sklearn-crfsuite's tutorial, ported
===================================

sklearn-crfsuite's named-entity tutorial (CoNLL-2002 Spanish), step by step with this library:
its token features (:func:`~pmap_sklearn.datasets.token_features` on ``(word, pos)`` pairs),
its model — crfsuite's L-BFGS with ``c1 = c2 = 0.1`` is :class:`~pmap_sklearn.ChainCRF` with the
elastic net that :func:`~pmap_sklearn.crfsuite_penalty` maps those to, fitted by OWL-QN on the
(feature, tag) pairs seen in training (``all_possible_states=False``, crfsuite's default) —
its reports (:mod:`pmap_sklearn.metrics`' ``flat_*`` functions) and its views of the weights
(:func:`~pmap_sklearn.inspection.state_features`,
:func:`~pmap_sklearn.inspection.transition_features`).

To keep the documentation build short this fits on the first 3,000 of the 8,323 training
sentences for crfsuite's 100 iterations; ``benchmarks/ner.py`` runs the whole tutorial against
sklearn-crfsuite. See "Coming from sklearn-crfsuite" in the user guide for the full table of
names.
"""

import pickle
import warnings
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

from pmap_sklearn import ChainCRF, SequenceVectorizer, crfsuite_penalty
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.inspection import state_features, transition_features
from pmap_sklearn.metrics import flat_classification_report, flat_f1_score

train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
X_train, y_train = train.tokens[:3000], train.tags[:3000]

# sklearn-crfsuite: CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100,
#                       all_possible_transitions=True)
alpha, l1_ratio = crfsuite_penalty(c1=0.1, c2=0.1, n_samples=len(X_train))
crf = make_pipeline(
    SequenceVectorizer(token_features),
    ChainCRF(alpha=alpha, l1_ratio=l1_ratio, all_possible_states=False, max_iter=100),
)
with warnings.catch_warnings():  # crfsuite's 100 iterations end before OWL-QN's stopping rule
    warnings.simplefilter("ignore", ConvergenceWarning)
    crf.fit(X_train, y_train)

# %%
# Evaluation: the tutorial's token F1 over the tags other than O, and its per-tag report with
# the B- and I- tags of each entity type side by side.
labels = [tag for tag in crf[-1].classes_ if tag != "O"]
y_pred = crf.predict(test.tokens)
print(f"token F1 (tags other than O): {flat_f1_score(test.tags, y_pred, labels=labels):.3f}")
sorted_labels = sorted(labels, key=lambda name: (name[1:], name[0]))
print(flat_classification_report(test.tags, y_pred, labels=sorted_labels, digits=3))

# %%
# What the model learned. crfsuite's L1 leaves most weights at exactly zero: the views list
# the non-zero ones, as sklearn-crfsuite's ``state_features_`` and ``transition_features_``
# do (features are named ``name=value`` where crfsuite writes ``name:value``), and a pickle
# of the pipeline stores only those weights.
states, transitions = state_features(crf), transition_features(crf)
model = crf[-1]
print(f"{len(states):,} non-zero state weights of {model.structure_.unpack(model.coef_)[0].size:,}")
print(f"saved pipeline: {len(pickle.dumps(crf)) / 1e6:.1f} MB")
print("most likely transitions:")
for (a, b), weight in Counter(transitions).most_common(5):
    print(f"  {a:6} -> {b:6} {weight:+.3f}")
print("top positive state features:")
for (feature, tag), weight in Counter(states).most_common(8):
    print(f"  {weight:+.3f} {tag:6} {feature}")

# %%
# The transition weights as a table (zero where the L1 penalty removed a transition).
classes = list(model.classes_)
table = np.zeros((len(classes), len(classes)))
for (a, b), weight in transitions.items():
    table[classes.index(a), classes.index(b)] = weight
limit = np.abs(table).max()
figure, axis = plt.subplots(figsize=(6, 5))
image = axis.imshow(table, cmap="RdBu", vmin=-limit, vmax=limit)
axis.set_xticks(range(len(classes)), classes, rotation=60)
axis.set_yticks(range(len(classes)), classes)
axis.set_xlabel("to")
axis.set_ylabel("from")
axis.set_title("transition weights (ChainCRF, c1 = c2 = 0.1)")
figure.colorbar(image)
figure.tight_layout()
plt.show()
