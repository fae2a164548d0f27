"""ChainCRF: exact likelihood, gradient and marginals against enumeration; learning."""

import numpy as np
import pytest

from pmap_sklearn import ChainCRF, GridStructure
from pmap_sklearn.datasets import make_chain_data, make_grid_data

from .helpers import _token_data


# ---- the elastic net: OWL-QN, crfsuite's c1 / c2 and its observed-states model ---------------
def test_crfsuite_views_read_the_weights_through_a_pipeline(rng):
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import SequenceVectorizer
    from pmap_sklearn.inspection import explain_weights, state_features, transition_features

    X, y = _token_data(rng)
    model = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.05, l1_ratio=0.5)).fit(X, y)
    crf = model[-1]
    weights = explain_weights(model).weights
    names = list(model[0].get_feature_names_out()) + ["<bias>"]
    states = state_features(model)
    assert len(states) == np.count_nonzero(weights) < weights.size
    for (name, label), weight in states.items():
        assert weight != 0
        assert weight == weights[names.index(name), list(crf.classes_).index(label)]
    table = crf.structure_.transition(crf.coef_)
    transitions = transition_features(model)
    assert len(transitions) == np.count_nonzero(table)
    for (a, b), weight in transitions.items():
        assert weight == table[list(crf.classes_).index(a), list(crf.classes_).index(b)]
    assert state_features(crf) == {
        (f"x{names.index(n)}" if n != "<bias>" else n, k): w for (n, k), w in states.items()
    }
    grid = make_grid_data(n_samples=4, shape=(3, 3), noise=0.8, random_state=0)
    fitted = ChainCRF(GridStructure(solver="brute_force"), max_iter=2).fit(grid.data, grid.target)
    with pytest.raises(ValueError, match="not a chain model"):
        transition_features(fitted)


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
