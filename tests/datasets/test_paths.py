"""Where the shared data is looked for."""

from pathlib import Path

from pmap_sklearn.datasets._paths import candidate_roots


def test_data_roots_skip_an_installed_package(tmp_path, monkeypatch):
    """Inside a source checkout the shared folder beside it is tried; an installed package
    (no pyproject.toml two levels up) never gives a root inside the virtualenv."""
    from pmap_sklearn.datasets import _paths

    monkeypatch.delenv("PMAP_SKLEARN_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    roots = candidate_roots()
    checkout = Path(_paths.__file__).resolve().parents[2]
    assert roots[0] == checkout.parent / "shared" / "data"
    installed = tmp_path / "venv" / "lib" / "site-packages" / "pmap_sklearn" / "datasets"
    installed.mkdir(parents=True)
    monkeypatch.setattr(_paths, "__file__", str(installed / "_paths.py"))
    assert candidate_roots() == [tmp_path.parent / "shared" / "data"]
