"""ContrastiveDivergenceCRF: a diverging step is named."""

import pytest

from pmap_sklearn import ContrastiveDivergenceCRF
from pmap_sklearn._validation import NonFiniteError
from pmap_sklearn.datasets import make_grid_data


def test_a_diverging_step_names_the_step_size():
    data = make_grid_data(n_samples=4, shape=(5, 5), random_state=0)
    with pytest.raises(NonFiniteError, match="eta0"):
        ContrastiveDivergenceCRF("grid", eta0=1e300, max_iter=3).fit(data.data, data.target)
