"""ignore_label: nodes removed from the fit (neither in the loss nor filled in), not scored."""

import warnings

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    EpsilonCRF,
    GraphSample,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
    TwoStageCRF,
)
from pmap_sklearn._labels import without_ignored
from pmap_sklearn.datasets import make_chain_data

VOID = 9


def _graphs(rng, n=12):
    """Chains as graphs, a tenth of their nodes void."""
    data = make_chain_data(n_samples=n, random_state=0)
    X, y_void = [], []
    for x, t in zip(data.data, data.target, strict=True):
        edges = np.column_stack([np.arange(len(t) - 1), np.arange(1, len(t))])
        X.append(GraphSample(x, edges, np.ones((len(edges), 1)), np.arange(1, len(t) + 1)))
        y_void.append(np.where(rng.random(len(t)) < 0.1, VOID, t))
    return X, y_void


def test_without_ignored_keeps_the_subgraph_and_cuts_chains():
    features = np.arange(10.0).reshape(5, 2)
    graph = GraphSample(
        features,
        [[0, 1], [1, 2], [2, 3], [3, 4], [0, 4]],
        [[1], [2], [3], [4], [5]],
        [1, 2, 3, 4, 5],
    )
    (kept,), (labels,) = without_ignored([graph], [[0, 1, 9, 1, 0]], 9, "graph")
    np.testing.assert_array_equal(kept.node_features, features[[0, 1, 3, 4]])
    np.testing.assert_array_equal(kept.edges, [[0, 1], [2, 3], [0, 3]])  # renumbered
    np.testing.assert_array_equal(kept.edge_features.ravel(), [1, 4, 5])
    np.testing.assert_array_equal(kept.node_sizes, [1, 2, 4, 5])
    np.testing.assert_array_equal(labels, [0, 1, 1, 0])
    X, y = without_ignored([features, features[:2]], [[9, 1, 2, 9, 3], [9, 9]], 9, "chain")
    assert [x.tolist() for x in X] == [features[1:3].tolist(), features[4:].tolist()]
    assert [t.tolist() for t in y] == [[1, 2], [3]]  # the all-void chain is dropped
    with pytest.raises(ValueError, match="grid cannot lose"):
        without_ignored([np.zeros((2, 2, 1))], [[[0, 9], [1, 0]]], 9, "grid")
    with pytest.raises(ValueError, match="every node is ignored"):
        without_ignored([features], [[9] * 5], 9, "chain")


LEARNERS = [
    lambda: PerturbMAPCRF("graph", random_state=0),
    lambda: MarginalPerturbMAPCRF("graph", random_state=0),
    lambda: MeanFieldCRF("graph", random_state=0),
    lambda: StructuredSVM("graph", max_iter=5, random_state=0),
    lambda: PiecewiseCRF("graph"),
    lambda: PseudoLikelihoodCRF("graph"),
    lambda: EpsilonCRF("graph", max_iter=5),
]


@pytest.mark.parametrize("make", LEARNERS)
def test_an_ignored_node_is_the_same_as_a_removed_node(make, rng):
    """Fitting with void nodes marked equals fitting on the graphs without them: the void
    label never becomes a class, and the score leaves them out."""
    X, y = _graphs(rng)
    removed_X, removed_y = without_ignored(X, y, VOID, "graph")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ignoring = make().set_params(ignore_label=VOID).fit(X, y)
        plain = make().fit(removed_X, removed_y)
    assert VOID not in ignoring.classes_
    np.testing.assert_allclose(ignoring.coef_, plain.coef_)
    predicted = ignoring.predict(X)
    assert all(VOID not in p for p in predicted)
    void_free = [t != VOID for t in y]
    accuracy = np.mean(
        [np.mean(p[k] == t[k]) for p, t, k in zip(predicted, y, void_free, strict=True)]
    )
    assert ignoring.score(X, y) == pytest.approx(accuracy)


def test_chain_learners_and_two_stage_ignore_too(rng):
    data = make_chain_data(n_samples=30, random_state=0)
    y = [
        np.where(rng.random(len(t)) < 0.15, "void", np.array(list("abcde"))[t]) for t in data.target
    ]
    for model in (
        ChainCRF(ignore_label="void"),
        PerturbMAPCRF(ignore_label="void", unknown_label=None, random_state=0),
        TwoStageCRF(ignore_label="void", random_state=0),
    ):
        model.fit(data.data, y)
        assert list(model.classes_) == list("abcde")
        assert model.score(data.data, y) > 0.6


def test_ignore_and_unknown_must_differ(rng):
    X, y = _graphs(rng)
    with pytest.raises(ValueError, match="both 9"):
        PerturbMAPCRF("graph", unknown_label=VOID, ignore_label=VOID).fit(X, y)
    with pytest.raises(ValueError, match="grid cannot lose"):
        PerturbMAPCRF("grid", ignore_label=1).fit([np.zeros((3, 3, 1))], [np.eye(3, dtype=int)])


def test_ignored_nodes_are_free_in_known_labels_and_calibration(rng):
    X, y = _graphs(rng)
    model = PerturbMAPCRF("graph", ignore_label=VOID, random_state=0, n_perturbations=20).fit(X, y)
    free = [np.full(len(t), VOID) for t in y]
    for a, b in zip(model.predict(X, known_labels=free), model.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)
    model.calibrate_marginals(X, y)
    assert 1 / 8 <= model.marginal_temperature_ <= 8
