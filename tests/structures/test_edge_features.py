"""Tied edge features: symmetric and antisymmetric tables."""

import numpy as np
import pytest

from pmap_sklearn import PerturbMAPCRF, StructuredSVM
from pmap_sklearn.samples import GraphSample
from pmap_sklearn.structures import GraphStructure, GridStructure


def _tied_structure(**kwargs):
    return GraphStructure(n_states=3, pairwise="table", solver="brute_force", **kwargs)


def test_tied_tables_are_symmetric_and_antisymmetric(rng):
    """One edge per feature: the potentials' tables are ``(W + Wᵀ)/2``, ``(W − Wᵀ)/2`` and
    ``W``, and the tied blocks of Ψ lie in the same subspaces."""
    edges = np.array([[0, 1], [1, 2], [2, 0]])
    X = [GraphSample(rng.normal(size=(3, 2)), edges, np.eye(3))]
    structure = _tied_structure(symmetric_edge_features=[0], antisymmetric_edge_features=[2])
    batch = structure.fit(X).prepare(X)
    w = rng.normal(size=structure.size_)
    free = structure.unpack(w)[1].reshape(3, 3, 3)
    tables = structure.potentials(batch, w).pairwise
    np.testing.assert_allclose(tables[0], (free[0] + free[0].T) / 2)
    np.testing.assert_allclose(tables[1], free[1])
    np.testing.assert_allclose(tables[2], (free[2] - free[2].T) / 2)
    psi = structure.joint_feature(batch, rng.integers(0, 3, 3))
    blocks = structure.unpack(psi)[1].reshape(3, 3, 3)
    np.testing.assert_allclose(blocks[0], blocks[0].T)
    np.testing.assert_allclose(blocks[2], -blocks[2].T)


def test_antisymmetric_features_make_the_model_independent_of_edge_orientation(rng):
    """Listing an edge the other way round and negating its antisymmetric feature (e.g. +1
    left to right, −1 right to left) gives every labelling the same score; a symmetric
    feature needs no sign change."""
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    features = np.column_stack([rng.random(5), rng.choice([-1.0, 1.0], 5)])
    flip = np.array([True, False, True, True, False])
    flipped_edges = np.where(flip[:, None], edges[:, ::-1], edges)
    flipped_features = features * np.column_stack([np.ones(5), np.where(flip, -1.0, 1.0)])
    node_features = rng.normal(size=(4, 2))
    X = [GraphSample(node_features, edges, features)]
    Y = [GraphSample(node_features, flipped_edges, flipped_features)]
    structure = _tied_structure(symmetric_edge_features=[0], antisymmetric_edge_features=[1])
    structure.fit(X)
    w = rng.normal(size=structure.size_)
    labellings = rng.integers(0, 3, size=(20, 4))
    for batch_x, batch_y in [(structure.prepare(X), structure.prepare(Y))]:
        one = structure.potentials(batch_x, w)
        other = structure.potentials(batch_y, w)
        for labels in labellings:
            np.testing.assert_allclose(one.score(labels), other.score(labels))
    free = GraphStructure(n_states=3, pairwise="table", solver="brute_force").fit(X)
    w = rng.normal(size=free.size_)
    one, other = free.potentials(free.prepare(X), w), free.potentials(free.prepare(Y), w)
    assert not np.allclose([one.score(y) for y in labellings], [other.score(y) for y in labellings])


def _rows(rng, n_samples, width=6, k=4):
    """Rows of nodes whose label grows by one (mod K) to the right; only the leftmost node's
    features show its label (the others are zeros). Edges are listed in random orientation,
    with a constant feature and one that is +1 when listed left to right, −1 right to left."""
    X, y = [], []
    base = np.stack([np.arange(width - 1), np.arange(1, width)], axis=1)
    for _ in range(n_samples):
        labels = (np.arange(width) + rng.integers(k)) % k
        flip = rng.random(width - 1) < 0.5
        edges = np.where(flip[:, None], base[:, ::-1], base)
        features = np.column_stack([np.ones(width - 1), np.where(flip, -1.0, 1.0)])
        nodes = np.zeros((width, k))
        nodes[0, labels[0]] = 1.0
        X.append(GraphSample(nodes, edges, features))
        y.append(labels)
    return X, y


