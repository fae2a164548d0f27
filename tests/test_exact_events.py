"""Exact event probabilities with hidden states: every solver or estimator that claims
exactness sums over the states of each label (against enumeration over the states)."""

import itertools

import numpy as np
import pytest

from pmap_sklearn import ChainCRF, ChainStructure, GraphStructure, PerturbMAPCRF
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.inspection import (
    edge_marginals,
    entity_probabilities,
    region_probabilities,
    sequence_probabilities,
)
from pmap_sklearn.metrics import entity_spans

from .helpers import _hidden_graph_data
from .test_inspection import _labellings, _tagging_data

EXACT_SETUPS = {
    "chain": lambda: ChainCRF(alpha=0.1, max_iter=30),
    "chain-2-states": lambda: ChainCRF(ChainStructure(n_states_per_label=2), max_iter=30),
    "chain-1-2-states": lambda: ChainCRF(ChainStructure(n_states_per_label=[1, 2]), max_iter=30),
    "brute-force-2-states": lambda: PerturbMAPCRF(
        ChainStructure(n_states_per_label=2, solver="brute_force"), max_iter=3, random_state=0
    ),
    "forest-2-states": lambda: PerturbMAPCRF(
        ChainStructure(n_states_per_label=2, solver="forest"), max_iter=3, random_state=0
    ),
    "brute-force-hidden-node": lambda: PerturbMAPCRF(
        GraphStructure(pairwise="table", n_hidden_states=2, solver="brute_force"),
        max_iter=3,
        random_state=0,
    ),
}


def _state_enumeration(model, x):
    """P(y) of every visible labelling of x by brute force over the states (hidden nodes and
    the states of each label): Σ_h exp f(h) / Z over the states h that show y."""
    structure = model.structure_
    batch = structure.prepare([x])
    potentials = structure.potentials(batch, model.coef_)
    states = np.array(list(itertools.product(range(structure.n_states_), repeat=batch.n_nodes)))
    scores = np.array([potentials.score(h)[0] for h in states])
    visible = (
        np.flatnonzero(~batch.hidden) if batch.hidden is not None else np.arange(batch.n_nodes)
    )
    shown = structure.state_labels_[states][:, visible]
    labellings = _labellings(range(len(model.classes_)), len(visible))
    log_z = np.logaddexp.reduce(scores)
    p = [np.exp(np.logaddexp.reduce(scores[(shown == y).all(axis=1)]) - log_z) for y in labellings]
    return [model.classes_[y] for y in labellings], np.array(p), shown, np.exp(scores - log_z)


@pytest.fixture(scope="module", params=list(EXACT_SETUPS))
def exact_setup(request):
    """Each solver or estimator that claims exact events, fitted on tiny K=2 models."""
    if request.param == "brute-force-hidden-node":
        X, y = _hidden_graph_data()
    else:
        data = make_chain_data(n_samples=16, n_states=2, random_state=0)
        X, y = [x[:3] * 0.3 for x in data.data], [t[:3] for t in data.target]
    model = EXACT_SETUPS[request.param]().fit(X, y)
    return model, X[:2]


def test_exact_sequence_probabilities_sum_over_the_hidden_states(exact_setup):
    """P(y) over every labelling of a tiny model: sums to one, the same at every call, and
    equal to the brute-force sum over the states that show each labelling."""
    model, X = exact_setup
    for x in X:
        labellings, expected, _, _ = _state_enumeration(model, x)
        n = len(labellings)
        first = sequence_probabilities(model, [x] * n, labellings, method="exact")
        again = sequence_probabilities(model, [x] * n, labellings, method="exact", random_state=1)
        np.testing.assert_allclose(first.sum(), 1.0, rtol=1e-10)
        np.testing.assert_array_equal(first, again)
        np.testing.assert_allclose(first, expected, rtol=1e-9, atol=1e-14)


