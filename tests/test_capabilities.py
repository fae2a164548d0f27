"""Solver capabilities: every estimator × structure × solver × labels combination either works
or is refused before the first solver call, with an error naming solvers that can do it."""

import itertools

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    ContrastiveDivergenceCRF,
    EpsilonCRF,
    GridStructure,
    MarginalPerturbMAPCRF,
    PartClampCRF,
    PerturbMAPCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
    grid_edges,
)
from pmap_sklearn.solvers import (
    SOLVERS,
    BruteForceSolver,
    Capabilities,
    ForestSolver,
    GibbsSampler,
    MessagePassingSolver,
    PairwiseKind,
    Potentials,
    Requirements,
    Solver,
    solvers_for,
)

ESTIMATORS = {
    "PerturbMAPCRF": lambda s: PerturbMAPCRF(s, max_iter=1, n_perturbations=2, random_state=0),
    "MarginalPerturbMAPCRF": lambda s: MarginalPerturbMAPCRF(
        s, max_iter=1, n_perturbations=2, random_state=0
    ),
    "StructuredSVM": lambda s: StructuredSVM(s, max_iter=1, random_state=0),
    "ChainCRF": lambda s: ChainCRF(s, max_iter=2),
    "EpsilonCRF": lambda s: EpsilonCRF(s, max_iter=2),
    "PseudoLikelihoodCRF": lambda s: PseudoLikelihoodCRF(s, max_iter=2, n_perturbations=2),
    "PartClampCRF": lambda s: PartClampCRF(s, max_iter=2, n_rounds=1, n_perturbations=2),
    "ContrastiveDivergenceCRF": lambda s: ContrastiveDivergenceCRF(
        s, max_iter=2, n_gibbs=1, n_perturbations=2, random_state=0
    ),
}
STRUCTURES = {
    "chain": lambda k, solver: ChainStructure(n_states=k, solver=solver),
    "grid-potts": lambda k, solver: GridStructure(n_states=k, solver=solver),
    "grid-table": lambda k, solver: GridStructure(n_states=k, pairwise="table", solver=solver),
}


def _spy(solver_class, calls):
    """An instance of ``solver_class`` that records every query (same name, capabilities)."""

    class Spy(solver_class):
        capabilities = solver_class.capabilities

        def map(self, *args, **kwargs):
            calls.append("map")
            return super().map(*args, **kwargs)

        def clamped_maps(self, *args, **kwargs):
            calls.append("clamped_maps")
            return super().clamped_maps(*args, **kwargs)

        def marginals(self, *args, **kwargs):
            calls.append("marginals")
            return super().marginals(*args, **kwargs)

    return Spy()


def _data(structure: str, k: int, unknown: bool):
    rng = np.random.default_rng(0)
    if structure == "chain":
        X = [rng.normal(size=(4, 2)) for _ in range(3)]
        y = [np.arange(4) % k for _ in range(3)]
    else:
        X = [rng.normal(size=(3, 3, 1)) for _ in range(3)]
        y = [np.arange(9).reshape(3, 3) % k for _ in range(3)]
    if unknown:
        y[1] = y[1].copy()
        y[1].flat[0] = -1
    return X, y


CASES = list(itertools.product(ESTIMATORS, STRUCTURES, sorted(SOLVERS), (2, 3), (False, True)))


@pytest.mark.parametrize(("estimator", "structure", "solver", "k", "unknown"), CASES)
def test_a_mismatch_is_refused_before_any_solver_call(estimator, structure, solver, k, unknown):
    calls = []
    model = ESTIMATORS[estimator](STRUCTURES[structure](k, _spy(SOLVERS[solver], calls)))
    X, y = _data(structure.split("-")[0], k, unknown)
    try:
        model.fit(X, y)
    except ValueError as error:
        # A refusal comes before any work and names what is missing and who can do it.
        assert calls == [], f"refused after {calls[:3]}: {error}"
        message = str(error)
        assert f"cannot use the {solver} solver" in message or "keeps attractive" in message
        if "cannot use the" in message:
            assert "solver=" in message or "no registered solver" in message
        return
    model.predict(X)  # an accepted combination also predicts


