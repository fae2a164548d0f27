"""Brute-force references shared by the tests."""

import numpy as np

from pmap_sklearn._backend import brute


def exact_distribution(structure, batch, w, index=0):
    """All labellings of sample ``index`` with their probabilities ``P(y|x)``."""
    unary, edges, pairwise = structure.dense_model(batch, w, index)
    labellings, scores = brute.enumerate_scores(unary, edges, pairwise)
    return labellings, np.exp(scores - brute.brute_log_partition(unary, edges, pairwise))


def exact_expected_joint_feature(structure, batch, w, index=0):
    """``E_P[Ψ(x, y)]`` of sample ``index`` by enumeration."""
    single = batch.subset([index])
    labellings, prob = exact_distribution(structure, batch, w, index)
    return sum(
        p * structure.joint_feature(single, y) for p, y in zip(prob, labellings, strict=True)
    )


def exact_conditional_joint_feature(structure, batch, w, node, label, index=0):
    """``E_P[Ψ(x, y) | y_node = label]`` of sample ``index`` by enumeration."""
    single = batch.subset([index])
    labellings, prob = exact_distribution(structure, batch, w, index)
    keep = labellings[:, node] == label
    prob = prob[keep] / prob[keep].sum()
    return sum(
        p * structure.joint_feature(single, y) for p, y in zip(prob, labellings[keep], strict=True)
    )


def mean_oracle_gradient(oracle, index, w, n_chunks=80, per_chunk=500, seed=0):
    """Mean of a stochastic gradient oracle over many perturbations of the samples ``index``
    (each repeated ``per_chunk`` times per call), with its standard error."""
    rng = np.random.default_rng(seed)
    copies = np.repeat(np.asarray(index), per_chunk)
    means = np.array([oracle(copies, w, rng)[0] / per_chunk for _ in range(n_chunks)])
    return means.mean(0), means.std(0, ddof=1) / np.sqrt(n_chunks)
