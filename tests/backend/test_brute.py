"""The brute-force solver against an independent loop."""

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pmap_sklearn import Potentials
from pmap_sklearn._backend import BruteForceSolver

from ..helpers import SETTINGS, _free_or_clamped, loop_scores, scores_of, statistics_of


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n_states=st.integers(2, 3),
    kind=st.sampled_from(["potts", "shared", "tables"]),
    clamped=st.booleans(),
)
def test_brute_force_matches_an_independent_loop(seed, n_states, kind, clamped):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    edges = np.array([(i, j) for i, j in itertools.combinations(range(n), 2)]).reshape(-1, 2)
    edges = edges[rng.random(len(edges)) < 0.6]
    shape = {"potts": (len(edges),), "shared": (n_states,) * 2}.get(
        kind, (len(edges), n_states, n_states)
    )
    p = Potentials(rng.normal(size=(n, n_states)), edges, rng.normal(size=shape))
    labellings, scores = loop_scores(p)
    np.testing.assert_allclose(scores_of(p)[1], scores)
    clamp = _free_or_clamped(rng, n, n_states) if clamped else None
    allowed = np.ones(len(scores), bool)
    if clamped:
        allowed = (labellings[:, clamp >= 0] == clamp[clamp >= 0]).all(axis=1)
    solver = BruteForceSolver()
    best = solver.map(p, clamp)
    np.testing.assert_allclose(p.score(best)[0], scores[allowed].max())
    log_z = np.logaddexp.reduce(scores[allowed])
    np.testing.assert_allclose(solver.log_partition(p, clamp)[0], log_z)
    marginals = solver.marginals(p, clamp)
    np.testing.assert_allclose(marginals.log_partition[0], log_z)
    prob = np.exp(scores[allowed] - log_z)
    expected = sum(
        q * statistics_of(p, y).unary for q, y in zip(prob, labellings[allowed], strict=True)
    )
    pairwise = sum(
        q * statistics_of(p, y).pairwise for q, y in zip(prob, labellings[allowed], strict=True)
    )
    np.testing.assert_allclose(marginals.node, expected, atol=1e-12)
    np.testing.assert_allclose(marginals.statistics.pairwise, pairwise, atol=1e-12)
