"""Every solver (plain, perturbed, clamped MAP; marginals) equals brute-force enumeration on tiny
models, and brute force equals an independent loop."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pmap_sklearn import MarginalPerturbMAPCRF, PerturbMAPCRF, Potentials
from pmap_sklearn._backend import (
    BruteForceSolver,
    ChainSolver,
    GraphCutSolver,
    Solver,
    chain,
    check_solver,
)
from pmap_sklearn._backend.potentials import Statistics, add_sample_differences, incidence
from pmap_sklearn._utils import ranges
from pmap_sklearn.datasets import make_grid_data
from pmap_sklearn.perturbation import gumbel
from pmap_sklearn.samples import GraphSample
from pmap_sklearn.structures import ChainStructure, GraphStructure, GridStructure

from .helpers import (
    SETTINGS,
    _assert_optimal,
    _free_or_clamped,
    exact_distribution,
    loop_scores,
    scores_of,
    statistics_of,
)


def _random_graph(rng, n_nodes):
    pairs = np.array([(i, j) for i in range(n_nodes) for j in range(i + 1, n_nodes)])
    edges = pairs.reshape(-1, 2)[rng.random(len(pairs)) < 0.5]
    return GraphSample(rng.normal(size=(n_nodes, 2)), edges, rng.random((len(edges), 2)))


def _model(rng, case):
    """(potentials with a Gumbel perturbation, solver) of a few tiny samples for a case."""
    if case.startswith("chain"):
        n_states = 2 if case == "chain-cut" else int(rng.integers(2, 5))
        X = [rng.normal(size=(d, 2)) for d in rng.integers(1, 6, size=3)]
        solver = "graph_cut" if case == "chain-cut" else "viterbi"
        structure = ChainStructure(n_states=n_states, solver=solver)
    elif case.startswith("grid"):
        X = [rng.normal(size=(h, w, 2)) for h, w in rng.integers(1, 4, size=(3, 2))]
        connectivity, contrast = int(rng.choice([4, 8])), bool(rng.integers(2))
        if case == "grid-brute":
            structure = GridStructure(connectivity, contrast, n_states=3, solver="brute_force")
            X = [x[:2, :2] for x in X]
        else:
            structure = GridStructure(connectivity, contrast)
    else:
        X = [_random_graph(rng, n) for n in rng.integers(1, 8, size=3)]
        structure = GraphStructure()
    structure.fit(X, [np.zeros(1, int)])
    batch = structure.prepare(X)
    w = structure.project(2 * rng.normal(size=structure.size_))
    perturbation = gumbel(rng, (batch.n_nodes, structure.n_states_))
    return structure.potentials(batch, w, perturbation), structure.solver_


CASES = ["chain", "chain-cut", "grid", "graph", "grid-brute"]


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


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), case=st.sampled_from(CASES), clamped=st.booleans())
def test_map_matches_brute_force(seed, case, clamped):
    rng = np.random.default_rng(seed)
    potentials, solver = _model(rng, case)
    clamp = _free_or_clamped(rng, potentials.n_nodes, potentials.n_states) if clamped else None
    labels = solver.map(potentials, clamp)
    for i, sample in enumerate(potentials.split()):
        nodes = slice(potentials.node_offsets[i], potentials.node_offsets[i + 1])
        _assert_optimal(sample, labels[nodes], None if clamp is None else clamp[nodes])


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    case=st.sampled_from(CASES),
    dynamic=st.booleans(),
    skip=st.booleans(),
)
def test_clamped_maps_match_brute_force(seed, case, dynamic, skip):
    """y*_A and Σ_q c_q [φ(y*_B,q) − φ(y*_A)] of dynamic cuts / max-product tracing / solves
    from scratch, with and without Gumbel reduction, equal brute force."""
    rng = np.random.default_rng(seed)
    p, solver = _model(rng, case)
    nodes = np.sort(rng.choice(p.n_nodes, size=min(p.n_nodes, 7), replace=False))
    labels = rng.integers(0, p.n_states, size=len(nodes))
    weights = rng.random(len(nodes))
    solution = solver.clamped_maps(p, nodes, labels, weights, skip_agreeing=skip, dynamic=dynamic)
    np.testing.assert_array_equal(solution.map_labels, solver.map(p))
    agreeing = solution.map_labels[nodes] == labels
    np.testing.assert_array_equal(solution.solved, ~agreeing if skip else np.ones(len(nodes), bool))
    expected = Statistics.zeros(p)
    for node, label, weight in zip(nodes, labels, weights, strict=True):
        i = p.node_sample[node]
        sample, offset = p.sample(i), p.node_offsets[i]
        labellings, scores = scores_of(sample)
        best = labellings[
            np.argmax(np.where(labellings[:, node - offset] == label, scores, -np.inf))
        ]
        y_b, y_a = solution.map_labels.copy(), solution.map_labels
        y_b[offset : offset + sample.n_nodes] = best
        difference = statistics_of(p, y_b)
        reference = statistics_of(p, y_a)
        expected.unary += weight * (difference.unary - reference.unary)
        expected.pairwise += weight * (difference.pairwise - reference.pairwise)
    np.testing.assert_allclose(solution.statistics.unary, expected.unary, atol=1e-9)
    np.testing.assert_allclose(solution.statistics.pairwise, expected.pairwise, atol=1e-9)
    z = rng.normal(size=p.unary.shape)
    np.testing.assert_allclose(solution.perturbation_gap(z), np.sum(expected.unary * z))


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


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_grid_fast_path_agrees_with_general_graph_cut(seed):
    """The add_grid_edges fast path and the add_edges path solve the same problem."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(12, 9, 3))]
    grid = GridStructure(connectivity=8, contrast=True).fit(X, [np.zeros(1, int)])
    batch = grid.prepare(X)
    w = grid.project(rng.normal(size=grid.size_))
    p = grid.potentials(batch, w, gumbel(rng, (batch.n_nodes, 2)))
    general = replace(p, layout=None)
    solver = GraphCutSolver()
    np.testing.assert_array_equal(solver.map(p), solver.map(general))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), shared=st.booleans())
