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
