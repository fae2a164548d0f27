"""Brute-force references shared by the tests: enumeration of one sample's potentials."""

import itertools

import numpy as np
from scipy.special import logsumexp

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


def grid_exact_marginals(potentials, shape):
    """Exact node marginals and log-partition of one 4-connected H×W grid model by the transfer
    matrix over rows (K^W row states): a forward-backward over the rows in the log domain."""
    height, width = shape
    k = potentials.n_states
    unary = potentials.unary.reshape(height, width, k)
    tables = potentials.edge_tables()
    horizontal, vertical = {}, {}
    for (i, j), table in zip(potentials.edges, tables, strict=True):
        (ri, ci), (rj, cj) = divmod(int(i), width), divmod(int(j), width)
        if ri == rj:
            horizontal[(ri, min(ci, cj))] = table if ci < cj else table.T
        else:
            vertical[(min(ri, rj), ci)] = table if ri < rj else table.T
    states = np.array(list(np.ndindex(*(k,) * width)))  # (K^W, W)
    row_scores = np.zeros((height, len(states)))
    for r in range(height):
        row_scores[r] = unary[r, np.arange(width), states].sum(axis=1)
        for c in range(width - 1):
            if (r, c) in horizontal:
                row_scores[r] += horizontal[(r, c)][states[:, c], states[:, c + 1]]
    between = []
    for r in range(height - 1):
        t = np.zeros((len(states), len(states)))
        for c in range(width):
            if (r, c) in vertical:
                t += vertical[(r, c)][states[:, c][:, None], states[:, c][None, :]]
        between.append(t)
    forward = [row_scores[0]]
    for r in range(1, height):
        forward.append(row_scores[r] + logsumexp(forward[-1][:, None] + between[r - 1], axis=0))
    backward = [np.zeros(len(states))]
    for r in range(height - 2, -1, -1):
        backward.insert(0, logsumexp(between[r] + (row_scores[r + 1] + backward[0])[None], axis=1))
    log_z = logsumexp(forward[-1])
    marginals = np.zeros((height, width, k))
    for r in range(height):
        p = np.exp(forward[r] + backward[r] - log_z)
        for c in range(width):
            marginals[r, c] = np.bincount(states[:, c], p, minlength=k)
    return marginals.reshape(-1, k), log_z
