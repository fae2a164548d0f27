"""
Second-best readings and transition marginals
=============================================

How sure is a tagger of a sentence, and what else could the sentence be? A tagger held to the
BIO scheme (:class:`~pmap_sklearn.PerturbMAPCRF`, ``ChainStructure(constraints="BIO")``) is
trained on a slice of CoNLL-2002 Spanish. On the test sentence it hesitates over most,
:func:`~pmap_sklearn.inspection.k_best_labellings` lists its five most probable tag sequences
with their probabilities: with ``method="exact"`` those of the Gibbs distribution of its
weights, by the list Viterbi algorithm (the first one what ``predict`` returns); by default,
the distribution the tagger was fitted to, its perturbed MAPs ranked by their frequency over
1,000 draws. :func:`~pmap_sklearn.inspection.edge_marginals` gives every pair of neighbouring
words the probability of each pair of tags, :math:`P(y_d = a, y_{d+1} = b \\mid x)`, zero on
the transitions BIO forbids (:ref:`k-best-labellings`).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from pmap_sklearn import ChainStructure, PerturbMAPCRF, SequenceVectorizer
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.inspection import edge_marginals, k_best_labellings
from pmap_sklearn.metrics import to_bio_tags

train, test = load_conll2002("esp", "train"), load_conll2002("esp", "testb")
train_tokens, train_tags = train.tokens[:1500], [to_bio_tags(t) for t in train.tags[:1500]]
tagger = make_pipeline(
    SequenceVectorizer(token_features),
    PerturbMAPCRF(ChainStructure(constraints="BIO"), random_state=0),
)
tagger.fit(train_tokens, train_tags)

# %%
# The short test sentences with an entity, and the one whose best reading is least likely.
candidates = [
    i for i, tags in enumerate(test.tags[:300]) if 6 <= len(tags) <= 14 and set(tags) != {"O"}
]
exact = dict(method="exact")
_, best = k_best_labellings(tagger, [test.tokens[i] for i in candidates], k=1, **exact)
sentence = test.tokens[candidates[int(np.argmin([p[0] for p in best]))]]
words = [word for word, _ in sentence]
print(" ".join(words))
(readings,), (probabilities,) = k_best_labellings(tagger, [sentence], k=5, **exact)
print("exact:")
for reading, probability in zip(readings, probabilities, strict=True):
    print(f"  {probability:.3f}  " + " ".join(reading))
print(f"  the five readings hold {probabilities.sum():.0%} of the probability")
assert (readings[0] == tagger.predict([sentence])[0]).all()  # the first is the MAP
(drawn,), (frequencies,) = k_best_labellings(tagger, [sentence], k=5, random_state=0)
print("frequencies over 1,000 perturbed MAPs:")
for reading, frequency in zip(drawn, frequencies, strict=True):
    print(f"  {frequency:.3f}  " + " ".join(reading))

# %%
# The transition marginals of the sentence: at the pair of words where the model is least
# sure of the pair of tags (the largest entropy of the K × K table), as a heat map.
pair = edge_marginals(tagger, [sentence], **exact)[0]  # (len(words) - 1, K, K)
with np.errstate(divide="ignore", invalid="ignore"):
    entropy = -np.where(pair > 0, pair * np.log(pair), 0.0).sum(axis=(1, 2))
edge = int(np.argmax(entropy))
classes = list(tagger[-1].classes_)

figure, (left, right) = plt.subplots(
    1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [1.4, 1]}
)
left.barh(range(len(probabilities))[::-1], probabilities, color="tab:blue")
left.set_yticks(
    range(len(probabilities))[::-1],
    [" ".join(tag if tag != "O" else "·" for tag in reading) for reading in readings],
    fontsize=8,
)
left.set_xlabel("probability of the whole tag sequence (exact)")
left.set_title(" ".join(words), fontsize=10)
image = right.imshow(pair[edge], cmap="Blues", vmin=0, vmax=pair[edge].max())
right.set_xticks(range(len(classes)), classes, rotation=60, fontsize=9)
right.set_yticks(range(len(classes)), classes, fontsize=9)
right.set_xlabel(f"tag of {words[edge + 1]!r}")
right.set_ylabel(f"tag of {words[edge]!r}")
right.set_title("P(tag pair | sentence)", fontsize=11)
figure.colorbar(image, ax=right, fraction=0.046)
figure.tight_layout()
plt.show()
