"""pmap_sklearn.inspection: weights, entity, sequence and region probabilities, uncertainty maps."""

import itertools

import numpy as np
import pytest
from scipy import ndimage
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    SequenceVectorizer,
    StructuredSVM,
    TwoStageCRF,
    _parallel,
    inspection,
)
from pmap_sklearn.bounds import log_partition_exact
from pmap_sklearn.datasets import (
    make_chain_data,
    make_grid_data,
    token_features,
)
from pmap_sklearn.inspection import (
    edge_marginals,
    entity_probabilities,
    explain_weights,
    k_best_labellings,
    marginal_entropy,
    region_probabilities,
    sequence_probabilities,
    state_features,
    transition_features,
)
from pmap_sklearn.metrics import entity_spans

from .helpers import _corpus, _hidden_graph_data, _token_data


@pytest.fixture(scope="module")
def short_chains():
    """Chains of 4 nodes, 3 labels: 81 labellings to enumerate."""
    data = make_chain_data(n_samples=30, n_states=3, random_state=0)
    return [x[:4] for x in data.data], [t[:4] for t in data.target]


@pytest.fixture(scope="module")
def chain_crf(short_chains):
    return ChainCRF(alpha=0.1).fit(*short_chains)


def _labellings(classes, n_nodes):
    return [np.array(y) for y in itertools.product(classes, repeat=n_nodes)]


def _log_probabilities(model, x, labellings, weights=None):
    """log P of each labelling by enumeration: its score minus the brute-force log Z."""
    potentials = model.structure_.potentials(
        model.structure_.prepare([x]), model.coef_ if weights is None else weights
    )
    codes = [np.searchsorted(model.classes_, y.ravel()) for y in labellings]
    scores = np.array([potentials.score(c)[0] for c in codes])
    return scores - log_partition_exact(potentials)


# ---- sequence probabilities ----------------------------------------------------------------
@pytest.mark.parametrize(
    "make", [lambda: ChainCRF(alpha=0.1), lambda: PerturbMAPCRF(random_state=0)]
)
def test_sequence_probabilities_are_exact_on_chains(short_chains, make):
    """Every labelling of a chain: the probabilities are exp(score − log Z) and sum to 1; the
    default is the MAP labelling's."""
    X, y = short_chains
    model = make().fit(X, y)
    x = X[0]
    labellings = _labellings(model.classes_, len(x))
    exact = dict(method="exact")  # the perturb-and-MAP learners' default is their draws
    probability = sequence_probabilities(model, [x] * len(labellings), labellings, **exact)
    assert probability.shape == (len(labellings),)
    np.testing.assert_allclose(probability.sum(), 1.0, rtol=1e-9)
    np.testing.assert_allclose(
        np.log(probability), _log_probabilities(model, x, labellings), rtol=1e-9
    )
    best = model.predict([x])[0]
    index = next(i for i, lab in enumerate(labellings) if np.array_equal(lab, best))
    np.testing.assert_allclose(sequence_probabilities(model, [x], **exact), probability[index])
    assert probability[index] == probability.max()  # the MAP is the most probable labelling


def test_sequence_probabilities_follow_the_fitted_temperature(short_chains):
    X, y = short_chains
    model = PerturbMAPCRF(random_state=0).fit(X, y)
    model.calibrate_marginals(X[20:], y[20:])
    x, temperature = X[0], model.marginal_temperature_
    labellings = _labellings(model.classes_, len(x))
    probability = sequence_probabilities(model, [x] * len(labellings), labellings)
    expected = _log_probabilities(model, x, labellings, model.coef_ / temperature)
    np.testing.assert_allclose(np.log(probability), expected, rtol=1e-9)


def test_sequence_probabilities_from_draws_agree_with_the_exact_ones(
    chain_crf, short_chains, monkeypatch
):
    """The frequency path (exact draws of the same model) within Monte-Carlo error."""
    X, _ = short_chains
    exact = sequence_probabilities(chain_crf, X[:5])
    monkeypatch.setattr(inspection, "_exact_solver", lambda model, capability, method: None)
    n = 20_000
    drawn = sequence_probabilities(chain_crf, X[:5], n_draws=n, random_state=0, tol=0)
    assert np.all(np.abs(drawn - exact) < 5 * np.sqrt(exact * (1 - exact) / n) + 1e-12)


