"""The SGD learners: their parameters, L1, sparse features."""

import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.utils._param_validation import InvalidParameterError

from pmap_sklearn import (
    ChainCRF,
    GraphSample,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    PerturbMAPCRF,
    StructuredSVM,
    grid_edges,
)
from pmap_sklearn._optim import defaults
from pmap_sklearn.datasets import make_chain_data, make_grid_data
from pmap_sklearn.learners._sgd_learner import bucket_by_length

from ..helpers import _sparse_and_dense


@pytest.mark.parametrize("learner", [PerturbMAPCRF, MarginalPerturbMAPCRF])
def test_a_warm_start_takes_the_new_eta0(learner):
    data = make_chain_data(n_samples=20, random_state=0)
    model = learner(warm_start=True, max_iter=2, tol=None, eta0=0.1, random_state=0)
    model.fit(data.data, data.target)
    assert model.set_params(eta0=0.05).fit(data.data, data.target).eta0_ == 0.05


@pytest.mark.parametrize("param", ["max_iter", "eta0", "alpha", "batch_size", "n_jobs"])
def test_a_bool_is_not_a_number_of_anything(param):
    data = make_chain_data(n_samples=10, random_state=0)
    with pytest.raises(InvalidParameterError, match=f"'{param}' parameter"):
        PerturbMAPCRF(**{param: True}).fit(data.data, data.target)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=5, tol=None, learning_rate="optimal", average=True, alpha=1e-4
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=4, tol=None, average=30, alpha=0.05, learning_rate="optimal"
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=3, tol=None, learning_rate="constant", average=True, alpha=1e-4
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=4, tol=None, learning_rate="adagrad", average=True, alpha=1e-4
        ),
        lambda: PerturbMAPCRF(
            random_state=0, max_iter=4, tol=None, learning_rate="adagrad", average=50, alpha=0.05
        ),
        lambda: MarginalPerturbMAPCRF(
            random_state=0,
            max_iter=3,
            tol=None,
            learning_rate="adagrad",
            eta0=0.5,
            average=True,
            alpha=1e-4,
        ),
        lambda: MarginalPerturbMAPCRF(
            random_state=0, max_iter=3, tol=None, learning_rate="optimal", average=True, alpha=1e-4
        ),
        lambda: ChainCRF(max_iter=30, alpha=1e-4, l1_ratio=0.0, all_possible_states=True),
        lambda: StructuredSVM(random_state=0, max_iter=5, alpha=1e-3, batch_size=1),
        lambda: StructuredSVM(random_state=0, max_iter=4, batch_size=4, average=False, alpha=1e-3),
    ],
)
def test_sparse_features_fit_exactly_like_dense(make, monkeypatch):
    """Lazy sparse SGD steps (shrinkage and averaging caught up when a row is read) give the
    weights of the dense steps — in the fit and in the step-size search, given the same search
    (by default sparse features judge it on held-out samples, dense ones on the pass's) and the
    same settings (``"auto"`` resolves to others on sparse features)."""
    monkeypatch.setattr(defaults, "SPARSE_STEP_SEARCH", {})
    chains, dense, tags = _sparse_and_dense()
    on_sparse, on_dense = make().fit(chains, tags), make().fit(dense, tags)
    np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)
    assert on_sparse.score(chains, tags) == on_dense.score(dense, tags)
    if isinstance(on_sparse, StructuredSVM):  # its dual blocks live on their sample's rows
        width = on_sparse.structure_.weight_row_width_
        n_pairwise_rows = (
            on_sparse.structure_.size_ - on_sparse.structure_.n_unary_weights_
        ) // width
        for chain, block in zip(chains, on_sparse._state.blocks, strict=True):
            assert len(block.index) <= len(np.unique(chain.indices)) + 1 + n_pairwise_rows


def test_bucketing_keeps_a_permutation_of_similar_lengths():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=1000)
    order = rng.permutation(1000)
    bucketed = bucket_by_length(order, lengths, 16, rng)
    assert sorted(bucketed.tolist()) == list(range(1000))
    spread = [np.ptp(lengths[bucketed[i : i + 16]]) for i in range(0, 992, 16)]
    random_spread = [np.ptp(lengths[order[i : i + 16]]) for i in range(0, 992, 16)]
    assert np.mean(spread) < np.mean(random_spread) / 4


def test_graphs_take_sparse_node_features_too(monkeypatch):
    monkeypatch.setattr(defaults, "SPARSE_STEP_SEARCH", {})  # the same step-size search
    images = make_grid_data(n_samples=8, shape=(6, 6), noise=1.0, random_state=0)
    edges = grid_edges((6, 6))
    dense = [GraphSample(np.c_[x.reshape(-1, 1), x.reshape(-1, 1) > 0], edges) for x in images.data]
    sparse_graphs = [GraphSample(sparse.csr_matrix(g.node_features), g.edges) for g in dense]
    y = [t.ravel() for t in images.target]
    for make in (
        lambda: PerturbMAPCRF(
            "graph",
            random_state=0,
            max_iter=4,
            tol=None,
            average=True,
            learning_rate="optimal",
            alpha=1e-4,
        ),
        lambda: PerturbMAPCRF(
            "graph", learning_rate="adagrad", random_state=0, max_iter=4, average=True, alpha=1e-4
        ),
        lambda: MarginalPerturbMAPCRF(
            "graph",
            random_state=0,
            max_iter=3,
            tol=None,
            learning_rate="optimal",
            average=True,
            alpha=1e-4,
        ),
        # graph cuts: the S-SVM's sparse blocks read the projected (attractive) iterate
        lambda: StructuredSVM("graph", random_state=0, max_iter=4, alpha=1e-3, batch_size=1),
    ):
        on_sparse, on_dense = make().fit(sparse_graphs, y), make().fit(dense, y)
        np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)


def test_optimal_schedule_needs_alpha():
    data = make_chain_data(n_samples=5, random_state=0)
    with pytest.raises(ValueError, match="alpha > 0"):
        PerturbMAPCRF(alpha=0.0, learning_rate="optimal").fit(data.data, data.target)
    auto = PerturbMAPCRF(alpha=0.0, max_iter=1).fit(data.data, data.target)  # "auto": AdaGrad
    assert auto._settings(auto.structure_.prepare(data.data)).learning_rate == "adagrad"
    PerturbMAPCRF(alpha=0.0, learning_rate="constant", eta0=0.01, max_iter=1).fit(
        data.data, data.target
    )


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
