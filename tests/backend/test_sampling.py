"""Exact joint draws: forward filtering backward sampling, the chain rule."""

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from pmap_sklearn._backend import Potentials
from pmap_sklearn._backend.sampling import sample_labellings
from pmap_sklearn._backend.viterbi import ChainSolver, forward_filtering_backward_sampling
from pmap_sklearn.solvers import check_solver as get_solver


def _joint(unary, edges, tables):
    """Every labelling of one small model and its exact probability."""
    n, k = unary.shape
    labellings = np.array(list(itertools.product(range(k), repeat=n)))
    scores = unary[np.arange(n), labellings].sum(axis=1)
    for (a, b), table in zip(edges, tables, strict=True):
        scores = scores + table[labellings[:, a], labellings[:, b]]
    probability = np.exp(scores - scores.max())
    return labellings, probability / probability.sum()


def _goodness_of_fit(draws, labellings, probability):
    """The chi-square p-value of the draws' labelling counts against the probabilities."""
    index = {tuple(y): i for i, y in enumerate(labellings)}
    counts = np.bincount([index[tuple(y)] for y in draws], minlength=len(labellings))
    return chisquare(counts, probability * len(draws)).pvalue


def test_forward_filtering_backward_sampling_draws_the_chain_distribution():
    rng = np.random.default_rng(0)
    k, lengths = 3, np.array([4, 2, 1])
    unary = rng.normal(size=(3, 4, k))
    transition = rng.normal(size=(k, k))
    draws = forward_filtering_backward_sampling(
        unary, lengths, transition, 30_000, np.random.default_rng(1)
    )
    for chain, n in enumerate(lengths):
        edges = [(d, d + 1) for d in range(n - 1)]
        labellings, probability = _joint(unary[chain, :n], edges, [transition] * len(edges))
        assert _goodness_of_fit(draws[:, chain, :n], labellings, probability) > 1e-3
        assert not draws[:, chain, n:].any()  # padding


def test_chain_draws_are_conditional_on_clamps():
    rng = np.random.default_rng(2)
    unary, transition = rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    potentials = Potentials(unary, np.array([[0, 1], [1, 2], [2, 3]]), transition)
    clamp = np.array([-1, 2, -1, -1])
    draws = ChainSolver().sample(potentials, 30_000, np.random.default_rng(3), clamp)
    assert (draws[:, 1] == 2).all()
    labellings, probability = _joint(unary, [(0, 1), (1, 2), (2, 3)], [transition] * 3)
    keep = labellings[:, 1] == 2
    assert _goodness_of_fit(draws, labellings[keep], probability[keep] / probability[keep].sum())


@pytest.mark.parametrize("solver", ["brute_force", "forest"])
def test_chain_rule_draws_exact_distributions_of_other_solvers(solver):
    """Solvers without their own sampler draw node by node from exact marginals."""
    rng = np.random.default_rng(4)
    edges = (
        np.array([[0, 1], [0, 2], [2, 3]])
        if solver == "forest"
        else np.array([[0, 1], [1, 2], [0, 2], [2, 3]])
    )
    unary, tables = rng.normal(size=(4, 2)), rng.normal(size=(len(edges), 2, 2))
    potentials = Potentials(unary, edges, tables)
    draws = sample_labellings(get_solver(solver), potentials, 20_000, 5)
    labellings, probability = _joint(unary, edges, tables)
    assert _goodness_of_fit(draws, labellings, probability) > 1e-3


def test_a_map_only_solver_cannot_draw_exactly():
    potentials = Potentials(np.zeros((2, 2)), np.array([[0, 1]]), np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="method='perturb'"):
        sample_labellings(get_solver("trws"), potentials, 3)
