"""The Gibbs sampler: its draws, colours and conditional scores."""

import numpy as np
import pytest

from pmap_sklearn import Potentials, grid_edges
from pmap_sklearn._backend import conditional_probabilities, conditional_scores, sample_colours
from pmap_sklearn.solvers import BruteForceSolver, GibbsSampler

from ..helpers import _potts_grid


def test_gibbs_sampling_reaches_the_exact_marginals():
    rng = np.random.default_rng(3)
    edges = grid_edges((2, 3))
    p = Potentials(rng.normal(size=(6, 3)), edges, rng.normal(size=(len(edges), 3, 3)))
    session = GibbsSampler(n_sweeps=1).session(p)
    sample, counts = np.zeros(6, dtype=np.intp), np.zeros((6, 3))
    for step in range(6000):
        sample = session.sample(p, sample, rng)
        if step >= 200:
            counts[np.arange(6), sample] += 1
    exact = BruteForceSolver().marginals(p).node
    np.testing.assert_allclose(counts / counts.sum(axis=1, keepdims=True), exact, atol=0.03)
    with pytest.raises(ValueError, match="6 nodes"):
        session.sample(Potentials(np.zeros((4, 3))), np.zeros(4, dtype=np.intp), rng)


def test_samples_are_coloured_on_their_own():
    rng = np.random.default_rng(0)
    one = _potts_grid(rng, (3, 4), 2, 1.0)
    other = _potts_grid(rng, (5, 2), 2, 1.0)
    both = Potentials(
        np.concatenate([one.unary, other.unary]),
        np.concatenate([one.edges, other.edges + one.n_nodes]),
        np.concatenate([one.pairwise, other.pairwise]),
        [0, one.n_nodes, one.n_nodes + other.n_nodes],
        [0, one.n_edges, one.n_edges + other.n_edges],
    )
    colour = sample_colours(both)
    assert (colour[both.edges[:, 0]] != colour[both.edges[:, 1]]).all()
    np.testing.assert_array_equal(colour[: one.n_nodes], sample_colours(one))
    np.testing.assert_array_equal(colour[one.n_nodes :], sample_colours(other))
    labels = rng.integers(2, size=both.n_nodes)
    np.testing.assert_allclose(conditional_probabilities(both, labels).sum(axis=1), 1.0)


@pytest.mark.parametrize("k", [2, 4])
def test_potts_conditional_scores_equal_those_of_the_tables(k):
    rng = np.random.default_rng(k)
    potts = _potts_grid(rng, (4, 5), k, 1.0)
    potts = Potentials(potts.unary, potts.edges, rng.normal(size=potts.n_edges))  # any sign
    tables = Potentials(potts.unary, potts.edges, potts.edge_tables())
    labels = rng.integers(k, size=potts.n_nodes)
    np.testing.assert_allclose(
        conditional_scores(potts, labels), conditional_scores(tables, labels), atol=1e-12
    )
