"""Sets of allowed labels per node: their encoding, every query against enumeration of the
labellings that keep to the sets, learning from them, and the errors."""

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    Potentials,
    StructuredSVM,
)
from pmap_sklearn._backend import ChainSolver, forbid_states
from pmap_sklearn._labels import encode_known, encode_with_sets
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.inspection import k_best_labellings

from ..helpers import exact_distribution, scores_of

TAGS = ["B-PER", "I-PER", "O"]


def test_sets_are_coded_below_minus_one_with_a_table_of_their_labels():
    y = [np.array(["O", {"B-PER", "I-PER"}, "I-PER"], dtype=object), ["O", "O"]]
    codes, classes, sets = encode_with_sets(y)
    np.testing.assert_array_equal(classes, TAGS)
    np.testing.assert_array_equal(codes[0], [2, -2, 1])
    np.testing.assert_array_equal(sets, [[True, True, False]])
    # a set of one label is that label, a set of every class an unknown label
    one = [np.array([{"O"}, frozenset(TAGS), "B-PER", "I-PER"], dtype=object)]
    codes, _, sets = encode_with_sets(one)
    np.testing.assert_array_equal(codes[0], [2, -1, 0, 1])
    assert sets is None
    # the same set twice is one row; sets may hold labels no single node has
    codes, classes, sets = encode_with_sets([np.array([{1, 3}, {3, 1}, 0, {0, 1}], dtype=object)])
    np.testing.assert_array_equal(classes, [0, 1, 3])
    np.testing.assert_array_equal(codes[0], [-2, -2, 0, -3])
    np.testing.assert_array_equal(sets, [[False, True, True], [True, True, False]])


@pytest.mark.parametrize(
    "y, message",
    [
        ([np.array(["O", set()], dtype=object)], "empty set"),
        ([np.array(["O", {"O", -1}], dtype=object)], "mixes numeric and string"),
        ([np.array([0, {1, -1}], dtype=object)], "unknown marker"),
    ],
)
def test_bad_sets_are_named(y, message):
    with pytest.raises(ValueError, match=message):
        encode_with_sets(y)


def test_known_sets_name_the_sample_and_the_label():
    classes = np.array(TAGS)
    codes, sets = encode_known([[None, {"O", "B-PER"}], ["O", None]], classes)
    np.testing.assert_array_equal(codes[0], [-1, -2])
    np.testing.assert_array_equal(sets, [[True, False, True]])
    with pytest.raises(ValueError, match="known_labels of sample 1: label 'B-LOC'"):
        encode_known([[None, "O"], [{"B-LOC", "O"}, None]], classes)


def _chain_model(k=3, n_states_per_label=None, random_state=0):
    data = make_chain_data(
        n_samples=30, n_states=k, n_features=4, length=(4, 5), random_state=random_state
    )
    structure = ChainStructure(n_states_per_label=n_states_per_label)
    return ChainCRF(structure).fit(data.data, data.target), data.data


def _keeps(labellings, codes, label_sets):
    """Which labellings (of labels) keep to the known labels and sets."""
    ok = np.ones(len(labellings), dtype=bool)
    for d, code in enumerate(codes):
        if code >= 0:
            ok &= labellings[:, d] == code
        elif code < -1:
            ok &= label_sets[-2 - code][labellings[:, d]]
    return ok


