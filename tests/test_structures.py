"""Joint feature map, potentials and sample validation of the structures."""

import numpy as np
import pytest

from pmap_sklearn import PerturbMAPCRF, StructuredSVM
from pmap_sklearn._backend import BruteForceSolver
from pmap_sklearn.samples import GraphSample
from pmap_sklearn.structures import ChainStructure, GraphStructure, GridStructure, check_structure

from .helpers import _samples, exact_expected_joint_feature, loop_scores

KINDS = [
    "chain",
    "grid",
    "graph",
    "grid_table",
    "grid_untied",
    "graph_table",
    "graph_tied",
    "grid_untied_tied",
    "chain_scaled",
    "grid_scaled",
    "graph_scaled",
]


@pytest.mark.parametrize("kind", KINDS)
def test_score_of_the_potentials_is_w_dot_joint_feature(kind, rng):
    structure, X = _samples(kind, rng)
    structure.fit(X)
    batch = structure.prepare(X)
    w = structure.project(rng.normal(size=structure.size_))
    labels = rng.integers(0, structure.n_states_, size=batch.n_nodes)
    psi = structure.joint_feature_per_sample(batch, labels)
    potentials = structure.potentials(batch, w)
    np.testing.assert_allclose(psi @ w, potentials.score(labels))
    np.testing.assert_allclose(psi.sum(0), structure.joint_feature(batch, labels))
    for i, sample in enumerate(potentials.split()):
        labellings, all_scores = loop_scores(sample)
        y = labels[batch.nodes_of(i)]
        index = np.ravel_multi_index(y, (structure.n_states_,) * len(y))
        np.testing.assert_allclose(all_scores[index], psi[i] @ w)


