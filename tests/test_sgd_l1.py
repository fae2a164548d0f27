"""The L1 (elastic-net) penalty of the SGD engine: the cumulative penalty of Tsuruoka, Tsujii &
Ananiadou (2009) with every step rule, lazy and dense, and ``l1_ratio`` in the learners."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import MarginalPerturbMAPCRF, MeanFieldCRF, PerturbMAPCRF
from pmap_sklearn.datasets import make_chain_data

from .helpers import _sparse_and_dense


def _chains(n=60, seed=0):
    data = make_chain_data(n_samples=n, n_states=3, n_features=6, random_state=seed)
    return data.data, data.target


def test_l1_ratio_zero_is_the_l2_fit_and_l1_sparsifies():
    """``l1_ratio=0`` is the L2 fit (no L1 state); more L1 gives more exact zeros, in the
    tail-averaged weights the defaults return on sparse features, and the fit still fits."""
    chains, dense, tags = _sparse_and_dense(40)
    params = dict(random_state=0, max_iter=4, alpha=0.05, eta0=0.2)
    plain = PerturbMAPCRF(**params).fit(chains, tags)
    zero = PerturbMAPCRF(l1_ratio=0.0, **params).fit(chains, tags)
    np.testing.assert_array_equal(plain.coef_, zero.coef_)
    assert zero._state.l1_total is None
    fits = [PerturbMAPCRF(l1_ratio=r, **params).fit(chains, tags) for r in (0.5, 1.0)]
    zeros = [np.sum(fit.coef_ == 0) for fit in [plain, *fits]]
    assert zeros[0] < zeros[1] < zeros[2]
    assert fits[-1].sgd_settings_["average"] == 2 * len(tags)  # tail averaging
    # the average is kept on the last iterate's support
    state = fits[-1]._state
    np.testing.assert_array_equal(fits[-1].coef_, np.where(state.coef != 0, state.average, 0))
    assert fits[-1].score(chains, tags) > 0.9


@pytest.mark.parametrize("learning_rate", ["adagrad", "optimal", "invscaling"])
def test_sparse_features_fit_with_l1_exactly_like_dense(learning_rate):
    """With L1, the lazy sparse steps still give the dense steps' fit (the penalty reaches the
    weights of the non-zero gradient entries, in both)."""
    chains, dense, tags = _sparse_and_dense(40)
    params = dict(
        random_state=0, max_iter=3, tol=None, learning_rate=learning_rate, eta0=0.2,
        average=True, alpha=0.1, l1_ratio=0.7,
    )  # fmt: skip
    on_sparse = PerturbMAPCRF(**params).fit(chains, tags)
    on_dense = PerturbMAPCRF(**params).fit(dense, tags)
    np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)
    assert np.array_equal(on_sparse.coef_ == 0, on_dense.coef_ == 0)
    l2_fit = PerturbMAPCRF(**dict(params, l1_ratio=0.0)).fit(chains, tags)
    assert (on_sparse.coef_ == 0).sum() > (l2_fit.coef_ == 0).sum()


@pytest.mark.parametrize("sparse", [True, False])
def test_warm_start_continues_the_l1_state(sparse):
    """Two warm-started fits of 2 epochs are one fit of 4: the penalty due and applied carry
    over (through a pickle too)."""
    chains, dense, tags = _sparse_and_dense(30, seed=3)
    X = chains if sparse else dense
    params = dict(
        random_state=0, tol=None, eta0=0.2, average=False, alpha=0.02, l1_ratio=0.6,
        learning_rate="adagrad",
    )  # fmt: skip
    twice = PerturbMAPCRF(max_iter=2, warm_start=True, **params).fit(X, tags)
    twice = pickle.loads(pickle.dumps(twice))
    assert twice._state.l1_total.any()
    twice.fit(X, tags)
    once = PerturbMAPCRF(max_iter=4, warm_start=True, **params).fit(X, tags)
    np.testing.assert_allclose(twice.coef_, once.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(twice._state.l1_total, once._state.l1_total)
    # AdaGrad's penalty due is kept by row; a warm start with a schedule keeps it by weight
    width = once.structure_.weight_row_width_
    assert once._state.l1_total.shape == (once.coef_.size // width, 1)
    once.set_params(learning_rate="constant", max_iter=1).fit(X, tags)
    assert once._state.l1_total.shape == (once.coef_.size, 1) and (once.coef_ == 0).any()


@pytest.mark.parametrize("cls", [PerturbMAPCRF, MarginalPerturbMAPCRF, MeanFieldCRF])
def test_every_sgd_learner_takes_l1_ratio(cls):
    X, y = _chains(30)
    structure = "chain"
    fitted = cls(structure, l1_ratio=0.9, alpha=1.0, max_iter=3, random_state=0).fit(X, y)
    assert (fitted.coef_ == 0).any()
    with pytest.raises(InvalidParameterError, match="l1_ratio"):
        cls(structure, l1_ratio=1.5).fit(X, y)
