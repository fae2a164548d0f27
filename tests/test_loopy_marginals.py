"""Marginals of loopy models: the exact transfer-matrix reference against enumeration, and the
Gibbs chains started from perturbed MAPs (``method="gibbs"``) against exact marginals, on known
labels, across workers, and against plain perturb-and-MAP on a coupled grid."""

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    GridStructure,
    PerturbMAPCRF,
    PseudoLikelihoodCRF,
)
from pmap_sklearn._backend import (
    AlphaExpansionSolver,
    BruteForceSolver,
    GraphCutSolver,
)
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.perturbation import perturb_and_map, perturbed_maps

from .helpers import _potts_grid, grid_exact_marginals


def _hand_set_grid_model(k, coupling, n_samples=2, shape=(3, 3), seed=0):
    """A PerturbMAPCRF on small grids with its weights then set by hand: unary weights N(0, 1),
    every pairwise weight ``-coupling`` (a Gibbs model the user chose)."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(*shape, 2)) for _ in range(n_samples)]
    y = [rng.integers(k, size=shape) for _ in range(n_samples)]
    y[0].flat[:k] = np.arange(k)  # every label seen
    model = PerturbMAPCRF(GridStructure(), max_iter=1, random_state=0).fit(X, y)
    n_unary = model.structure_.n_unary_weights_
    model.coef_[:n_unary] = rng.normal(size=n_unary)
    model.coef_[n_unary:] = -coupling
    return model, X, y


@pytest.mark.parametrize("k", [2, 3])
def test_transfer_matrix_matches_enumeration_on_a_3x3_grid(k):
    rng = np.random.default_rng(k)
    for coupling in (0.3, 2.5):
        model = _potts_grid(rng, (3, 3), k, coupling)
        exact = BruteForceSolver().marginals(model)
        marginals, log_z = grid_exact_marginals(model, (3, 3))
        np.testing.assert_allclose(marginals, exact.node, atol=1e-12)
        np.testing.assert_allclose(log_z, exact.log_partition[0], rtol=1e-12)


@pytest.mark.parametrize("k, solver", [(2, GraphCutSolver()), (3, AlphaExpansionSolver())])
def test_gibbs_from_perturbed_maps_reaches_the_exact_marginals(k, solver):
    rng = np.random.default_rng(10 + k)
    model = _potts_grid(rng, (3, 3), k, 1.0)
    exact = BruteForceSolver().marginals(model).node
    n_chains = 2000 if k == 2 else 800  # α-expansion's MAPs cost more
    gibbs = perturb_and_map(solver, model, n_chains, 0, maxima=False, n_sweeps=10).marginals
    np.testing.assert_allclose(gibbs.sum(axis=1), 1.0)
    # the chains' states are correlated across sweeps: one chain per draw bounds the error
    assert np.abs(gibbs - exact).max() < 4 * np.sqrt(0.25 / n_chains)


def test_gibbs_corrects_perturb_and_map_on_a_coupled_grid():
    """First-order perturbations bias the marginals of a coupled loopy model; Gibbs chains
    started from the same perturbed MAPs move them towards the exact ones."""
    rng = np.random.default_rng(5)
    shape = (6, 6)
    model = _potts_grid(rng, shape, 2, 1.0)
    exact, _ = grid_exact_marginals(model, shape)
    solver = GraphCutSolver()
    perturbed = perturb_and_map(solver, model, 400, 0, maxima=False).marginals
    gibbs = perturb_and_map(solver, model, 400, 0, maxima=False, n_sweeps=10).marginals
    assert np.abs(gibbs - exact).mean() < 0.5 * np.abs(perturbed - exact).mean()


def test_gibbs_on_chains_agrees_with_forward_backward():
    """Where the Gibbs marginals are known exactly the chains reach them, and the perturbed
    MAPs they start from do not (the bias of first-order perturbations)."""
    data = make_chain_data(n_samples=20, n_states=3, n_features=4, random_state=0)
    model = PerturbMAPCRF(random_state=0, max_iter=5).fit(data.data, data.target)
    X = data.data[:3]
    exact = np.concatenate(model.predict_marginals(X, method="exact"))
    gibbs = np.concatenate(model.predict_marginals(X, method="gibbs", n_perturbations=2000))
    perturbed = np.concatenate(model.predict_marginals(X, n_perturbations=2000, method="perturb"))
    assert np.abs(gibbs - exact).max() < 4 * np.sqrt(0.25 / 2000)
    assert np.abs(perturbed - exact).max() > 2 * np.abs(gibbs - exact).max()


@pytest.mark.parametrize("k", [2, 3])
def test_gibbs_marginals_of_an_estimator_are_conditional_on_known_labels(k):
    model, X, y = _hand_set_grid_model(k, coupling=1.0)
    known = [np.full((3, 3), None, dtype=object) for _ in X]
    known[0][1, 1] = model.classes_[k - 1]
    known[1][0, :2] = model.classes_[0]
    n_chains = 2000 if k == 2 else 800
    marginals = model.predict_marginals(
        X, method="gibbs", n_perturbations=n_chains, known_labels=known
    )
    clamp = np.full(18, -1)
    clamp[4], clamp[[9, 10]] = k - 1, 0
    exact = BruteForceSolver().marginals(model.potentials(X), clamp).node
    got = np.concatenate([m.reshape(-1, k) for m in marginals])
    assert np.abs(got - exact).max() < 4 * np.sqrt(0.25 / n_chains)
    np.testing.assert_array_equal(got[[4, 9, 10]], np.eye(k)[[k - 1, 0, 0]])
    draws = model.sample(X, n_draws=50, known_labels=known, method="gibbs")
    assert (draws[0][:, 1, 1] == model.classes_[k - 1]).all()
    assert (draws[1][:, 0, :2] == model.classes_[0]).all()


def test_gibbs_draws_follow_the_exact_marginals():
    model, X, _ = _hand_set_grid_model(2, coupling=1.0, n_samples=1)
    draws = model.sample(X, n_draws=3000, method="gibbs", random_state=1)[0]
    exact = BruteForceSolver().marginals(model.potentials(X)).node[:, 1]
    frequency = (draws == model.classes_[1]).mean(axis=0).ravel()
    assert np.abs(frequency - exact).max() < 4 * np.sqrt(0.25 / 3000)


def test_gibbs_results_do_not_depend_on_n_jobs_nor_on_chunks(always_parallel):
    model, X, y = _hand_set_grid_model(3, coupling=1.0, n_samples=5, shape=(4, 5))
    serial = model.predict_marginals(X, method="gibbs", n_perturbations=30)
    draws = model.sample(X, n_draws=7, method="gibbs", random_state=2)
    model.set_params(n_jobs=2)
    parallel = model.predict_marginals(X, method="gibbs", n_perturbations=30)
    for one, two in zip(serial, parallel, strict=True):
        np.testing.assert_allclose(one, two, atol=1e-12)
    again = model.sample(X, n_draws=7, method="gibbs", random_state=2)
    for one, two in zip(draws, again, strict=True):
        np.testing.assert_array_equal(one, two)
    potentials = model.potentials(X)
    solver = model.structure_.solver_
    whole = perturbed_maps(solver, potentials, 30, 4, n_sweeps=4)
    small = perturbed_maps(solver, potentials, 30, 4, n_sweeps=4, max_nodes=25)
    np.testing.assert_array_equal(whole, small)  # chunks of one sample, blocks of one chain


def test_the_method_is_offered_where_the_weights_define_a_gibbs_model():
    model, X, y = _hand_set_grid_model(2, coupling=0.5)
    surrogate = PseudoLikelihoodCRF("grid", max_iter=5).fit(X, y)
    assert surrogate.predict_marginals(X, method="gibbs")[0].shape == (3, 3, 2)
    chains = make_chain_data(n_samples=5, n_states=3, n_features=4, random_state=0)
    crf = ChainCRF(max_iter=5).fit(chains.data, chains.target)
    with pytest.raises(ValueError, match=r"method must be one of \['exact'\]"):
        crf.predict_marginals(chains.data[:1], method="gibbs")
