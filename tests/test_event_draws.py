"""Event probabilities from draws in rounds (pmap_sklearn._event_draws): agreement with the exact
probabilities within the standard error each sample reached, the stopping rule, determinism and
the parameter checks of entity, sequence and region probabilities."""

import copy

import numpy as np
import pytest

from pmap_sklearn import ChainCRF, PerturbMAPCRF, _event_draws, inspection
from pmap_sklearn._event_draws import first_round, needed_draws, standard_errors
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.inspection import (
    entity_probabilities,
    region_probabilities,
    sequence_probabilities,
)

from .test_inspection import _tagging_data


@pytest.fixture(scope="module")
def chains():
    """Chains of 4 to 6 nodes, 3 labels, and an exact chain CRF fitted on them."""
    data = make_chain_data(n_samples=40, n_states=3, random_state=0)
    X = [x[: 4 + i % 3] for i, x in enumerate(data.data)]
    y = [t[: 4 + i % 3] for i, t in enumerate(data.target)]
    return X, ChainCRF(alpha=0.1).fit(X, y)


@pytest.fixture(scope="module")
def tagger():
    X, y = _tagging_data()
    return X, ChainCRF(alpha=0.05).fit(X, y)


@pytest.fixture(scope="module")
def perturbed():
    X, y = _tagging_data()
    return X, PerturbMAPCRF(random_state=0, max_iter=20).fit(X, y)


def _spy(monkeypatch):
    """Record the draws of each sample of the next event probabilities."""
    seen = {}
    original = _event_draws.event_frequencies

    def spy(*args, **kwargs):
        frequencies, drawn = original(*args, **kwargs)
        seen["drawn"] = drawn
        return frequencies, drawn

    monkeypatch.setattr(_event_draws, "event_frequencies", spy)
    return seen


def _draws_only(monkeypatch):
    """Frequencies over exact draws of the chain model instead of its exact events."""
    monkeypatch.setattr(inspection, "_exact_solver", lambda model, capability, method: None)


def test_the_standard_error_rule():
    """sqrt(p (1 - p) / n) at p = (c + 1) / (n + 2); the first round is the fewest draws at
    which an event held in every draw (or none) meets tol."""
    np.testing.assert_allclose(standard_errors([5], 10), np.sqrt(0.5 * 0.5 / 10))
    for tol in (0.1, 0.02, 0.013):
        n = first_round(tol, 1000)
        assert standard_errors([n], n)[0] <= tol < standard_errors([n - 1], n - 1)[0]
        assert needed_draws(np.array([0.0, n]), n, tol) <= n
    assert first_round(0.0, 300) == 300 and first_round(0.001, 300) == 300
    assert needed_draws(np.array([50.0]), 100, 0.02) == int(np.ceil(0.25 / 0.02**2))


@pytest.mark.parametrize("what", ["sequence", "region", "entity"])
def test_adaptive_frequencies_agree_with_the_exact_probabilities(what, chains, tagger, monkeypatch):
    """Over exact draws of the same model, each probability within 4 standard errors of the
    draws its sample got (at most ~4 tol) of the exact one, and each sample's error at most
    tol unless it reached n_draws."""
    tol, n_draws = 0.015, 3000
    X, model = tagger if what == "entity" else chains
    X = X[:12]
    probabilities = {
        "sequence": lambda **kw: list(sequence_probabilities(model, X, **kw)),
        "region": lambda **kw: list(region_probabilities(model, X, **kw)[1]),
        "entity": lambda **kw: [
            np.array([e[3] for e in s]) for s in entity_probabilities(model, X, **kw)
        ],
    }[what]
    exact = probabilities()
    seen = _spy(monkeypatch)
    _draws_only(monkeypatch)
    drawn = probabilities(n_draws=n_draws, tol=tol, random_state=0)
    counts = seen["drawn"]
    checked = 0
    for e, d, n in zip(exact, drawn, counts, strict=True):
        e, d = np.atleast_1d(e), np.atleast_1d(d)
        if not len(e):
            assert n == 0  # a sample without events is not drawn
            continue
        assert 0 < n <= n_draws
        error = np.sqrt(e * (1 - e) / n)
        assert np.all(np.abs(d - e) <= 4 * error + 1e-12)
        reached = standard_errors(d * n, n)
        assert n == n_draws or reached.max() <= tol
        checked += len(e)
    assert checked >= 12
    assert counts.max() > first_round(tol, n_draws)  # some samples needed more draws


def test_certain_samples_stop_after_the_first_round_and_the_cap_holds(chains, monkeypatch):
    """A sample whose labelling every draw keeps stops at the first round (ceil(1 / tol)
    draws); an uncertain one goes on, to n_draws at most."""
    X, model = chains
    sure = copy.deepcopy(model)
    sure.coef_ = model.coef_ * 100  # the distribution all but at the MAP labelling
    certain = np.flatnonzero(sequence_probabilities(sure, X) > 1 - 1e-9)[:3]
    assert len(certain) == 3
    X_sure = [X[i] for i in certain]
    seen = _spy(monkeypatch)
    _draws_only(monkeypatch)
    probability = sequence_probabilities(sure, X_sure, n_draws=500, tol=0.05, random_state=0)
    np.testing.assert_array_equal(probability, 1.0)
    np.testing.assert_array_equal(seen["drawn"], first_round(0.05, 500))
    sequence_probabilities(model, X[:10], n_draws=150, tol=0.001, random_state=0)
    assert seen["drawn"].max() == 150  # the cap, though tol asked for more
    assert np.all(seen["drawn"] == 150)  # tol 0.001: no first round below the cap


def test_draws_are_a_function_of_random_state_and_of_each_samples_own_draws(perturbed):
    """The same random_state gives the same probabilities, another gives others; a
    sequence's probabilities do not depend on which other sequences are drawn with it (nor on
    the workers)."""
    X, model = perturbed
    whole = entity_probabilities(model, X[:16], random_state=5)
    assert whole == entity_probabilities(model, X[:16], random_state=5)
    assert whole != entity_probabilities(model, X[:16], random_state=6)
    assert entity_probabilities(model, X[:7], random_state=5) == whole[:7]
    parallel = copy.deepcopy(model).set_params(n_jobs=2)
    assert entity_probabilities(parallel, X[:16], random_state=5) == whole


def test_tol_zero_draws_every_sample_n_draws_times(perturbed, monkeypatch):
    X, model = perturbed
    seen = _spy(monkeypatch)
    entity_probabilities(model, X[:6], n_draws=40, tol=0, random_state=0)
    has = [len(s) > 0 for s in entity_probabilities(model, X[:6], method="exact")]
    np.testing.assert_array_equal(seen["drawn"], np.where(has, 40, 0))


@pytest.mark.parametrize("tol", [-0.01, 0.6, np.nan, "0.02", True, None])
@pytest.mark.parametrize(
    "function", [entity_probabilities, sequence_probabilities, region_probabilities]
)
def test_bad_tol_and_n_draws_are_named(function, tol, tagger):
    X, model = tagger
    with pytest.raises(ValueError, match="tol must be a real number in"):
        function(model, X[:1], tol=tol)
    with pytest.raises(ValueError, match="n_draws must be an int >= 1"):
        function(model, X[:1], n_draws=0)
