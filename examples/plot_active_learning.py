r"""
Active learning: which sentences to label
=========================================

Labelling named entities costs an annotator's time per sentence. Pool-based active learning
(Settles & Craven 2008) fits a model on the few sentences labelled so far and asks for the
labels of those it is least sure of. A CRF's marginals :math:`q_d(k) = P(y_d = k | x)` are
those of whole tag sequences (forward–backward over the chain), and their sum
:math:`\sum_d (1 - \max_k q_d(k))` is the number of tags the model expects to get wrong in the
sentence: the uncertainty used here, level in the benchmark with the probability that the best
tag sequence is wrong, :math:`1 - P(y^* | x)` (the one it chose on ``esp.testa``).

Here on 2,000 sentences of CoNLL-2002 Spanish (the pool) with a default
:class:`~pmap_sklearn.PerturbMAPCRF`: a random 5 % labelled to start, then four rounds that
label the 5 % of the pool the model is least sure of, against random sentences; entity F1
(conlleval) on ``esp.testb``. ``benchmarks/active_learning.py`` runs the whole pool, three
seeds and other uncertainties (:ref:`active-learning`).
"""

import matplotlib.pyplot as plt
import numpy as np

from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.metrics import entity_f1_score

train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
pool_size = 2000
# The pool's text is known before any label: its features are built once.
vectorizer = SequenceVectorizer(token_features).fit(train.tokens[:pool_size])
X, y = vectorizer.transform(train.tokens[:pool_size]), train.tags[:pool_size]
X_test = vectorizer.transform(test.tokens)

order = np.random.default_rng(0).permutation(pool_size)
step = pool_size // 20  # 5 % of the pool per round


def f1_of(labelled):
    model = PerturbMAPCRF(random_state=0).fit([X[i] for i in labelled], [y[i] for i in labelled])
    return model, entity_f1_score(test.tags, model.predict(X_test))


budgets = np.arange(1, 6) * step
curves = {"random": [], "expected token errors": []}
labelled = list(order[:step])  # the same random start for both
for size in budgets:
    model, f1 = f1_of(labelled)
    curves["expected token errors"].append(f1)
    curves["random"].append(f1 if size == step else f1_of(order[:size])[1])
    if size < budgets[-1]:  # ask for the labels of the sentences the model is least sure of
        pool = np.setdiff1d(np.arange(pool_size), labelled)
        marginals = model.predict_marginals([X[i] for i in pool])
        uncertainty = np.array([np.sum(1 - q.max(axis=1)) for q in marginals])
        labelled += pool[np.argsort(-uncertainty, kind="stable")[:step]].tolist()
reference = f1_of(order[: 8 * step])[1]  # 40 % of the pool, at random
for name, f1 in curves.items():
    print(f"{name:22s}", " ".join(f"{value:.3f}" for value in f1))
print(f"random, 40 % of the pool: {reference:.3f}")
tokens = sum(len(y[i]) for i in labelled) / sum(len(tags) for tags in y)
print(f"the {len(labelled)} uncertain sentences hold {tokens:.0%} of the pool's tokens")

# %%
# The uncertain sentences are longer than average (a long sentence has more ways to be
# wrong), so they hold more tokens than random ones. Counted in tokens the gain is smaller,
# but it stays: in the benchmark the uncertainty normalised by length labels as many tokens as
# random sentences do and still beats 40 % of them.
figure, axis = plt.subplots(figsize=(6, 4))
for name, f1 in curves.items():
    axis.plot(100 * budgets / pool_size, f1, "o-", label=name)
axis.axhline(reference, color="k", linestyle="--", label="random, 40 % labelled")
axis.set_xlabel("sentences labelled (% of the pool)")
axis.set_ylabel("entity F1 on esp.testb")
axis.legend()
figure.tight_layout()
plt.show()