def test_an_antisymmetric_feature_learns_which_way_the_labels_grow(rng):
    """With edges listed either way, "the label on the right is this label + 1" needs the
    antisymmetric table of the orientation feature; a table on the constant feature alone
    cannot tell left from right. The learners stay in the antisymmetric subspace."""
    X, y = _rows(rng, 80)
    antisymmetric = PerturbMAPCRF(
        GraphStructure(pairwise="table", antisymmetric_edge_features=[1], solver="trws"),
        random_state=0,
    ).fit(X[:40], y[:40])
    constant = [GraphSample(x.node_features, x.edges, x.edge_features[:, :1]) for x in X]
    plain = PerturbMAPCRF(GraphStructure(pairwise="table", solver="trws"), random_state=0)
    plain.fit(constant[:40], y[:40])
    assert antisymmetric.score(X[40:], y[40:]) > 0.9
    assert plain.score(constant[40:], y[40:]) < 0.75
    table = antisymmetric.structure_.unpack(antisymmetric.coef_)[1].reshape(2, 4, 4)[1]
    np.testing.assert_allclose(table, -table.T, atol=1e-12)
    np.testing.assert_array_equal(table.argmax(axis=1), (np.arange(4) + 1) % 4)
    svm = StructuredSVM(
        GraphStructure(pairwise="table", antisymmetric_edge_features=[1], solver="trws"),
        random_state=0,
        max_iter=5,
    ).fit(X[:40], y[:40])
    table = svm.structure_.unpack(svm.coef_)[1].reshape(2, 4, 4)[1]
    np.testing.assert_allclose(table, -table.T, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"symmetric_edge_features": [0], "pairwise": "potts"}, "need pairwise='table'"),
        ({"symmetric_edge_features": [0], "antisymmetric_edge_features": [0]}, "both"),
        ({"antisymmetric_edge_features": [2]}, "holds edge feature 2, but the samples have 2"),
        ({"symmetric_edge_features": [1, 1]}, "repeats"),
        ({"symmetric_edge_features": [-1]}, ">= 0"),
        ({"antisymmetric_edge_features": ["a"]}, "ints"),
        ({"symmetric_edge_features": [0.5]}, "ints"),
    ],
)
def test_tied_feature_lists_are_checked(kwargs, match, rng):
    X = [GraphSample(rng.normal(size=(3, 1)), [[0, 1], [1, 2]], rng.random((2, 2)))]
    structure = GraphStructure(**{"n_states": 3, "pairwise": "table", **kwargs})
    with pytest.raises(ValueError, match=match):
        structure.fit(X)


def test_tables_with_more_than_two_labels_get_trws_and_signed_antisymmetric_features(rng):
    """``solver="auto"`` picks TRW-S for K > 2 tables; graph cuts take binary tables whose
    antisymmetric features have any sign (an antisymmetric table couples nothing)."""
    images, labels = [np.zeros((3, 3, 1))], [np.array([[0, 1, 2]] * 3)]
    assert GridStructure(pairwise="table").fit(images, labels).solver_.name == "trws"
    assert GridStructure().fit(images, labels).solver_.name == "alpha_expansion"
    X = [GraphSample(rng.normal(size=(3, 1)), [[0, 1], [1, 2]], [[1.0, -1.0], [0.5, 1.0]])]
    structure = GraphStructure(pairwise="table", antisymmetric_edge_features=[1])
    assert structure.fit(X, [np.array([0, 1, 0])]).solver_.name == "graph_cut"
    with pytest.raises(ValueError, match="edge features must be >= 0"):
        GraphStructure(pairwise="table").fit(X, [np.array([0, 1, 0])])
