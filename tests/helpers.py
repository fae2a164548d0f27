"""Brute-force references shared by the tests: enumeration of one sample's potentials."""

import itertools

import numpy as np

from pmap_sklearn._backend import brute
from pmap_sklearn._backend.potentials import label_statistics


def scores_of(potentials):
    """Every labelling of a one-sample model and its score (lexicographic order)."""
    parts = list(brute.enumerate_scores(potentials))
    return np.concatenate([y for y, _ in parts]), np.concatenate([s for _, s in parts])


def loop_scores(potentials):
    """Independent reference: a Python loop over the labellings and the edges."""
    p = potentials
    tables = p.edge_tables()
    labellings, scores = [], []
    for y in itertools.product(range(p.n_states), repeat=p.n_nodes):
        score = sum(p.unary[d, k] for d, k in enumerate(y))
        score += sum(tables[e, y[i], y[j]] for e, (i, j) in enumerate(p.edges))
        labellings.append(y)
        scores.append(score)
    return np.array(labellings), np.array(scores)


def exact_distribution(potentials):
    """All labellings of a one-sample model with their probabilities ``P(y)``."""
    labellings, scores = scores_of(potentials)
    prob = np.exp(scores - scores.max())
    return labellings, prob / prob.sum()


def statistics_of(potentials, labels):
    """Sufficient statistics of one labelling of a one-sample model."""
    return label_statistics(labels, potentials.edges, potentials.n_states, potentials.pairwise_kind)


def exact_expected_joint_feature(structure, batch, w, index=0, given=None):
    """``E_P[Ψ(x, y)]`` of sample ``index`` by enumeration; with ``given = (node, label)`` the
    conditional expectation ``E_P[Ψ | y_node = label]``."""
    single = batch.subset([index])
    labellings, prob = exact_distribution(structure.potentials(single, w))
    if given is not None:
        keep = labellings[:, given[0]] == given[1]
        labellings, prob = labellings[keep], prob[keep] / prob[keep].sum()
    return sum(
        p * structure.joint_feature(single, y) for p, y in zip(prob, labellings, strict=True)
    )


def mean_oracle_gradient(oracle, index, w, n_chunks=80, per_chunk=500, seed=0):
    """Mean of a stochastic gradient oracle over many perturbations of the samples ``index``
    (each repeated ``per_chunk`` times per call), with its standard error."""
    rng = np.random.default_rng(seed)
    copies = np.repeat(np.asarray(index), per_chunk)
    means = np.array([oracle(copies, w, rng)[0] / per_chunk for _ in range(n_chunks)])
    return means.mean(0), means.std(0, ddof=1) / np.sqrt(n_chunks)