def test_the_perturb_and_map_learners_measure_events_on_their_perturbed_maps(short_chains):
    """By default the distribution the estimator was fitted to: for PerturbMAPCRF the
    frequencies over its perturbed MAPs (what sample(method="perturb") draws), also on chains
    where the exact marginals are its predict_marginals default; after calibrate_marginals the
    exact ones at the fitted temperature."""
    X, y = short_chains
    model = PerturbMAPCRF(random_state=0).fit(X, y)
    assert model._default_marginal_method() == "exact"
    draws = model.sample(X[:3], n_draws=300, method="perturb", random_state=4)
    probability = sequence_probabilities(model, X[:3], n_draws=300, random_state=4, tol=0)
    for p, drawn, best in zip(probability, draws, model.predict(X[:3]), strict=True):
        assert p == (drawn == best).all(axis=1).mean()
    _, regions = region_probabilities(model, X[:3], n_draws=300, random_state=4, tol=0)
    _, exact = region_probabilities(model, X[:3], method="exact")
    assert not all(np.allclose(a, b) for a, b in zip(regions, exact, strict=True))
    model.calibrate_marginals(X[20:], y[20:])
    np.testing.assert_allclose(
        sequence_probabilities(model, X[:3]),
        sequence_probabilities(model, X[:3], method="exact"),
    )
    with pytest.raises(ValueError, match="method must be one of"):
        region_probabilities(model, X[:3], method="beliefs")


def test_sequence_probabilities_from_draws_of_a_loopy_model():
    """On grids the frequency of the MAP labelling over perturbed MAPs: what sample draws."""
    data = make_grid_data(n_samples=6, shape=(3, 3), noise=0.8, random_state=0)
    model = PerturbMAPCRF(GridStructure(), random_state=0).fit(data.data, data.target)
    probability = sequence_probabilities(model, data.data[:2], n_draws=200, random_state=1, tol=0)
    draws = model.sample(data.data[:2], n_draws=200, random_state=1)
    for p, drawn, best in zip(probability, draws, model.predict(data.data[:2]), strict=True):
        assert p == (drawn == best).all(axis=(1, 2)).mean()


def test_sequence_probabilities_through_a_pipeline_and_two_stages():
    X = [[{"w": "Ann"}, {"w": "ran"}], [{"w": "Bo"}, {"w": "sat"}], [{"w": "it"}]] * 10
    y = [["B-PER", "O"], ["B-PER", "O"], ["O"]] * 10
    pipeline = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.1)).fit(X, y)
    direct = sequence_probabilities(pipeline[-1], pipeline[0].transform(X[:3]), y[:3])
    np.testing.assert_allclose(sequence_probabilities(pipeline, X[:3], y[:3]), direct)
    data = make_chain_data(n_samples=20, random_state=0)
    two_stage = TwoStageCRF(crf=ChainCRF(alpha=0.1), cv=2).fit(data.data, data.target)
    samples = two_stage.stage_two_samples(data.data[:3])
    np.testing.assert_allclose(
        sequence_probabilities(two_stage, data.data[:3]),
        sequence_probabilities(two_stage.crf_, samples),
    )


def test_sequence_probabilities_refuse_bad_labellings(chain_crf, short_chains):
    X, y = short_chains
    with pytest.raises(ValueError, match="not one of the classes"):
        sequence_probabilities(chain_crf, X[:1], [np.array([0, 1, 7, 0])])
    with pytest.raises(ValueError, match=r"sample 0: y has shape \(3,\), expected \(4,\)"):
        sequence_probabilities(chain_crf, X[:1], [y[0][:3]])
    with pytest.raises(ValueError, match="X has 2 samples but y has 1"):
        sequence_probabilities(chain_crf, X[:2], y[:1])
    with pytest.raises(ValueError, match="not one of the classes"):
        sequence_probabilities(chain_crf, X[:1], [np.array([0, -1, 1, 0])])  # no unknown
    with pytest.raises(ValueError, match="n_draws"):
        sequence_probabilities(chain_crf, X[:1], n_draws=0)
    svm = StructuredSVM(random_state=0, max_iter=2).fit(X, y)
    for function in (sequence_probabilities, region_probabilities):
        with pytest.raises(ValueError, match="StructuredSVM has no marginals"):
            function(svm, X[:1])
    with pytest.raises(ValueError, match="StructuredSVM has no marginals"):
        marginal_entropy(svm, X[:1])