def test_the_refusal_names_a_solver_that_can_do_it():
    X, y = _data("grid", 3, unknown=False)
    with pytest.raises(ValueError) as error:
        structure = GridStructure(n_states=3, pairwise="table", solver="graph_cut")
        MarginalPerturbMAPCRF(structure).fit(X, y)
    message = str(error.value)
    assert "handles at most 2 labels, got K = 3" in message
    assert "solver='message_passing'" in message and "solver='brute_force'" in message
    assert "alpha_expansion" not in message  # K = 3 tables need not be metric
    with pytest.raises(ValueError, match="computes no marginals.*solver='brute_force'"):
        ChainCRF(GridStructure(solver="graph_cut")).fit(*_data("grid", 2, unknown=False))


def test_the_issue_example_now_works_with_message_passing_clamps():
    X, y = _data("grid", 3, unknown=True)
    structure = GridStructure(n_states=3, pairwise="table", solver="message_passing")
    model = MarginalPerturbMAPCRF(structure, max_iter=2, n_perturbations=2, random_state=0)
    assert model.fit(X, y).score(X, [np.where(t < 0, 0, t) for t in y]) > 0


def test_requirements_and_solvers_for():
    need = Requirements(3, PairwiseKind.TABLES)
    assert solvers_for(need) == ["message_passing", "trws", "mean_field", "brute_force"]
    chains = Requirements(3, PairwiseKind.SHARED, graph=ChainStructure.graph_kind)
    assert solvers_for(chains)[0] == "viterbi"
    assert "ishikawa" not in solvers_for(chains)  # a structure's tables need not be convex


def test_a_user_solver_inherits_capabilities_and_reports_marginals():
    class MapOnly(Solver):
        name = "map_only"

        def map(self, potentials, clamp=None, n_jobs=None):
            return np.zeros(potentials.n_nodes, dtype=np.intp)

    class WithMarginals(MapOnly):
        def marginals(self, potentials, clamp=None):
            return BruteForceSolver().marginals(potentials, clamp)

    assert MapOnly.capabilities == Capabilities(marginals=False)
    assert WithMarginals.capabilities.marginals and WithMarginals().has_marginals
    with pytest.raises(ValueError, match="computes no marginals"):
        ChainCRF(ChainStructure(solver=MapOnly())).fit(*_data("chain", 2, unknown=False))


def _loopy(rng, k=3, side=3):
    edges = grid_edges((side, side))
    unary = rng.normal(size=(side * side, k)) * 2
    return Potentials(unary, edges, rng.normal(size=(len(edges), k, k)))


def test_message_passing_clamps_are_exact_on_trees():
    rng = np.random.default_rng(1)
    edges = np.array([[0, 1], [1, 2], [1, 3], [3, 4], [3, 5]])
    p = Potentials(rng.normal(size=(6, 3)) * 2, edges, rng.normal(size=(5, 3, 3)) * 2)
    clamp = np.array([-1, 2, -1, 0, -1, -1])
    approx, exact = MessagePassingSolver(), BruteForceSolver()
    got, want = approx.marginals(p, clamp), exact.marginals(p, clamp)
    np.testing.assert_allclose(got.node, want.node, atol=1e-9)
    np.testing.assert_allclose(got.log_partition, want.log_partition, rtol=1e-9)
    assert np.array_equal(approx.map(p, clamp), exact.map(p, clamp))
    assert not np.allclose(got.node, approx.marginals(p).node)  # the clamps changed something


def test_message_passing_honours_clamps_on_loopy_graphs():
    rng = np.random.default_rng(2)
    p = _loopy(rng)
    clamp = np.full(p.n_nodes, -1)
    clamp[[0, 4, 8]] = [2, 1, 0]
    labels = MessagePassingSolver().map(p, clamp)
    assert np.array_equal(labels[[0, 4, 8]], [2, 1, 0])
    node = MessagePassingSolver().marginals(p, clamp).node
    np.testing.assert_allclose(node[[0, 4, 8]], np.eye(3)[[2, 1, 0]], atol=1e-12)


def test_gibbs_sampling_reaches_the_exact_marginals():
    rng = np.random.default_rng(3)
    edges = grid_edges((2, 3))
    p = Potentials(rng.normal(size=(6, 3)), edges, rng.normal(size=(len(edges), 3, 3)))
    session = GibbsSampler(n_sweeps=1).session(p)
    sample, counts = np.zeros(6, dtype=np.intp), np.zeros((6, 3))
    for step in range(6000):
        sample = session.sample(p, sample, rng)
        if step >= 200:
            counts[np.arange(6), sample] += 1
    exact = BruteForceSolver().marginals(p).node
    np.testing.assert_allclose(counts / counts.sum(axis=1, keepdims=True), exact, atol=0.03)
    with pytest.raises(ValueError, match="6 nodes"):
        session.sample(Potentials(np.zeros((4, 3))), np.zeros(4, dtype=np.intp), rng)


