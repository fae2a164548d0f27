import pytest

from pmap_sklearn import PerturbMAPCRF
from pmap_sklearn._sgd import learning_rate
from pmap_sklearn.datasets import make_chain_data


def test_schedules():
    assert learning_rate("constant", 10, 0.1, 0.5, 0.5) == 0.5
    assert learning_rate("optimal", 0, 0.1, 0.5, 0.5) == pytest.approx(0.5)  # starts at eta0
    assert learning_rate("optimal", 100, 0.1, 0.5, 0.5) == pytest.approx(1 / (0.1 * (100 + 20)))
    assert learning_rate("invscaling", 3, 0.1, 0.5, 0.5) == pytest.approx(0.25)


def test_auto_step_size_adapts_to_feature_scale():
    data = make_chain_data(n_samples=80, n_states=3, n_features=4, random_state=0)
    fit = PerturbMAPCRF(max_iter=1, random_state=0).fit(data.data, data.target)
    scaled = PerturbMAPCRF(max_iter=1, random_state=0).fit([10 * x for x in data.data], data.target)
    assert scaled.eta0_ < fit.eta0_ / 5  # 100x the curvature wants a much smaller step
    fixed = PerturbMAPCRF(max_iter=1, eta0=0.05, random_state=0).fit(data.data, data.target)
    assert fixed.eta0_ == 0.05


def test_optimal_schedule_needs_alpha():
    data = make_chain_data(n_samples=5, random_state=0)
    with pytest.raises(ValueError, match="alpha > 0"):
        PerturbMAPCRF(alpha=0.0).fit(data.data, data.target)
    PerturbMAPCRF(alpha=0.0, learning_rate="constant", eta0=0.01, max_iter=1).fit(
        data.data, data.target
    )
