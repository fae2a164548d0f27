"""
Word vectors beside token features
==================================

Dense word vectors appended to the sparse token features of sklearn-crfsuite's named-entity
tutorial (CoNLL-2002 Spanish). The vectors come from the training sentences themselves, no
download: :func:`~pmap_sklearn.embeddings.cooccurrence_vectors` takes the truncated SVD of the
positive pointwise mutual information of the words that occur within two tokens of each other
(Levy, Goldberg & Dagan 2015), 50 dimensions of unit length. A
:class:`~pmap_sklearn.SequenceUnion` joins :class:`~pmap_sklearn.SequenceVectorizer`'s
features and :class:`~pmap_sklearn.TokenEmbeddings`' vectors for each sentence (the output
stays sparse), and :class:`~pmap_sklearn.PerturbMAPCRF` fits it with its defaults, beside the
same tagger without the vectors (:ref:`dense-vectors`). The vectors' settings — the window, the
dimension and the block's scale — were chosen on ``esp.testa``; ``esp.testb`` only reports.
Made from the training sentences alone, the vectors hold little that the token features (every
training word among them) lack: the entity F1 moves within the noise of a seed (:ref:`the
vectors' table <ner-vectors-table>`).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from pmap_sklearn import PerturbMAPCRF, SequenceUnion, SequenceVectorizer, TokenEmbeddings
from pmap_sklearn.datasets import load_conll2002, token_features
from pmap_sklearn.embeddings import cooccurrence_vectors
from pmap_sklearn.metrics import entity_precision_recall_fscore_support

train, dev, test = (load_conll2002("esp", split) for split in ("train", "testa", "testb"))
words, vectors = cooccurrence_vectors(train.sentences, n_components=50, window=2)
print(f"{len(words):,} lower-cased training words, vectors of {vectors.shape[1]} dimensions")

# %%
# What the vectors hold: among the words seen at least 20 times in training, those closest to
# a few others (cosine similarity: the vectors have unit length; a rare word's vector rests on
# few co-occurrences). Words used alike get close vectors, though nothing told the SVD what
# they are.
index = {word: v for v, word in enumerate(words)}
counts = np.bincount(
    [index[word.lower()] for sentence in train.sentences for word in sentence],
    minlength=len(words),
)
frequent = np.flatnonzero(counts >= 20)
for word in ("madrid", "presidente", "dijo", "gobierno"):
    similarity = vectors[frequent] @ vectors[index[word]]
    closest = [words[v] for v in frequent[np.argsort(-similarity)[1:6]]]
    print(f"{word:10s} -> {', '.join(closest)}")

# %%
# The same features with and without the vectors. Both taggers read the raw ``(word, pos)``
# tokens: the vectorizer builds the tutorial's feature dicts from them, the embeddings look up
# the lower-cased word (the first item of each token); a word without a vector gets zeros.
# The vectors' block is scaled by 0.1 (``transformer_weights``): with the same L2 penalty on
# every weight, the scale sets how much the vectors' weights are held back.
plain = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
features = SequenceUnion(
    [
        ("tokens", SequenceVectorizer(token_features)),
        ("vectors", TokenEmbeddings((words, vectors), lowercase=True)),
    ],
    transformer_weights={"vectors": 0.1},
)
with_vectors = make_pipeline(features, PerturbMAPCRF(random_state=0))
scores = {}
for name, tagger in (("token features", plain), ("+ word vectors", with_vectors)):
    tagger.fit(train.tokens, train.tags)
    for split, data in (("testa", dev), ("testb", test)):
        predicted = tagger.predict(data.tokens)
        scores[name, split] = entity_precision_recall_fscore_support(
            data.tags, predicted, average=None
        )
        f1 = entity_precision_recall_fscore_support(data.tags, predicted)[2]
        print(f"{name:15s} {split}: entity F1 {f1:.4f}")
unknown = np.mean([word.lower() not in index for sentence in test.sentences for word in sentence])
print(f"testb tokens whose word has no vector (never seen in training): {unknown:.1%}")

# %%
# Per-type entity F1 on testb. One seed: a seed moves the entity F1 by about a point, so the
# benchmark (``benchmarks/ner_vectors.py``) compares the means over three seeds, and vectors
# made from the untagged sentences of all three splits too (:ref:`the vectors' table
# <ner-vectors-table>`).
figure, axis = plt.subplots(figsize=(7, 3.8))
types = scores["token features", "testb"][4]
positions = np.arange(len(types))
for offset, name in ((-0.2, "token features"), (0.2, "+ word vectors")):
    axis.bar(positions + offset, scores[name, "testb"][2], width=0.4, label=name)
axis.set_xticks(positions, types)
axis.set_ylim(0.4, 1.0)
axis.set_ylabel("entity F1 on esp.testb")
axis.legend(loc="upper left", ncols=2)
figure.tight_layout()
plt.show()