def test_a_belief_session_continues_from_its_messages():
    rng = np.random.default_rng(4)
    p = _loopy(rng)
    solver = MessagePassingSolver(counting_numbers="convex")
    session = solver.beliefs(p, 1.0)
    session.run(max_sweeps=500, tol=1e-12)
    np.testing.assert_allclose(session.node_beliefs(), solver.marginals(p).node, atol=1e-8)
    changed = _loopy(np.random.default_rng(5))
    session.set_scores(changed.unary, changed.edge_tables())
    session.run(max_sweeps=500, tol=1e-12)  # warm from the old messages, same fixed point
    np.testing.assert_allclose(session.node_beliefs(), solver.marginals(changed).node, atol=1e-8)
    assert SOLVERS["message_passing"].capabilities.beliefs
    assert not SOLVERS["graph_cut"].capabilities.beliefs


def test_the_forest_solver_is_exact_once_a_feedback_vertex_set_is_clamped():
    from pmap_sklearn.solvers import feedback_vertex_set

    rng = np.random.default_rng(6)
    tree, grid = np.array([[0, 1], [1, 2], [1, 3], [3, 4]]), grid_edges((3, 3))
    edges = np.concatenate([tree, grid + 5, np.zeros((0, 2), dtype=int)])
    p = Potentials(
        rng.normal(size=(16, 3)),
        edges,
        rng.normal(size=(len(edges), 3, 3)),
        node_offsets=[0, 5, 14, 16],  # a tree, a grid, two nodes without an edge
        edge_offsets=[0, 4, len(edges), len(edges)],
    )
    fvs = feedback_vertex_set(9, grid)
    clamp = np.full(16, -1)
    clamp[5 + np.flatnonzero(fvs)] = rng.integers(0, 3, int(fvs.sum()))
    clamp[[1, 15]] = [0, 2]
    got, want = ForestSolver().marginals(p, clamp), BruteForceSolver().marginals(p, clamp)
    np.testing.assert_allclose(got.node, want.node, atol=1e-12)
    np.testing.assert_allclose(got.statistics.pairwise, want.statistics.pairwise, atol=1e-12)
    np.testing.assert_allclose(got.log_partition, want.log_partition, rtol=1e-12)
    assert np.array_equal(ForestSolver().map(p, clamp), BruteForceSolver().map(p, clamp))
    with pytest.raises(ValueError, match="sample 1 has a cycle"):
        ForestSolver().map(p)  # the grid without its clamps


def test_a_solver_written_for_the_old_protocol_is_translated_with_a_warning():
    with pytest.warns(FutureWarning, match="declare capabilities"):

        class OldCut(Solver):
            name = "old_cut"
            max_states = 2
            needs_attractive = True

            def map(self, potentials, clamp=None, n_jobs=None):
                return np.zeros(potentials.n_nodes, dtype=np.intp)

    solver = OldCut()
    assert solver.max_states == 2 and solver.needs_attractive
    assert OldCut.capabilities.max_states == 2
    with pytest.raises(ValueError, match="handles at most 2 labels"):
        PerturbMAPCRF(GridStructure(solver=solver)).fit(*_data("grid", 3, unknown=False))


def test_marginal_map_on_a_tree_is_the_map_or_the_marginal_argmax_at_its_extremes():
    rng = np.random.default_rng(7)
    edges = np.array([[0, 1], [1, 2], [1, 3], [3, 4], [3, 5]])
    p = Potentials(rng.normal(size=(6, 3)) * 2, edges, rng.normal(size=(5, 3, 3)) * 2)
    solver, exact = MessagePassingSolver(), BruteForceSolver()
    start = np.zeros(6, dtype=np.intp)
    every = solver.marginal_map(p, np.ones(6, dtype=bool), start, n_iter=200)
    assert np.array_equal(every, exact.map(p))
    none = solver.marginal_map(p, np.zeros(6, dtype=bool), start, n_iter=200)
    assert np.array_equal(none, exact.marginals(p).node.argmax(axis=1))
    assert SOLVERS["message_passing"].capabilities.marginal_map
    assert not SOLVERS["graph_cut"].capabilities.marginal_map
