"""NonEmptyLabelling: the wrapped solver's models without the all-zero labelling, checked
against enumeration of every non-empty labelling."""

import numpy as np
import pytest
from scipy.special import logsumexp

from pmap_sklearn._backend.label_sets import NonEmptyLabelling, _best_single_labels
from pmap_sklearn.solvers import BruteForceSolver, ForestSolver, LocalSearchSolver, Potentials

from ..helpers import scores_of

TREE = np.array([[0, 1], [1, 2], [1, 3], [3, 4]])
FULL = np.array([[a, b] for a in range(5) for b in range(a + 1, 5)])


def _models(rng, edges, n_samples=6, shift=-2.0):
    """Binary models of 5 nodes whose unconstrained MAP is often empty (unary scores of 1
    shifted down)."""
    n = 5
    unary = rng.normal(size=(n * n_samples, 2))
    unary[:, 1] += shift
    offsets = np.arange(n_samples + 1) * n
    all_edges = np.concatenate([edges + offsets[i] for i in range(n_samples)])
    pairwise = rng.normal(size=(len(all_edges), 2, 2))
    return Potentials(unary, all_edges, pairwise, offsets, np.arange(n_samples + 1) * len(edges))


def _constrained(one, clamp):
    """Every non-empty labelling of a one-sample model that respects ``clamp``, its score."""
    labellings, scores = scores_of(one)
    keep = labellings.any(axis=1)
    if clamp is not None:
        keep &= ((clamp < 0) | (labellings == clamp)).all(axis=1)
    return labellings[keep], scores[keep]


def _clamps(rng, potentials):
    """Nodes clamped to 0 (a few of each sample, never all) and one node of sample 0 to 1."""
    clamp = np.where(rng.random(potentials.n_nodes) < 0.3, 0, -1)
    clamp[potentials.node_offsets[:-1]] = -1
    clamp[1] = 1
    return clamp


@pytest.mark.parametrize(
    "edges, base",
    [(TREE, ForestSolver()), (FULL, BruteForceSolver()), (TREE, BruteForceSolver())],
    ids=["tree-forest", "full-brute", "tree-brute"],
)
@pytest.mark.parametrize("clamped", [False, True])
def test_map_marginals_and_log_partition_are_those_of_the_non_empty_labellings(
    edges, base, clamped, rng
):
    potentials = _models(rng, edges)
    clamp = _clamps(rng, potentials) if clamped else None
    solver = NonEmptyLabelling(base)
    assert not base.map(potentials, clamp).reshape(-1, 5).any(axis=1).all()  # at stake
    labels = solver.map(potentials, clamp)
    marginals = solver.marginals(potentials, clamp)
    for i, one in enumerate(potentials.split()):
        nodes = slice(5 * i, 5 * i + 5)
        given = None if clamp is None else clamp[nodes]
        labellings, scores = _constrained(one, given)
        np.testing.assert_array_equal(labels[nodes], labellings[np.argmax(scores)])
        probability = np.exp(scores - logsumexp(scores))
        np.testing.assert_allclose(marginals.log_partition[i], logsumexp(scores), atol=1e-10)
        np.testing.assert_allclose(marginals.node[nodes, 1], probability @ labellings, atol=1e-10)
        pair = marginals.statistics.pairwise[len(edges) * i : len(edges) * (i + 1)]
        for e, (a, b) in enumerate(edges):
            for x in range(2):
                for y in range(2):
                    expected = probability @ ((labellings[:, a] == x) & (labellings[:, b] == y))
                    np.testing.assert_allclose(pair[e, x, y], expected, atol=1e-10)


def test_an_approximate_solvers_map_gets_a_label_and_stays_a_local_optimum(rng):
    potentials = _models(rng, FULL, n_samples=20)
    solver = NonEmptyLabelling(LocalSearchSolver())
    labels = solver.map(potentials).reshape(-1, 5)
    assert labels.any(axis=1).all()
    exact = NonEmptyLabelling(BruteForceSolver()).map(potentials)
    found, best = potentials.score(labels.ravel()), potentials.score(exact)
    assert np.all(found <= best + 1e-9) and np.mean(found >= best - 1e-9) >= 0.9


