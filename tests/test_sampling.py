"""Joint samples: exact draws against enumeration, perturbed MAP draws against the marginals
they average, conditioning on known labels, and the estimator method's contract."""

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    MarginalPerturbMAPCRF,
    StructuredSVM,
)


# ---- entity probabilities ---------------------------------------------------------------------
def _tagging_data(n=60, length=4, seed=0):
    """Random 3-feature tokens tagged by a noisy rule, in IOB2 with two entity types."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        features = rng.normal(size=(length, 3))
        tags, previous = [], "O"
        for f in features:
            kind = "PER" if f[0] > 0.3 else "LOC" if f[1] > 0.5 else None
            if kind is None or rng.random() < 0.1:
                tag = "O"
            else:
                tag = ("I-" if previous[2:] == kind else "B-") + kind
            tags.append(tag)
            previous = tag
        X.append(features)
        y.append(tags)
    return X, y


def test_entity_probabilities_are_exact_on_chains():
    """The exact probabilities against draws read by conlleval's rules: the frequency of
    draws that hold each predicted entity with its predicted tags."""
    from pmap_sklearn.inspection import entity_probabilities
    from pmap_sklearn.metrics import entity_spans

    X, y = _tagging_data()
    model = ChainCRF(alpha=0.05).fit(X, y)
    exact = entity_probabilities(model, X[:6])
    draws = model.sample(X[:6], n_draws=20_000, random_state=0)
    checked = 0
    for entities, tags, drawn in zip(exact, model.predict(X[:6]), draws, strict=True):
        assert [e[:3] for e in entities] == entity_spans(tags)
        for kind, start, end, probability in entities:
            held = np.mean(
                [
                    (kind, start, end) in entity_spans(draw)
                    and list(draw[start:end]) == list(tags[start:end])
                    for draw in drawn
                ]
            )
            assert abs(held - probability) < 5 * np.sqrt(probability * (1 - probability) / 20_000)
            checked += 1
    assert checked >= 4


def test_entity_probabilities_from_draws_where_the_model_is_not_exact():
    from pmap_sklearn.inspection import entity_probabilities

    X, y = _tagging_data()
    exact = entity_probabilities(ChainCRF(alpha=0.05).fit(X, y), X[:6])
    model = MarginalPerturbMAPCRF(random_state=0, max_iter=20).fit(X, y)
    drawn = entity_probabilities(model, X[:6], n_draws=300, random_state=0)
    assert [[e[:3] for e in s] for s in drawn] == [
        [e[:3] for e in s] for s in entity_probabilities(model, X[:6], n_draws=5)
    ]
    values = [p for s in drawn for *_, p in s]
    assert values and all(0 <= p <= 1 for p in values)
    assert len(exact) == len(drawn)
    with pytest.raises(ValueError, match="no marginals"):
        entity_probabilities(StructuredSVM(random_state=0, max_iter=2).fit(X, y), X[:1])
