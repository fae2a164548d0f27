"""Data-parallel fits (``n_shards``): iterative parameter mixing over shards of the training
set, each shard's epoch one joblib task; results depend on n_shards and random_state only."""

import os
import pickle

import numpy as np
import pytest
from joblib import parallel_config

from pmap_sklearn import MarginalPerturbMAPCRF, MeanFieldCRF, PerturbMAPCRF
from pmap_sklearn._optim import shards as _shards
from pmap_sklearn.datasets import make_chain_data, make_grid_data


def _chain_mean_field(**params):
    return MeanFieldCRF("chain", **params)


LEARNERS = [PerturbMAPCRF, MarginalPerturbMAPCRF, _chain_mean_field]
IDS = ["PerturbMAPCRF", "MarginalPerturbMAPCRF", "MeanFieldCRF"]


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=120, n_states=3, n_features=4, random_state=0)
    return data.data, data.target


@pytest.mark.parametrize("make", LEARNERS, ids=IDS)
def test_one_shard_is_the_serial_fit(make, chains, monkeypatch):
    """n_shards=1 runs no shard and no mixing: the serial fit, bit for bit."""
    serial = make(random_state=0).fit(*chains)

    def refuse(*args, **kwargs):
        raise AssertionError("a fit with n_shards=1 mixed shards")

    monkeypatch.setattr(_shards.Shards, "epoch", refuse)
    one = make(random_state=0, n_shards=1).fit(*chains)
    np.testing.assert_array_equal(one.coef_, serial.coef_)
    assert one.loss_curve_ == serial.loss_curve_


@pytest.mark.parametrize("make", LEARNERS, ids=IDS)
def test_n_jobs_does_not_change_a_sharded_fit(make, chains):
    X, y = chains
    serial = make(random_state=0, n_shards=2, n_jobs=1).fit(X, y)
    parallel = make(random_state=0, n_shards=2, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(parallel.coef_, serial.coef_)
    assert parallel.loss_curve_ == serial.loss_curve_
    assert parallel.t_ == serial.t_
    other = make(random_state=1, n_shards=2, n_jobs=1).fit(X, y)
    assert not np.array_equal(other.coef_, serial.coef_)  # the seed matters
    three = make(random_state=0, n_shards=3, n_jobs=1).fit(X, y)
    assert not np.array_equal(three.coef_, serial.coef_)  # and the number of shards


def test_shards_reach_local_workers_through_files_removed_after_the_fit(chains, monkeypatch):
    """On the local pool a worker's samples and state travel as shared files (every array
    here, with the threshold lowered): the same fit, and no file left after it, nor after a
    fit that fails."""
    from pmap_sklearn import _parallel

    X, y = chains
    serial = PerturbMAPCRF(random_state=0, n_shards=2, n_jobs=1, max_iter=4).fit(X, y)
    monkeypatch.setattr(_parallel, "SHARED_MIN_BYTES", 64)
    folders, written = [], []
    write = _parallel._write_array

    def recording(array, folder, spare=None):
        folders.append(folder)
        written.append(array.nbytes)
        return write(array, folder, spare)

    monkeypatch.setattr(_parallel, "_write_array", recording)
    parallel = PerturbMAPCRF(random_state=0, n_shards=2, n_jobs=2, max_iter=4).fit(X, y)
    np.testing.assert_array_equal(parallel.coef_, serial.coef_)
    assert written and not any(map(os.path.exists, set(folders)))
    folders.clear()
    bad = [x.copy() for x in X]
    bad[-1][0, 0] = np.inf  # refused before any shard runs: no folder made
    with pytest.raises(ValueError, match="finite|inf"):
        PerturbMAPCRF(random_state=0, n_shards=2, n_jobs=2, max_iter=4).fit(bad, y)

    def failing(*args, **kwargs):
        raise RuntimeError("a pass failed")

    monkeypatch.setattr(_shards, "run_epoch", failing)  # the caller's own pass fails
    with pytest.raises(RuntimeError, match="a pass failed"):
        PerturbMAPCRF(random_state=0, n_shards=2, n_jobs=2, max_iter=4).fit(X, y)
    assert folders and not any(map(os.path.exists, set(folders)))


@pytest.mark.parametrize("make", LEARNERS, ids=IDS)
def test_shards_learn_close_to_the_serial_fit(make, chains):
    X, y = chains
    serial = make(random_state=0).fit(X, y).score(X, y)
    sharded = make(random_state=0, n_shards=2).fit(X, y)
    assert sharded.score(X, y) > 0.5  # three labels: chance is 1/3
    assert sharded.score(X, y) == pytest.approx(serial, abs=0.05)
    assert len(sharded.loss_curve_) == sharded.n_iter_  # one record per mixed epoch


def test_the_stopping_rule_and_validation_run_per_mixed_epoch(chains):
    model = PerturbMAPCRF(
        random_state=0, n_shards=2, early_stopping=True, n_iter_no_change=2, max_iter=40
    ).fit(*chains)
    assert len(model.validation_scores_) == model.n_iter_ < 40


@pytest.mark.parametrize("value", [0, -1, 1.5, "2"])
def test_invalid_n_shards_is_named(value, chains):
    with pytest.raises(ValueError, match="'n_shards' parameter"):
        PerturbMAPCRF(n_shards=value).fit(*chains)


def test_more_shards_than_samples_is_refused(chains):
    X, y = chains
    model = PerturbMAPCRF(n_shards=5, random_state=0).fit(X, y)  # a fitted model stays
    before = model.coef_.copy()
    with pytest.raises(ValueError, match=r"n_shards=5 exceeds the 3 samples.*lower n_shards"):
        model.fit(X[:3], y[:3])
    np.testing.assert_array_equal(model.coef_, before)


def test_sample_weights_in_a_sharded_fit(chains):
    """Equal weights are the unweighted fit; unequal ones change it."""
    X, y = chains
    plain = PerturbMAPCRF(random_state=0, n_shards=2).fit(X, y)
    equal = PerturbMAPCRF(random_state=0, n_shards=2).fit(X, y, sample_weight=np.full(120, 3.0))
    np.testing.assert_allclose(equal.coef_, plain.coef_, rtol=1e-10, atol=1e-12)
    assert plain._state.n_seen == plain.n_iter_ * 120  # every sample of every shard, each epoch
    weights = np.ones(120)
    weights[:60] = 5.0
    unequal = PerturbMAPCRF(random_state=0, n_shards=2).fit(X, y, sample_weight=weights)
    assert not np.allclose(unequal.coef_, plain.coef_)


def test_partial_fit_splits_its_chunk(chains):
    X, y = chains

    def stream(**params):
        model = PerturbMAPCRF(random_state=0, n_shards=2, **params)
        for a, b in ((0, 60), (60, 120)):
            model.partial_fit(X[a:b], y[a:b], classes=[0, 1, 2])
        return model

    serial, parallel = stream(n_jobs=1), stream(n_jobs=2)
    np.testing.assert_array_equal(parallel.coef_, serial.coef_)
    assert serial.score(X, y) > 0.5


def test_a_sharded_warm_start_continues_after_pickling(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0, n_shards=2, warm_start=True, max_iter=3, tol=None)
    model.fit(X, y)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.fit(X, y).coef_, model.fit(X, y).coef_)
    assert model.t_ > 3 * 2  # continued: the steps of both fits