# ---- regions -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_grid():
    data = make_grid_data(n_samples=12, shape=(3, 4), noise=1.0, random_state=0)
    model = PerturbMAPCRF(GridStructure(solver="brute_force"), random_state=0)
    return data, model.fit(data.data, data.target)


def test_regions_are_the_connected_components_of_equal_labels():
    data = make_grid_data(n_samples=4, shape=(12, 12), noise=1.2, random_state=3)
    model = PerturbMAPCRF(GridStructure(), random_state=0).fit(data.data, data.target)
    regions, probabilities = region_probabilities(model, data.data, n_draws=5)
    for region, p, labels in zip(regions, probabilities, model.predict(data.data), strict=True):
        assert region.shape == labels.shape and len(p) == region.max() + 1
        expected = sum(ndimage.label(labels == k)[1] for k in np.unique(labels))
        assert region.max() + 1 == expected
        for r in range(expected):  # each region one label, one 4-connected piece
            inside = region == r
            assert len(np.unique(labels[inside])) == 1
            assert ndimage.label(inside)[1] == 1
        assert region.ravel()[0] == 0 and np.all(
            np.diff(np.maximum.accumulate(region.ravel())) <= 1
        )


def test_region_probabilities_are_exact_by_enumeration(tiny_grid):
    data, model = tiny_grid
    assert model._default_marginal_method() == "exact"
    for x in data.data[:3]:
        (region,), (probability,) = region_probabilities(model, [x], method="exact")
        labellings = _labellings(model.classes_, x.shape[0] * x.shape[1])
        p = np.exp(_log_probabilities(model, x, labellings))
        best = model.predict([x])[0].ravel()
        stacked = np.array(labellings)
        for r, value in enumerate(probability):
            inside = region.ravel() == r
            expected = p[(stacked[:, inside] == best[inside]).all(axis=1)].sum()
            np.testing.assert_allclose(value, expected, rtol=1e-9)


def test_region_probabilities_from_draws_agree_with_the_exact_ones(
    chain_crf, short_chains, monkeypatch
):
    """On chains (regions: runs of equal labels) the frequency over exact draws of the same
    model within Monte-Carlo error; on a tiny grid, over its chain-rule draws."""
    X, _ = short_chains
    _, exact = region_probabilities(chain_crf, X[:6])
    monkeypatch.setattr(inspection, "_exact_solver", lambda model, capability, method: None)
    n = 20_000
    _, drawn = region_probabilities(chain_crf, X[:6], n_draws=n, random_state=0, tol=0)
    for e, d in zip(exact, drawn, strict=True):
        assert np.all(np.abs(d - e) < 5 * np.sqrt(e * (1 - e) / n) + 1e-12)


def test_region_probabilities_from_perturbed_draws_on_graphs():
    """A superpixel-like graph with graph cuts: the frequency of each region over the draws of
    sample with the same random_state."""
    rng = np.random.default_rng(0)
    edges = np.array([[i, i + 1] for i in range(5)] + [[0, 3], [2, 5]])
    X = [GraphSample(rng.normal(size=(6, 2)) + np.repeat([[2, 0], [0, 2]], 3, 0), edges)
         for _ in range(12)]  # fmt: skip
    y = [np.repeat([0, 1], 3)] * 12
    model = PerturbMAPCRF("graph", random_state=0).fit(X, y)
    regions, probabilities = region_probabilities(model, X[:3], n_draws=300, random_state=2, tol=0)
    draws = model.sample(X[:3], n_draws=300, random_state=2)
    for region, p, drawn, best in zip(
        regions, probabilities, draws, model.predict(X[:3]), strict=True
    ):
        for r, value in enumerate(p):
            inside = region == r
            assert value == (drawn[:, inside] == best[inside]).all(axis=1).mean()


