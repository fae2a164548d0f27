import os
from pathlib import Path

import numpy as np
import pytest

from pmap_sklearn.datasets._paths import candidate_roots


def shared_data_root():
    """The shared data folder, or None (tests that need it are skipped)."""
    for root in candidate_roots():
        if (root / "ocr" / "letter.data.gz").is_file() or (root / "ocr" / "letter.data").is_file():
            return root
    return None


@pytest.fixture(scope="session")
def ocr():
    root = shared_data_root()
    if root is None:
        tried = ", ".join(str(p) for p in candidate_roots())
        pytest.skip(f"OCR data not found (tried {tried}; set PMAP_SKLEARN_DATA)")
    from pmap_sklearn.datasets import load_ocr

    return load_ocr(Path(root) / "ocr")


@pytest.fixture
def rng():
    return np.random.default_rng(int(os.environ.get("PMAP_TEST_SEED", "0")))


@pytest.fixture
def always_parallel(monkeypatch):
    """Send every call with several workers to them, however small (the tests' problems are
    tiny): no probing in the calling process, every call expected to pay."""
    from joblib import effective_n_jobs

    from pmap_sklearn import _parallel

    def every_worker(kind, n_jobs, work, workers=None):
        return effective_n_jobs(n_jobs) if workers is None else workers

    monkeypatch.setattr(_parallel, "PROBE_SECONDS", 0.0)
    monkeypatch.setattr(_parallel, "parallel_workers", every_worker)
