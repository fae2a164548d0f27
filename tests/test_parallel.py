"""Results do not depend on n_jobs nor on joblib's backend; calls go to the workers only when
the work pays for the dispatch."""

import os
import time

import numpy as np
import pytest
from joblib import parallel_config

from pmap_sklearn import (
    LogSupermodularDenoiser,
    MarginalPerturbMAPCRF,
    PartClampCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
    _parallel,
)
from pmap_sklearn.datasets import add_flip_noise, make_grid_data


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
    for cls in (PiecewiseCRF, PseudoLikelihoodCRF, PartClampCRF):  # L-BFGS on one BLAS thread
        out[cls.__name__] = cls("grid", max_iter=20, n_jobs=n_jobs).fit(X, y).coef_
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
def test_dask_backend_gives_the_same_results(always_parallel):
    """A user who outgrows one machine runs the same code under joblib's dask backend."""
    distributed = pytest.importorskip("distributed")
    reference = _runs(1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster), parallel_config(backend="dask"):
            on_dask = _runs(None)  # even these small calls go to the cluster
    for name, value in reference.items():
        np.testing.assert_array_equal(on_dask[name], value, err_msg=name)


def _pid_after_sleep(seconds):
    time.sleep(seconds)
    return os.getpid()


def test_a_long_call_of_unknown_cost_moves_to_the_workers_after_a_probe(monkeypatch):
    monkeypatch.setattr(_parallel, "_SECONDS_PER_WORK", {})
    jobs = [(0.01,)] * 40  # 0.4 s of work, of a kind not measured yet
    pids = _parallel.map_jobs(_pid_after_sleep, jobs, 2)
    here = [pid == os.getpid() for pid in pids]
    assert here[0] and not all(here)  # probed here, then sent away
    assert sum(here) <= 5  # ~PROBE_SECONDS of it
    kind = _parallel.job_kind(_pid_after_sleep)
    assert 0.005 < _parallel.expected_seconds(kind, 1) < 0.05  # the measured cost per job
    # a short call of the same kind stays here without probing
    assert _parallel.map_jobs(_pid_after_sleep, [(0.001,)] * 2, 2) == [os.getpid()] * 2


def test_map_samples_splits_one_chunk_per_worker_only_when_it_pays(monkeypatch):
    monkeypatch.setattr(_parallel, "_SECONDS_PER_WORK", {})
    sizes = np.full(32, 0.005)  # seconds of work of each sample

    def job(chunk):
        return (float(sizes[chunk].sum()),)

    pids = _parallel.map_samples(_pid_after_sleep, job, sizes, 2, 10.0, chunks_per_worker=1)
    assert len(pids) == 3 and pids[0] == os.getpid() and os.getpid() not in pids[1:]
    pids = _parallel.map_samples(_pid_after_sleep, job, sizes, 2, 10.0)  # cost known: no probe
    assert len(pids) == 2 * _parallel.CHUNKS_PER_WORKER and os.getpid() not in pids
    # measured cost ~1 s per unit: 0.02 s of work stays here, in one chunk of at most `limit`
    assert _parallel.map_samples(_pid_after_sleep, job, sizes[:4], 2, 10.0) == [os.getpid()]
    assert len(_parallel.map_samples(_pid_after_sleep, job, sizes[:4], 2, 0.01)) == 2


def _pid_and_square(value):
    if value < 0:
        raise ValueError(f"negative value {value}")
    return os.getpid(), value * value


def test_run_on_workers_returns_in_order_from_the_worker_processes():
    """With joblib's default backend the jobs are submitted to its worker processes directly."""
    out = _parallel.run_on_workers(_pid_and_square, [(i,) for i in range(9)], 2)
    assert [square for _, square in out] == [i * i for i in range(9)]
    assert os.getpid() not in {pid for pid, _ in out}