# ---- uncertainty maps ----------------------------------------------------------------------
def test_marginal_entropy_is_the_entropy_of_the_marginals(tiny_grid):
    data, model = tiny_grid
    entropy = marginal_entropy(model, data.data[:2])
    for h, marginal in zip(entropy, model.predict_marginals(data.data[:2]), strict=True):
        assert h.shape == marginal.shape[:-1]
        np.testing.assert_allclose(h, -(marginal * np.log(marginal)).sum(axis=-1))
    perturbed = marginal_entropy(model, data.data[:1], method="perturb", n_perturbations=20)[0]
    frequencies = model.predict_marginals(data.data[:1], method="perturb", n_perturbations=20)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = -np.nansum(frequencies * np.log(frequencies), axis=-1)
    np.testing.assert_allclose(perturbed, expected)


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
    default = entity_probabilities(model, X[:8], n_draws=400, random_state=3, tol=0)
    draws = model.sample(X[:8], n_draws=400, method="perturb", random_state=3)
    values = np.array([p for sentence in default for *_, p in sentence])
    assert len(values) >= 4
    np.testing.assert_allclose(values, _frequencies(model, X[:8], draws))
    perturb = entity_probabilities(
        model, X[:8], method="perturb", n_draws=400, random_state=3, tol=0
    )
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


def test_exact_entity_probabilities_do_not_depend_on_the_chunks(monkeypatch):
    """Constrained forward-backward over the sequences in chunks: the same probabilities."""
    from pmap_sklearn.inspection import entity_probabilities

    X, y = _tagging_data()
    model = PerturbMAPCRF(random_state=0, max_iter=5).fit(X, y)
    whole = entity_probabilities(model, X[:12], method="exact")
    assert sum(map(len, whole)) >= 5
    for limit in (1, 9, 30):
        monkeypatch.setattr(_parallel, "PREDICT_NODES", limit)
        chunked = entity_probabilities(model, X[:12], method="exact")
        assert [[e[:3] for e in s] for s in chunked] == [[e[:3] for e in s] for s in whole]
        np.testing.assert_allclose(
            [e[3] for s in chunked for e in s], [e[3] for s in whole for e in s], rtol=1e-12
        )


def test_crfsuite_views_read_the_weights_through_a_pipeline(rng):
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import SequenceVectorizer

    X, y = _token_data(rng)
    model = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.05, l1_ratio=0.5)).fit(X, y)
    crf = model[-1]
    weights = explain_weights(model).weights
    names = list(model[0].get_feature_names_out()) + ["<bias>"]
    states = state_features(model)
    assert len(states) == np.count_nonzero(weights) < weights.size
    for (name, label), weight in states.items():
        assert weight != 0
        assert weight == weights[names.index(name), list(crf.classes_).index(label)]
    table = crf.structure_.transition(crf.coef_)
    transitions = transition_features(model)
    assert len(transitions) == np.count_nonzero(table)
    for (a, b), weight in transitions.items():
        assert weight == table[list(crf.classes_).index(a), list(crf.classes_).index(b)]
    assert state_features(crf) == {
        (f"x{names.index(n)}" if n != "<bias>" else n, k): w for (n, k), w in states.items()
    }
    grid = make_grid_data(n_samples=4, shape=(3, 3), noise=0.8, random_state=0)
    fitted = ChainCRF(GridStructure(solver="brute_force"), max_iter=2).fit(grid.data, grid.target)
    with pytest.raises(ValueError, match="not a chain model"):
        transition_features(fitted)


