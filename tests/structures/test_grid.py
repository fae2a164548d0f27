"""GridStructure: its edges and shapes, untied weights on one-pixel images."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import EpsilonCRF, GridStructure, PerturbMAPCRF

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("learner", [EpsilonCRF, PerturbMAPCRF])
def test_untied_weights_on_one_pixel_images(learner):
    """1×1 images have one weight set and no edge: einsum refused the 2-D weights."""
    images = [RNG.normal(size=(1, 1, 2)) + (i % 2) for i in range(8)]
    labels = [np.array([[i % 2]]) for i in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = learner(GridStructure(untied=True), max_iter=30).fit(images, labels)
    assert [p.shape for p in model.predict(images)] == [(1, 1)] * 8


def test_grid_edges_and_shapes():
    structure = GridStructure(connectivity=4).fit([np.zeros((3, 4))])
    batch = structure.prepare([np.zeros((3, 4))])
    assert len(batch.edges) == 3 * 3 + 2 * 4  # horizontal + vertical
    assert structure.size_ == 2 * 2 + 2  # (1 feature + bias) x 2 labels + 2 directions
    split = batch.split(np.arange(12))
    assert split[0].shape == (3, 4)