@pytest.mark.parametrize("kind", KINDS)
def test_per_sample_joint_feature_differences_match_one_sample_at_a_time(kind, rng):
    structure, X = _samples(kind, rng)
    structure.fit(X)
    batch = structure.prepare(X)
    labels = rng.integers(-1, structure.n_states_, size=batch.n_nodes)  # -1: unknown
    other = np.where(rng.random(batch.n_nodes) < 0.5, labels, rng.integers(0, 2, batch.n_nodes))
    differences = structure.joint_feature_per_sample(batch, labels, other)
    for i in range(batch.n_samples):
        one, nodes = batch.subset([i]), batch.nodes_of(i)
        expected = structure.joint_feature_difference(one, labels[nodes], other[nodes])
        np.testing.assert_allclose(differences[i], expected, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_joint_feature_of_marginals_is_the_expected_joint_feature(kind, rng):
    structure, X = _samples(kind, rng)
    structure.fit(X)
    batch = structure.prepare(X[:1])
    w = structure.project(rng.normal(size=structure.size_))
    marginals = BruteForceSolver().marginals(structure.potentials(batch, w))
    np.testing.assert_allclose(
        structure.joint_feature_of(batch, marginals.statistics),
        exact_expected_joint_feature(structure, batch, w),
    )


@pytest.mark.parametrize("bias", [True, False])
def test_scaled_unary_scores_are_one_weight_times_the_scores_plus_biases(bias, rng):
    structure = GraphStructure(n_states=3, unary="scaled", bias=bias)
    scores = rng.normal(size=(4, 3))
    X = [GraphSample(scores, [[0, 1], [1, 2], [2, 3]])]
    batch = structure.fit(X).prepare(X)
    assert structure.n_unary_weights_ == 1 + 3 * bias
    w = rng.normal(size=structure.size_)
    unary, _ = structure.unpack(w)
    expected = w[0] * scores + (w[1:4] if bias else 0.0)
    np.testing.assert_allclose(structure.potentials(batch, w).unary, expected)
    assert structure.weight_row_width_ == 1 and not structure.has_sparse_features(batch)


@pytest.mark.parametrize(
    "structure, X, match",
    [
        (GraphStructure(unary="scaled"), [GraphSample(np.zeros((2, 3)), [[0, 1]])], "one score"),
        (GridStructure(unary="scaled", untied=True), [np.zeros((2, 2, 2))], "untied"),
        (ChainStructure(unary="affine"), [np.zeros((2, 2))], "'linear' or 'scaled'"),
    ],
)
def test_scaled_unary_refuses_what_it_cannot_scale(structure, X, match):
    with pytest.raises(ValueError, match=match):
        structure.fit(X, [np.zeros(np.shape(x)[:-1] if np.ndim(x) == 3 else 2, int) for x in X])


def test_subset_matches_preparing_the_subset(rng):
    structure, X = _samples("graph", rng)
    X = X + [X[0]]
    structure.fit(X)
    batch = structure.prepare(X)
    sub = batch.subset([2, 1])
    direct = structure.prepare([X[2], X[1]])
    for name in (
        "features",
        "node_offsets",
        "edges",
        "edge_offsets",
        "edge_features",
        "node_sizes",
    ):
        np.testing.assert_array_equal(getattr(sub, name), getattr(direct, name))


@pytest.mark.parametrize("kind", ["chain", "grid", "graph"])
def test_slice_subset_is_the_indexed_subset_without_copies(kind, rng):
    structure, X = _samples(kind, rng)
    X = X + X[:2]
    structure.fit(X)
    batch = structure.prepare(X)
    for part in (slice(1, 3), slice(0, len(X)), slice(2, 2)):
        by_slice = batch.subset(part)
        by_index = batch.subset(np.arange(len(X))[part])
        for name in ("features", "node_offsets", "edges", "edge_offsets", "edge_features"):
            np.testing.assert_array_equal(getattr(by_slice, name), getattr(by_index, name))
        assert by_slice.label_shapes == by_index.label_shapes
        assert np.shares_memory(by_slice.features, batch.features) or by_slice.n_nodes == 0
        nodes = np.arange(batch.n_nodes)
        np.testing.assert_array_equal(
            nodes[batch.node_index(part)], batch.node_index(np.arange(len(X))[part])
        )
    with pytest.raises(ValueError, match="step 1"):
        batch.subset(slice(0, 3, 2))


def test_grid_edges_and_shapes():
    structure = GridStructure(connectivity=4).fit([np.zeros((3, 4))])
    batch = structure.prepare([np.zeros((3, 4))])
    assert len(batch.edges) == 3 * 3 + 2 * 4  # horizontal + vertical
    assert structure.size_ == 2 * 2 + 2  # (1 feature + bias) x 2 labels + 2 directions
    split = batch.split(np.arange(12))
    assert split[0].shape == (3, 4)


def test_projection_keeps_cut_weights_nonpositive(rng):
    structure, X = _samples("graph", rng)
    structure.fit(X)
    w = structure.project(np.ones(structure.size_))
    unary, pairwise = structure.unpack(w)
    assert np.all(pairwise <= 0) and np.all(unary == 1)


@pytest.mark.parametrize(
    "structure, X, y, match",
    [
        (
            ChainStructure(n_states=2),
            [np.zeros((3, 2)), np.zeros((2, 3))],
            None,
            "sample 1 has 3 node",
        ),
        (
            ChainStructure(n_states=2),
            [np.zeros((3, 2)), np.full((2, 2), np.nan)],
            None,
            "sample 1.*non-finite",
        ),
        (
            ChainStructure(n_states=2),
            [np.zeros((3, 2)), np.zeros(4)],
            None,
            "sample 1: expected a 2-D",
        ),
        (ChainStructure(), [np.zeros((3, 2))], [[0, 1]], "sample 0: y has shape"),
        (ChainStructure(n_states=2), [np.zeros((3, 2))], [[0, 1, 2]], "label 2 out of range"),
        (ChainStructure(), [np.zeros((3, 2))], [[0, -1, 1]], "-1 .unknown. is not accepted"),
        (ChainStructure(), [np.zeros((3, 2))], [[0, 0.5, 1]], "labels must be integers"),
        (ChainStructure(), [np.zeros((3, 2))], [[0, 1, 1], [0]], "1 samples but y has 2"),
        (
            GridStructure(solver="graph_cut"),
            [np.zeros((2, 2))],
            [[[0, 1], [2, 0]]],
            "handles at most 2 labels",
        ),
        (ChainStructure(n_states="a"), [np.zeros((2, 2))], None, "n_states must be an int"),
        (ChainStructure(bias="no"), [np.zeros((2, 2))], None, r"ChainStructure\(bias=...\)"),
        (GridStructure(contrast=1), [np.zeros((2, 2))], None, r"contrast=...\) must be True"),
        (ChainStructure(n_states=1), [np.zeros((2, 2))], None, "n_states must be at least 2"),
        (GraphStructure(), [GraphSample(np.zeros((3, 1)), [[0, 3]])], None, "out of range"),
        (GraphStructure(), [GraphSample(np.zeros((3, 1)), [[0, 1], [2, 2]])], None, "self-loop"),
        (GraphStructure(), [GraphSample(np.zeros((3, 1)), [[0, 1]], [[-1.0]])], None, ">= 0"),
        (
            GraphStructure(),
            [GraphSample(np.zeros((3, 1)), [[0, 1]], [[1.0], [2.0]])],
            None,
            "edge_features must have shape",
        ),
        (GraphStructure(), [np.zeros((3, 2))], None, "takes GraphSample"),
        (
            GraphStructure(),
            [GraphSample(np.zeros((3, 1)), [[0, 1]], None, [1, 0, 1])],
            None,
            "node_sizes",
        ),
    ],
)
def test_bad_input_names_the_sample_and_the_problem(structure, X, y, match):
    with pytest.raises(ValueError, match=match):
        structure.fit(X[:1], y)
        batch = structure.prepare(X)
        if y is not None:
            structure.prepare_labels(batch, y)


def test_check_structure_rejects_unknown_names():
    with pytest.raises(ValueError, match="structure must be one of"):
        check_structure("tree")
    assert isinstance(check_structure("grid"), GridStructure)


def test_solver_decides_what_the_structure_accepts(rng):
    """K > 2 and edge features of any sign are refused by graph cuts, not by the structure."""
    X = [GraphSample(rng.normal(size=(3, 1)), [[0, 1], [1, 2]], [[-1.0], [2.0]])]
    with pytest.raises(ValueError, match="edge features must be >= 0 for the graph_cut"):
        GraphStructure().fit(X, [np.array([0, 1, 0])])
    y = [np.array([0, 2, 1])]
    structure = GraphStructure(solver="brute_force").fit(X, y)
    assert structure.n_states_ == 3
    batch = structure.prepare(X)
    np.testing.assert_array_equal(structure.prepare_labels(batch, y), [0, 2, 1])
    w = rng.normal(size=structure.size_)
    assert np.array_equal(structure.project(w.copy()), w)  # no attractive constraint needed
    chain = ChainStructure(n_states=2, solver="graph_cut").fit([np.zeros((3, 1))])
    w = np.zeros(chain.size_)
    w[-4:] = [0.0, 1.0, 2.0, -1.0]  # T00 + T11 - T01 - T10 = -4: repulsive
    table = chain.transition(chain.project(w))
    assert table[0, 0] + table[1, 1] - table[0, 1] - table[1, 0] == pytest.approx(0, abs=1e-12)


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