class _Unnamed(TransformerMixin, BaseEstimator):
    """A transformer without get_feature_names_out."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X


def test_explain_weights_falls_back_to_x_names():
    data = make_chain_data(n_samples=20, n_features=3, random_state=0)
    pipeline = make_pipeline(_Unnamed(), PerturbMAPCRF(max_iter=2, tol=None, random_state=0))
    explanation = explain_weights(pipeline.fit(data.data, data.target), top=2)
    named = {name for pairs in explanation.positive.values() for name, _ in pairs}
    assert named and named <= {"x0", "x1", "x2", "<bias>"}


def test_explain_weights_refuses_scaled_scores():
    data = make_chain_data(n_samples=20, n_states=2, n_features=2, random_state=0)
    model = PerturbMAPCRF(ChainStructure(unary="scaled"), max_iter=2, tol=None, random_state=0)
    with pytest.raises(ValueError, match="scaled"):
        explain_weights(model.fit(data.data, data.target))


def test_explain_weights_names_the_features_of_each_tag():
    sentences, tags = _corpus(60)
    pipe = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
    pipe.fit(sentences, tags)
    explained = explain_weights(pipe, top=5)
    assert explained.transitions.shape == (3, 3)
    classes = list(explained.classes)
    det, noun, verb = (classes.index(t) for t in ("DET", "NOUN", "VERB"))
    # DET is followed by NOUN, never by VERB
    assert explained.transitions[det, noun] > explained.transitions[det, verb]
    top_det = [name for name, _ in explained.positive["DET"]]
    assert {"word.lower()=the", "word.lower()=a"} & set(top_det)
    weights = [w for _, w in explained.positive["NOUN"]]
    assert weights == sorted(weights, reverse=True) and weights[0] > 0
    with pytest.raises(ValueError, match="feature_names has 2 names"):
        explain_weights(pipe[-1], feature_names=["a", "b"])


def test_multilabel_weights_are_each_labels_logistic_coefficients():
    """On independent labels the exact model is one logistic regression per label: the
    coefficients the views give reproduce its probabilities on the raw features."""
    from sklearn.datasets import make_multilabel_classification

    from pmap_sklearn import ChainCRF, MultiLabelStructure

    X, Y = make_multilabel_classification(60, n_features=5, n_classes=3, random_state=0)
    model = ChainCRF(MultiLabelStructure("independent")).fit(X, Y)
    explanation = explain_weights(model, feature_names=list("abcde"))
    assert explanation.classes.tolist() == [0, 1, 2]
    coefficients, intercept = explanation.weights[:-1], explanation.weights[-1]
    expected = 1.0 / (1.0 + np.exp(-(X @ coefficients + intercept)))
    np.testing.assert_allclose(model.predict_proba(X), expected, atol=1e-6)
    weights = state_features(model, feature_names=list("abcde"))
    assert weights[("c", 1)] == pytest.approx(coefficients[2, 1])
    assert weights[("<bias>", 2)] == pytest.approx(intercept[2])
    assert transition_features(model) == {}  # no label edge


def test_multilabel_weight_views_name_labels_and_label_pairs():
    """On a Chow–Liu tree (a pipeline with a scaler, names from it) the views have one bias and
    one row per feature for each label column, and the label-pair tables keyed by the labels
    and values of each label edge."""
    from sklearn.datasets import make_multilabel_classification
    from sklearn.preprocessing import StandardScaler

    from pmap_sklearn import ChainCRF, MultiLabelStructure

    X, Y = make_multilabel_classification(60, n_features=4, n_classes=3, random_state=0)
    pipe = make_pipeline(StandardScaler(), ChainCRF(MultiLabelStructure("tree"))).fit(X, Y)
    structure, coef = pipe[-1].structure_, pipe[-1].coef_
    coefficients = structure.label_coefficients(coef)  # (labels, features + bias)
    explanation = explain_weights(pipe, top=10)
    assert explanation.classes.tolist() == [0, 1, 2] == explanation.states.tolist()
    assert explanation.weights.shape == (5, 3)
    np.testing.assert_allclose(explanation.weights, coefficients.T)
    weights = state_features(pipe)
    assert {label for _, label in weights} == {0, 1, 2}
    assert {name for name, _ in weights} == {"x0", "x1", "x2", "x3", "<bias>"}
    assert weights[("<bias>", 1)] == pytest.approx(coefficients[1, -1])
    assert weights[("x3", 2)] == pytest.approx(coefficients[2, 3])
    for label in range(3):  # each label's own features, sorted by weight
        listed = explanation.positive[label] + explanation.negative[label]
        assert {name for name, _ in listed} <= {"x0", "x1", "x2", "x3", "<bias>"}
        assert [w for _, w in explanation.positive[label]] == sorted(
            coefficients[label][coefficients[label] > 0], reverse=True
        )
    tables = structure.tables(coef)
    assert len(structure.edges_) == 2  # a spanning tree of 3 labels
    pairs = transition_features(pipe)
    assert len(pairs) == np.count_nonzero(tables)
    for e, (first, second) in enumerate(structure.edges_.tolist()):
        for a in (0, 1):
            for b in (0, 1):
                entry = pairs.get(((first, a), (second, b)), 0.0)
                assert entry == pytest.approx(tables[e, a, b])


def test_weight_views_list_each_hidden_state(short_chains):
    """With hidden states every view has one entry per state, named (label, j): the node
    weights and the state transition table as the structure unpacks them."""
    X, y = short_chains
    model = ChainCRF(ChainStructure(n_states_per_label=[1, 2, 2]), max_iter=10).fit(X, y)
    states = [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)]
    unary, _ = model.structure_.unpack(model.coef_)
    assert unary.shape[1] == 5
    explanation = explain_weights(model, top=3)
    assert explanation.states.tolist() == states and explanation.classes.tolist() == [0, 1, 2]
    assert list(explanation.positive) == states and explanation.weights.shape == unary.shape
    weights = state_features(model)
    assert {k for _, k in weights} == set(states)
    assert weights[("x3", (2, 1))] == unary[3, 4]
    table = model.structure_.transition(model.coef_)
    assert explanation.transitions.shape == (5, 5)
    transitions = transition_features(model)
    assert transitions[((1, 1), (2, 0))] == table[2, 3] and len(transitions) == 25
    with pytest.raises(ValueError, match="hidden states.*method='perturb'"):
        k_best_labellings(model, X[:1], method="exact")


def test_weight_views_name_the_states_of_hidden_nodes():
    """A graph with hidden nodes: their states' weights appear as ("<hidden>", j); the graph
    has no label transitions, and says so."""
    X, y = _hidden_graph_data()
    model = PerturbMAPCRF(
        GraphStructure(pairwise="table", n_hidden_states=2), max_iter=3, random_state=0
    ).fit(X, y)
    explanation = explain_weights(model)
    assert explanation.states.tolist() == [(0, 0), (1, 0), ("<hidden>", 0), ("<hidden>", 1)]
    unary, _ = model.structure_.unpack(model.coef_)
    weights = state_features(model)
    assert weights[("<bias>", ("<hidden>", 1))] == unary[-1, 3]
    assert set(weights) == {
        (name, state)
        for i, name in enumerate(["x0", "x1", "<bias>"])
        for k, state in enumerate(explanation.states)
        if unary[i, k] != 0
    }
    with pytest.raises(ValueError, match="not a chain model.*not label transitions"):
        transition_features(model)


def test_edge_marginals_sum_to_the_node_marginals_and_count_the_draws(short_chains):
    """Exact transition marginals sum, over either label, to the exact node marginals; where
    they come from draws they are the pair frequencies of the same draws of ``sample``."""
    X, y = short_chains
    exact = ChainCRF(alpha=0.1).fit(X, y)
    nodes = exact.predict_marginals(X[:5])
    for pair, node in zip(edge_marginals(exact, X[:5]), nodes, strict=True):
        assert pair.shape == (len(node) - 1, node.shape[1], node.shape[1])
        np.testing.assert_allclose(pair.sum(axis=2), node[:-1], atol=1e-10)
        np.testing.assert_allclose(pair.sum(axis=1), node[1:], atol=1e-10)
    drawn = PerturbMAPCRF(random_state=0, max_iter=5).fit(X, y)
    pairs = edge_marginals(drawn, X[:3], n_draws=50, random_state=0)
    draws = drawn.sample(X[:3], n_draws=50, method="perturb", random_state=0)
    classes = list(drawn.classes_)
    for pair, sample in zip(pairs, draws, strict=True):
        codes = np.vectorize(classes.index)(np.asarray(sample))
        expected = np.zeros_like(pair)
        for d in range(codes.shape[1] - 1):
            np.add.at(expected[d], (codes[:, d], codes[:, d + 1]), 1 / 50)
        np.testing.assert_allclose(pair, expected)


# ---- k-best labellings -----------------------------------------------------------------------
def _top_of_enumeration(probability, labellings, k):
    """The k most probable labellings of an enumeration with their probabilities."""
    order = np.argsort(-probability, kind="stable")[:k]
    order = order[probability[order] > 0]
    return [labellings[i] for i in order], probability[order]


@pytest.mark.parametrize("k", [1, 4, 81, 100])
@pytest.mark.parametrize(
    "make", [lambda: ChainCRF(alpha=0.1), lambda: PerturbMAPCRF(random_state=0)]
)
def test_k_best_labellings_are_the_top_of_the_enumeration_on_chains(short_chains, make, k):
    """Exact on chains: the k labellings of largest exp(score − log Z), the MAP first; all 81
    of a 4-node, 3-label chain for k >= 81, their probabilities summing to 1."""
    X, y = short_chains
    model = make().fit(X, y)
    labellings_of, probabilities_of = k_best_labellings(model, X[:3], k=k, method="exact")
    for x, labellings, probability, best in zip(
        X[:3], labellings_of, probabilities_of, model.predict(X[:3]), strict=True
    ):
        every = _labellings(model.classes_, len(x))
        expected, expected_p = _top_of_enumeration(
            np.exp(_log_probabilities(model, x, every)), every, k
        )
        assert labellings.shape == (min(k, 81), len(x))
        np.testing.assert_allclose(probability, expected_p, atol=1e-6)
        np.testing.assert_array_equal(labellings, expected)
        np.testing.assert_array_equal(labellings[0], best)
        assert probability.sum() <= 1 + 1e-9
        if k >= 81:
            assert probability.sum() == pytest.approx(1.0, abs=1e-9)


def test_k_best_labellings_keep_to_the_scheme_and_the_known_labels():
    """BIO constraints and known labels: the top of the enumeration of the labellings they
    allow, with probabilities conditional on the known labels, fewer than k where fewer are
    allowed (then summing to 1)."""
    X = [np.eye(3)[[0, 1, 2]] + 0.3, np.eye(3)[[2, 0, 1]], np.eye(3)[[1, 1, 0]]] * 8
    y = [np.array(["B-X", "I-X", "O"]), np.array(["O", "B-X", "I-X"]), np.array(["O"] * 3)] * 8
    model = ChainCRF(ChainStructure(constraints="BIO"), alpha=0.1).fit(X, y)
    x = X[2]
    every = _labellings(model.classes_, 3)
    joint = sequence_probabilities(model, [x] * len(every), every)
    assert np.sum(joint == 0) > 0  # the scheme forbids some
    labellings, probability = k_best_labellings(model, [x], k=30)
    allowed = int(np.sum(joint > 0))
    assert len(labellings[0]) == allowed < 30
    expected, expected_p = _top_of_enumeration(joint, every, 30)
    np.testing.assert_array_equal(labellings[0], expected)
    np.testing.assert_allclose(probability[0], expected_p, atol=1e-6)
    assert probability[0].sum() == pytest.approx(1.0, abs=1e-9)
    known = [np.array([None, "I-X", None], dtype=object)]
    keeps = np.array([t[1] == "I-X" for t in every])
    conditional = np.where(keeps, joint, 0.0) / joint[keeps].sum()
    labellings, probability = k_best_labellings(model, [x], k=3, known_labels=known)
    expected, expected_p = _top_of_enumeration(conditional, every, 3)
    np.testing.assert_array_equal(labellings[0], expected)
    np.testing.assert_allclose(probability[0], expected_p, atol=1e-6)
    assert (labellings[0][0] == model.predict([x], known_labels=known)[0]).all()


def test_k_best_labellings_do_not_depend_on_the_chunks(chain_crf, short_chains, monkeypatch):
    X, _ = short_chains
    whole = k_best_labellings(chain_crf, X[:9], k=6)
    monkeypatch.setattr(_parallel, "PREDICT_NODES", 9)
    chunked = k_best_labellings(chain_crf, X[:9], k=6)
    for a, b in zip(whole[0], chunked[0], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.stack(chunked[1]), np.stack(whole[1]), rtol=1e-12)


def test_k_best_labellings_of_perturbed_maps_are_their_ranked_frequencies():
    """On a grid (graph cuts) the distinct perturbed MAPs of sample, ranked by frequency."""
    data = make_grid_data(n_samples=6, shape=(2, 3), noise=1.5, random_state=0)
    model = PerturbMAPCRF(GridStructure(), random_state=0).fit(data.data, data.target)
    labellings, probability = k_best_labellings(
        model, data.data[:2], k=4, n_draws=300, random_state=1
    )
    draws = model.sample(data.data[:2], n_draws=300, random_state=1)
    for listed, p, drawn in zip(labellings, probability, draws, strict=True):
        counts = {}
        for labelling in drawn:
            counts[labelling.tobytes()] = counts.get(labelling.tobytes(), 0) + 1
        ranked = sorted(counts.values(), reverse=True)[:4]
        assert listed.shape == (len(ranked), 2, 3)
        np.testing.assert_allclose(p, np.array(ranked) / 300)
        assert [counts[labelling.tobytes()] for labelling in listed] == ranked
    known = [np.array([[None, 1, None], [None, None, None]], dtype=object)]
    labellings, _ = k_best_labellings(
        model, data.data[:1], k=4, known_labels=known, n_draws=100, random_state=1
    )
    assert np.all(labellings[0][:, 0, 1] == 1)


def test_k_best_frequencies_agree_with_the_enumeration(chain_crf, short_chains, monkeypatch):
    """The frequency path over exact draws of a tiny chain model (forward filtering, backward
    sampling) against the enumeration: within Monte-Carlo error, and in the same order where
    the probabilities are apart."""
    X, _ = short_chains
    x = X[:1]
    every = _labellings(chain_crf.classes_, 4)
    p = np.exp(_log_probabilities(chain_crf, x[0], every))
    expected, e = _top_of_enumeration(p, every, 4)
    monkeypatch.setattr(inspection, "_exact_solver", lambda model, capability, method: None)
    n = 20_000
    drawn, drawn_p = k_best_labellings(chain_crf, x, k=3, n_draws=n, random_state=0)
    tolerance = 5 * np.sqrt(e * (1 - e) / n)
    np.testing.assert_array_less(np.abs(drawn_p[0] - e[:3]), tolerance[:3])
    # the ranks whose probability is apart from both neighbours' come in the same order
    gaps = -np.diff(e, prepend=1.0)
    apart = (gaps[:3] > 2 * tolerance[:3]) & (gaps[1:] > 2 * tolerance[:3])
    assert apart.all()
    np.testing.assert_array_equal(drawn[0], expected[:3])


def test_k_best_labellings_errors(short_chains, chain_crf):
    X, y = short_chains
    for k in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="k must be an int >= 1"):
            k_best_labellings(chain_crf, X[:1], k=k)
    with pytest.raises(NotFittedError):
        k_best_labellings(ChainCRF(), X[:1])
    hidden = ChainCRF(ChainStructure(n_states_per_label=2), alpha=0.1, max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match="hidden states.*method='perturb'"):
        k_best_labellings(hidden, X[:1])
    data = make_grid_data(n_samples=4, shape=(3, 3), random_state=0)
    grid = PerturbMAPCRF(GridStructure(), random_state=0, max_iter=2).fit(data.data, data.target)
    with pytest.raises(ValueError, match="graph_cut.*computes no marginals"):
        k_best_labellings(grid, data.data[:1], method="exact")
    with pytest.raises(ValueError, match="StructuredSVM has no marginals"):
        k_best_labellings(StructuredSVM(max_iter=2).fit(X, y), X[:1])


def test_events_of_a_learner_with_marginals_but_no_draws_name_sample(short_chains):
    """EpsilonCRF has predict_marginals but no sample: the events were refused with "has no
    marginals", which its predict_marginals contradicts."""
    from pmap_sklearn import EpsilonCRF

    X, y = short_chains
    model = EpsilonCRF(max_iter=2).fit(X, y)
    assert model.predict_marginals(X[:1])[0].shape == (4, 3)
    functions = [
        entity_probabilities,
        sequence_probabilities,
        region_probabilities,
        edge_marginals,
        k_best_labellings,
    ]
    for function in functions:
        with pytest.raises(ValueError, match=r"EpsilonCRF has no sample: .*estimator with sample"):
            function(model, X[:1])
    assert marginal_entropy(model, X[:1])[0].shape == (4,)  # node by node: it has what it needs
