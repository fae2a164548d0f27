"""Part & Clamp building blocks: feedback vertex sets and the clamped-forest bound (eq. 7)."""

import itertools

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from pmap_sklearn import grid_edges
from pmap_sklearn._backend.part_clamp import clamped_bound, feedback_vertex_set
from pmap_sklearn.solvers import BruteForceSolver, Potentials

from .helpers import _brute_log_z, _grid_graphs


def _is_forest(n_nodes, edges, keep):
    """No cycle among the kept nodes: every component has one edge fewer than nodes."""
    parent = list(range(n_nodes))

    def root(v):
        while parent[v] != v:
            v = parent[v]
        return v

    for i, j in edges:
        if keep[i] and keep[j]:
            a, b = root(i), root(j)
            if a == b:
                return False
            parent[a] = b
    return True


@pytest.mark.parametrize("order", ["bfs", "dfs"])
def test_the_feedback_vertex_set_leaves_a_forest(rng, order):
    for _ in range(20):
        n = int(rng.integers(5, 40))
        edges = np.array([[i, j] for i in range(n) for j in range(i + 1, n) if rng.random() < 0.15])
        edges = edges.reshape(-1, 2)
        fvs = feedback_vertex_set(n, edges, order)
        assert _is_forest(n, edges, ~fvs)
        # minimal in the sense of the greedy rule: putting any F node back closes a cycle
        for v in np.flatnonzero(fvs)[:3]:
            keep = ~fvs
            keep[v] = True
            assert not _is_forest(n, edges, keep)


def test_grid_fractions_match_the_papers_report():
    edges = grid_edges((64, 64))
    bfs = feedback_vertex_set(64 * 64, edges, "bfs").mean()
    dfs = feedback_vertex_set(64 * 64, edges, "dfs").mean()
    assert _is_forest(64 * 64, edges, ~feedback_vertex_set(64 * 64, edges, "bfs"))
    # about 1/3 with the union-find rule (0.325 breadth-first, 0.325 depth-first here; the rule
    # as printed in the paper gives about 0.49)
    assert 0.28 < bfs < 0.38 and 0.28 < dfs < 0.40


def _model(rng, shape=(3, 3), k=2):
    edges = grid_edges(shape)
    return Potentials(
        rng.normal(size=(shape[0] * shape[1], k)), edges, rng.normal(size=(len(edges), k, k))
    )


def test_bound_is_below_log_z_and_exact_with_every_state(rng):
    model = _model(rng, (3, 3), k=3)
    fvs = feedback_vertex_set(model.n_nodes, model.edges)
    exact = BruteForceSolver().marginals(model)
    every = np.array(list(itertools.product(range(3), repeat=int(fvs.sum()))))
    bound, statistics = clamped_bound(model, fvs, every)
    assert bound == pytest.approx(exact.log_partition[0], rel=1e-10)
    np.testing.assert_allclose(statistics.unary, exact.node, atol=1e-8)
    np.testing.assert_allclose(statistics.pairwise, exact.statistics.pairwise, atol=1e-8)
    previous = -np.inf
    for size in (1, 3, 9, len(every)):  # the bound rises as states are added
        value, _ = clamped_bound(model, fvs, every[:size])
        assert previous - 1e-12 <= value <= exact.log_partition[0] + 1e-10
        previous = value


def test_bound_gradient_is_the_mixture_of_forest_marginals(rng):
    model = _model(rng, (2, 3), k=2)
    fvs = feedback_vertex_set(model.n_nodes, model.edges)
    states = rng.integers(0, 2, size=(3, int(fvs.sum())))
    _, statistics = clamped_bound(model, fvs, states)

    def bound_of_unary(flat):
        changed = Potentials(flat.reshape(model.unary.shape), model.edges, model.pairwise)
        return clamped_bound(changed, fvs, states)[0]

    def bound_of_pairwise(flat):
        changed = Potentials(model.unary, model.edges, flat.reshape(model.pairwise.shape))
        return clamped_bound(changed, fvs, states)[0]

    np.testing.assert_allclose(
        statistics.unary.ravel(),
        approx_fprime(model.unary.ravel(), bound_of_unary, 1e-7),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        statistics.pairwise.ravel(),
        approx_fprime(model.pairwise.ravel(), bound_of_pairwise, 1e-7),
        atol=1e-5,
    )


