"""PartClampCRF: its objective, bound and learning."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from ..helpers import _brute_log_z, _grid_graphs


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


def test_the_online_schedule_keeps_its_budget_and_the_old_name_is_gone(rng):
    from pmap_sklearn import PartClampCRF

    X, y = _grid_graphs(rng, n_samples=3, shape=(4, 4))
    online = PartClampCRF("graph", schedule="online", budget=2, n_rounds=4, max_iter=5).fit(X, y)
    batch = PartClampCRF("graph", n_rounds=4, max_iter=5).fit(X, y)
    assert len(online.lower_bound_by_states_) <= 2 < len(batch.lower_bound_by_states_)
    with pytest.raises(TypeError, match="solver"):  # the old name of schedule, removed
        PartClampCRF("graph", solver="online")
