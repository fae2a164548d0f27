"""Hostile but legal input: batches of edgeless samples (1×1 images, graphs without edges),
alone or mixed with others, in every learner; learners that cannot learn say so."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import (
    ContrastiveDivergenceCRF,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PartClampCRF,
    PerturbMAPCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
)

LEARNERS = {
    "EpsilonCRF": lambda s: EpsilonCRF(s, max_iter=20),
    "PerturbMAPCRF": lambda s: PerturbMAPCRF(s, max_iter=2, random_state=0),
    "MarginalPerturbMAPCRF": lambda s: MarginalPerturbMAPCRF(s, max_iter=2, random_state=0),
    "StructuredSVM": lambda s: StructuredSVM(s, max_iter=2, random_state=0),
    "PartClampCRF": lambda s: PartClampCRF(s, n_rounds=1, random_state=0),
    "PseudoLikelihoodCRF": lambda s: PseudoLikelihoodCRF(s),
    "ContrastiveDivergenceCRF": lambda s: ContrastiveDivergenceCRF(s, max_iter=2, random_state=0),
}


def _batches(rng):
    """(structure, X, y): only 1×1 images; 1×1 images mixed with a 3×3 one (K = 3); edgeless
    graphs with K = 3 tables."""
    tiny = [rng.normal(size=(1, 1, 2)) for _ in range(4)]
    mixed = [tiny[0], rng.normal(size=(3, 3, 2)), tiny[1]]
    graphs = [
        GraphSample(rng.normal(size=(3, 2)), np.zeros((0, 2), int), np.zeros((0, 1)))
        for _ in range(3)
    ]
    return {
        "1x1 images": (GridStructure(), tiny, [np.array([[i % 2]]) for i in range(4)]),
        "1x1 and 3x3, K = 3": (
            GridStructure(),
            mixed,
            [np.array([[0]]), rng.integers(3, size=(3, 3)), np.array([[2]])],
        ),
        "1x1 images, tables": (
            GridStructure(pairwise="table", solver="message_passing"),
            tiny,
            [np.array([[i % 2]]) for i in range(4)],
        ),
        "edgeless graphs, K = 3 tables": (
            GraphStructure(pairwise="table", solver="message_passing"),
            graphs,
            [rng.integers(3, size=3) for _ in range(3)],
        ),
    }


@pytest.mark.parametrize(
    "batch",
    ["1x1 images", "1x1 and 3x3, K = 3", "1x1 images, tables", "edgeless graphs, K = 3 tables"],
)
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_every_learner_fits_and_predicts_edgeless_samples(learner, batch):
    structure, X, y = _batches(np.random.default_rng(0))[batch]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LEARNERS[learner](structure).fit(X, y)
    predictions = model.predict(X)
    assert [np.shape(p) for p in predictions] == [np.shape(t) for t in y]
    k = len(model.classes_)
    if hasattr(model, "predict_marginals") and learner != "StructuredSVM":
        marginals = model.predict_marginals(X)
        for m in marginals:
            np.testing.assert_allclose(np.sum(m, axis=-1), 1.0, atol=1e-6)
            assert m.shape[-1] == k
