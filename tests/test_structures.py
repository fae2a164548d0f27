"""Joint feature map, potentials and sample validation of the structures."""

import numpy as np
import pytest

from pmap_sklearn._backend import BruteForceSolver
from pmap_sklearn.samples import GraphSample
from pmap_sklearn.structures import ChainStructure, GraphStructure, GridStructure, check_structure

from .helpers import exact_expected_joint_feature, loop_scores


def _samples(kind, rng):
    if kind == "chain":
        return ChainStructure(n_states=3), [rng.normal(size=(d, 2)) for d in (1, 3, 4)]
    if kind == "grid":
        return GridStructure(connectivity=8, contrast=True), [rng.normal(size=(2, 3, 2))] * 2
    if kind in ("grid_table", "grid_untied"):
        structure = GridStructure(
            contrast=True,
            n_states=3,
            pairwise="table",
            untied=kind == "grid_untied",
            solver="brute_force",
        )
        return structure, [rng.normal(size=(2, 3, 2)) for _ in range(2)]
    if kind == "chain_scaled":  # one score per label, one weight scaling them, biases
        return ChainStructure(n_states=3, unary="scaled"), [rng.normal(size=(d, 3)) for d in (1, 4)]
    if kind == "grid_scaled":
        return GridStructure(unary="scaled", bias=False), [rng.normal(size=(2, 3, 2))] * 2
    if kind == "graph_scaled":
        edges = np.array([[0, 1], [1, 2], [2, 0]])
        sample = GraphSample(rng.normal(size=(3, 3)), edges, rng.random((3, 2)))
        return GraphStructure(n_states=3, unary="scaled"), [sample] * 2
    if kind == "graph_table":
        edges = np.array([[0, 1], [1, 2], [2, 0]])
        sample = GraphSample(rng.normal(size=(3, 2)), edges, rng.normal(size=(3, 2)))
        return GraphStructure(n_states=3, pairwise="table", solver="brute_force"), [sample] * 2
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3]])
    sample = GraphSample(rng.normal(size=(4, 2)), edges, rng.random((4, 3)), rng.random(4) + 1)
    return GraphStructure(), [
        sample,
        GraphSample(rng.normal(size=(2, 2)), [[0, 1]], rng.random((1, 3))),
    ]


KINDS = [
    "chain",
    "grid",
    "graph",
    "grid_table",
    "grid_untied",
    "graph_table",
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
