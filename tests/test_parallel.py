"""Results do not depend on n_jobs nor on joblib's backend; calls go to the workers only when
the work pays for the dispatch."""

import numpy as np
import pytest
from joblib import parallel_config

from pmap_sklearn import (
    LogSupermodularDenoiser,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    StructuredSVM,
    _parallel,
)
from pmap_sklearn.datasets import add_flip_noise, make_grid_data


@pytest.fixture
def always_parallel(monkeypatch):
    """Send every call to the workers, however small (the tests' problems are tiny)."""
    monkeypatch.setattr(_parallel, "MIN_PARALLEL_WORK", 0)


def _runs(n_jobs):
    """Fits and predictions of every estimator that uses workers."""
    data = make_grid_data(n_samples=6, shape=(10, 10), random_state=1)
    X, y = data.data, data.target
    out = {}
    common = dict(max_iter=2, batch_size=3, random_state=0, n_jobs=n_jobs)
    for cls in (PerturbMAPCRF, MarginalPerturbMAPCRF):
        model = cls("grid", **common).fit(X, y)
        out[cls.__name__] = model.coef_
        out[cls.__name__ + " marginals"] = np.stack(model.predict_marginals(X, n_perturbations=7))
    out["StructuredSVM"] = (
        StructuredSVM("grid", max_iter=2, random_state=0, n_jobs=n_jobs).fit(X, y).coef_
    )
    clean = np.stack(y)
    noisy = add_flip_noise(clean, 0.1, random_state=0)
    denoiser = LogSupermodularDenoiser(max_iter=2, n_perturbations=5, random_state=0, n_jobs=n_jobs)
    out["denoiser marginals"] = denoiser.fit(noisy, clean).predict_marginals(noisy)
    return out


def test_results_do_not_depend_on_n_jobs(always_parallel):
    serial, parallel = _runs(1), _runs(2)
    for name, value in serial.items():
        np.testing.assert_array_equal(parallel[name], value, err_msg=name)


def test_small_calls_stay_in_the_calling_process():
    calls = []
    jobs = [(i,) for i in range(10)]
    out = _parallel.map_jobs(lambda i: calls.append(i) or i * i, jobs, 2, work=[10] * 10)
    assert out == [i * i for i in range(10)] and calls == list(range(10))  # ran here, in order


def test_chunks_balance_the_work_and_keep_the_order(always_parallel):
    work = [1] * 20 + [100, 100]
    out = _parallel.map_jobs(abs, [(-i,) for i in range(22)], 2, work=work)
    assert out == list(range(22))


@pytest.mark.slow
def test_dask_backend_gives_the_same_results():
    """A user who outgrows one machine runs the same code under joblib's dask backend."""
    distributed = pytest.importorskip("distributed")
    reference = _runs(None)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster), parallel_config(backend="dask"):
            _parallel_min = _parallel.MIN_PARALLEL_WORK
            _parallel.MIN_PARALLEL_WORK = 0  # send even these small calls to the cluster
            try:
                on_dask = _runs(None)
            finally:
                _parallel.MIN_PARALLEL_WORK = _parallel_min
    for name, value in reference.items():
        np.testing.assert_array_equal(on_dask[name], value, err_msg=name)
