"""Entity probabilities by distribution: the perturbed MAPs a perturb-and-MAP learner was fitted
to (its default), the exact Gibbs distribution on request or after a temperature was fitted."""

import numpy as np
import pytest

from pmap_sklearn import ChainCRF, PerturbMAPCRF
from pmap_sklearn.inspection import entity_probabilities
from pmap_sklearn.metrics import entity_spans

from .test_sampling import _tagging_data


def _frequencies(model, X, draws):
    """Each predicted entity's frequency over ``draws``: drawn with its predicted tags and not
    continued or extended (conlleval's reading of each draw)."""
    found = []
    for tags, drawn in zip(model.predict(X), draws, strict=True):
        for kind, start, end in entity_spans(tags):
            held = [
                (kind, start, end) in entity_spans(draw)
                and list(draw[start:end]) == list(tags[start:end])
                for draw in drawn
            ]
            found.append(np.mean(held))
    return np.array(found)


@pytest.fixture(scope="module")
def tagging():
    X, y = _tagging_data()
    return X, y, PerturbMAPCRF(random_state=0, max_iter=20).fit(X, y)


def test_perturb_and_map_entities_are_the_perturbed_draws_frequencies(tagging):
    """The default of PerturbMAPCRF: the frequency over its perturbed MAPs, the very draws of
    sample(method='perturb') with the same seed."""
    X, _, model = tagging
    default = entity_probabilities(model, X[:8], n_draws=400, random_state=3)
    draws = model.sample(X[:8], n_draws=400, method="perturb", random_state=3)
    values = np.array([p for sentence in default for *_, p in sentence])
    assert len(values) >= 4
    np.testing.assert_allclose(values, _frequencies(model, X[:8], draws))
    perturb = entity_probabilities(model, X[:8], method="perturb", n_draws=400, random_state=3)
    assert perturb == default


def test_exact_entities_on_request_and_after_a_temperature(tagging):
    """method='exact': constrained forward-backward against 10,000 exact draws; after
    calibrate_marginals the default is the exact distribution at the fitted temperature."""
    X, y, model = tagging
    exact = entity_probabilities(model, X[:5], method="exact")
    values = np.array([p for sentence in exact for *_, p in sentence])
    assert len(values) >= 3
    drawn = _frequencies(
        model, X[:5], model.sample(X[:5], n_draws=10_000, method="exact", random_state=0)
    )
    assert np.all(np.abs(drawn - values) < 5 * np.sqrt(values * (1 - values) / 10_000) + 1e-9)

    calibrated = PerturbMAPCRF(random_state=0, max_iter=20).fit(X, y)
    calibrated.marginal_temperature_ = 2.0  # as calibrate_marginals sets it
    default = entity_probabilities(calibrated, X[:5])
    assert default == entity_probabilities(calibrated, X[:5], method="exact")
    softer = np.array([p for sentence in default for *_, p in sentence])
    assert softer.mean() < values.mean() - 0.01  # the predicted entities, less sure at T = 2


def test_entity_probabilities_refuse_a_method_the_estimator_lacks(tagging):
    X, y, _ = tagging
    with pytest.raises(ValueError, match="method must be one of"):
        entity_probabilities(ChainCRF(alpha=0.05).fit(X, y), X[:1], method="perturb")