def test_chain_queries_equal_enumeration_over_the_labellings_the_sets_allow():
    model, X = _chain_model()
    x = X[0]
    known = np.array([None] * len(x), dtype=object)
    known[0], known[2] = {0, 2}, 1
    known[3] = {1, 2}
    labellings, p = exact_distribution(model.potentials([x]))
    codes = np.array([-2, -1, 1, -3] + [-1] * (len(x) - 4))
    sets = np.array([[True, False, True], [False, True, True]])
    p = p * _keeps(labellings, codes, sets)
    p /= p.sum()
    expected = np.stack([np.bincount(labellings[:, d], p, minlength=3) for d in range(len(x))])
    marginals = model.predict_marginals([x], known_labels=[known])[0]
    np.testing.assert_allclose(marginals, expected, atol=1e-9)
    np.testing.assert_array_equal(
        model.predict([x], known_labels=[known])[0], labellings[np.argmax(p)]
    )
    draws = model.sample([x], n_draws=3000, known_labels=[known], random_state=0)[0]
    frequencies = np.stack([(draws == k).mean(axis=0) for k in range(3)], axis=1)
    assert np.abs(frequencies - expected).max() < 0.04  # 3000 draws: s.e. below 0.01
    assert set(draws[:, 0]) <= {0, 2} and set(draws[:, 3]) <= {1, 2}
    best, probability = k_best_labellings(model, [x], k=4, known_labels=[known])
    top = np.argsort(-p, kind="stable")[:4]
    np.testing.assert_array_equal(best[0], labellings[top])
    np.testing.assert_allclose(probability[0], p[top], atol=1e-9)


def test_sets_restrict_the_labels_of_hidden_states():
    """With two states per label a set allows every state of its labels."""
    model, X = _chain_model(n_states_per_label=2)
    x = X[1]
    known = [np.array([{0, 1}] * len(x), dtype=object)]
    marginals = model.predict_marginals([x], known_labels=known)[0]
    np.testing.assert_allclose(marginals[:, 2], 0.0, atol=1e-12)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0)
    assert set(model.predict([x], known_labels=known)[0]) <= {0, 1}
    states = model.predict_latent([x], known_labels=known)[0]
    assert set(model.structure_.state_labels_[states]) <= {0, 1}


def test_perturbed_maps_on_a_grid_keep_to_the_sets():
    rng = np.random.default_rng(0)
    images = [rng.normal(size=(5, 6, 3)) for _ in range(6)]
    labels = [rng.integers(0, 3, size=(5, 6)) for _ in range(6)]
    model = PerturbMAPCRF(GridStructure(), max_iter=2, random_state=0).fit(images, labels)
    known = np.full((5, 6), None, dtype=object)
    known[:, :3] = [[{0, 1}] * 3] * 5
    known[0, 5] = 2
    predicted = model.predict([images[0]], known_labels=[known])[0]
    assert set(predicted[:, :3].ravel()) <= {0, 1} and predicted[0, 5] == 2
    marginals = model.predict_marginals([images[0]], known_labels=[known])[0]
    np.testing.assert_allclose(marginals[:, :3, 2], 0.0)
    draws = model.sample([images[0]], n_draws=20, known_labels=[known], random_state=0)[0]
    assert set(draws[:, :, :3].ravel()) <= {0, 1}


def test_forbidden_states_lose_on_long_chains_with_strong_transitions():
    """The bound counts each edge's largest pairwise score: a shared table scores once per
    edge, so a long chain with a strong transition cannot buy back a forbidden label."""
    n = 200
    unary = np.zeros((n, 2))
    transition = np.array([[30.0, -30.0], [-30.0, 30.0]])
    forbidden = np.zeros((n, 2), dtype=bool)
    forbidden[0, 0] = True  # node 0 may only be 1: every node follows it
    p = Potentials(
        forbid_states(unary, forbidden, transition, n - 1), np.c_[: n - 1, 1:n], transition
    )
    np.testing.assert_array_equal(ChainSolver().map(p), np.ones(n))
    assert ChainSolver().marginals(p).node[0, 0] < 1e-300