def test_exact_region_probabilities_and_edges_sum_over_the_hidden_states(exact_setup):
    """Each predicted region's probability and each edge's label-pair marginals are the
    brute-force sums over the states; the edges' sum to the node marginals."""
    model, X = exact_setup
    for x in X:
        _, _, shown, p = _state_enumeration(model, x)
        (region,), (probability,) = region_probabilities(model, [x], method="exact")
        again = region_probabilities(model, [x], method="exact", random_state=3)[1][0]
        np.testing.assert_array_equal(probability, again)
        best = np.searchsorted(model.classes_, model.predict([x])[0].ravel())
        for r, value in enumerate(probability):
            inside = region.ravel() == r
            expected = p[(shown[:, inside] == best[inside]).all(axis=1)].sum()
            np.testing.assert_allclose(value, expected, rtol=1e-9)
        if model.structure_.prepare([x]).hidden is not None:
            continue  # hidden nodes: no edge of labels
        (pair,) = edge_marginals(model, [x], method="exact")
        for e in range(len(x) - 1):
            expected = [[p[(shown[:, e] == a) & (shown[:, e + 1] == b)].sum() for b in (0, 1)]
                        for a in (0, 1)]  # fmt: skip
            np.testing.assert_allclose(pair[e], expected, rtol=1e-9, atol=1e-10)
        marginals = model.predict_marginals([x], method="exact")[0]
        np.testing.assert_allclose(pair.sum(axis=2), marginals[:-1], rtol=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ChainCRF(ChainStructure(n_states_per_label=2), alpha=0.1, max_iter=20),
        lambda: PerturbMAPCRF(ChainStructure(solver="forest"), max_iter=3, random_state=0),
        lambda: PerturbMAPCRF(ChainStructure(solver="brute_force"), max_iter=3, random_state=0),
    ],
    ids=["chain-2-states", "forest", "brute-force"],
)
def test_exact_entity_probabilities_sum_over_the_hidden_states(make):
    """A tagger with two states per tag, or on an exact solver without a span query (forest,
    brute force): each entity's probability is the brute-force sum, over the state
    sequences, of those whose tags hold the entity by conlleval's rules."""
    X, y = _tagging_data(n=40)
    crf = make().fit(X, y)
    features = X[:4]
    exact = entity_probabilities(crf, features, method="exact")
    assert entity_probabilities(crf, features, method="exact", random_state=2) == exact
    checked = 0
    for x, entities, tags in zip(features, exact, crf.predict(features), strict=True):
        labellings, p, _, _ = _state_enumeration(crf, x)
        for kind, start, end, probability in entities:
            held = [
                (kind, start, end) in entity_spans(list(t))
                and list(t[start:end]) == list(tags[start:end])
                for t in labellings
            ]
            np.testing.assert_allclose(probability, p[held].sum(), rtol=1e-9)
            checked += 1
    assert checked >= 2


def test_exact_edge_marginals_of_a_loopy_graph_by_enumeration():
    """Edge marginals of the brute-force solver on a triangle with two states for label 1:
    the sums over the states of each label pair, in the orientation of the edges,
    conditional on known labels too."""
    from pmap_sklearn import GraphSample

    rng = np.random.default_rng(0)
    edges, n = [[0, 1], [2, 1], [0, 2]], 3
    X = [GraphSample(rng.normal(size=(n, 2)), np.array(edges)) for _ in range(12)]
    y = [(x.node_features[:, 0] > 0).astype(int) for x in X]
    structure = GraphStructure(pairwise="table", n_states_per_label=[1, 2], solver="brute_force")
    model = PerturbMAPCRF(structure, max_iter=3, random_state=0).fit(X, y)
    x = X[0]
    _, _, shown, p = _state_enumeration(model, x)
    (pair,) = edge_marginals(model, [x], method="exact")
    for e, (i, j) in enumerate(edges):
        expected = [[p[(shown[:, i] == a) & (shown[:, j] == b)].sum() for b in (0, 1)]
                    for a in (0, 1)]  # fmt: skip
        np.testing.assert_allclose(pair[e], expected, rtol=1e-9, atol=1e-12)
    known = np.array([1, -1, -1])
    (given,) = edge_marginals(model, [x], known_labels=[known], method="exact")
    held = shown[:, 0] == 1
    for e, (i, j) in enumerate(edges):
        expected = [[p[held & (shown[:, i] == a) & (shown[:, j] == b)].sum() for b in (0, 1)]
                    for a in (0, 1)]  # fmt: skip
        np.testing.assert_allclose(given[e], np.array(expected) / p[held].sum(), rtol=1e-9)


def test_exact_events_are_refused_where_the_solver_has_no_exact_query():
    """method="exact" asked of a solver whose marginals are approximate, or without an exact
    query of that kind, is refused by name instead of answered from draws; the default
    method still estimates from draws."""
    from pmap_sklearn import GraphSample, MultiLabelStructure
    from pmap_sklearn.inspection import k_best_labellings

    rng = np.random.default_rng(0)
    triangle = np.array([[0, 1], [1, 2], [2, 0]])
    X = [GraphSample(rng.normal(size=(3, 2)), triangle) for _ in range(8)]
    y = [(x.node_features[:, 0] > 0).astype(int) for x in X]
    structure = GraphStructure(pairwise="table", solver="message_passing")
    model = PerturbMAPCRF(structure, max_iter=2, random_state=0).fit(X, y)
    for query in (edge_marginals, sequence_probabilities, region_probabilities):
        with pytest.raises(ValueError, match="method='exact': the 'message_passing' solver"):
            query(model, X[:1], method="exact")
    with pytest.raises(ValueError, match="no exact probabilities of the most probable"):
        k_best_labellings(model, X[:1], method="exact")
    assert edge_marginals(model, X[:1], n_draws=20)[0].shape == (3, 2, 2)
    features = rng.normal(size=(30, 3))
    labels = (features[:, :2] > 0).astype(int)
    forest = ChainCRF(MultiLabelStructure("chain")).fit(features, labels)
    with pytest.raises(ValueError, match="'forest' solver .*no k_best.*'viterbi', 'brute_force'"):
        k_best_labellings(forest, features[:1], method="exact")
    assert len(k_best_labellings(forest, features[:1], k=2, n_draws=50)[0][0]) <= 2