def test_bad_input_gets_clear_errors(rng):
    with pytest.raises(ValueError, match="order"):
        feedback_vertex_set(3, [[0, 1]], "random")
    model = _model(rng)
    fvs = feedback_vertex_set(model.n_nodes, model.edges)
    with pytest.raises(ValueError, match="columns"):
        clamped_bound(model, fvs, np.zeros((1, int(fvs.sum()) + 1), dtype=int))


def _fitted_part_clamp(rng, n_rounds):
    """A small PartClampCRF fit, its prepared batch, labels and fresh state sets (the truth)."""
    from pmap_sklearn import PartClampCRF

    X, y = _grid_graphs(rng, n_samples=3, shape=(3, 4))
    model = PartClampCRF("graph", n_rounds=n_rounds, alpha=0.5, max_iter=5).fit(X, y)
    batch = model.structure_.prepare(X)
    labels = model.structure_.prepare_labels(batch, y)
    return model, batch, labels, model._decompose(batch, labels, rng)


def test_composite_likelihood_is_part_and_clamp_with_the_truth(rng):
    model, batch, labels, parts = _fitted_part_clamp(rng, n_rounds=1)
    structure = model.structure_
    w = model.coef_ + 0.3 * rng.normal(size=model.coef_.shape)
    value, gradient = model._objective(batch, labels, parts, w)
    expected = 0.0
    for i, sample in enumerate(structure.potentials(batch, w).split()):
        truth = labels[batch.nodes_of(i)]
        clamp = np.where(parts[i][0][0].fvs, truth, -1)
        # eq. 6: −log P(y_A | y_F) = log Z(y_F) − f(y)
        expected += _brute_log_z(sample, clamp) - sample.score(truth)[0]
    assert value == pytest.approx(expected / 3 + 0.25 * w @ w, rel=1e-10)
    numeric = approx_fprime(w, lambda v: model._objective(batch, labels, parts, v)[0], 1e-6)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)


def test_tightened_objective_gradient_and_bound(rng):
    model, batch, labels, parts = _fitted_part_clamp(rng, n_rounds=3)
    structure = model.structure_
    before = model._bound(batch, parts, model.coef_).total
    model._tighten(batch, parts, model.coef_)
    model._tighten(batch, parts, model.coef_ * 0.5)
    after = model._bound(batch, parts, model.coef_).total
    exact = sum(_brute_log_z(s) for s in structure.potentials(batch, model.coef_).split())
    assert before <= after + 1e-12 <= exact + 1e-9
    w = model.coef_ + 0.3 * rng.normal(size=model.coef_.shape)
    numeric = approx_fprime(w, lambda v: model._objective(batch, labels, parts, v)[0], 1e-6)
    np.testing.assert_allclose(model._objective(batch, labels, parts, w)[1], numeric, atol=1e-5)


def test_pseudo_likelihood_objective_and_gradient(rng):
    from pmap_sklearn import PseudoLikelihoodCRF

    X, y = _grid_graphs(rng, n_samples=3, shape=(3, 3))
    model = PseudoLikelihoodCRF("graph", alpha=0.5, max_iter=3).fit(X, y)
    structure = model.structure_
    batch = structure.prepare(X)
    labels = structure.prepare_labels(batch, y)
    w = model.coef_ + 0.3 * rng.normal(size=model.coef_.shape)
    value, gradient = model._objective(batch, labels, w)
    expected = 0.0
    for i, sample in enumerate(structure.potentials(batch, w).split()):
        truth = labels[batch.nodes_of(i)]
        for node in range(sample.n_nodes):  # −log P(y_i | y_rest) by brute force
            clamp = truth.copy()
            clamp[node] = -1
            expected += _brute_log_z(sample, clamp) - sample.score(truth)[0]
    assert value == pytest.approx(expected / 3 + 0.25 * w @ w, rel=1e-10)
    numeric = approx_fprime(w, lambda v: model._objective(batch, labels, v)[0], 1e-6)
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)


