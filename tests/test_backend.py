"""Every solver (plain, perturbed, clamped MAP; marginals) equals brute-force enumeration on tiny
models, and brute force equals an independent loop."""

import numpy as np

from pmap_sklearn import Potentials

from .helpers import exact_distribution


def test_exact_distribution_of_a_chain_sums_to_one(rng):
    p = Potentials(rng.normal(size=(4, 3)), [[0, 1], [1, 2], [2, 3]], rng.normal(size=(3, 3)))
    labellings, prob = exact_distribution(p)
    assert labellings.shape == (81, 4)
    np.testing.assert_allclose(prob.sum(), 1.0)