def test_run_on_workers_shares_the_jobs_with_the_caller():
    """``share_with_caller``: every n_workers-th job runs in the calling process, the others in
    the workers, the results in order; other backends get every job."""
    out = _parallel.run_on_workers(
        _pid_and_square, [(i,) for i in range(5)], 2, share_with_caller=True
    )
    assert [square for _, square in out] == [i * i for i in range(5)]
    here = [i for i, (pid, _) in enumerate(out) if pid == os.getpid()]
    assert here == [0, 2, 4]
    with pytest.raises(ValueError, match="negative value -3"):  # a worker's error
        _parallel.run_on_workers(_pid_and_square, [(2,), (-3,)], 2, share_with_caller=True)
    with pytest.raises(ValueError, match="negative value -2"):  # the caller's
        _parallel.run_on_workers(_pid_and_square, [(-2,), (3,)], 2, share_with_caller=True)
    with parallel_config(backend="threading"):
        out = _parallel.run_on_workers(_pid_and_square, [(3,)], 2, share_with_caller=True)
    assert out == [(os.getpid(), 9)]


def _pid_sum_and_double(kept, transient):
    return os.getpid(), float(kept.sum() + transient.sum()), 2 * transient


def test_shared_arrays_carry_jobs_and_results_through_files():
    """With ``shared``, the workers' large arrays (arguments and results) travel as files: the
    kept ones are written once for every call, the others' files (and the results') kept as
    spare files that later calls overwrite, the folder removed at ``close``; small arrays and
    other objects are pickled as usual."""
    rng = np.random.default_rng(0)
    kept = rng.random(300_000)  # 2.4 MB: a file
    small = rng.random(10)
    shared = _parallel.SharedArrays()
    shared.keep(kept)
    files = []
    try:
        for _ in range(2):
            transient = rng.random(200_000)
            jobs = [(kept, transient), (kept, transient), (kept, small)]
            out = _parallel.run_on_workers(
                _pid_sum_and_double, jobs, 2, share_with_caller=True, shared=shared
            )
            assert [pid == os.getpid() for pid, _, _ in out] == [True, False, True]
            for (_, total, doubled), (a, b) in zip(out, jobs, strict=True):
                assert total == float(a.sum() + b.sum())
                np.testing.assert_array_equal(doubled, 2 * b)
            files.append(sorted(os.listdir(shared.folder)))
        # the kept array's file, and the call's others kept as spare files that the second
        # call overwrote (the caller's arguments and the worker's result): no new file
        assert len(files[0]) == 3 and files[1] == files[0]
        folder = shared.folder
    finally:
        shared.close()
    assert not os.path.exists(folder)
    # an object the standard pickle refuses (a lambda) goes through cloudpickle
    payload = shared.dumps((lambda x: x + 1, np.arange(3)))
    function, array = _parallel._shared_loads(payload, shared.folder)
    assert function(1) == 2 and array.tolist() == [0, 1, 2]
    shared.close()


def test_a_worker_holds_the_kept_arrays_of_its_folder(monkeypatch):
    """A worker reads a kept array's file once per folder (a sharded fit's samples, every
    epoch the same) and reuses its copy in later calls; the other arrays are read each call,
    and a call from another folder drops the copies of the last."""
    monkeypatch.setattr(_parallel, "_worker_kept", (None, {}))
    kept, transient = np.arange(300_000.0), np.ones(200_000)
    shared = _parallel.SharedArrays()
    shared.keep(kept)
    try:
        first = _parallel._shared_loads(shared.dumps((kept, transient)), shared.folder, hold=True)
        shared.drop_transient()
        (kept_file,) = os.listdir(shared.folder)
        payload = shared.dumps((kept, 2 * transient))
        os.remove(os.path.join(shared.folder, kept_file))  # not read again: the copy is used
        second = _parallel._shared_loads(payload, shared.folder, hold=True)
        assert second[0] is first[0] and second[1] is not first[1]
        np.testing.assert_array_equal(second[0], kept)
        np.testing.assert_array_equal(second[1], 2 * transient)
        with pytest.raises(FileNotFoundError):  # the caller's loads hold nothing
            _parallel._shared_loads(payload, shared.folder)
        other = _parallel.SharedArrays()
        other.keep(kept)
        try:
            elsewhere = _parallel._shared_loads(other.dumps((kept,)), other.folder, hold=True)
            assert elsewhere[0] is not first[0]
            assert _parallel._worker_kept[0] == other.folder
            assert list(_parallel._worker_kept[1]) == os.listdir(other.folder)
        finally:
            other.close()
    finally:
        shared.close()


