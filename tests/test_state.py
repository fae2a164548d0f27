"""pmap_sklearn._state: what a fit keeps, and how it pickles."""

import numpy as np

from pmap_sklearn.datasets import make_chain_data


def test_pickles_store_the_copies_of_the_weights_once():
    """An SGD learner keeps its weights several times (``coef_``, the average in its fit state,
    ``supervised_coef_``): a pickle stores them once, and loading restores every copy, so a warm
    start after loading continues exactly."""
    import pickle

    from pmap_sklearn import PerturbMAPCRF

    data = make_chain_data(n_samples=40, n_states=3, n_features=30, noise=1.0, random_state=0)
    model = PerturbMAPCRF(max_iter=3, warm_start=True, random_state=0).fit(data.data, data.target)
    np.testing.assert_array_equal(model._state.estimate, model.coef_)
    dense = pickle.dumps({key: value for key, value in vars(model).items()})
    saved = pickle.dumps(model)
    assert len(saved) < len(dense) - 1.8 * model.coef_.nbytes  # the average, supervised_coef_
    loaded = pickle.loads(saved)
    for name in ("coef", "average", "squares"):
        a, b = getattr(loaded._state, name), getattr(model._state, name)
        assert (a is None and b is None) or np.array_equal(a, b)
    np.testing.assert_array_equal(loaded.supervised_coef_, model.supervised_coef_)
    assert loaded.supervised_coef_ is not loaded.coef_
    loaded.fit(data.data, data.target)
    model.fit(data.data, data.target)
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
