"""
Sparse taggers: L1 in the SGD learners
======================================

sklearn-crfsuite's named-entity tutorial (CoNLL-2002 Spanish) with an L1 term in the penalty
of :class:`~pmap_sklearn.PerturbMAPCRF`: ``l1_ratio`` mixes scikit-learn's elastic net,
:math:`\\alpha (\\rho \\|w\\|_1 + (1 - \\rho) \\|w\\|^2 / 2)`, and
:func:`~pmap_sklearn.crfsuite_penalty` gives ``alpha`` and ``l1_ratio`` for crfsuite's ``c1``
and ``c2``. The L1 term is taken by the cumulative penalty of Tsuruoka et al. (2009), which
keeps at zero the weights only the noise of the stochastic gradients moves, and the averaged
weights are kept on the last iterate's non-zeros (see "Sparse models: L1" in the user guide).
The dense defaults, crfsuite's own ``c1 = c2 = 0.1`` and the setting chosen on ``esp.testa``
(``c1 = 0.2``, ``c2 = 0.05``) are scored on ``esp.testb``: the non-zero (feature, tag)
weights, the token F1 of the tutorial and the size of the pickled pipeline.
"""

import pickle
import time

import matplotlib.pyplot as plt
from sklearn.pipeline import make_pipeline

from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer, crfsuite_penalty
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.inspection import state_features
from pmap_sklearn.metrics import flat_f1_score

train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
vectorizer = SequenceVectorizer(token_features).fit(train.tokens)
X_train, X_test = vectorizer.transform(train.tokens), vectorizer.transform(test.tokens)


def elastic_net(c1, c2):
    """crfsuite's ``c1``, ``c2`` as the learners' ``alpha``, ``l1_ratio``."""
    alpha, l1_ratio = crfsuite_penalty(c1, c2, n_samples=len(X_train))
    return dict(alpha=alpha, l1_ratio=l1_ratio)


settings = {
    "dense (defaults)": {},
    "c1 = c2 = 0.1 (crfsuite's)": elastic_net(0.1, 0.1),
    "c1 = 0.2, c2 = 0.05": elastic_net(0.2, 0.05),
}
results = {}
for name, params in settings.items():
    start = time.perf_counter()
    model = PerturbMAPCRF(random_state=0, **params).fit(X_train, train.tags)
    seconds = time.perf_counter() - start
    tagger = make_pipeline(vectorizer, model)  # the fitted vectoriser and learner
    result = results[name] = dict(
        weights=len(state_features(tagger)),
        f1=flat_f1_score(test.tags, model.predict(X_test), exclude="O"),
        megabytes=len(pickle.dumps(tagger)) / 1e6,
    )
    print(
        f"{name:28s} {result['weights']:6,d} non-zero state weights, token F1 "
        f"{result['f1']:.4f}, pickle {result['megabytes']:.1f} MB, fit {seconds:.1f} s"
    )

# %%
# Token F1 against the number of non-zero (feature, tag) weights: the chosen L1 setting keeps
# the dense model's F1 with about half its weights.
figure, axis = plt.subplots(figsize=(6.5, 4))
for name, result in results.items():
    axis.scatter(result["weights"], result["f1"], s=60)
    axis.annotate(name, (result["weights"], result["f1"]), textcoords="offset points",
                  xytext=(6, 6), fontsize=10)  # fmt: skip
axis.set_xlabel("non-zero state weights", fontsize=11)
axis.set_ylabel("token F1 on esp.testb", fontsize=11)
axis.set_xlim(0, 1.25 * max(result["weights"] for result in results.values()))
figure.tight_layout()
plt.show()
