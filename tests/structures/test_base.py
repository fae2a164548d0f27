"""The structures' parsing, labels, hidden states and joint feature map."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_multilabel_classification

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    MultiLabelStructure,
    PerturbMAPCRF,
    StructuredSVM,
)
from pmap_sklearn._backend import BruteForceSolver, Statistics
from pmap_sklearn._utils import SparseVector
from pmap_sklearn.datasets import make_chain_data, make_crosses
from pmap_sklearn.structures import Problem, check_structure

from ..helpers import (
    _chains,
    _samples,
    _sparse_and_dense,
    exact_expected_joint_feature,
    loop_scores,
)

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
        (
            GraphStructure(),
            [GraphSample(np.zeros((3, 1)), [[0, 1], [1, 2], [0, 1]])],
            None,
            r"sample 0: edges 0 \(0, 1\) and 2 \(0, 1\) join the same pair",
        ),
        (
            GraphStructure(),
            [GraphSample(np.zeros((3, 1)), [[0, 1], [2, 1], [1, 0]])],
            None,
            r"sample 0: edges 0 \(0, 1\) and 2 \(1, 0\) join the same pair",
        ),
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


_COMPLEX = np.array([[1.0 + 0.5j, 2.0], [0.0, 1.0], [1.0, 1.0]])


@pytest.mark.parametrize(
    "structure, sample, where",
    [
        (ChainStructure(n_states=2), _COMPLEX, "node features"),
        (ChainStructure(n_states=2), sparse.csr_matrix(_COMPLEX), "node features"),
        (GridStructure(), _COMPLEX.reshape(1, 3, 2), "pixel features"),
        (GraphStructure(), GraphSample(_COMPLEX, [[0, 1]]), "node features"),
        (GraphStructure(), GraphSample(np.ones((3, 1)), [[0, 1]], [[1 + 1j]]), "edge features"),
        (GraphStructure(), GraphSample(np.ones((3, 1)), [[0, 1]], None, [1, 1j, 1]), "node sizes"),
    ],
)
def test_complex_features_are_refused_by_every_structure(structure, sample, where):
    """Casting to float would drop the imaginary part: refused as scikit-learn does."""
    with pytest.raises(ValueError, match=f"sample 0: {where}: Complex data not supported"):
        structure.fit([sample])


@pytest.mark.parametrize(
    "structure, sample",
    [
        (ChainStructure(n_states=2), np.array([["0.1", "2"], ["1", "3"]])),
        (GridStructure(), np.array([[["0.1"], ["2"]]])),
        (GraphStructure(), GraphSample(np.array([["1"], ["2"]]), [[0, 1]])),
    ],
)
def test_numeric_text_features_are_refused(structure, sample):
    with pytest.raises(ValueError, match="sample 0: .*features must be numeric, got strings"):
        structure.fit([sample])


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


@pytest.mark.parametrize(
    "structure, X, y",
    [
        (GridStructure(n_states_per_label=2), [np.zeros((2, 2))], [np.array([[0, 1], [1, 1]])]),
        (
            GraphStructure(n_states_per_label=[1, 2]),
            [GraphSample(np.ones((3, 2)), [[0, 1], [1, 2]])],
            [np.array([0, 1, 1])],
        ),
    ],
)
def test_hidden_states_with_potts_terms_are_refused_on_edges(structure, X, y):
    """A Potts term over states scores two states of one label as two labels."""
    with pytest.raises(ValueError, match=r"n_states_per_label=.* needs pairwise='table', got "):
        structure.fit(X, y)
    structure.set_params(pairwise="table").fit(X, y)
    assert structure.n_states_ > structure.n_labels_
    # without edges a Potts term has nothing to score: the states are a mixture of unaries
    no_edges = [GraphSample(np.ones((1, 2)), np.zeros((0, 2), dtype=int))] * 2
    fitted = GraphStructure(n_states_per_label=2).fit(no_edges, [np.array([0]), np.array([1])])
    assert fitted.n_states_ == 4


def test_hidden_nodes_with_potts_terms_are_refused_on_their_edges():
    """A hidden node's state always differs from a visible label: its Potts terms are the same
    for every hidden state."""
    X = [GraphSample(np.ones((3, 2)), [[0, 1], [1, 2], [2, 3]], n_hidden_nodes=1)]
    y = [np.array([0, 1, 1])]
    with pytest.raises(ValueError, match=r"n_hidden_states=2 needs pairwise='table', got "):
        GraphStructure(n_hidden_states=2).fit(X, y)
    as_tuples = [(np.ones((3, 2)), [[3, 0]], None, None, None, 1)]
    with pytest.raises(ValueError, match="edges reach hidden nodes"):
        GraphStructure(n_hidden_states=1).fit(as_tuples, y)
    assert GraphStructure(pairwise="table", n_hidden_states=2).fit(X, y).n_states_ == 4
    # a hidden node with no edge, or no hidden node at all: nothing to tell apart by edges
    apart = [GraphSample(np.ones((3, 2)), [[0, 1], [1, 2]], n_hidden_nodes=1)]
    assert GraphStructure(n_hidden_states=2).fit(apart, y).n_states_ == 4
    visible = [GraphSample(np.ones((3, 2)), [[0, 1], [1, 2]])]
    assert GraphStructure(n_hidden_states=2).fit(visible, y).n_states_ == 4


def test_states_are_laid_out_label_by_label_then_hidden():
    structure = GraphStructure(pairwise="table", n_states_per_label=[1, 3], n_hidden_states=2)
    X = [GraphSample(np.ones((3, 2)), [[0, 1], [1, 2], [2, 3]], n_hidden_nodes=1)]
    structure.fit(X, [np.array([0, 1, 1])])
    assert structure.n_labels_ == 2 and structure.n_states_ == 6
    np.testing.assert_array_equal(structure.state_labels_, [0, 1, 1, 1, -1, -1])
    np.testing.assert_array_equal(
        structure.label_states_,
        [[1, 0, 0, 0, 0, 0], [0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1]],
    )
    np.testing.assert_array_equal(
        structure.allowed_states(np.array([1, -1, 2])),
        [[0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1]],
    )
    assert ChainStructure(n_states_per_label=2).fit(*_chains()).n_states_ == 4


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(n_states_per_label=[1, 2, 3]), "one int per label; got \\[1, 2, 3\\] for 2 labels"),
        (dict(n_states_per_label=0), "n_states_per_label must be >= 1"),
        (dict(n_states_per_label=[1.5, 2]), "must hold ints"),
        (dict(n_states_per_label=2, unary="scaled"), "unary='scaled' .* not with hidden states"),
    ],
)
def test_bad_hidden_state_parameters_are_named(params, match):
    X, y = _chains()
    with pytest.raises(ValueError, match=match):
        PerturbMAPCRF(ChainStructure(**params), max_iter=1).fit(X, y)


def test_hidden_nodes_are_checked():
    X = [GraphSample(np.ones((2, 1)), [[0, 1], [1, 2]], n_hidden_nodes=1)]
    with pytest.raises(ValueError, match="sample 0 has 1 hidden nodes .* set n_hidden_states"):
        StructuredSVM(GraphStructure(pairwise="table")).fit(X, [np.array([0, 1])])
    bad = [GraphSample(np.ones((2, 1)), [[0, 1], [1, 2]], n_hidden_nodes=-1)]
    with pytest.raises(ValueError, match="n_hidden_nodes must be an int >= 0"):
        StructuredSVM(GraphStructure(n_hidden_states=2)).fit(bad, [np.array([0, 1])])
    with pytest.raises(ValueError, match=r"y has shape \(3,\), expected \(2,\) .*visible node"):
        StructuredSVM(GraphStructure(pairwise="table", n_hidden_states=2)).fit(
            X, [np.array([0, 1, 1])]
        )
    with pytest.raises(ValueError, match="n_hidden_states must be an int >= 0"):
        StructuredSVM(GraphStructure(n_hidden_states=-2)).fit(X, [np.array([0, 1])])


def test_initial_states_split_a_label_by_its_context():
    data = make_crosses(n_samples=20, noise=0, random_state=0)
    structure = GridStructure(pairwise="table", n_states_per_label=[1, 2])
    structure.fit(list(data.data), list(data.target))
    batch = structure.prepare(list(data.data))
    codes = structure.prepare_labels(batch, list(data.target))
    states = structure.initial_states(batch, codes, np.random.default_rng(0))
    assert structure.allowed_states(codes)[np.arange(batch.n_nodes), states].all()
    # centres (4 neighbours in the cross) apart from arms (1 neighbour)
    cross = np.flatnonzero(codes == 1)
    in_cross = np.zeros(batch.n_nodes)
    np.add.at(in_cross, batch.edges[:, 0], codes[batch.edges[:, 1]] == 1)
    np.add.at(in_cross, batch.edges[:, 1], codes[batch.edges[:, 0]] == 1)
    centres, arms = cross[in_cross[cross] == 4], cross[in_cross[cross] == 1]
    assert len(set(states[centres])) == 1 and len(set(states[arms])) == 1
    assert states[centres][0] != states[arms][0]


def test_a_model_too_large_to_allocate_names_the_features():
    """A CSR with 4e9 columns asked for 149 GiB of weights."""
    X = [sparse.csr_matrix(([1.0, 1.0], ([0, 1], [5, 4_000_000_000])), shape=(2, 4_000_000_001))]
    with pytest.raises(ValueError, match="4,000,000,002 node features.*SequenceVectorizer"):
        PerturbMAPCRF().fit(X, [np.array([0, 1])])


def test_sequences_given_to_a_grid_learner_are_told_to_use_a_chain():
    """MeanFieldCRF's default structure is a grid: words (one label per row of X) read as
    images get the remedy, not only the shapes."""
    from pmap_sklearn import MeanFieldCRF
    from pmap_sklearn.datasets import make_chain_data

    data = make_chain_data(n_samples=5, noise=1.0, random_state=0)
    with pytest.raises(ValueError, match="use structure='chain'"):
        MeanFieldCRF().fit(data.data, data.target)


def test_sparse_gradient_is_the_dense_one_and_mini_batches_are_views():
    """The compact joint-feature difference (read from the CSR arrays of a mini-batch cut
    without copying) equals the dense one, over the nodes that differ and over all nodes."""
    chains, dense, tags = _sparse_and_dense(12)
    classes = np.unique(np.concatenate(tags))
    structure = ChainStructure(n_states=len(classes)).fit(chains)
    batch, dense_batch = structure.prepare(chains), structure.prepare(dense)
    labels = np.searchsorted(classes, np.concatenate(tags))
    other = np.random.default_rng(0).integers(structure.n_states_, size=len(labels))
    part = slice(3, 9)
    sub, nodes = batch.subset(part), batch.node_index(part)
    assert batch.subset(part) is sub  # an SGD step asks twice
    assert np.shares_memory(sub.features.data, batch.features.data)
    np.testing.assert_array_equal(sub.features.toarray(), batch.features[nodes].toarray())
    for second in (other[nodes], labels[nodes]):
        compact = structure.joint_feature_difference(
            sub, labels[nodes], second, [0.5, 1, 2, 1, 1, 3], compact=True
        )
        assert isinstance(compact, SparseVector)
        expected = structure.joint_feature_difference(
            dense_batch.subset(part), labels[nodes], second, [0.5, 1, 2, 1, 1, 3]
        )
        np.testing.assert_allclose(compact.toarray(), expected, atol=1e-12)
    marginals = np.random.default_rng(1).dirichlet(np.ones(structure.n_states_), sub.n_nodes)
    statistics = Statistics(marginals, np.ones((structure.n_states_,) * 2))
    np.testing.assert_allclose(
        structure.joint_feature_of(sub, statistics, compact=True).toarray(),
        structure.joint_feature_of(dense_batch.subset(part), statistics),
        atol=1e-12,
    )


# ---- the seam: the validated problem a structure hands an estimator ----------------------
def _chain_data(n=6):
    data = make_chain_data(n_samples=n, n_states=3, random_state=0)
    return list(data.data), list(data.target)


def test_fit_problem_encodes_the_labels_and_fits_the_structure():
    X, y = _chain_data()
    words = np.array(["a", "b", "c"])
    structure = ChainStructure()
    problem = structure.fit_problem(X, [words[t] for t in y])
    assert isinstance(problem, Problem)
    assert problem.classes.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(problem.labels, np.concatenate(y))
    assert problem.batch.n_samples == len(X) and problem.batch.n_nodes == sum(map(len, y))
    assert structure.n_states_ == 3 and structure.n_features_in_ == X[0].shape[1]
    assert not problem.has_unknown


def test_fit_problem_marks_unknown_and_drops_ignored_nodes():
    X, y = _chain_data()
    y = [t.copy() for t in y]
    y[0][0], y[1][1] = -1, 9  # unknown, ignored
    problem = ChainStructure().fit_problem(X, y, unknown_label=-1, ignore_label=9)
    assert problem.has_unknown and (problem.labels == -1).sum() == 1
    assert 9 not in problem.classes
    assert problem.batch.n_nodes == sum(map(len, y)) - 1  # the ignored node is gone
    assert problem.batch.n_samples == len(X) + 1  # its chain cut in two


def test_fit_problem_with_classes_keeps_the_fitted_structure():
    X, y = _chain_data()
    structure = ChainStructure()
    first = structure.fit_problem(X, y)
    solver = structure.solver_
    again = structure.fit_problem(X[:2], y[:2], classes=first.classes)
    assert structure.solver_ is solver  # not fitted again
    with pytest.raises(ValueError, match="not one of the classes"):
        structure.fit_problem(X[:1], [np.full(len(y[0]), 7)], classes=first.classes)
    np.testing.assert_array_equal(again.labels, np.concatenate(y[:2]))


def test_fit_problem_refuses_what_cannot_be_learned():
    X, y = _chain_data()
    with pytest.raises(ValueError, match="at least two are needed"):
        ChainStructure().fit_problem(X, [np.zeros(len(t), int) for t in y])
    with pytest.raises(ValueError, match="both"):
        ChainStructure().fit_problem(X, y, unknown_label=-1, ignore_label=-1)
    images = [np.zeros((3, 3)), np.ones((3, 3))]
    labels = [np.zeros((3, 3), int), np.ones((3, 3), int)]
    labels[0][0, 0] = 5
    with pytest.raises(ValueError, match="cannot lose"):
        GridStructure().fit_problem(images, labels, ignore_label=5)


def test_problem_encodes_known_labels_and_held_out_labels():
    X, y = _chain_data()
    structure = ChainStructure()
    classes = structure.fit_problem(X, y).classes
    assert structure.problem(X).labels is None
    known = [np.array([None] * len(t), dtype=object) for t in y[:2]]
    known[0][0] = 2
    problem = structure.problem(X, index=slice(0, 2), known_labels=known, classes=classes)
    assert problem.batch.n_samples == 2
    assert problem.labels[0] == 2 and (problem.labels[1:] == -1).all()
    held = structure.problem(X, labels=y, classes=classes, markers=(-1,))
    np.testing.assert_array_equal(held.labels, np.concatenate(y))
    with pytest.raises(ValueError, match="known_labels has 1"):
        structure.problem(X[:2], known_labels=known[:1], classes=classes)
    with pytest.raises(ValueError, match="sample 0"):
        structure.problem(X[:1], known_labels=[[5] * len(y[0])], classes=classes)


def test_graph_problems_drop_ignored_nodes_with_their_edges():
    samples = [
        GraphSample(np.eye(3), [[0, 1], [1, 2]]),
        GraphSample(np.eye(3), [[0, 1], [0, 2]]),
    ]
    problem = GraphStructure().fit_problem(samples, [[0, 1, 9], [1, 0, 1]], ignore_label=9)
    assert problem.batch.n_nodes == 5 and len(problem.batch.edges) == 3


def test_the_multilabel_problem_checks_X_once(monkeypatch):
    """X is validated at the boundary and not again while the structure fits and stacks it."""
    from pmap_sklearn import _validation
    from pmap_sklearn.structures import multilabel

    X, Y = make_multilabel_classification(n_samples=30, n_classes=4, random_state=0)
    calls = []
    check = _validation.check_feature_matrix

    def counted(*args, **kwargs):
        calls.append(1)
        return check(*args, **kwargs)

    monkeypatch.setattr(multilabel, "check_feature_matrix", counted)
    problem = MultiLabelStructure("chain").fit_problem(X, Y)
    assert len(calls) == 1
    assert problem.batch.n_samples == 30 and problem.batch.n_nodes == 30 * 4
    np.testing.assert_array_equal(problem.labels, Y.ravel())
    for matrix in (X, sparse.csr_matrix(X)):
        assert MultiLabelStructure().fit_problem(matrix, Y).batch.n_nodes == 120


def test_estimators_fit_through_the_structure_seam(monkeypatch):
    """Every structure fit of an estimator goes through ``fit_problem``, once."""
    from pmap_sklearn.structures import BaseStructure

    X, y = _chain_data(8)
    calls = []
    original = BaseStructure.fit_problem

    def recorded(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BaseStructure, "fit_problem", recorded)
    PerturbMAPCRF(max_iter=2, random_state=0).fit(X, y)
    ChainCRF(max_iter=5).fit(X, y)
    assert calls == ["ChainStructure", "ChainStructure"]


def test_sample_kind_says_what_a_sample_is():
    assert ChainStructure().sample_kind == "chain"
    assert GridStructure().sample_kind == "grid"
    assert GraphStructure().sample_kind == "graph"
    assert MultiLabelStructure().sample_kind == "multilabel"
