"""Per-sample solver calls over joblib workers, when the work pays for the dispatch.

PyMaxflow holds the GIL, so threads give no speed-up: graph cuts are spread over processes. A
call to the workers costs milliseconds (sending the potentials, waking the workers, collecting
the results: :func:`run_on_workers`), while a graph cut on a superpixel graph costs tens of
microseconds: a call goes to the workers only when its work is expected to take at least
``MIN_PARALLEL_SECONDS`` in the calling process, in a few chunks of equal work per worker.

The expectation comes from measured costs: each kind of job (a solver's function) keeps the
seconds per unit of work of its serial runs in this process. A kind not measured yet starts in
the calling process and moves the rest of the call to the workers once its first jobs show that
the call is long. The backend is joblib's — ``joblib.parallel_config(backend="dask")`` with a
``distributed`` cluster spreads the same calls over many machines, with the same results.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import pickle
import shutil
import tempfile
import time
import uuid
import warnings
from numbers import Integral
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from ._validation import NumberInterval, check_generator

try:  # removes a shared folder left by a killed process (joblib's memmapping uses it too)
    from joblib.externals.loky.backend import resource_tracker as _resource_tracker
except ImportError:
    _resource_tracker = None

try:  # joblib's copy (its wheels vendor it); some distributions install it on its own
    from joblib.externals import cloudpickle
except ImportError:
    import cloudpickle

try:  # joblib's default backend, whose pool of workers run_on_workers submits to directly
    from joblib._parallel_backends import LokyBackend
except ImportError:  # (a private module: if a joblib moves it, every call uses Parallel)
    LokyBackend = ()

#: scikit-learn parameter constraint of ``n_jobs``: None, a positive count, or -1, -2, … (all
#: processors, all but one, …); 0 is refused.
N_JOBS_CONSTRAINT = [
    None,
    NumberInterval(Integral, 1, None, closed="left"),
    NumberInterval(Integral, None, -1, closed="right"),
]

#: Expected serial seconds below which a call runs in the calling process: a dispatch costs
#: milliseconds and a chunk keeps its fixed costs, so shorter calls gain nothing from workers
#: (docs/results/defaults.md, MIN_PARALLEL_SECONDS).
MIN_PARALLEL_SECONDS = 0.1

#: A kind of job not measured yet runs in the calling process for this long before the rest of
#: the call is planned from the measured cost.
PROBE_SECONDS = 0.02

#: Chunks per worker: several, so that workers stay busy when chunks take unequal times.
CHUNKS_PER_WORKER = 4

#: Seconds per unit of work of each kind of job, measured on serial runs in this process.
_SECONDS_PER_WORK: dict[str, float] = {}


def job_kind(function) -> str:
    """The name under which the cost of ``function``'s jobs is measured."""
    return f"{function.__module__}.{function.__qualname__}"


def record_cost(kind: str, seconds: float, work: float) -> None:
    """Fold a serial run of ``work`` units in ``seconds`` into the cost of ``kind``.

    The estimate is a running geometric mean, so one slow run (a cold cache, another process)
    moves it only half-way. Short runs overestimate the cost per unit (their fixed costs are
    spread over little work): the error leans towards the workers only for calls near the
    threshold, where either choice costs about the same.
    """
    if work <= 0 or seconds <= 0:
        return
    rate = seconds / work
    known = _SECONDS_PER_WORK.get(kind)
    _SECONDS_PER_WORK[kind] = rate if known is None else math.sqrt(known * rate)


def expected_seconds(kind: str, work: float):
    """Serial seconds expected for ``work`` units of ``kind``, or None if not measured yet."""
    rate = _SECONDS_PER_WORK.get(kind)
    return None if rate is None else rate * work


def parallel_workers(kind: str, n_jobs, work: float, workers=None) -> int:
    """Workers a call of ``work`` units of ``kind`` should use: ``effective_n_jobs(n_jobs)``
    (or ``workers`` when already known) when it is expected to pay for the dispatch, else 1
    (also while its cost is unknown)."""
    workers = effective_n_jobs(n_jobs) if workers is None else workers
    if workers == 1:
        return 1
    rate = _SECONDS_PER_WORK.get(kind)
    return workers if rate is not None and rate * work >= MIN_PARALLEL_SECONDS else 1