def test_chain_likelihood_of_sets_is_the_probability_of_the_sets():
    """ChainCRF's objective is log P(y_d in S_d for every d): checked against enumeration,
    and its gradient against finite differences."""
    model, X = _chain_model()
    X = X[:3]
    y = [np.array([{0, 1}, 2, None, {1, 2}] + [0] * (len(x) - 4), dtype=object) for x in X]
    for yi in y:
        yi[2] = {0, 1, 2}  # every class: an unknown label
    problem = model.structure_.fit_problem(X, y, classes=model.classes_)
    batch, labels, sets = problem.batch, problem.labels, problem.label_sets
    w = model.coef_ * 0.7
    value, gradient = model._log_likelihood(batch, labels, w, label_sets=sets)
    expected = 0.0
    for i, x in enumerate(X):
        structure = model.structure_
        labellings, scores = scores_of(structure.potentials(structure.prepare([x]), w))
        codes = labels[batch.node_offsets[i] : batch.node_offsets[i + 1]]
        keep = _keeps(labellings, codes, sets)
        expected += np.logaddexp.reduce(scores[keep]) - np.logaddexp.reduce(scores)
    assert value == pytest.approx(expected / len(X), abs=1e-9)
    rng = np.random.default_rng(0)
    for index in rng.choice(len(w), 6, replace=False):
        step = np.zeros_like(w)
        step[index] = 1e-5
        up = model._log_likelihood(batch, labels, w + step, label_sets=sets)[0]
        down = model._log_likelihood(batch, labels, w - step, label_sets=sets)[0]
        assert gradient[index] == pytest.approx((up - down) / 2e-5, abs=1e-6)


def _partially_labelled(n_train, seed, share=0.6, k=5, n_complete=10):
    data = make_chain_data(
        n_samples=n_train + 300, n_states=k, n_features=6, noise=2.5, random_state=seed
    )
    X, y = list(data.data), list(data.target)
    rng = np.random.default_rng(seed)
    with_sets, unknown = [], []
    for i, labels in enumerate(y[:n_train]):
        sets, hidden = np.array(labels, dtype=object), np.array(labels).copy()
        partial = rng.random(len(labels)) < share if i >= n_complete else []
        for d in np.flatnonzero(partial):
            other = rng.choice([c for c in range(k) if c != labels[d]])
            sets[d], hidden[d] = {int(labels[d]), int(other)}, -1
        with_sets.append(sets)
        unknown.append(hidden)
    return X[:n_train], (y[:n_train], with_sets, unknown), X[n_train:], y[n_train:]


@pytest.mark.parametrize(
    "make",
    [lambda: ChainCRF(), lambda: MarginalPerturbMAPCRF(random_state=0)],
    ids=["ChainCRF", "MarginalPerturbMAPCRF"],
)
def test_learning_from_sets_lies_between_unknown_and_full_labels(make):
    """60 % of the nodes of the training samples past the first ten carry a two-label set
    holding the true label: the model is above the one with those nodes unknown and at most
    the fully labelled one."""
    accuracy = {"full": [], "sets": [], "unknown": []}
    for seed in range(3):
        X, (full, sets, unknown), X_test, y_test = _partially_labelled(40, seed)
        truth = np.concatenate(y_test)
        for name, y in (("full", full), ("sets", sets), ("unknown", unknown)):
            predicted = np.concatenate(make().fit(X, y).predict(X_test))
            accuracy[name].append(np.mean(predicted == truth))
    mean = {name: np.mean(values) for name, values in accuracy.items()}
    assert mean["unknown"] < mean["sets"] <= mean["full"] + 0.005, mean


@pytest.mark.parametrize("learner", [PerturbMAPCRF(max_iter=1), StructuredSVM(max_iter=1)])
def test_learners_that_cannot_learn_from_sets_say_so(learner):
    data = make_chain_data(n_samples=6, n_states=3, n_features=3, random_state=0)
    y = [np.array(labels, dtype=object) for labels in data.target]
    y[0][0] = {0, 1}
    with pytest.raises(ValueError, match="does not learn from sets of labels.*ChainCRF"):
        learner.fit(data.data, y)


def test_score_refuses_sets_of_labels():
    model, X = _chain_model()
    y = [np.array(labels, dtype=object) for labels in model.predict(X[:2])]
    y[1][0] = {0, 1}
    with pytest.raises(ValueError, match="sets of labels"):
        model.score(X[:2], y)


