"""Per-sample solver calls over joblib workers, when the work pays for the dispatch.

PyMaxflow holds the GIL, so threads give no speed-up: graph cuts are spread over processes. A
call to the workers costs milliseconds (sending the potentials, collecting the results), while
a graph cut on a superpixel graph costs tens of microseconds: a call goes to the workers only
when its estimated work is large enough, in a few chunks of equal work per worker. The backend
is joblib's — ``joblib.parallel_config(backend="dask")`` with a ``distributed`` cluster spreads
the same calls over many machines, with the same results.
"""

from __future__ import annotations

import functools
from numbers import Integral

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.utils._param_validation import Interval
from threadpoolctl import threadpool_limits

#: scikit-learn parameter constraint of ``n_jobs``: None, a positive count, or -1, -2, … (all
#: processors, all but one, …); 0 is refused.
N_JOBS_CONSTRAINT = [
    None,
    Interval(Integral, 1, None, closed="left"),
    Interval(Integral, None, -1, closed="right"),
]

#: Estimated work (node visits of the solvers, e.g. nodes × solves) below which a call runs in
#: the calling process: about 0.1-0.5 s of graph cuts, well above the cost of a dispatch.
MIN_PARALLEL_WORK = 1_000_000

#: Chunks per worker: several, so that workers stay busy when chunks take unequal times.
CHUNKS_PER_WORKER = 4


def map_jobs(function, jobs, n_jobs, work=None):
    """``[function(*job) for job in jobs]``, over ``n_jobs`` joblib workers when it pays.

    Parameters
    ----------
    function : callable
    jobs : list of tuple
        The arguments of each call.
    n_jobs : int or None
        As in joblib (None: the ``joblib.parallel_config`` in force, else 1).
    work : sequence of float, optional
        Estimated work of each job; the jobs run in the calling process when their total is
        below ``MIN_PARALLEL_WORK``, and are grouped into chunks of about equal work.
    """
    workers = effective_n_jobs(n_jobs)
    total = None if work is None else float(np.sum(work))
    if workers == 1 or len(jobs) < 2 or (total is not None and total < MIN_PARALLEL_WORK):
        return [function(*job) for job in jobs]
    n_chunks = min(len(jobs), CHUNKS_PER_WORKER * workers)
    weights = np.ones(len(jobs)) if work is None else np.maximum(np.asarray(work, float), 1e-12)
    # Chunk c holds the jobs whose cumulative work falls in its share [c, c + 1) of the total.
    position = (np.cumsum(weights) - weights / 2) / weights.sum() * n_chunks
    chunk_of = np.minimum(position.astype(int), n_chunks - 1)
    chunks = [np.flatnonzero(chunk_of == c) for c in range(n_chunks)]
    parts = Parallel(n_jobs=n_jobs)(
        delayed(_run_chunk)(function, [jobs[i] for i in chunk]) for chunk in chunks if len(chunk)
    )
    return [result for part in parts for result in part]


def uses_workers(method):
    """Run an estimator's method with single-threaded BLAS when its ``n_jobs`` gives several
    workers: the calling process must leave the cores to the worker processes, and BLAS threads
    keep spinning on them for ~0.1 s after each matrix product (which cost up to a third of the
    speed-up of n_jobs=2 on two cores). The workers themselves are limited by joblib."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if effective_n_jobs(getattr(self, "n_jobs", None)) == 1:
            return method(self, *args, **kwargs)
        with threadpool_limits(limits=1, user_api="blas"):
            return method(self, *args, **kwargs)

    return wrapper


def _run_chunk(function, jobs):
    return [function(*job) for job in jobs]