def map_jobs(function, jobs, n_jobs, work=None, kind=None):
    """``[function(*job) for job in jobs]``, over ``n_jobs`` joblib workers when it pays.

    Parameters
    ----------
    function : callable
    jobs : list of tuple
        The arguments of each call.
    n_jobs : int or None
        As in joblib (None: the ``joblib.parallel_config`` in force, else 1).
    work : sequence of float, optional
        Estimated work of each job (default 1 each), in units whose cost is about constant for
        ``function``: the jobs are grouped into chunks of about equal work.
    kind : str, optional
        Name under which the cost is measured (default: the function's); give one per solver
        when ``function`` runs several.

    Notes
    -----
    While the cost of ``kind`` is unknown, the first jobs run in the calling process for
    ``PROBE_SECONDS``; the rest go to the workers if they are expected to take at least
    ``MIN_PARALLEL_SECONDS``. Results never depend on where a job ran.
    """
    kind = job_kind(function) if kind is None else kind
    work = np.ones(len(jobs)) if work is None else np.asarray(work, float)
    rate = _SECONDS_PER_WORK.get(kind)
    # the common case first, without asking joblib (which takes tens of microseconds)
    small = rate is not None and rate * float(work.sum()) < MIN_PARALLEL_SECONDS
    workers = 1 if small else effective_n_jobs(n_jobs)
    if workers == 1 and not small:
        return [function(*job) for job in jobs]
    results = []
    if rate is None:  # run the first jobs here until their cost is known
        start = time.perf_counter()
        while len(results) < len(jobs) and time.perf_counter() - start < PROBE_SECONDS:
            results.append(function(*jobs[len(results)]))
        record_cost(kind, time.perf_counter() - start, work[: len(results)].sum())
        jobs, work = jobs[len(results) :], work[len(results) :]
    total = float(work.sum())
    if small or len(jobs) < 2 or parallel_workers(kind, n_jobs, total, workers) == 1:
        start = time.perf_counter()
        results += [function(*job) for job in jobs]
        record_cost(kind, time.perf_counter() - start, total)
        return results
    n_chunks = min(len(jobs), CHUNKS_PER_WORKER * workers)
    weights = np.maximum(work, 1e-12)
    # Chunk c holds the jobs whose cumulative work falls in its share [c, c + 1) of the total.
    position = (np.cumsum(weights) - weights / 2) / weights.sum() * n_chunks
    chunk_of = np.minimum(position.astype(int), n_chunks - 1)
    chunks = [np.flatnonzero(chunk_of == c) for c in range(n_chunks)]
    parts = run_on_workers(
        _run_chunk, [(function, [jobs[i] for i in chunk]) for chunk in chunks if len(chunk)], n_jobs
    )
    return results + [result for part in parts for result in part]


def _loky_pool(parallel):
    """The pool of loky worker processes behind an entered ``Parallel``, or None when its
    backend is another (dask, threads, a nested call)."""
    backend = parallel._backend  # joblib's own, configured by entering the context
    pool = getattr(backend, "_workers", None) if isinstance(backend, LokyBackend) else None
    return pool if hasattr(pool, "submit") else None


def _worker_ready() -> int:
    """A task that only imports the library (unpickling it does) in a worker."""
    return os.getpid()


def start_workers(n_jobs) -> None:
    """Start joblib's loky workers and have each import the library, without waiting for them.

    A fresh worker's first task imports the library first (about a second): a data-parallel
    fit calls this before its serial setup, which then overlaps the workers' start instead of
    its first epoch waiting for it. Other backends (a cluster's workers are up already) and a
    single job do nothing.
    """
    workers = effective_n_jobs(n_jobs)
    if workers < 2:
        return
    # the arguments of run_on_workers' Parallel: other ones would make loky start a new pool
    with Parallel(n_jobs=n_jobs, max_nbytes=None) as parallel:
        pool = _loky_pool(parallel)
        if pool is not None:  # a cold worker is busy importing while the next task arrives
            for _ in range(workers):
                pool.submit(_worker_ready)


