"""
Word vectors and clusters beside token features
===============================================

Word clusters added to the sparse token features of sklearn-crfsuite's named-entity tutorial
(CoNLL-2002 Spanish), in the setting they are made for: few tagged sentences and more
untagged text. The tagger learns from the first 1,000 training sentences; the vectors come
from all 8,323 training sentences without their tags, no download:
:func:`~pmap_sklearn.embeddings.cooccurrence_vectors` takes the truncated SVD of the positive
pointwise mutual information of the words that occur within two tokens of each other (Levy,
Goldberg & Dagan 2015), 50 dimensions of unit length. :class:`~pmap_sklearn.TokenClusters`
turns them into one-hot k-means cluster ids of each word and of its neighbours (Turian,
Ratinov & Bengio 2010), a :class:`~pmap_sklearn.SequenceUnion` joins them to
:class:`~pmap_sklearn.SequenceVectorizer`'s features for each sentence (the output stays
sparse), and :class:`~pmap_sklearn.PerturbMAPCRF` fits it with its defaults, beside the same
tagger without them (:ref:`dense-vectors`). The settings — the vectors' window and dimension,
the block's scale — were chosen on ``esp.testa``; ``esp.testb`` only reports. The clusters
gain about a point of entity F1 on testb over three seeds, the raw dense vectors nothing; with
all the training sentences tagged, vectors of the same text gain nothing either (:ref:`the
vectors' table <ner-vectors-table>`).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from pmap_sklearn import PerturbMAPCRF, SequenceUnion, SequenceVectorizer, TokenClusters
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.embeddings import cooccurrence_vectors
from pmap_sklearn.metrics import entity_precision_recall_fscore_support

untagged, dev, test = (load_conll2002("esp", split) for split in ("train", "testa", "testb"))
tagged_tokens, tagged_tags = untagged.tokens[:1000], untagged.tags[:1000]
words, vectors = cooccurrence_vectors(untagged.sentences, n_components=50, window=2)
print(f"{len(words):,} lower-cased words of the untagged sentences, {vectors.shape[1]} dimensions")

# %%
# What the vectors hold: among the words seen at least 20 times in the untagged text, those
# closest to a few others (cosine similarity: the vectors have unit length; a rare word's
# vector rests on few co-occurrences). Words used alike get close vectors, though nothing
# told the SVD what they are.
index = {word: v for v, word in enumerate(words)}
counts = np.bincount(
    [index[word.lower()] for sentence in untagged.sentences for word in sentence],
    minlength=len(words),
)
frequent = np.flatnonzero(counts >= 20)
for word in ("madrid", "presidente", "dijo", "gobierno"):
    similarity = vectors[frequent] @ vectors[index[word]]
    closest = [words[v] for v in frequent[np.argsort(-similarity)[1:6]]]
    print(f"{word:10s} -> {', '.join(closest)}")

# %%
# A linear tagger takes the vectors best made discrete (Turian, Ratinov & Bengio 2010): the
# word's cluster at a few granularities, for the token and its neighbours, as one-hot
# features. :class:`~pmap_sklearn.TokenClusters` runs k-means on the vectors into 50, 200 and
# 1000 clusters (its defaults) and gives token i the ids of the clusters of words i - 1, i and
# i + 1, fitted with the tagger. Both taggers below read the raw ``(word, pos)`` tokens: the
# vectorizer builds the tutorial's feature dicts from them, the clusters look up the
# lower-cased word (the first item of each token); a word without a vector gets no cluster.
# The clusters' block is scaled by 0.3 (``transformer_weights``, chosen on testa): with the
# same L2 penalty on every weight, the scale sets how much its weights are held back.
plain = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
features = SequenceUnion(
    [
        ("tokens", SequenceVectorizer(token_features)),
        ("clusters", TokenClusters((words, vectors), lowercase=True)),
    ],
    transformer_weights={"clusters": 0.3},
)
with_clusters = make_pipeline(features, PerturbMAPCRF(random_state=0))
scores = {}
for name, tagger in (("token features", plain), ("+ word clusters", with_clusters)):
    tagger.fit(tagged_tokens, tagged_tags)
    for split, data in (("testa", dev), ("testb", test)):
        predicted = tagger.predict(data.tokens)
        scores[name, split] = entity_precision_recall_fscore_support(
            data.tags, predicted, average=None
        )
        f1 = entity_precision_recall_fscore_support(data.tags, predicted)[2]
        print(f"{name:15s} {split}: entity F1 {f1:.4f}")

# %%
# Two of the 1000 clusters, those of "madrid" and "dijo" (their frequent words): the tagger
# reads a word's cluster where the token features have only the word, or nothing for a word
# the tagged sentences lack.
clusters = with_clusters[0].named_transformers_.clusters
for word in ("madrid", "dijo"):
    members = frequent[clusters.clusters_[frequent, 2] == clusters.clusters_[index[word], 2]]
    print(f"{word:10s} -> {', '.join(words[v] for v in members[:12])}")
seen = {token[0].lower() for sentence in tagged_tokens for token in sentence}
test_words = [word.lower() for sentence in test.sentences for word in sentence]
print(
    f"testb tokens whose word the tagged sentences lack: "
    f"{np.mean([w not in seen for w in test_words]):.1%}, of which with a cluster: "
    f"{np.mean([w in index for w in test_words if w not in seen]):.1%}"
)

# %%
# Per-type entity F1 on testb. One seed: a seed moves the entity F1 by about a point, so the
# benchmark (``benchmarks/ner_vectors.py``) compares the means over three seeds, with the
# dense vectors and with all the training sentences tagged too (:ref:`the vectors' table
# <ner-vectors-table>`).
figure, axis = plt.subplots(figsize=(7, 3.8))
types = scores["token features", "testb"][4]
positions = np.arange(len(types))
for offset, name in ((-0.2, "token features"), (0.2, "+ word clusters")):
    axis.bar(positions + offset, scores[name, "testb"][2], width=0.4, label=name)
axis.set_xticks(positions, types)
axis.set_ylim(0.2, 1.0)
axis.set_ylabel("entity F1 on esp.testb")
axis.legend(loc="upper left", ncols=2)
figure.tight_layout()
plt.show()
