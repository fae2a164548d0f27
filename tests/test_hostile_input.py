"""Hostile input on the newest surfaces (whole photos, sparse chains, known labels, the
ε-family, group-maximum models): each case gives a correct result or a ValueError that names
the problem — never NaN, a silent zero or a crash deep in numpy. Property tests (hypothesis)
sweep the whole-photo path and SequenceVectorizer's inputs."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import (
    ChainStructure,
    ContinuousLogSupermodularDenoiser,
    PerturbMAPCRF,
    SequenceVectorizer,
)
from pmap_sklearn.datasets import make_chain_data, token_features
from pmap_sklearn.inspection import explain_weights

RNG = np.random.default_rng(0)
PHOTO = RNG.random((24, 24))


def _photo_model(**params):
    defaults = dict(patch_size=4, noise_std=0.1, max_iter=3, random_state=0)
    return ContinuousLogSupermodularDenoiser(**{**defaults, **params})


# ---- whole photos ------------------------------------------------------------------------------
@pytest.mark.parametrize("stride", [5, 7])
def test_a_stride_beyond_the_patch_is_refused(stride):
    """Patches 4 apart at stride 5 leave pixels no patch covers (they came out NaN)."""
    with pytest.raises(ValueError, match=f"patch_stride={stride} is larger than the 4×4"):
        _photo_model(patch_stride=stride).fit([PHOTO])
    model = _photo_model().fit([PHOTO]).set_params(patch_stride=stride)
    with pytest.raises(ValueError, match="at most 4"):
        model.predict(PHOTO)


@pytest.mark.parametrize("size", [2, 3])
def test_sure_on_small_patches_covers_the_image(size):
    """The SURE factor's sparser patches must still cover the photo (they left gaps: NaN
    risks and a factor picked from them)."""
    model = _photo_model(patch_size=size, prior_scale="sure").fit([PHOTO])
    noisy = PHOTO + 0.1 * RNG.normal(size=PHOTO.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's "invalid value" included
        denoised = model.predict(noisy)
    assert np.isfinite(denoised).all()
    assert np.mean((denoised - PHOTO) ** 2) < np.mean((noisy - PHOTO) ** 2)


def test_a_colour_image_is_refused():
    model = _photo_model().fit([PHOTO])
    colour = RNG.random((24, 24, 3))
    for call in (model.predict, _photo_model().fit):
        with pytest.raises(ValueError, match="colour image.*rgb2gray"):
            call(colour)
    assert model.predict(list(colour.transpose(2, 0, 1)))[0].shape == (24, 24)  # channel-wise


@pytest.mark.parametrize("scale", [1e20, 1e150])
def test_the_map_decoding_clips_huge_inputs_like_the_others(scale):
    """Scaled far beyond the domain U, every decoding returns ±U (the MAP returned 0: its
    levels' squared distances tied in float64)."""
    signals = RNG.normal(size=(300, 4))
    model = ContinuousLogSupermodularDenoiser(noise_std=0.5, max_iter=10, random_state=0)
    model.fit(signals)
    noisy = signals[:5] * scale
    for decoding in ("map", "mmse", "continuous_map"):
        np.testing.assert_allclose(
            model.predict(noisy, decoding=decoding), np.sign(noisy) * model.domain_
        )


def test_a_grid_step_coarser_than_the_domain_is_refused():
    """All levels but 0 beyond the data: every coefficient decoded as 0, silently."""
    signals = RNG.normal(size=(100, 4))
    with pytest.raises(ValueError, match="grid_step=1000000000.0 is larger than the largest"):
        ContinuousLogSupermodularDenoiser(noise_std=0.5, grid_step=1e9).fit(signals)
    model = ContinuousLogSupermodularDenoiser(noise_std=0.5, max_iter=5).fit(signals)
    with pytest.raises(ValueError, match="grid_step='auto'"):
        model.set_params(grid_step=1e6).predict(signals)


def test_the_prior_learns_at_any_scale_of_the_data():
    """Signals ×1e200 learn the same prior (in their units) instead of d = 0 with a warning
    that blamed the sample count (AdaGrad's sum of squares overflowed)."""
    signals = RNG.normal(size=(200, 4))
    model = ContinuousLogSupermodularDenoiser(noise_std=0.5, max_iter=20, random_state=0)
    unit = model.fit(signals).group_weights_
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        scaled = model.set_params(noise_std=0.5e200).fit(signals * 1e200).group_weights_
    np.testing.assert_allclose(scaled * 1e200, unit, rtol=1e-9)


def test_signals_at_the_edge_of_float64_are_refused_with_the_denoisers_own_remedy():
    """×1e307 overflows: the error names the signals' scale and this estimator's parameters
    (not an SGD learner's eta0), with no numpy warning on the way."""
    model = ContinuousLogSupermodularDenoiser(noise_std=1e307, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="rescale the signals \\(and noise_std\\)") as error:
            model.fit(RNG.normal(size=(50, 4)) * 1e307)
    assert "eta0" not in str(error.value)


def test_an_overflowing_noise_std_is_named():
    model = ContinuousLogSupermodularDenoiser(noise_std=1.0, max_iter=5).fit(
        RNG.normal(size=(50, 4))
    )
    with pytest.raises(ValueError, match="noise_std=1e\\+200 is out of float64's range"):
        model.set_params(noise_std=1e200).predict(RNG.normal(size=(3, 4)))


def test_ragged_groups_are_named():
    with pytest.raises(ValueError, match="group 0 must be a non-empty sequence of int"):
        ContinuousLogSupermodularDenoiser(groups=[[0, [1, 2]], [3]], noise_std=1).fit(
            RNG.normal(size=(50, 4))
        )


# ---- token features and SequenceVectorizer -------------------------------------------------
@pytest.mark.parametrize("i", [-1, 3, 1.0, True])
def test_token_features_refuses_positions_outside_the_sentence(i):
    """-1 wrapped round to the last token (with BOS set)."""
    with pytest.raises(ValueError, match="is not a token position of this 3-token sentence"):
        token_features(["a", "b", "c"], i)


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
FITTED = {size: _photo_model(patch_size=size).fit([PHOTO]) for size in (2, 4)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.sampled_from([2, 4]),
    stride=st.integers(1, 6),
    height=st.integers(1, 30),
    width=st.integers(1, 30),
    scale=st.sampled_from([1e-3, 1.0, 1e3, 1e6]),
    dtype=st.sampled_from([np.float64, np.float32, np.uint8, np.int16]),
)
def test_whole_photo_path_is_finite_or_refused(size, stride, height, width, scale, dtype):
    """Any shape, stride, scale and dtype: a finite photo of the input's shape, or a
    ValueError that names the problem."""
    model = FITTED[size].set_params(patch_stride=stride)
    image = np.random.default_rng(height * 31 + width).random((height, width)) * scale
    image = image.astype(dtype)
    try:
        denoised = model.predict(image)
    except ValueError as error:
        assert any(
            words in str(error)
            for words in ("patch_stride", "smaller than one patch", "out of float64")
        ), error
        return
    assert denoised.shape == image.shape and np.isfinite(denoised).all()


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
