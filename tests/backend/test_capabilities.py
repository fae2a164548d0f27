"""Solver capabilities: what a solver declares, and the refusals before any solver call."""

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
)
from pmap_sklearn.solvers import (
    SOLVERS,
    BruteForceSolver,
    Capabilities,
    PairwiseKind,
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
        s, max_iter=2, n_sweeps=1, n_perturbations=2, random_state=0
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
    assert solvers_for(need) == [
        "message_passing",
        "trws",
        "mean_field",
        "local_search",
        "brute_force",
    ]
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
