"""Hidden states (a label is a set of states) and hidden nodes: set-valued clamps in the
solvers, the structures' states, and the three learners that learn them (the latent structured
SVM, the marginal and the plain perturb-and-MAP likelihoods)."""

import numpy as np
import pytest

from pmap_sklearn._backend import BruteForceSolver, ChainSolver, Potentials, forbid_states
from tests.helpers import scores_of, statistics_of


def _random_chains(rng, n_chains=3, length=4, k=4):
    unary = rng.normal(size=(n_chains * length, k))
    heads = np.concatenate([np.arange(length - 1) + c * length for c in range(n_chains)])
    offsets = np.arange(n_chains + 1)
    return Potentials(
        unary,
        np.stack([heads, heads + 1], axis=1),
        rng.normal(size=(k, k)),
        offsets * length,
        offsets * (length - 1),
    )


def _set_clamped_reference(potentials, node, allowed):
    """The best labelling of a one-sample model with ``node`` in the set ``allowed``, by
    enumeration."""
    labellings, scores = scores_of(potentials)
    scores = np.where(allowed[labellings[:, node]], scores, -np.inf)
    return labellings[np.argmax(scores)]


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("solver", [ChainSolver(), BruteForceSolver()])
def test_set_valued_clamps_give_the_best_labelling_with_the_node_in_its_set(solver, dynamic, rng):
    sets = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0], [1, 1, 1, 0]], dtype=bool)
    for _ in range(5):
        p = _random_chains(rng)
        nodes = np.array([0, 2, 5, 7, 9, 11])
        labels = rng.integers(0, len(sets), size=len(nodes))
        weights = rng.random(len(nodes))
        for skip in (False, True):
            solution = solver.clamped_maps(
                p, nodes, labels, weights, sets=sets, skip_agreeing=skip, dynamic=dynamic
            )
            unary = np.zeros(p.unary.shape)
            pairwise = np.zeros(p.pairwise.shape)
            map_labels = solver.map(p)
            np.testing.assert_array_equal(solution.map_labels, map_labels)
            for node, label, weight in zip(nodes, labels, weights, strict=True):
                sample = p.node_sample[node]
                one = p.sample(sample)
                local = node - p.node_offsets[sample]
                best = _set_clamped_reference(one, local, sets[label])
                at_map = map_labels[p.node_offsets[sample] : p.node_offsets[sample + 1]]
                if skip:
                    assert solution.solved[list(nodes).index(node)] == (
                        not sets[label, at_map[local]]
                    )
                difference_b = statistics_of(one, best)
                difference_a = statistics_of(one, at_map)
                rows = slice(p.node_offsets[sample], p.node_offsets[sample + 1])
                unary[rows] += weight * (difference_b.unary - difference_a.unary)
                pairwise += weight * (difference_b.pairwise - difference_a.pairwise)
            np.testing.assert_allclose(solution.statistics.unary, unary, atol=1e-12)
            np.testing.assert_allclose(solution.statistics.pairwise, pairwise, atol=1e-12)


def test_singleton_sets_are_single_label_clamps(rng):
    p = _random_chains(rng)
    nodes, labels, weights = np.array([1, 6]), np.array([2, 0]), np.array([1.0, 0.5])
    identity = np.eye(4, dtype=bool)
    with_sets = ChainSolver().clamped_maps(p, nodes, labels, weights, sets=identity)
    single = ChainSolver().clamped_maps(p, nodes, labels, weights)
    np.testing.assert_array_equal(with_sets.statistics.unary, single.statistics.unary)


def test_bad_sets_are_refused(rng):
    p = _random_chains(rng)
    with pytest.raises(ValueError, match="sets must be a bool array of shape"):
        ChainSolver().clamped_maps(p, [0], [0], [1.0], sets=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="at least one label"):
        ChainSolver().clamped_maps(p, [0], [0], [1.0], sets=np.zeros((1, 4), bool))
    with pytest.raises(ValueError, match="query sets must lie in 0..0"):
        ChainSolver().clamped_maps(p, [0], [1], [1.0], sets=np.ones((1, 4), bool))


def test_forbidden_states_lose_to_every_allowed_labelling(rng):
    p = _random_chains(rng, n_chains=1, length=5, k=3)
    forbidden = rng.random(p.unary.shape) < 0.4
    forbidden[np.arange(5), rng.integers(0, 3, 5)] = False  # every node keeps a state
    masked = Potentials(forbid_states(p.unary, forbidden, p.pairwise), p.edges, p.pairwise)
    labellings, scores = scores_of(masked)
    legal = ~forbidden[np.arange(5), labellings].any(axis=1)
    assert scores[~legal].max() < scores[legal].min() - 999
    np.testing.assert_array_equal(ChainSolver().map(masked), labellings[np.argmax(scores)])