def test_a_dask_cluster_gives_the_same_fit(chains):
    distributed = pytest.importorskip("dask.distributed")
    X, y = chains
    local = PerturbMAPCRF(random_state=0, n_shards=2, max_iter=4).fit(X, y)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c,
        distributed.Client(c),
        parallel_config(backend="dask"),
    ):
        remote = PerturbMAPCRF(random_state=0, n_shards=2, max_iter=4, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(remote.coef_, local.coef_)


@pytest.mark.parametrize(
    "make",
    [
        lambda **p: PerturbMAPCRF(l1_ratio=0.5, alpha=0.01, **p),  # the L1 penalties mixed
        lambda **p: PerturbMAPCRF(learning_rate="adagrad", **p),  # AdaGrad's sums mixed
        lambda **p: MarginalPerturbMAPCRF("grid", max_iter=3, **p),  # per-sample graph cuts
    ],
    ids=["l1", "adagrad", "grid"],
)
def test_every_mixed_state_is_independent_of_n_jobs(make, chains):
    if make(random_state=0).structure == "grid":
        data = make_grid_data(n_samples=6, shape=(10, 10), random_state=0)
        X, y = data.data, data.target
    else:
        X, y = chains
    serial = make(random_state=0, n_shards=2, n_jobs=1).fit(X, y)
    parallel = make(random_state=0, n_shards=2, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(parallel.coef_, serial.coef_)
    assert serial.score(X, y) > 0.5


def test_unknown_labels_fit_in_two_sharded_stages(chains):
    X, full = chains
    y = [labels.copy() for labels in full]
    for labels in y[::3]:
        labels[::2] = -1
    model = MarginalPerturbMAPCRF(random_state=0, n_shards=2, max_iter=5).fit(X, y)
    again = MarginalPerturbMAPCRF(random_state=0, n_shards=2, max_iter=5, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(again.coef_, model.coef_)
    assert PerturbMAPCRF(random_state=0, n_shards=2, max_iter=5).fit(X, y).score(X, full) > 0.5
