"""
Part-of-speech tagging with token features
==========================================

Universal part-of-speech tags for the sentences of the UD English Web Treebank, learned from
per-token feature dicts as sklearn-crfsuite users write them: a
:class:`~pmap_sklearn.SequenceVectorizer` turns the sklearn-crfsuite tutorial's features
(:func:`~pmap_sklearn.datasets.token_features`) into sparse chains and a
:class:`~pmap_sklearn.PerturbMAPCRF` learns the tagger by perturb-and-MAP with its defaults,
which on sparse features are AdaGrad steps (one step size per feature, large for rare words,
small for frequent suffixes), mini-batches of 32 and 8 epochs with their second half
averaged. To keep the example short it trains on 3,000 sentences (the full treebank comparison
with crfsuite is in the user guide). The figure shows the marginals of each token's tag, alone
and with one tag known in advance.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
from pmap_sklearn.datasets import load_ud_treebank, token_features
from pmap_sklearn.inspection import explain_weights

train, test = load_ud_treebank("train"), load_ud_treebank("test")
tagger = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
tagger.fit(train.sentences[:3000], train.tags[:3000])
predicted = tagger.predict(test.sentences[:500])
accuracy = np.mean(np.concatenate(predicted) == np.concatenate(test.tags[:500]))
print(f"token accuracy on 500 test sentences: {100 * accuracy:.1f} %")

explained = explain_weights(tagger, top=3)
for tag in ("NOUN", "VERB", "ADJ"):
    print(tag, [name for name, _ in explained.positive[tag]])

# %%
# Per-token marginals of a sentence where "saw" and "book" are ambiguous (the model reads
# "book" as a verb), alone and with "book" known to be a noun (``known_labels``: None where the
# tag is free): the tags around it are decoded again given it.
sentence = ["I", "saw", "her", "book", "a", "flight", "to", "Boston", "."]
known = [None, None, None, "NOUN", None, None, None, None, None]
classes = list(tagger[-1].classes_)
figure, axes = plt.subplots(1, 2, figsize=(11, 5), sharey=True)
for axis, given, title in ((axes[0], None, "free"), (axes[1], [known], "'book' known: NOUN")):
    marginals = tagger.predict_proba([sentence], known_labels=given)[0]  # through the pipeline
    axis.imshow(marginals.T, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    axis.set_xticks(range(len(sentence)), sentence, rotation=45, fontsize=11)
    axis.set_yticks(range(len(classes)), classes, fontsize=10)
    tags = tagger.predict([sentence], known_labels=given)[0]
    axis.set_title(f"{title}\n{' '.join(tags)}", fontsize=10)
figure.suptitle("P(tag | sentence), exact marginals by forward–backward", fontsize=12)
figure.tight_layout()
plt.show()
