"""Joint samples: exact draws against enumeration, perturbed MAP draws against the marginals
they average, conditioning on known labels, and the estimator method's contract."""

import numpy as np
import pytest
from sklearn.datasets import make_multilabel_classification
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from pmap_sklearn import (
    ChainCRF,
    GridStructure,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    MultiLabelStructure,
    PerturbMAPCRF,
    StructuredSVM,
)
from pmap_sklearn.datasets import make_chain_data, make_grid_data


@pytest.fixture(scope="module")
def chains():
    data = make_chain_data(n_samples=16, random_state=7)
    return data.data, data.target


def test_perturbed_draws_are_the_perturbed_marginals(chains):
    """The same perturbations as predict_marginals: the frequencies are its marginals exactly."""
    X, y = chains
    model = MarginalPerturbMAPCRF(random_state=0, max_iter=3).fit(X, y)
    draws = model.sample(X[:4], n_draws=50, method="perturb")
    marginals = model.predict_marginals(X[:4], method="perturb", n_perturbations=50)
    for sample, marginal in zip(draws, marginals, strict=True):
        assert sample.shape == (50, len(marginal))
        frequency = np.stack([(sample == c).mean(axis=0) for c in model.classes_], axis=-1)
        np.testing.assert_allclose(frequency, marginal, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [lambda: PerturbMAPCRF(random_state=0), lambda: ChainCRF(), lambda: MeanFieldCRF("chain")],
)
def test_default_draws_match_the_default_marginals(make, chains):
    """Each estimator draws from its own model: exact chain draws for PerturbMAPCRF and
    ChainCRF, independent mean-field draws for MeanFieldCRF — within Monte-Carlo error."""
    X, y = chains
    model = make().fit(X, y)
    n_draws = 4000
    draws = model.sample(X[:3], n_draws=n_draws, random_state=0)
    for sample, marginal in zip(draws, model.predict_marginals(X[:3]), strict=True):
        frequency = np.stack([(sample == c).mean(axis=0) for c in model.classes_], axis=-1)
        sd = np.sqrt(marginal * (1 - marginal) / n_draws) + 1e-3
        assert np.all(np.abs(frequency - marginal) < 5 * sd)


def test_known_labels_are_kept_in_every_draw(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0).fit(X, y)
    known = [np.array([y[0][0]] + [None] * (len(y[0]) - 1), dtype=object)]
    for method in ("exact", "perturb"):
        draws = model.sample(X[:1], n_draws=40, known_labels=known, method=method)[0]
        assert (draws[:, 0] == y[0][0]).all()


def test_draws_take_the_shape_of_the_labels():
    grids = make_grid_data(n_samples=4, random_state=0)
    model = PerturbMAPCRF(GridStructure(), random_state=0, max_iter=3).fit(grids.data, grids.target)
    draws = model.sample(grids.data[:2], n_draws=5)
    assert draws[0].shape == (5, *np.shape(grids.target[0]))
    X, Y = make_multilabel_classification(n_samples=60, n_features=6, n_classes=3, random_state=0)
    multi = PerturbMAPCRF(MultiLabelStructure("full"), random_state=0).fit(X, Y)
    draws = multi.sample(X[:4], n_draws=20_000, random_state=0)
    assert draws.shape == (4, 20_000, 3) and set(np.unique(draws)) <= {0, 1}
    proba = multi.predict_proba(X[:4])
    assert np.all(np.abs(draws.mean(axis=1) - proba) < 5 * np.sqrt(0.25 / 20_000))


def test_sample_refuses_what_it_cannot_do(chains):
    X, y = chains
    model = PerturbMAPCRF(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="n_draws"):
        model.sample(X[:1], n_draws=0)
    with pytest.raises(ValueError, match="method must be one of"):
        model.sample(X[:1], method="beliefs")
    assert not hasattr(StructuredSVM(random_state=0).fit(X, y), "sample")  # no marginals


def test_a_fitted_pipeline_reaches_sample_through_its_last_step(chains):
    X, y = chains
    pipeline = make_pipeline(FunctionTransformer(), PerturbMAPCRF(random_state=0)).fit(X, y)
    draws = pipeline[-1].sample(pipeline[:-1].transform(X[:2]), n_draws=3)
    assert len(draws) == 2 and draws[1].shape == (3, len(y[1]))


def test_two_stage_crf_draws_from_its_stage_two(chains):
    from pmap_sklearn import TwoStageCRF

    X, y = chains
    model = TwoStageCRF(crf=PerturbMAPCRF(random_state=0), cv=3, random_state=7).fit(X, y)
    draws = model.sample(X[:2], n_draws=6, method="perturb")
    expected = model.crf_.sample(model.stage_two_samples(X[:2]), 6, method="perturb")
    for mine, theirs in zip(draws, expected, strict=True):
        np.testing.assert_array_equal(mine, theirs)


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


def test_perturbed_draws_do_not_depend_on_n_jobs():
    """Each sample's perturbations come from its own stream: the draws are the same whatever
    the number of workers."""
    grids = make_grid_data(n_samples=6, shape=(12, 12), random_state=1)
    model = PerturbMAPCRF(GridStructure(), random_state=0, max_iter=3)
    model.fit(grids.data, grids.target)
    serial = model.sample(grids.data, n_draws=8, random_state=3)
    parallel = model.set_params(n_jobs=2).sample(grids.data, n_draws=8, random_state=3)
    for one, two in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(one, two)
