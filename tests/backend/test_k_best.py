"""k-best labellings: list Viterbi on chains and enumeration, against brute force."""

import itertools

import numpy as np
import pytest

from pmap_sklearn import Potentials
from pmap_sklearn._backend import (
    SOLVERS,
    BruteForceSolver,
    ChainLayout,
    ChainSolver,
    GraphCutSolver,
    GraphKind,
    PairwiseKind,
    Requirements,
    TransitionConstraints,
    brute,
    check_capabilities,
    solvers_for,
)
from pmap_sklearn._backend.k_best import list_viterbi

#: BIO over the labels B-X, I-X, O: I-X opens no chain and follows no O.
BIO = TransitionConstraints(
    transitions=np.array([[True, True, True], [True, True, True], [True, False, True]]),
    start=np.array([True, False, True]),
    end=np.array([True, True, True]),
)


def _chains(rng, lengths, n_states=3, constraints=None):
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    heads = np.concatenate(
        [np.arange(a, b - 1) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    )
    return Potentials(
        rng.normal(size=(offsets[-1], n_states)) * 1.5,
        np.stack([heads, heads + 1], axis=1).astype(np.intp),
        rng.normal(size=(n_states, n_states)),
        offsets,
        np.concatenate([[0], np.cumsum(np.maximum(np.asarray(lengths) - 1, 0))]),
        ChainLayout(constraints),
    )


def _enumerated(potentials, constraints=None, clamp=None):
    """Per chain, every allowed labelling with its log-probability, most probable first (a
    Python loop over the labellings: an independent reference)."""
    p, out = potentials, []
    for i in range(p.n_samples):
        nodes = np.arange(p.node_offsets[i], p.node_offsets[i + 1])
        rows = []
        for y in itertools.product(range(p.n_states), repeat=len(nodes)):
            y = np.array(y, dtype=np.intp)
            if clamp is not None and np.any((clamp[nodes] >= 0) & (clamp[nodes] != y)):
                continue
            bounds = np.array([0, len(y)])
            if constraints is not None and len(y) and not constraints.allows(y, bounds).all():
                continue
            score = p.unary[nodes, y].sum() + p.pairwise[y[:-1], y[1:]].sum()
            rows.append((score, y))
        scores = np.array([s for s, _ in rows])
        order = np.argsort(-scores, kind="stable")
        out.append(([rows[j][1] for j in order], scores[order] - np.logaddexp.reduce(scores)))
    return out


def _assert_k_best(potentials, k, reference, labels, log_p):
    p = potentials
    assert labels.shape == (k, p.n_nodes) and log_p.shape == (p.n_samples, k)
    for i, (expected, expected_log_p) in enumerate(reference):
        listed = min(k, len(expected))
        np.testing.assert_allclose(log_p[i, :listed], expected_log_p[:listed], atol=1e-9)
        assert np.all(np.isneginf(log_p[i, listed:]))
        nodes = slice(p.node_offsets[i], p.node_offsets[i + 1])
        for r in range(listed):
            np.testing.assert_array_equal(labels[r, nodes], expected[r])
        total = np.exp(log_p[i, :listed]).sum()
        assert total <= 1 + 1e-9
        if k >= len(expected):  # every labelling listed
            assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("k", [1, 2, 5, 30, 100])
@pytest.mark.parametrize("constrained", [False, True], ids=["free", "BIO"])
@pytest.mark.parametrize("clamped", [False, True], ids=["", "clamped"])
def test_list_viterbi_is_the_top_k_of_the_enumeration(k, constrained, clamped):
    """Chains of several lengths, longest not first: the k best labellings and their
    probabilities are those of the enumeration (continuous scores: no ties), fewer where a
    chain has fewer labellings, and then their probabilities sum to 1."""
    rng = np.random.default_rng(k + 10 * constrained + 100 * clamped)
    constraints = BIO if constrained else None
    p = _chains(rng, [3, 1, 4, 2, 4, 3], constraints=constraints)
    clamp = None
    if clamped:
        clamp = np.where(rng.random(p.n_nodes) < 0.3, rng.integers(0, 3, p.n_nodes), -1)
        if constrained:  # keep every chain feasible: no I-X clamped at a chain's start
            starts = p.node_offsets[:-1]
            clamp[starts] = np.where(clamp[starts] == 1, -1, clamp[starts])
    labels, log_p = ChainSolver().k_best(p, k, clamp)
    _assert_k_best(p, k, _enumerated(p, constraints, clamp), labels, log_p)


def test_the_first_labelling_is_the_map_and_the_others_follow_in_order():
    rng = np.random.default_rng(1)
    p = _chains(rng, rng.integers(1, 30, size=40), n_states=5)
    labels, log_p = ChainSolver().k_best(p, 8)
    np.testing.assert_array_equal(labels[0], ChainSolver().map(p))
    listed = np.isfinite(log_p)  # chains of one node have 5 labellings
    assert np.all(listed[:, :5]) and np.all(listed[p.lengths > 1])
    assert np.all(np.diff(np.where(listed, log_p, -1e300), axis=1) <= 1e-12)
    scores = np.stack([p.score(labels[r]) for r in range(8)], axis=1)
    log_z = ChainSolver().log_partition(p)
    np.testing.assert_allclose(log_p[listed], (scores - log_z[:, None])[listed], atol=1e-9)
    codes = labels.T  # the 8 labellings of a chain are distinct
    for i in range(p.n_samples):
        nodes = slice(p.node_offsets[i], p.node_offsets[i + 1])
        listed = np.isfinite(log_p[i]).sum()
        assert len(np.unique(codes[nodes, :listed].T, axis=0)) == listed


def test_list_viterbi_keeps_every_labelling_of_equal_score():
    """Ties: all K^D labellings of a chain with zero scores, each listed once."""
    labels, scores = list_viterbi(np.zeros((3, 2)), np.array([3]), np.zeros((2, 2)), 8)
    assert np.all(scores == 0)
    assert len({tuple(row) for row in labels}) == 8


def test_chains_without_nodes_have_one_empty_labelling():
    p = _chains(np.random.default_rng(0), [2, 0, 3])
    labels, log_p = ChainSolver().k_best(p, 3)
    assert log_p[1, 0] == 0.0 and np.all(np.isneginf(log_p[1, 1:]))
    _, expected = BruteForceSolver().k_best(p, 3)
    np.testing.assert_allclose(log_p, expected, atol=1e-9)


def test_a_chain_without_allowed_labelling_is_refused():
    p = _chains(np.random.default_rng(0), [2, 2], constraints=BIO)
    clamp = np.array([-1, -1, 1, -1])  # the second chain opens with I-X
    with pytest.raises(ValueError, match="sample 1: no labelling obeys"):
        ChainSolver().k_best(p, 2, clamp)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_k_is_a_count(k):
    p = _chains(np.random.default_rng(0), [2])
    with pytest.raises((ValueError, TypeError), match="k"):
        ChainSolver().k_best(p, k)


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
def test_enumeration_lists_the_k_best_of_any_graph(batched, monkeypatch):
    """brute_force's k best, both paths (one labelling table for samples of one graph; the
    stream over the labellings of each sample, in chunks), on a loopy graph, with clamps."""
    if not batched:
        monkeypatch.setattr(brute, "BATCHED_ENTRIES", 1)
        monkeypatch.setattr(brute, "CHUNK", 7)
    rng = np.random.default_rng(3)
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    p = Potentials(
        rng.normal(size=(8, 3)),
        np.concatenate([edges, edges + 4]),
        rng.normal(size=(10, 3, 3)),
        np.array([0, 4, 8]),
        np.array([0, 5, 10]),
    )
    clamp = np.array([-1, 2, -1, -1, -1, -1, 0, -1])
    labels, log_p = BruteForceSolver().k_best(p, 12, clamp)
    log_z = BruteForceSolver().log_partition(p, clamp)
    for i in range(2):
        nodes = slice(4 * i, 4 * i + 4)
        sample = p.take([i])
        scored = sorted(
            (float(sample.score(np.array(labelling))[0]), labelling)
            for labelling in itertools.product(range(3), repeat=4)
            if all(c < 0 or c == v for c, v in zip(clamp[nodes], labelling, strict=True))
        )[::-1]
        np.testing.assert_allclose(log_p[i], [s for s, _ in scored[:12]] - log_z[i], atol=1e-9)
        for r in range(12):
            assert tuple(labels[r, nodes]) == scored[r][1]


def test_solvers_without_the_capability_refuse_it_by_name():
    need = Requirements(3, PairwiseKind.SHARED, graph=GraphKind.CHAIN, k_best=True)
    assert set(solvers_for(need)) == {"viterbi", "brute_force"}
    assert SOLVERS["viterbi"].capabilities.k_best and not GraphCutSolver.capabilities.k_best
    p = Potentials(
        np.zeros((2, 2)), np.array([[0, 1]]), np.zeros(1), np.array([0, 2]), np.array([0, 1])
    )
    with pytest.raises(ValueError, match="graph_cut solver lists no k-best labellings"):
        GraphCutSolver().k_best(p, 2)
    with pytest.raises(ValueError, match="lists no k-best labellings. Use solver='viterbi'"):
        check_capabilities(GraphCutSolver(), need, "k-best")
