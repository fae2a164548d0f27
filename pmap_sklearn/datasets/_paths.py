"""Where the data files are looked for: an explicit path, ``$PMAP_SKLEARN_DATA``, or the shared
data folder beside the source checkout (``../shared/data``) or beside the working directory."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

ENV_VAR = "PMAP_SKLEARN_DATA"


def candidate_roots() -> list[Path]:
    """Data roots in the order they are tried."""
    roots = []
    if os.environ.get(ENV_VAR):
        roots.append(Path(os.environ[ENV_VAR]))
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():  # a source checkout, not an installed package
        roots.append(repo.parent / "shared" / "data")
    roots.append(Path.cwd().parent / "shared" / "data")
    return list(dict.fromkeys(roots))


def find_data_file(path, relative_names: list[str], what: str, download: str) -> Path:
    """Resolve a data file, or raise ``FileNotFoundError`` naming every place tried.

    Parameters
    ----------
    path : str or Path or None
        A file, or a folder holding one of ``relative_names`` (or their base names).
    relative_names : list of str
        Paths below a data root, e.g. ``["ocr/letter.data.gz", "ocr/letter.data"]``.
    """
    tried = []
    if path is not None:
        path = Path(path)
        candidates = (
            [path]
            if not path.is_dir()
            else [path / name for rel in relative_names for name in (rel, Path(rel).name)]
        )
    else:
        candidates = [root / rel for root in candidate_roots() for rel in relative_names]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
        tried.append(str(candidate))
    raise FileNotFoundError(
        f"{what} not found; tried: {', '.join(tried)}. Pass path=..., or set ${ENV_VAR} to the "
        f"data folder. The original can be downloaded from {download}"
    )


def read_data_file(file: Path, read, source: str):
    """``read(handle)`` on a text file (gunzipped if it ends in ``.gz``), or a ValueError that
    names the file and where to get it again when it cannot be read (truncated, corrupted)."""
    opener = gzip.open if file.suffix == ".gz" else open
    try:
        with opener(file, "rt", encoding="utf-8") as handle:
            return read(handle)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(
            f"cannot read {file} ({type(exc).__name__}: {exc}): the file is truncated or "
            f"corrupted; download it again from {source}"
        ) from None
