"""Hostile input on the newest surfaces (whole photos, sparse chains, known labels, the
ε-family, group-maximum models): each case gives a correct result or a ValueError that names
the problem — never NaN, a silent zero or a crash deep in numpy. Property tests (hypothesis)
sweep the whole-photo path and SequenceVectorizer's inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import (
    ChainStructure,
    PerturbMAPCRF,
    SequenceVectorizer,
)
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.inspection import explain_weights


# ---- token features and SequenceVectorizer -------------------------------------------------
@pytest.mark.parametrize(
    "params, X, message",
    [
        ({}, [[{1: "a"}, {"b": "c"}]], "sequence 0, token 0: the feature has the name 1"),
        ({}, [[{"a": "x"}, {"b": b"1"}]], "sequence 0, token 1: the feature 'b' is bytes"),
        ({}, [[{"a": "x"}], [{"b": None}]], "sequence 1, token 0: the feature 'b' is None"),
        ({}, [[{"a": np.nan}]], "'a' is nan: values must be finite"),
        ({}, [[{"a": {"x": 1}}]], "'a' is dict"),
        ({"n_features": 16}, [[{1: "a"}]], "the feature has the name 1"),
        ({"dtype": "banana"}, [[{"a": "x"}]], "dtype='banana' is not a numeric numpy dtype"),
        ({"token_features": lambda s, i: s[i]}, [["w"]], "returned str 'w'"),
    ],
)
def test_sequence_vectorizer_names_the_bad_token(params, X, message):
    with pytest.raises(ValueError, match=message):
        SequenceVectorizer(**params).fit_transform(X)


def test_sequence_vectorizer_bounds():
    with pytest.raises(InvalidParameterError, match="n_features"):
        SequenceVectorizer(n_features=2**40).fit([[{"a": "x"}]])
    with pytest.raises(InvalidParameterError, match="min_count"):
        SequenceVectorizer(min_count=True).fit([[{"a": "x"}]])
    vectorizer = SequenceVectorizer().fit([[{"a": "x"}]])
    with pytest.raises(ValueError, match="'a' is None"):
        vectorizer.transform([[{"a": None}]])


def test_a_sequence_of_strings_is_still_a_multi_valued_feature():
    (matrix,) = SequenceVectorizer().fit_transform([[{"tags": ["x", "y"], "n": 2}]])
    assert matrix.toarray().tolist() == [[2.0, 1.0, 1.0]]


class _Unnamed(TransformerMixin, BaseEstimator):
    """A transformer without get_feature_names_out."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X


def test_explain_weights_falls_back_to_x_names():
    data = make_chain_data(n_samples=20, n_features=3, random_state=0)
    pipeline = make_pipeline(_Unnamed(), PerturbMAPCRF(max_iter=2, tol=None, random_state=0))
    explanation = explain_weights(pipeline.fit(data.data, data.target), top=2)
    named = {name for pairs in explanation.positive.values() for name, _ in pairs}
    assert named and named <= {"x0", "x1", "x2", "<bias>"}


def test_explain_weights_refuses_scaled_scores():
    data = make_chain_data(n_samples=20, n_states=2, n_features=2, random_state=0)
    model = PerturbMAPCRF(ChainStructure(unary="scaled"), max_iter=2, tol=None, random_state=0)
    with pytest.raises(ValueError, match="scaled"):
        explain_weights(model.fit(data.data, data.target))


# ---- property tests -------------------------------------------------------------------------
_names = st.one_of(st.text(max_size=4), st.integers(), st.none())
_values = st.one_of(
    st.text(max_size=4),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.binary(max_size=3),
    st.lists(st.text(max_size=2), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.dictionaries(_names, _values, max_size=3), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_sequence_vectorizer_is_finite_or_names_the_token(X):
    """Any token dicts: finite CSR chains of the right lengths, or a ValueError naming the
    sequence and the token (or that nothing is left to learn)."""
    try:
        chains = SequenceVectorizer().fit_transform(X)
    except ValueError as error:
        assert "sequence" in str(error) or "no feature" in str(error), error
        return
    assert [c.shape[0] for c in chains] == [len(s) for s in X]
    assert all(np.isfinite(c.data).all() for c in chains)
