"""What the image data sets share: reading images, choosing files by index, and computing
per-image results in parallel with an on-disk cache keyed by the files' sizes and times."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
from joblib import Memory, Parallel, delayed

from ..superpixels import _skimage


def _read(file: Path) -> np.ndarray:
    io = _skimage("io", "the image data set loaders")
    try:
        with warnings.catch_warnings():
            # a file no decoder recognises makes imageio try all its legacy plugins, whose
            # DICOM module warns of its deprecation on import: noise for a png or jpg
            warnings.filterwarnings("ignore", "The legacy `DICOM` plugin", DeprecationWarning)
            return io.imread(file)
    except Exception as exc:  # noqa: BLE001 - any decoder error becomes a clear message
        raise ValueError(f"cannot read image {file}: {exc}") from None


def _stamps(*files: Path) -> tuple:
    return tuple((f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def _select(items: list, indices, what: str) -> list:
    """``items[i]`` for i in ``indices`` (all when None), or a ValueError naming the bad one."""
    if indices is None:
        return items
    if np.ndim(indices) != 1 or isinstance(indices, str):
        raise ValueError(
            f"indices must be a sequence of ints (e.g. [0] or [0, 5]), got {indices!r}"
        )
    chosen = []
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, int | np.integer):
            raise ValueError(f"indices must be ints, got {i!r}")
        if not 0 <= i < len(items):
            raise ValueError(
                f"index {i} is out of range: there are {len(items)} {what}, indices 0.."
                f"{len(items) - 1}"
            )
        chosen.append(items[i])
    return chosen


def _cache_dir(cache) -> str | None:
    if cache is False or cache is None:
        return None
    if cache is True:
        default = Path.home() / ".cache" / "pmap_sklearn"
        return os.environ.get("PMAP_SKLEARN_CACHE", str(default))
    return str(cache)


def cached_map(function, jobs: list, location, n_jobs, what: str) -> list:
    """``[function(*job) for job in jobs]`` over ``n_jobs`` processes, each result cached with
    ``joblib.Memory`` in ``location`` (None: no cache). While some results are not cached yet,
    standard error gets one line saying what is computed and where it is cached, then (in a
    terminal only) the count of images done every tenth of the way."""
    load = Memory(location, verbose=0).cache(function) if location else function
    pending = len(jobs)
    if location:
        pending = sum(not load.check_call_in_cache(*job) for job in jobs)
    if pending:
        where = f", cached in {_home_as_tilde(location)}" if location else ""
        print(f"{what} of {pending} images{where}", file=sys.stderr, flush=True)
    counting = pending and sys.stderr.isatty()
    results = []
    stream = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(load)(*job) for job in jobs)
    for done, result in enumerate(stream, start=1):
        results.append(result)
        if counting and (done % max(1, len(jobs) // 10) == 0 or done == len(jobs)):
            print(f"{what}: {done}/{len(jobs)} images", file=sys.stderr, flush=True)
    return results


def _home_as_tilde(location) -> str:
    """``location`` with the user's home folder written ``~`` (a message names no user's folder)."""
    path, home = str(location), str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home) else path
