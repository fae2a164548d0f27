"""The step-size search (eta0="auto")."""

import numpy as np

from pmap_sklearn import PerturbMAPCRF
from pmap_sklearn._optim.step_search import calibrate_eta0
from pmap_sklearn.datasets import make_chain_data


def test_auto_step_size_adapts_to_feature_scale():
    data = make_chain_data(n_samples=80, n_states=3, n_features=4, random_state=0)
    fit = PerturbMAPCRF(max_iter=1, random_state=0).fit(data.data, data.target)
    scaled = PerturbMAPCRF(max_iter=1, random_state=0).fit([10 * x for x in data.data], data.target)
    assert scaled.eta0_ < fit.eta0_ / 5  # 100x the curvature wants a much smaller step
    fixed = PerturbMAPCRF(max_iter=1, eta0=0.05, random_state=0).fit(data.data, data.target)
    assert fixed.eta0_ == 0.05


def test_step_size_search_can_judge_on_samples_it_did_not_pass_over():
    """``held_out``: each candidate's pass runs over one part of the subsample and is judged
    on the other (disjoint, split in proportion); without it the pass's samples judge."""
    from pmap_sklearn._optim.step_search import calibrate_eta0

    target = np.random.default_rng(1).normal(size=(30, 2))
    made = []

    def make_oracle(order):
        order = np.asarray(order)
        made.append(order)
        calls = {"step": 0, "judge": 0}
        made.append(calls)

        def oracle(part, w, rng):  # ℓ_n(w) = −‖w − t_n‖² / 2: the best w is the mean
            rows = target[order[part]]
            calls["judge" if part == slice(None) else "step"] += 1
            return (rows - w).sum(axis=0), -0.5 * float(((rows - w) ** 2).sum())

        return oracle

    def search(**kwargs):
        made.clear()
        eta = calibrate_eta0(
            make_oracle, np.zeros(2), 30, rng=np.random.default_rng(0), alpha=0.0,
            batch_size=4, project=lambda w: w, average=False, **kwargs
        )  # fmt: skip
        return eta, made[0::2], made[1::2]

    eta, (passed, judged), (pass_calls, judge_calls) = search(n_calibration=20, held_out=10)
    assert len(passed) == 20 and len(judged) == 10 and not set(passed) & set(judged)
    assert pass_calls["judge"] == 0 and judge_calls["step"] == 0 and judge_calls["judge"] >= 2
    # fewer samples than asked: split in the same proportion
    _, (passed, judged), _ = search(n_calibration=40, held_out=20)
    assert (len(passed), len(judged)) == (20, 10)
    # without held-out samples one oracle both steps and judges, on the pass's samples
    eta_own, orders, (calls,) = search(n_calibration=20)
    assert len(orders) == 1 and calls["step"] and calls["judge"]
    assert 0.0 < eta <= 1.0 and 0.0 < eta_own <= 1.0  # a step of the mean's size, not beyond


def test_step_search_does_not_shrink_to_nothing_where_no_step_improves():
    """At the optimum, noisy gradients make every pass worse and smaller steps worse by less:
    the search must not follow them down to a step that does not learn."""

    def noisy_quadratic(scale):
        """ℓ(w) = −‖w‖² / 2 per sample, its gradient plus ``scale`` times N(0, 1) noise."""

        def make_oracle(order):
            def oracle(part, w, rng):
                batch = len(range(len(order))[part])
                noise = scale * rng.normal(size=(batch, len(w))).sum(axis=0)
                return noise - batch * w, -0.5 * batch * float(w @ w)

            return oracle

        return make_oracle

    eta = calibrate_eta0(
        noisy_quadratic(1.0),
        np.zeros(3),
        16,
        rng=np.random.default_rng(0),
        alpha=0.0,
        batch_size=4,
        project=lambda w: w,
        average=False,
    )
    assert eta == 0.1  # the search's start: no step improves on staying
    # where a small enough step improves, the search still finds it
    eta = calibrate_eta0(
        noisy_quadratic(0.0),
        np.ones(3),
        16,
        rng=np.random.default_rng(0),
        alpha=0.0,
        batch_size=4,
        project=lambda w: w,
        average=False,
    )
    assert eta > 0.1


