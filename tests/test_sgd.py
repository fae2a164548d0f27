import pytest

from pmap_sklearn import PerturbMAPCRF
from pmap_sklearn.datasets import make_chain_data


def test_optimal_schedule_needs_alpha():
    data = make_chain_data(n_samples=5, random_state=0)
    with pytest.raises(ValueError, match="alpha > 0"):
        PerturbMAPCRF(alpha=0.0, learning_rate="optimal").fit(data.data, data.target)
    auto = PerturbMAPCRF(alpha=0.0, max_iter=1).fit(data.data, data.target)  # "auto": AdaGrad
    assert auto._settings(auto.structure_.prepare(data.data)).learning_rate == "adagrad"
    PerturbMAPCRF(alpha=0.0, learning_rate="constant", eta0=0.01, max_iter=1).fit(
        data.data, data.target
    )
