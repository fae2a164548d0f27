"""ChainSolver: Viterbi, forward-backward and forward-filtering backward-sampling."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmap_sklearn import ChainStructure, Potentials
from pmap_sklearn._backend import BruteForceSolver, ChainSolver
from pmap_sklearn._backend import viterbi as chain
from pmap_sklearn._backend.viterbi import viterbi
from pmap_sklearn._utils import ranges

from ..helpers import SETTINGS, _free_or_clamped, scores_of


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n_states=st.integers(2, 4),
    clamped=st.booleans(),
    scale=st.sampled_from([1.0, 400.0]),
)
def test_forward_backward_matches_brute_force(seed, n_states, clamped, scale):
    """Both recursions — scaled exp-domain (packed) and log-domain (padded) — and the solver's
    dispatch between them are exact; at scale 400 the scores spread over more than 600 nats,
    where only the log-domain one may run."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(d, 2)) for d in rng.integers(1, 6, size=3)]
    structure = ChainStructure(n_states=n_states).fit(X)
    batch = structure.prepare(X)
    p = structure.potentials(batch, scale * 2 * rng.normal(size=structure.size_))
    clamp = _free_or_clamped(rng, batch.n_nodes, n_states) if clamped else None
    unary = p.unary if clamp is None else chain.clamp_scores(p.unary, clamp)
    brute = BruteForceSolver().marginals(p, clamp)
    marginals = ChainSolver().marginals(p, clamp)
    np.testing.assert_allclose(marginals.log_partition, brute.log_partition, rtol=1e-12)
    np.testing.assert_allclose(marginals.node, brute.node, atol=1e-12)
    np.testing.assert_allclose(marginals.statistics.pairwise, brute.statistics.pairwise, atol=1e-12)
    padded, position = chain.pad(unary, p.lengths)
    log_z, node_padded, pair = chain.log_forward_backward(padded, p.lengths, p.pairwise)
    np.testing.assert_allclose(log_z, brute.log_partition, rtol=1e-12)
    np.testing.assert_allclose(node_padded[p.node_sample, position], brute.node, atol=1e-12)
    np.testing.assert_allclose(pair.sum(0), brute.statistics.pairwise, atol=1e-11)
    spread = np.ptp(p.pairwise) + max(np.ptp(row[np.isfinite(row)]) for row in unary)
    if spread < chain._SCALED_MAX_SPREAD:  # the scaled recursion, on chains longest first
        order = np.argsort(-p.lengths, kind="stable")
        nodes = ranges(p.node_offsets, order)
        log_z, node, pair = chain.packed_forward_backward(
            unary[nodes], p.lengths[order], p.pairwise
        )
        np.testing.assert_allclose(log_z, brute.log_partition[order], rtol=1e-12)
        np.testing.assert_allclose(node, brute.node[nodes], atol=1e-12)
        np.testing.assert_allclose(pair, brute.statistics.pairwise, atol=1e-11)


@pytest.mark.parametrize("seed", range(6))
def test_packed_marginals_in_groups_with_wide_chains_match_brute_force(seed, monkeypatch):
    """The solver's marginals: chains sorted longest first, packed position by position in
    groups of a few scores (here every group holds one to three chains), the chains whose
    scores spread over more than ~600 nats sent to the log-domain recursion — and put back
    in the samples' order."""
    monkeypatch.setattr(chain, "PACKED_ENTRIES", 12)
    rng = np.random.default_rng(seed)
    n_states = 3
    X = [rng.normal(size=(d, 2)) for d in rng.integers(1, 6, size=7)]
    structure = ChainStructure(n_states=n_states).fit(X)
    batch = structure.prepare(X)
    p = structure.potentials(batch, 2 * rng.normal(size=structure.size_))
    wide = rng.random(batch.n_samples) < 0.4  # these chains' scores spread over 2,000 nats
    p = replace(p, unary=np.where(wide[p.node_sample, None], 1e3, 1.0) * p.unary)
    clamp = _free_or_clamped(rng, batch.n_nodes, n_states)
    for given_clamp in (None, clamp):
        marginals = ChainSolver().marginals(p, given_clamp)
        brute = BruteForceSolver().marginals(p, given_clamp)
        np.testing.assert_allclose(marginals.log_partition, brute.log_partition, rtol=1e-12)
        np.testing.assert_allclose(marginals.node, brute.node, atol=1e-12)
        np.testing.assert_allclose(
            marginals.statistics.pairwise, brute.statistics.pairwise, atol=1e-11
        )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), forbid=st.booleans())