def run_on_workers(
    function, jobs, n_jobs, share_with_caller: bool = False, shared: SharedArrays | None = None
) -> list:
    """``[function(*job) for job in jobs]``, one job per task on joblib's workers, in order.

    joblib's ``Parallel`` collects its results by polling every 10 ms, which is most of the cost
    of a call of tens of milliseconds. With joblib's default (loky) backend the jobs are
    submitted to the same pool of worker processes that ``Parallel`` uses and their futures
    awaited, which returns as soon as the last one is done (a call costs 2-5 ms more than its
    work); any other backend (dask, threads, a nested call) goes through ``Parallel``.

    ``share_with_caller``: with the loky pool, the calling process runs every ``n_workers``-th
    job itself (the first among them) while the workers run the others — for a few long jobs
    with large arguments (shards of a fit), whose caller would otherwise wait idle while their
    arguments and results travel; the workers' jobs are then pickled (by the standard
    pickle) before the caller starts its own, not by the pool's thread while it works. Other
    backends (a cluster) get every job.

    ``shared``: with the loky pool and ``share_with_caller``, the large arrays of the workers'
    jobs and of their results travel as files of this :class:`SharedArrays` folder instead of
    through the pool's pipes (which move about 100-200 MB/s here, against memory's GB/s).
    """
    # max_nbytes=None: arrays travel pickled; memory-mapping them costs a temporary folder
    # per call, whose removal alone costs more than a small call
    with Parallel(n_jobs=n_jobs, max_nbytes=None) as parallel:
        pool = _loky_pool(parallel)
        if pool is None:
            return parallel(delayed(function)(*job) for job in jobs)
        here = set(range(0, len(jobs), effective_n_jobs(n_jobs))) if share_with_caller else ()
        payloads = None
        if here and shared is not None and shared.usable:
            try:
                payloads = {
                    i: shared.dumps((function, job)) for i, job in enumerate(jobs) if i not in here
                }
            except OSError as error:  # the folder is full: the pipes, and a word
                shared.drop_transient()
                warnings.warn(
                    f"the shared folder {shared.folder} could not take the jobs' arrays "
                    f"({error}); they travel through the pool's pipes",
                    RuntimeWarning,
                    stacklevel=2,
                )
                shared.usable = False  # for the rest of its run
                shared = None
        if payloads is not None:
            lent = shared.lend(len(payloads))  # spare files the workers' results may fill
            futures = {
                i: pool.submit(_run_shared, payload, shared.folder, shared.min_bytes, files)
                for (i, payload), files in zip(payloads.items(), lent, strict=True)
            }
        elif here:  # pickled now, not by the pool's thread while the caller works (the GIL)
            futures = {
                i: pool.submit(_run_pickled, _pickled((function, job)))
                for i, job in enumerate(jobs)
                if i not in here
            }
        else:
            futures = {i: pool.submit(function, *job) for i, job in enumerate(jobs)}
        try:
            done = {i: function(*jobs[i]) for i in sorted(here)}
            results = [done[i] if i in done else futures[i].result() for i in range(len(jobs))]
            if payloads is not None:
                results = [r if i in done else shared.loads(r) for i, r in enumerate(results)]
                shared.recycle()  # every worker is done with the call's files
            return results
        finally:  # after an error, drop the jobs not started yet (and the call's files)
            for future in futures.values():
                future.cancel()
            if shared is not None:
                shared.drop_transient()


#: Arrays of this many bytes or more travel to and from local workers as shared files
#: (:class:`SharedArrays`); smaller ones are pickled with their job.
SHARED_MIN_BYTES = 1 << 20