def test_observed_states_count_every_label_of_a_set():
    """With ``all_possible_states=False`` a feature seen at a node of a set may weigh on each
    of its labels, and on no other."""
    X = [np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [0.0, 1.0]])]
    y = [np.array([{0, 1}, 2, 2], dtype=object), np.array([2, 2])]
    model = ChainCRF(ChainStructure(bias=False), all_possible_states=False).fit(X, y)
    unary, _ = model.structure_.unpack(model.coef_)
    assert unary[0, 2] == 0.0 and unary[0, :2].all()  # feature 0: only at the set {0, 1}
    np.testing.assert_array_equal(unary[1, :2], 0.0)  # feature 1: only with label 2


def test_event_probabilities_are_conditional_on_known_labels_and_sets():
    """Sequence, region and edge probabilities given known labels and sets equal those of
    enumeration of the labellings that keep to them; draws never break them."""
    from pmap_sklearn.inspection import (
        edge_marginals,
        region_probabilities,
        sequence_probabilities,
    )

    model, X = _chain_model()
    x = X[0]
    D = len(x)
    known = np.array([None] * D, dtype=object)
    known[0], known[2] = {0, 2}, 1
    codes = np.array([-2, -1, 1] + [-1] * (D - 3))
    labellings, p = exact_distribution(model.potentials([x]))
    p = p * _keeps(labellings, codes, np.array([[True, False, True]]))
    p /= p.sum()
    some = [labellings[np.argmax(p)], labellings[np.argsort(p)[-2]], np.ones(D, dtype=int)]
    for labelling in some:  # the last breaks the set at node 0
        index = np.flatnonzero((labellings == labelling).all(axis=1))[0]
        given = sequence_probabilities(model, [x], [labelling], known_labels=[known])
        assert given[0] == pytest.approx(p[index], abs=1e-9)
    assert sequence_probabilities(model, [x], known_labels=[known])[0] == pytest.approx(p.max())
    pair = edge_marginals(model, [x], known_labels=[known])[0]
    for d in range(D - 1):
        expected = np.zeros((3, 3))
        np.add.at(expected, (labellings[:, d], labellings[:, d + 1]), p)
        np.testing.assert_allclose(pair[d], expected, atol=1e-9)
    regions, probabilities = region_probabilities(model, [x], known_labels=[known])
    best = labellings[np.argmax(p)]
    for r, probability in enumerate(probabilities[0]):
        members = np.flatnonzero(regions[0] == r)
        keeps = (labellings[:, members] == best[members]).all(axis=1)
        assert probability == pytest.approx(p[keeps].sum(), abs=1e-9)
    drawn = PerturbMAPCRF(max_iter=3, random_state=0).fit(X, [model.predict([z])[0] for z in X])
    frequency = sequence_probabilities(drawn, [x], [some[2]], known_labels=[known], tol=0.05)
    assert frequency[0] == 0.0  # no draw breaks the set


def test_entity_probabilities_given_every_tag_are_one():
    X = [np.eye(3)[[0, 1, 2, 2]] + 0.1, np.eye(3)[[0, 2, 2]] + 0.1] * 6
    y = [["B-PER", "I-PER", "O", "O"], ["B-PER", "O", "O"]] * 6
    model = ChainCRF(alpha=0.1).fit(X, y)
    from pmap_sklearn.inspection import entity_probabilities

    known = [np.array([{"B-PER", "O"}, "O", "O", "O"], dtype=object)]
    entities = entity_probabilities(model, X[:1], known_labels=known)[0]
    assert [e[:3] for e in entities] in ([("PER", 0, 1)], [])
    given = [np.array(["B-PER", "I-PER", "O", "O"], dtype=object)]
    (entity,) = entity_probabilities(model, X[:1], known_labels=given)[0]
    assert entity[:3] == ("PER", 0, 2) and entity[3] == pytest.approx(1.0)
    draws = entity_probabilities(
        PerturbMAPCRF(random_state=0).fit(X, y), X[:1], known_labels=given, tol=0.05
    )
    assert draws[0][0][3] == pytest.approx(1.0)