def test_a_full_shared_folder_falls_back_to_the_pipes(monkeypatch):
    """When the shared folder cannot take the arrays (a full /dev/shm), the jobs travel through
    the pool's pipes with a warning, the same results, and later calls do not try again."""
    calls = []

    def full(array, folder, spare=None):
        calls.append(folder)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_parallel, "_write_array", full)
    shared = _parallel.SharedArrays()
    big = np.arange(300_000.0)
    jobs = [(big, big), (big, big)]
    try:
        with pytest.warns(RuntimeWarning, match="could not take the jobs' arrays"):
            out = _parallel.run_on_workers(
                _pid_sum_and_double, jobs, 2, share_with_caller=True, shared=shared
            )
        assert [total for _, total, _ in out] == [2 * big.sum()] * 2
        n_calls = len(calls)
        out = _parallel.run_on_workers(
            _pid_sum_and_double, jobs, 2, share_with_caller=True, shared=shared
        )
        assert len(calls) == n_calls and out[1][1] == 2 * big.sum()
    finally:
        shared.close()


def test_run_on_workers_raises_the_jobs_error():
    with pytest.raises(ValueError, match="negative value -3"):
        _parallel.run_on_workers(_pid_and_square, [(2,), (-3,), (4,)], 2)
    # the pool still works afterwards
    assert [s for _, s in _parallel.run_on_workers(_pid_and_square, [(3,), (5,)], 2)] == [9, 25]


def test_run_on_workers_goes_through_parallel_on_other_backends():
    with parallel_config(backend="threading"):
        out = _parallel.run_on_workers(_pid_and_square, [(i,) for i in range(4)], 2)
    assert out == [(os.getpid(), i * i) for i in range(4)]  # threads of this process


def test_run_on_workers_does_not_poll_through_parallel(monkeypatch):
    """joblib's Parallel collects results by polling every 10 ms (most of a short call's gain):
    with its default backend the jobs bypass ``Parallel.__call__``."""

    def polling(*args, **kwargs):
        raise AssertionError("went through Parallel.__call__")

    monkeypatch.setattr(_parallel.Parallel, "__call__", polling)
    out = _parallel.run_on_workers(_pid_and_square, [(i,) for i in range(4)], 2)
    assert [square for _, square in out] == [0, 1, 4, 9]


def test_fits_and_predictions_run_on_one_blas_thread(monkeypatch):
    """Whatever ``n_jobs``, a fit and a prediction limit BLAS to one thread while they run
    (their products are small; idle BLAS threads spin on the cores), and restore it after."""
    from threadpoolctl import threadpool_info

    from pmap_sklearn.structures import GridStructure

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    seen = []
    potentials = GridStructure.potentials

    def recording(self, *args, **kwargs):
        seen.extend(blas_threads())
        return potentials(self, *args, **kwargs)

    monkeypatch.setattr(GridStructure, "potentials", recording)
    data = make_grid_data(n_samples=4, shape=(6, 6), random_state=0)
    before = blas_threads()
    model = PerturbMAPCRF("grid", max_iter=2, tol=None, random_state=0, n_jobs=1)
    model.fit(data.data, data.target).predict(data.data)
    assert seen and set(seen) == {1}
    assert blas_threads() == before


def _worker_pid():
    return os.getpid()


def test_starting_the_workers_keeps_the_pool_a_sharded_fit_uses():
    """start_workers warms the loky pool that run_on_workers submits to: the same pool and the
    same worker processes afterwards (a pool of other arguments would be a new one), each having
    run a task; other backends do nothing."""
    from joblib import Parallel

    from pmap_sklearn._parallel import _loky_pool, run_on_workers, start_workers

    run_on_workers(_worker_pid, [()] * 2, 2)
    with Parallel(n_jobs=2, max_nbytes=None) as parallel:
        pool = _loky_pool(parallel)
    if pool is None:
        pytest.skip("joblib's loky pool is not available here")
    workers = set(pool._processes)
    start_workers(2)
    with Parallel(n_jobs=2, max_nbytes=None) as parallel:
        assert _loky_pool(parallel) is pool
    assert set(pool._processes) == workers
    assert set(run_on_workers(_worker_pid, [()] * 8, 2)) <= workers
    with parallel_config(backend="threading"):
        start_workers(2)  # no pool to start: nothing happens
