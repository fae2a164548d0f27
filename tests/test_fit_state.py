"""The state of a fit: warm starts that continue only what they may, refits that fail cleanly,
and the label markers (``ignore_label``, ``unknown_label``) read by the same rule as labels, by
the estimators and by the scorers."""

from __future__ import annotations

import pytest


# ---- a refit that fails leaves the fitted model as it was -------------------------------------
def test_a_failed_sequence_vectorizer_refit_keeps_its_vocabulary():
    from pmap_sklearn import SequenceVectorizer

    tokens = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    vectorizer = SequenceVectorizer().fit(tokens)
    before = vectorizer.transform(tokens)
    with pytest.raises(ValueError, match="is None"):
        vectorizer.set_params(n_features=16).fit([[{"w": None}]])  # the hasher's refit fails
    assert vectorizer.n_features_out_ == 3
    for a, b in zip(before, vectorizer.set_params(n_features=None).transform(tokens), strict=True):
        assert (a != b).nnz == 0