class SharedArrays:
    """A temporary folder through which the calling process and its local workers pass large
    arrays as files, instead of pickling them through the pool's pipes.

    Pickled by :meth:`dumps`, an array of at least ``min_bytes`` (a plain numpy array of
    numbers) is written to a file of the folder and replaced by its name, dtype and shape;
    :func:`_shared_loads` (a worker's) reads it back into memory, a copy. Arrays given to
    :meth:`keep` — that must not change while the folder is used — are written once and their
    files reused by every later :meth:`dumps`; the others' files, and those of the workers'
    results, serve one :func:`run_on_workers` call. After a call that succeeded
    (:meth:`recycle`) they are kept as spare files that later arrays of the same size
    overwrite, the caller's and (lent to them, :meth:`lend`) the workers': writing into a file
    that exists costs a seventh of making one (a sharded fit's state each epoch). After a call
    that failed, whose workers may still be reading or writing them, they are removed. The
    folder is in ``/dev/shm`` when it has room (memory), else in the temporary directory;
    :meth:`close` removes it.
    """

    def __init__(self, min_bytes: int | None = None):
        self.min_bytes = SHARED_MIN_BYTES if min_bytes is None else min_bytes
        self.folder: str | None = None
        self._kept: dict[int, tuple[np.ndarray, tuple]] = {}  # id -> (array, its reference)
        self._transient: list[tuple[str, int]] = []  # (name, bytes): this call's files
        self._spare: dict[int, list[str]] = {}  # bytes -> files free to overwrite
        self._to_keep: list = []
        self.usable = True  # False once the folder could not take the arrays

    def keep(self, obj) -> None:
        """Write the large arrays of ``obj`` once (at the first :meth:`dumps`: not at all when
        no job goes through the folder), for every later :meth:`dumps`."""
        self._to_keep.append(obj)

    def dumps(self, obj) -> bytes:
        """``obj`` pickled, its large arrays as files (new ones last one call)."""
        return self._dumps(obj, keep=False)

    def loads(self, payload: bytes):
        """A worker's result, its arrays read (their files now the call's)."""
        refs: list[tuple] = []
        result = _shared_loads(payload, self.folder, refs)
        known = {name for name, _ in self._transient}  # the lent files among them
        self._transient += [(ref[0], _nbytes(ref)) for ref in refs if ref[0] not in known]
        return result

    def lend(self, n_jobs: int) -> list[dict[int, list[str]]]:
        """The spare files, shared out between ``n_jobs`` workers' jobs for their results
        (bytes -> names; the call's files from now)."""
        lent: list[dict[int, list[str]]] = [{} for _ in range(n_jobs)]
        for nbytes, names in self._spare.items():
            for j, files in enumerate(lent):
                if names[j::n_jobs]:
                    files[nbytes] = names[j::n_jobs]
            self._transient += [(name, nbytes) for name in names]
        self._spare = {}
        return lent

    def recycle(self) -> None:
        """Keep the files of the call, which succeeded, as spare files."""
        for name, nbytes in self._transient:
            self._spare.setdefault(nbytes, []).append(name)
        self._transient.clear()

    def drop_transient(self) -> None:
        """Remove the files of the call (the arrays not kept, the workers' results)."""
        for name, _ in self._transient:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.folder, name))
        self._transient.clear()

    def close(self) -> None:
        """Remove the folder and forget the kept arrays."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            if _resource_tracker is not None:
                _resource_tracker.unregister(self.folder, "folder")
        self.folder, self._kept, self._transient, self._to_keep = None, {}, [], []
        self._spare = {}

    def _dumps(self, obj, keep: bool) -> bytes:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="pmap_sklearn_", dir=_shared_root())
            if _resource_tracker is not None:  # removed even if this process is killed
                _resource_tracker.register(self.folder, "folder")

        def reference(array: np.ndarray):
            kept = self._kept.get(id(array))
            if kept is not None:
                return kept[1]
            ref = _write_array(array, self.folder, None if keep else self._spare)
            if keep:
                ref = (*ref, "kept")  # a worker may hold it for the folder's later calls
                self._kept[id(array)] = (array, ref)  # the array held: its id stays its own
            else:
                self._transient.append((ref[0], array.nbytes))
            return ref

        while self._to_keep and not keep:
            self._dumps(self._to_keep.pop(), keep=True)
        return _pickle_with_files(obj, reference, self.min_bytes)


def _shared_root() -> str | None:
    """``/dev/shm`` when it exists with 1 GB free, else None (the temporary directory)."""
    try:
        stats = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if stats.f_bavail * stats.f_frsize >= 1 << 30 else None


def _write_array(array: np.ndarray, folder: str, spare: dict | None = None) -> tuple:
    """Write ``array`` to a file of ``folder``: into one of the ``spare`` files of its size
    (bytes -> names; the name taken from it), else a new one. Returns its reference."""
    names = None if spare is None or not array.nbytes else spare.get(array.nbytes)
    if names:  # overwritten in place: the file's pages exist already
        name = names.pop()
        with open(os.path.join(folder, name), "r+b") as file:
            file.write(memoryview(np.ascontiguousarray(array)).cast("B"))
    else:
        name = f"{uuid.uuid4().hex}.bin"
        np.ascontiguousarray(array).tofile(os.path.join(folder, name))
    return name, array.dtype.str, array.shape


def _nbytes(ref: tuple) -> int:
    """Bytes of the array of a file reference ``(name, dtype, shape, ...)``."""
    return int(np.prod(ref[2], dtype=np.int64)) * np.dtype(ref[1]).itemsize


def _pickle_with_files(obj, reference, min_bytes: int = 0) -> bytes:
    """``obj`` pickled, each plain numeric array of ``min_bytes`` or more replaced by
    ``reference(array)`` (a persistent id; None: none replaced); by cloudpickle when the
    standard pickle cannot."""

    def persistent_id(item):
        if (
            type(item) is np.ndarray
            and item.nbytes >= min_bytes
            and item.dtype.kind in "biufc"
            and item.dtype.isnative
        ):
            return reference(item)
        return None

    for pickler_class in (pickle.Pickler, cloudpickle.Pickler):
        buffer = io.BytesIO()
        pickler = pickler_class(buffer, pickle.HIGHEST_PROTOCOL)
        if reference is not None:  # (a hook per object pickled: only when it is needed)
            pickler.persistent_id = persistent_id
        try:
            pickler.dump(obj)
        except (pickle.PicklingError, AttributeError, TypeError):
            if pickler_class is cloudpickle.Pickler:
                raise
            continue
        return buffer.getvalue()
    raise AssertionError("unreachable")


#: A worker's copies of the kept arrays of the last shared folder it read: ``(folder, {name:
#: array})``. A kept array does not change while its folder is used, so the later calls of a
#: run (a sharded fit's epochs) reuse the copy, as the caller reuses its own objects, instead
#: of reading the file again; a call from another folder replaces them.
_worker_kept: tuple[str | None, dict] = (None, {})


def _shared_loads(payload: bytes, folder: str, refs: list | None = None, hold: bool = False):
    """Unpickle what :func:`_pickle_with_files` made, reading its arrays' files from
    ``folder`` (their references appended to ``refs``); ``hold`` (a worker's): the kept arrays
    from, and into, :data:`_worker_kept`."""
    global _worker_kept
    unpickler = pickle.Unpickler(io.BytesIO(payload))
    if hold and _worker_kept[0] != folder:
        _worker_kept = (folder, {})
    held = _worker_kept[1] if hold else None

    def persistent_load(ref):
        name, dtype, shape = ref[:3]
        if refs is not None:
            refs.append(ref)
        if held is not None and name in held:
            return held[name]
        array = np.fromfile(os.path.join(folder, name), dtype=np.dtype(dtype)).reshape(shape)
        if held is not None and ref[3:] == ("kept",):
            held[name] = array
        return array

    unpickler.persistent_load = persistent_load
    return unpickler.load()


def _run_shared(payload: bytes, folder: str, min_bytes: int, spare: dict | None = None) -> bytes:
    """A worker's job of :func:`run_on_workers` with ``shared``: its arguments' arrays read from
    ``folder``, its result's arrays of ``min_bytes`` or more written there, into the ``spare``
    files lent to it where one has their size (all of it pickled whole when the folder cannot
    take them)."""
    function, job = _shared_loads(payload, folder, hold=True)
    result = function(*job)

    def write(array):
        return _write_array(array, folder, spare)

    try:
        return _pickle_with_files(result, write, min_bytes)
    except OSError:
        return _pickle_with_files(result, None)


# ---- chunks: bounded memory, and results that do not depend on where chunks end ------------

#: Nodes of clamped copies a solver holds at once: bounds the memory of the clamped maximisers
#: and of the perturbation rounds.
CHUNK_NODES = 1 << 18
#: Nodes that a prediction (``predict``, ``predict_marginals``, ``score``, …) prepares and
#: solves at once: ``X`` is taken in chunks of consecutive samples of at most this many nodes
#: (a larger sample alone), so that its memory beyond the outputs does not grow with the number
#: of samples (a few MB a chunk: a 128² image, or about 250 sentences; the cost in speed is in
#: docs/results/predict_memory.md).
PREDICT_NODES = 1 << 12
#: Nodes of a chunk per worker when ``n_jobs`` gives several: a chunk's solver calls go to
#: the workers only when they carry enough work to pay for the dispatch (a hundred 128² images
#: of graph cuts, or thousands of small graphs' perturbed MAPs), so memory is bounded by
#: this many nodes per worker instead.
PARALLEL_PREDICT_NODES = 1 << 19


def prediction_chunks(sizes, n_jobs=None) -> list[slice]:
    """The chunks of consecutive samples (of ``sizes`` nodes) that a prediction takes at once:
    at most :data:`PREDICT_NODES` nodes, :data:`PARALLEL_PREDICT_NODES` per worker when
    ``n_jobs`` gives several (a larger sample alone)."""
    workers = effective_n_jobs(n_jobs)
    limit = PREDICT_NODES if workers == 1 else PARALLEL_PREDICT_NODES * workers
    return chunks_by_size(np.asarray(sizes), limit)


def in_chunks(predict, chunks, per_sample=None, random_state=None):
    """``predict(chunk, per_sample[chunk], random_state)`` over ``chunks``, the results
    concatenated; with a single chunk, ``predict(None, per_sample, random_state)``.

    A ``random_state`` (that of a randomised prediction) gives every sample the seed of its
    stream once for all the samples (:class:`SampleSeeds`), so the
    results do not depend on where the chunks end.
    """
    if len(chunks) <= 1:
        return predict(None, per_sample, random_state)
    seeds = None if random_state is None else sample_seeds(random_state, chunks[-1].stop)
    return np.concatenate(
        [
            predict(
                chunk,
                None if per_sample is None else per_sample[chunk],
                None if seeds is None else SampleSeeds(seeds[chunk]),
            )
            for chunk in chunks
        ]
    )


def chunks_by_size(sizes, limit: int = CHUNK_NODES) -> list[slice]:
    """Consecutive groups of items (queries, samples) whose sizes add up to at most ``limit``
    (a single larger item forms a group of its own)."""
    if len(sizes) == 0:
        return []
    ends = np.cumsum(sizes)
    bounds = [0]
    while bounds[-1] < len(sizes):
        start = bounds[-1]
        budget = (ends[start - 1] if start else 0) + limit
        bounds.append(max(start + 1, int(np.searchsorted(ends, budget, side="right"))))
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class SampleSeeds(NamedTuple):
    """Per-sample seeds drawn once for a whole call, passed as the ``random_state`` of a part
    of its samples (a prediction in chunks): each sample keeps the stream it would have had in
    one call, so the results do not depend on the chunking."""

    seeds: np.ndarray


def sample_seeds(random_state, n_samples: int) -> np.ndarray:
    """The seed of each sample's stream of perturbations, drawn from ``random_state`` (or the
    seeds of a :class:`SampleSeeds`).

    Parameters
    ----------
    random_state : int, Generator, RandomState, SampleSeeds or None
    n_samples : int

    Returns
    -------
    ndarray of shape (n_samples,) of int
    """
    if isinstance(random_state, SampleSeeds):
        if len(random_state.seeds) != n_samples:
            raise ValueError(
                f"{len(random_state.seeds)} sample seeds given for {n_samples} samples"
            )
        return random_state.seeds
    return check_generator(random_state).integers(2**63, size=n_samples)


def map_samples(
    function, make_job, sizes, n_jobs, limit, kind=None, chunks_per_worker=CHUNKS_PER_WORKER
):
    """``function(*make_job(chunk))`` over chunks of consecutive samples, in order.

    For solvers whose work per call has fixed costs (a max-flow graph per chunk, a perturbation
    round per chunk): in the calling process the chunks are as large as ``limit`` allows; with
    several workers, the call is split into ``chunks_per_worker`` chunks of equal size per
    worker (more if a chunk would exceed ``limit``) — when it is expected to pay, see
    :func:`map_jobs`. While the cost of ``kind`` is unknown, the first samples (about 1/16 of
    the work) run here to measure it.

    Parameters
    ----------
    function : callable
    make_job : callable
        ``slice of samples -> tuple`` of arguments of ``function``.
    sizes : ndarray of shape (n_samples,)
        Work of each sample, in ``kind``'s units.
    n_jobs : int or None
    limit : int
        Largest work of a chunk (memory).
    kind : str, optional
        Name of the cost (default: ``function``'s).
    chunks_per_worker : int, default=CHUNKS_PER_WORKER
        Several balance chunks of unequal times (α-expansion stops when its moves stop
        improving); 1 when each chunk has large fixed costs.

    Returns
    -------
    list
        The results of the chunks, in sample order.
    """
    kind = job_kind(function) if kind is None else kind
    sizes = np.asarray(sizes, float)
    workers = effective_n_jobs(n_jobs)
    results, first = [], 0
    if workers > 1 and len(sizes) > 1 and kind not in _SECONDS_PER_WORK:
        first = int(np.searchsorted(np.cumsum(sizes), sizes.sum() / 16, "right"))
        first = min(max(first, 1), len(sizes) - 1)
        start = time.perf_counter()
        results.append(function(*make_job(slice(0, first))))
        record_cost(kind, time.perf_counter() - start, sizes[:first].sum())
    rest = sizes[first:]
    if parallel_workers(kind, n_jobs, rest.sum(), workers) > 1:
        n_chunks = max(workers * chunks_per_worker, int(np.ceil(rest.sum() / limit)))
        ends = np.cumsum(rest)
        cuts = np.searchsorted(ends, np.arange(1, n_chunks) * (ends[-1] / n_chunks), "right")
        bounds = np.unique(np.concatenate([[0], cuts, [len(rest)]]))
        chunks = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    else:
        chunks = chunks_by_size(rest, limit)
    chunks = [slice(c.start + first, c.stop + first) for c in chunks]
    work = [sizes[c].sum() for c in chunks]
    return results + map_jobs(function, [make_job(c) for c in chunks], n_jobs, work, kind)


@functools.cache
def _blas_controller():
    # Built once (inspecting the loaded libraries takes milliseconds), at the first fit or
    # prediction with several workers, when numpy's and scipy's BLAS are loaded.
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def single_blas_thread():
    """Context manager limiting BLAS to one thread (cheap after the first call)."""
    return _blas_controller().limit(limits=1, user_api="blas")


def one_blas_thread(method):
    """Run an estimator's method (fit, prediction, marginals) with BLAS limited to one thread.

    Its products are small — a mini-batch's or a chunk's features times the K weights of each
    feature — and BLAS threads gain little on them, but keep spinning after each product: when
    another process shares the cores (the estimator's own workers with ``n_jobs``, a concurrent
    fit) they take up to half of the fit's time (docs/results/defaults.md). The workers
    themselves are limited by joblib.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with single_blas_thread():
            return method(self, *args, **kwargs)

    return wrapper


def _pickled(payload) -> bytes:
    """``payload`` pickled by the standard pickle, or by cloudpickle (as loky does) when it
    holds what the standard one cannot (a lambda, a function defined in a function)."""
    return _pickle_with_files(payload, None)


def _run_pickled(payload: bytes):
    function, job = pickle.loads(payload)
    return function(*job)


def _run_chunk(function, jobs):
    return [function(*job) for job in jobs]