def test_packed_forward_backward_matches_the_log_domain_on_long_chains(seed, forbid):
    """Chains of 1 to 60 nodes and 17 labels, too long to enumerate, some labels clamped out
    and (``forbid``) transitions forbidden as constraints forbid them: the scaled recursion,
    in either layout, gives the log-domain recursion's log-partition, node and summed pair
    marginals."""
    rng = np.random.default_rng(seed)
    k = 17
    lengths = np.sort(rng.choice([1, 2, 5, 17, 60], size=int(rng.integers(1, 9))))[::-1]
    unary = 3 * rng.normal(size=(lengths.sum(), k))
    unary[rng.random(unary.shape) < 0.1] = -np.inf
    transition = rng.normal(size=(k, k))
    if forbid:
        transition[rng.random((k, k)) < 0.3] = -np.inf
    padded, position = chain.pad(unary, lengths, fill=-np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_z, node_padded, pair = chain.log_forward_backward(padded, lengths, transition)
        assert np.isfinite(log_z).all()  # every chain keeps a labelling at these rates
        scaled = chain.packed_forward_backward(unary, lengths, transition)
    np.testing.assert_allclose(scaled[0], log_z, rtol=1e-12)
    node = node_padded[np.repeat(np.arange(len(lengths)), lengths), position]
    np.testing.assert_allclose(scaled[1], node, atol=1e-12)
    np.testing.assert_allclose(scaled[2], pair.sum(0), atol=1e-10)
    rows = chain._packed_layout(lengths)[2]
    packed_unary = np.empty_like(unary)
    packed_unary[rows] = unary
    log_z, packed_node, pair = chain.packed_forward_backward(
        packed_unary, lengths, transition, packed=True
    )
    np.testing.assert_array_equal(log_z, scaled[0])
    np.testing.assert_array_equal(packed_node[rows], scaled[1])
    np.testing.assert_array_equal(pair, scaled[2])


def _reference_viterbi(unary, transition):
    """Viterbi of one chain with a stored back-pointer table (the textbook recursion)."""
    n, k = unary.shape
    score, pointer = unary[0].copy(), np.zeros((n, k), dtype=int)
    for d in range(1, n):
        candidates = score[:, None] + transition
        pointer[d] = candidates.argmax(axis=0)
        score = candidates.max(axis=0) + unary[d]
    labels = np.zeros(n, dtype=int)
    labels[-1] = score.argmax()
    for d in range(n - 1, 0, -1):
        labels[d - 1] = pointer[d, labels[d]]
    return labels


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_states=st.integers(2, 4))
def test_packed_viterbi_matches_per_chain_reference(seed, n_states):
    """Chains of lengths 1 to 60 in any order (no padding): each chain's labels are those of
    the textbook Viterbi of that chain alone."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([1, 1, 2, 5, 17, 60], size=int(rng.integers(1, 12)))
    unary = rng.normal(size=(lengths.sum(), n_states)) * 2
    transition = rng.normal(size=(n_states, n_states))
    labels = viterbi(unary, lengths, transition)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        np.testing.assert_array_equal(labels[a:b], _reference_viterbi(unary[a:b], transition))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_packed_viterbi_breaks_ties_as_the_reference_among_empty_chains(seed):
    """Integer scores (many ties) and empty chains anywhere in the batch: each chain's labels
    are the textbook Viterbi's, ties going to the first best label as there."""
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(1, 5))
    lengths = rng.integers(0, 8, size=int(rng.integers(1, 10)))
    lengths[rng.integers(len(lengths))] = max(1, lengths.max())
    unary = rng.integers(-2, 3, size=(lengths.sum(), n_states)).astype(float)
    transition = rng.integers(-2, 3, size=(n_states, n_states)).astype(float)
    labels = viterbi(unary, lengths, transition)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        if b > a:
            np.testing.assert_array_equal(labels[a:b], _reference_viterbi(unary[a:b], transition))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_packed_viterbi_matches_brute_force(seed):
    """Tiny chains of lengths 1 to 6 with clamped-out labels (-inf): the best labelling."""
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(2, 4))
    lengths = rng.integers(1, 7, size=int(rng.integers(1, 5)))
    unary = rng.normal(size=(lengths.sum(), n_states))
    keep = rng.integers(n_states, size=len(unary))
    unary[
        (rng.random(len(unary)) < 0.2)[:, None] & (np.arange(n_states) != keep[:, None])
    ] = -np.inf
    transition = rng.normal(size=(n_states, n_states))
    labels = viterbi(unary, lengths, transition)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        edges = np.stack([np.arange(b - a - 1), np.arange(1, b - a)], axis=1)
        sample = Potentials(unary[a:b], edges, transition)
        _, scores = scores_of(sample)
        assert sample.score(labels[a:b])[0] == pytest.approx(scores.max())
