"""The package's layout: one concept per module, old module paths still importable."""

import importlib
import pickle
from pathlib import Path

import pytest

import pmap_sklearn

PACKAGE = Path(pmap_sklearn.__file__).parent


def test_no_module_name_is_used_twice():
    names = [p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


@pytest.mark.parametrize(
    "old, name",
    [
        ("multilabel", "chow_liu_tree"),
        ("part_clamp", "feedback_vertex_set"),
        ("baselines", "StructuredSVM"),
        ("continuous", "snr"),
        ("denoising", "LogSupermodularDenoiser"),
        ("perturb_map", "PerturbMAPCRF"),
        ("two_stage", "TwoStageCRF"),
        ("mean_field", "MeanFieldCRF"),
        ("epsilon", "EpsilonCRF"),
        ("marginal", "MarginalPerturbMAPCRF"),
    ],
)
def test_modules_of_earlier_releases_still_import(old, name):
    module = importlib.import_module(f"pmap_sklearn.{old}")
    assert hasattr(module, name)


def test_a_pickle_naming_an_old_module_loads():
    """Pickles of earlier releases name classes by their old modules."""
    from pmap_sklearn import PerturbMAPCRF

    payload = pickle.dumps(PerturbMAPCRF(alpha=0.5), protocol=0).replace(
        b"pmap_sklearn.learners.perturb_map", b"pmap_sklearn.perturb_map"
    )
    assert b"pmap_sklearn.perturb_map" in payload
    assert pickle.loads(payload).alpha == 0.5


def test_public_names_resolve_where_users_find_them():
    for name in pmap_sklearn.__all__:
        assert getattr(pmap_sklearn, name) is not None
    from pmap_sklearn import metrics, persistence, solvers

    for module in (metrics, solvers, persistence):
        for name in module.__all__:
            assert getattr(module, name) is not None
