"""Per-sample oracle calls, in chunks over joblib processes.

PyMaxflow holds the GIL, so threads give no speed-up: graph cuts are spread over processes,
a few chunks per worker so that the dispatch cost stays small next to the cuts.
"""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed


def map_jobs(function, jobs, n_jobs):
    """``[function(*job) for job in jobs]``, in chunks over ``n_jobs`` processes if asked."""
    if n_jobs in (None, 1) or len(jobs) < 2:
        return [function(*job) for job in jobs]
    chunks = np.array_split(np.arange(len(jobs)), min(len(jobs), 4 * abs(n_jobs)))
    parts = Parallel(n_jobs=n_jobs)(
        delayed(_run_chunk)(function, [jobs[i] for i in chunk]) for chunk in chunks
    )
    return [result for part in parts for result in part]


def _run_chunk(function, jobs):
    return [function(*job) for job in jobs]