def test_the_papers_ordering_on_noisy_block_images():
    """P&C ≤ CD < CL < PL (Pletscher & Ong, Table 1) on a small noisy denoising problem, and
    the tightened learners beat thresholding the noisy pixels."""
    from pmap_sklearn import ContrastiveDivergenceCRF, PartClampCRF, PseudoLikelihoodCRF

    rng = np.random.default_rng(3)
    X, y = _grid_graphs(rng, n_samples=24, shape=(8, 8), noise=0.9)
    train, test = slice(0, 12), slice(12, 24)

    def error(predicted):
        return np.mean([np.mean(p != t) for p, t in zip(predicted, y[test], strict=True)])

    models = {
        "PL": PseudoLikelihoodCRF("graph", alpha=0.01),
        "CL": PartClampCRF("graph", n_rounds=1, alpha=0.01),
        "P&C": PartClampCRF("graph", n_rounds=3, alpha=0.01),
        "CD": ContrastiveDivergenceCRF("graph", max_iter=60, alpha=0.01, random_state=0),
    }
    errors = {
        name: error(model.fit(X[train], y[train]).predict(X[test]))
        for name, model in models.items()
    }
    threshold = error([x.node_features[:, 0] > 0.5 for x in X[test]])
    assert errors["P&C"] < errors["CL"] < errors["PL"]
    assert errors["CD"] < errors["CL"]
    assert max(errors["P&C"], errors["CD"]) < threshold
    assert len(models["P&C"].lower_bound_history_) == 3
    # at the fitted weights, every clamped state raises the bound (eq. 7, Fig. 2)
    by_states = models["P&C"].lower_bound_by_states_
    assert len(by_states) == 3 and np.all(np.diff(by_states) > 0)


def test_learners_reject_what_they_cannot_fit(rng):
    from pmap_sklearn import GraphStructure, PartClampCRF

    X, y = _grid_graphs(rng, n_samples=2, shape=(3, 3))
    with pytest.raises(ValueError, match="pairwise='potts'"):
        PartClampCRF(GraphStructure(pairwise="table")).fit(X, y)


def test_forest_sum_product_is_exact(rng):
    from pmap_sklearn._backend.forest import ForestPlan

    edges = np.array([[1, 0], [1, 2], [3, 1], [3, 4], [6, 5], [5, 7]])  # two trees, node 8 alone
    plan = ForestPlan(9, edges)
    unary, tables = rng.normal(size=(3, 9, 3)), rng.normal(size=(3, len(edges), 3, 3))
    out = plan.sum_product(unary, tables)
    for b in range(3):
        exact = BruteForceSolver().marginals(Potentials(unary[b], edges, tables[b]))
        assert out.log_partition[b] == pytest.approx(exact.log_partition[0], rel=1e-12)
        np.testing.assert_allclose(out.node[b], exact.node, atol=1e-12)
        np.testing.assert_allclose(out.edge[b], exact.statistics.pairwise, atol=1e-12)
    with pytest.raises(ValueError, match="cycle"):
        ForestPlan(3, [[0, 1], [1, 2], [2, 0]])


def test_the_online_schedule_keeps_its_budget_and_the_old_name_warns(rng):
    from pmap_sklearn import PartClampCRF

    X, y = _grid_graphs(rng, n_samples=3, shape=(4, 4))
    online = PartClampCRF("graph", schedule="online", budget=2, n_rounds=4, max_iter=5).fit(X, y)
    batch = PartClampCRF("graph", n_rounds=4, max_iter=5).fit(X, y)
    assert len(online.lower_bound_by_states_) <= 2 < len(batch.lower_bound_by_states_)
    with pytest.warns(FutureWarning, match="renamed schedule="):
        old = PartClampCRF("graph", solver="online", budget=2, n_rounds=4, max_iter=5).fit(X, y)
    np.testing.assert_array_equal(old.coef_, online.coef_)