def test_binary_tables_reduce_to_potts_form(seed, shared):
    """Any binary table = unary terms + Potts weight + constant; graph cuts solve attractive
    tables exactly."""
    rng = np.random.default_rng(seed)
    n = 5
    edges = np.array([(i, j) for i, j in itertools.combinations(range(n), 2)])
    shape = (2, 2) if shared else (len(edges), 2, 2)
    tables = rng.normal(size=shape)
    p = Potentials(rng.normal(size=(n, 2)), edges, tables)
    potts, constant = p.as_potts()
    labellings, scores = scores_of(p)
    np.testing.assert_allclose(scores_of(potts)[1] + constant[0], scores, atol=1e-12)
    coupling = tables[..., 0, 0] + tables[..., 1, 1] - tables[..., 0, 1] - tables[..., 1, 0]
    np.testing.assert_allclose(potts.pairwise, np.broadcast_to(-coupling / 2, len(edges)))
    attractive = replace(p, pairwise=tables + np.abs(coupling)[..., None, None] * np.eye(2))
    _assert_optimal(attractive, GraphCutSolver().map(attractive))


def test_solvers_refuse_what_they_cannot_solve():
    three = Potentials(np.zeros((2, 3)), [[0, 1]], [-1.0])
    with pytest.raises(ValueError, match="graph cuts need K = 2 labels"):
        GraphCutSolver().map(three)
    with pytest.raises(ValueError, match="attractive pairwise terms.*edge 0 of sample 0"):
        GraphCutSolver().map(Potentials(np.zeros((2, 2)), [[0, 1]], [0.5]))
    with pytest.raises(ValueError, match="chain-shaped"):
        ChainSolver().map(Potentials(np.zeros((3, 2)), [[0, 2]], np.zeros((2, 2))))
    with pytest.raises(ValueError, match="shared"):
        ChainSolver().map(Potentials(np.zeros((2, 2)), [[0, 1]], [-1.0]))
    with pytest.raises(ValueError, match="unary scores of sample 1 are not finite"):
        GraphCutSolver().map(
            Potentials(np.array([[0, 1], [0, 1], [0, np.inf]]), node_offsets=[0, 2, 3])
        )
    with pytest.raises(ValueError, match="increasing order"):
        ChainSolver().clamped_maps(
            Potentials(np.zeros((3, 2)), [[0, 1], [1, 2]], np.zeros((2, 2))), [2, 0], [0, 0], [1, 1]
        )
    with pytest.raises(ValueError, match="computes no marginals"):
        GraphCutSolver().marginals(Potentials(np.zeros((2, 2))))
    with pytest.raises(ValueError, match="too many to enumerate"):
        BruteForceSolver(max_labellings=100).map(Potentials(np.zeros((10, 2))))
    with pytest.raises(ValueError, match="solver must be one of"):
        check_solver("qpbo")
    with pytest.raises(ValueError, match="pairwise must have shape"):
        Potentials(np.zeros((3, 2)), [[0, 1]], np.zeros(3))
    with pytest.raises(ValueError, match="edge 0 .0, 2. of sample 0 leaves the sample.s nodes"):
        Potentials(np.zeros((3, 2)), [[0, 2]], [-1.0], [0, 2, 3], [0, 1, 1]).check()