@pytest.mark.parametrize("kind", ["tables", "potts"])
def test_an_approximate_solver_tries_the_nodes_whose_label_alone_scores_best(kind, rng):
    potentials = _models(rng, FULL, n_samples=4)
    if kind == "potts":
        potentials = Potentials(
            potentials.unary,
            potentials.edges,
            rng.normal(size=potentials.n_edges),
            potentials.node_offsets,
            potentials.edge_offsets,
        )
    nodes = np.arange(potentials.n_nodes)
    chosen = _best_single_labels(potentials, nodes, potentials.node_sample[nodes], 3)
    zero = potentials.score(np.zeros(potentials.n_nodes, dtype=np.intp))
    for sample in range(potentials.n_samples):
        gains = []
        for node in range(5 * sample, 5 * sample + 5):
            alone = np.zeros(potentials.n_nodes, dtype=np.intp)
            alone[node] = 1
            gains.append(potentials.score(alone)[sample] - zero[sample])
        expected = 5 * sample + np.sort(np.argsort(gains)[::-1][:3])
        np.testing.assert_array_equal(chosen[3 * sample : 3 * sample + 3], expected)


def test_perturbed_rounds_and_clamped_maximisers_honour_the_constraint(rng):
    potentials = _models(rng, TREE, n_samples=8)
    solver = NonEmptyLabelling(ForestSolver())
    perturbations = rng.gumbel(size=(5, potentials.n_nodes, 2))
    rounds = solver.perturbed_rounds(potentials, perturbations)
    for r in range(5):
        assert rounds[r].reshape(-1, 5).any(axis=1).all()
        np.testing.assert_array_equal(rounds[r], solver.map(potentials.add_unary(perturbations[r])))
    nodes = np.arange(potentials.n_nodes)
    solution = solver.clamped_maps(potentials, nodes, np.zeros_like(nodes), np.ones(len(nodes)))
    np.testing.assert_array_equal(solution.map_labels, solver.map(potentials))
    # each query's maximiser: the best non-empty labelling with its node at 0 (Σ of differences)
    expected = np.zeros(potentials.unary.shape)
    for node in nodes:
        clamp = np.full(potentials.n_nodes, -1)
        clamp[node] = 0
        expected += np.eye(2)[solver.map(potentials, clamp)] - np.eye(2)[solution.map_labels]
    np.testing.assert_allclose(solution.statistics.unary, expected)


def test_a_sample_clamped_all_to_zero_is_refused_by_name(rng):
    potentials = _models(rng, TREE, n_samples=3)
    clamp = np.full(potentials.n_nodes, -1)
    clamp[5:10] = 0
    solver = NonEmptyLabelling(ForestSolver())
    with pytest.raises(ValueError, match="sample 1 has every label clamped to 0"):
        solver.map(potentials, clamp)
    with pytest.raises(ValueError, match="sample 1 has no labelling with a label"):
        solver.marginals(potentials, clamp)


@pytest.mark.parametrize("clamped", [False, True])
def test_k_best_lists_the_non_empty_labellings_with_their_probabilities(clamped, rng):
    potentials = _models(rng, FULL)
    clamp = _clamps(rng, potentials) if clamped else None
    labels, log_p = NonEmptyLabelling(BruteForceSolver()).k_best(potentials, 4, clamp)
    assert labels.shape == (4, potentials.n_nodes) and log_p.shape == (potentials.n_samples, 4)
    for i, one in enumerate(potentials.split()):
        nodes = slice(5 * i, 5 * i + 5)
        labellings, scores = _constrained(one, None if clamp is None else clamp[nodes])
        order = np.argsort(-scores, kind="stable")[:4]
        listed = len(order)  # a clamped sample may have fewer than 4
        np.testing.assert_array_equal(labels[:listed, nodes], labellings[order])
        expected = scores[order] - logsumexp(scores)
        np.testing.assert_allclose(log_p[i, :listed], expected, atol=1e-10)
        assert np.isneginf(log_p[i, listed:]).all()


def test_it_declares_what_it_answers():
    solver = NonEmptyLabelling(ForestSolver())
    assert solver.name == "forest" and solver.has_marginals
    assert not solver.capabilities.k_best and solver.capabilities.max_states == 2
    assert NonEmptyLabelling(BruteForceSolver()).capabilities.k_best
    assert not NonEmptyLabelling(LocalSearchSolver()).has_marginals
    with pytest.raises(ValueError, match="computes no marginals"):
        NonEmptyLabelling(LocalSearchSolver()).marginals(_models(np.random.default_rng(0), FULL))
    assert repr(solver) == "NonEmptyLabelling(ForestSolver())"