def _counted_quadratic(targets, curvature, sizes, work):
    """``ℓ_n(w) = −(c/2) ‖w − t_n‖²`` plus Gumbel-free noise from the oracle's generator, its
    calls' work (the ``sizes`` of the samples they are handed) added to ``work``."""

    def make_oracle(order):
        order = np.asarray(order)

        def oracle(part, w, rng):
            rows = order[part]
            work.append(float(sizes[rows].sum()))
            residual = targets[rows] - w
            noise = rng.normal(size=residual.shape)
            gradient = curvature * (residual + noise).sum(axis=0)
            return gradient, -0.5 * curvature * float((residual**2).sum())

        return oracle

    return make_oracle


def _quadratic_search(curvature, n_samples=400, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    targets = rng.normal(1.0, 1.0, size=(n_samples, 3))
    sizes = rng.integers(1, 6, size=n_samples).astype(float)
    work = []
    eta = calibrate_eta0(
        _counted_quadratic(targets, curvature, sizes, work),
        np.zeros(3),
        n_samples,
        rng=np.random.default_rng(seed),
        alpha=1e-4,
        batch_size=8,
        project=lambda w: w,
        **kwargs,
    )
    return eta, work, sizes


def test_step_size_search_spends_at_most_its_budget():
    """Every sample of every pass and evaluation counts, by its size: under a budget the
    subsample shrinks and the search stops before overrunning it, while without one it passes
    over up to ``n_calibration`` samples per candidate."""
    _, unbounded, sizes = _quadratic_search(50.0)
    budget = sizes.sum()  # one epoch
    assert sum(unbounded) > 3 * budget  # 256 samples a pass, judged on them, 4+ candidates
    eta, work, _ = _quadratic_search(50.0, budget=budget, sizes=sizes)
    assert sum(work) <= budget
    assert max(work) < max(unbounded)  # a judgement over fewer samples than 256
    # a start 2^20 below the step: the gallop would need ~10 candidates; the budget stops it at
    # the best step evaluated so far
    far, work, _ = _quadratic_search(50.0, start=1e-8, budget=budget, sizes=sizes)
    assert sum(work) <= budget
    assert 1e-8 < far < eta
    # the budget is at least the evaluation at w and six candidates on one mini-batch
    _, work, _ = _quadratic_search(50.0, budget=1.0, sizes=sizes)
    assert 0 < sum(work) <= 13 * sizes.max() * 8


def test_budgeted_step_size_search_finds_the_step_of_the_full_search():
    """Started from Polyak's step, the search on a subsample within one epoch of work (passes
    of at least 200 units of work, as the estimators ask for 3,000 nodes) picks a step within a
    factor 2 of the full search from 0.1 (256 samples a pass), at curvatures from 1 to 10⁴
    (steps from ~1 to ~1e-4); the same seed gives the same step."""
    for curvature in (1.0, 50.0, 1e4):
        full, _, sizes = _quadratic_search(curvature, start=0.1)
        bounded, work, _ = _quadratic_search(
            curvature, budget=sizes.sum(), sizes=sizes, min_work=200.0
        )
        # within the budget, or the evaluation at w (work[0]) and six candidates above it
        assert sum(work) <= max(sizes.sum(), 13 * work[0])
        assert 0.5 <= bounded / full <= 2.0, (curvature, bounded, full)
        again, _, _ = _quadratic_search(curvature, budget=sizes.sum(), sizes=sizes, min_work=200.0)
        assert again == bounded


def test_held_out_search_keeps_its_pass_or_returns_its_start():
    """With held-out judging the judged samples shrink under a budget and the pass keeps its
    length; where three full passes do not fit, the start comes back without a pass."""
    eta, work, sizes = _quadratic_search(
        50.0, n_calibration=64, held_out=256, start=0.4, budget=30.0, n_samples=400
    )
    assert eta == 0.4 and work == []
    kwargs = dict(n_calibration=64, held_out=256, start=0.4, n_samples=400)
    _, work, sizes = _quadratic_search(50.0, **kwargs)
    judged_work = max(work)  # one call over every judged sample
    budget = 2.5 * judged_work  # three passes of 64 samples fit with half the judged samples
    _, bounded, _ = _quadratic_search(50.0, budget=budget, sizes=sizes, **kwargs)
    assert sum(bounded) <= budget
    assert max(bounded) < judged_work  # fewer judged samples
    assert min(bounded) > 0