class LoopSolver(Solver):
    """A new solver in one class: exact MAP by a Python loop over the labellings of each sample
    (``clamped_maps`` comes from the base class)."""

    name = "loop"

    def map(self, potentials, clamp=None, n_jobs=None):
        out = []
        for i, sample in enumerate(potentials.split()):
            labellings, scores = loop_scores(sample)
            if clamp is not None:
                given = clamp[potentials.node_offsets[i] : potentials.node_offsets[i + 1]]
                fixed = given >= 0
                scores = np.where((labellings[:, fixed] == given[fixed]).all(1), scores, -np.inf)
            out.append(labellings[np.argmax(scores)])
        return np.concatenate(out)


@pytest.mark.parametrize("estimator", [PerturbMAPCRF, MarginalPerturbMAPCRF])
def test_a_new_solver_is_one_class(estimator):
    """A solver written as one class plugs into a structure through solver= and trains the
    learners: it gives the same model as the built-in brute-force solver (both exact, same
    perturbations)."""
    data = make_grid_data(n_samples=6, shape=(3, 3), noise=1.0, random_state=0)
    fits = [
        estimator(GridStructure(solver=solver), max_iter=3, batch_size=2, random_state=0).fit(
            data.data, data.target
        )
        for solver in (LoopSolver(), "brute_force")
    ]
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, atol=1e-12)
    assert fits[0].structure_.solver_.name == "loop"
    assert fits[0].score(data.data, data.target) > 0.5
    probabilities = [
        f.predict_marginals(data.data[:2], method="perturb", n_perturbations=20) for f in fits
    ]
    np.testing.assert_allclose(probabilities[0][1], probabilities[1][1])


def test_exact_distribution_of_a_chain_sums_to_one(rng):
    p = Potentials(rng.normal(size=(4, 3)), [[0, 1], [1, 2], [2, 3]], rng.normal(size=(3, 3)))
    labellings, prob = exact_distribution(p)
    assert labellings.shape == (81, 4)
    np.testing.assert_allclose(prob.sum(), 1.0)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["potts", "shared", "tables"]))
def test_dense_and_sparse_clamped_statistics_agree(seed, kind):
    """The two ways of folding a block of clamped labellings into statistics (dense products
    for small graphs, visits of the changed nodes for large ones) give the same statistics."""
    rng = np.random.default_rng(seed)
    n, n_queries = int(rng.integers(2, 30)), int(rng.integers(1, 6))
    edges = np.array([(i, j) for i, j in itertools.combinations(range(n), 2)])
    edges = edges[rng.random(len(edges)) < 0.3].reshape(-1, 2)
    shape = {"potts": (len(edges),), "shared": (2, 2)}.get(kind, (len(edges), 2, 2))
    p = Potentials(rng.normal(size=(n, 2)), edges, rng.normal(size=shape))
    map_labels = rng.integers(0, 2, n)
    labellings = np.where(rng.random((n_queries, n)) < 0.2, 1 - map_labels, map_labels)
    weights = rng.random(n_queries)
    dense, sparse = Statistics.zeros(p), Statistics.zeros(p)
    add_sample_differences(dense, p, map_labels, labellings, weights, None)
    add_sample_differences(sparse, p, map_labels, labellings, weights, incidence(edges, n))
    np.testing.assert_allclose(sparse.unary, dense.unary, atol=1e-12)
    np.testing.assert_allclose(sparse.pairwise, dense.pairwise, atol=1e-12)
