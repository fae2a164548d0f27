"""The API reference's docstrings pass the numpydoc checks of the documentation build.

The build (``sphinx -W``) fails on any of them; checking here finds a missing parameter or
Returns section in seconds, in the test run, instead of after the gallery's minutes.
"""

import importlib
import inspect
import re
from pathlib import Path

import pytest

validate = pytest.importorskip("numpydoc.validate", reason="numpydoc is a docs extra")

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _conf():
    """The checks and exclusions of the documentation build's ``conf.py``."""
    source = (DOCS / "conf.py").read_text()
    namespace = {}
    for name in ("numpydoc_validation_checks", "numpydoc_validation_exclude"):
        start = source.index(f"{name} = ")
        end = source.index("\n}", start) + 2
        exec(source[start:end], namespace)  # a set literal of strings
    return namespace["numpydoc_validation_checks"], namespace["numpydoc_validation_exclude"]


CHECKS, EXCLUDE = _conf()


def _api_names():
    """Every object an autosummary block of ``api.rst`` lists, as an import path."""
    names, in_block = [], False
    for line in (DOCS / "api.rst").read_text().splitlines():
        if line.startswith(".. autosummary::"):
            in_block = True
        elif in_block and re.match(r"^   [A-Za-z_][\w.]*$", line):
            names.append(f"pmap_sklearn.{line.strip()}")
        elif in_block and line and not line.startswith("   "):
            in_block = False
    return names


def _resolve(path):
    module, _, rest = path.partition(".")
    obj = importlib.import_module(module)
    for part in rest.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(f"{obj.__name__}.{part}")
    return obj


def _documented():
    """The import paths the build validates: the listed objects and, for classes, their public
    documented members, inherited ones included, except scikit-learn's and Python's."""
    paths = []
    for path in _api_names():
        obj = _resolve(path)
        paths.append(path)
        if not inspect.isclass(obj):
            continue
        for name in dir(obj):
            if name.startswith("_"):
                continue
            member = inspect.getattr_static(obj, name)
            function = getattr(member, "fget", None) or getattr(member, "__func__", member)
            module = getattr(function, "__module__", None) or ""
            if not module.startswith("pmap_sklearn") or not getattr(function, "__doc__", None):
                continue  # scikit-learn's members, Python's (an enumeration's str methods)
            if callable(function) or isinstance(member, property):
                paths.append(f"{path}.{name}")
    return [p for p in paths if not any(re.search(pattern, p) for pattern in EXCLUDE)]


@pytest.mark.parametrize("path", _documented())
def test_docstring_passes_the_build_checks(path):
    errors = [
        f"{code}: {message}"
        for code, message in validate.validate(path)["errors"]
        if code in CHECKS
    ]
    assert not errors, f"{path}: " + "; ".join(errors)
