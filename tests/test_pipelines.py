"""Every public function that takes a fitted estimator takes a Pipeline ending in it the same.

The inspection functions, the event probabilities and the scorers read a pipeline's last step
with ``X`` through the other steps: their results are those of the bare estimator given the
transformed samples, and what the bare estimator refuses the pipeline refuses in the same
words.
"""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

from pmap_sklearn import (
    ChainCRF,
    EpsilonCRF,
    PerturbMAPCRF,
    SequenceVectorizer,
    StructuredSVM,
    TwoStageCRF,
    inspection,
    metrics,
)
from pmap_sklearn.datasets import token_features

from .helpers import _corpus

#: Parts of speech as chunks: DET outside, a NOUN or a VERB a one-token entity.
CHUNKS = {"DET": "O", "NOUN": "B-NP", "VERB": "B-VP"}

#: Functions of (estimator, X, y, feature names) from the public API that take a fitted
#: estimator (the names: those a pipeline's steps give, for the bare estimator).
CALLS = {
    "explain_weights": lambda e, X, y, names=None: inspection.explain_weights(e, names, top=3),
    "state_features": lambda e, X, y, names=None: inspection.state_features(e, names),
    "transition_features": lambda e, X, y: inspection.transition_features(e),
    "entity_probabilities": lambda e, X, y: inspection.entity_probabilities(
        e, X, random_state=0, n_draws=200
    ),
    "sequence_probabilities": lambda e, X, y: inspection.sequence_probabilities(
        e, X, y, random_state=0, n_draws=200
    ),
    "edge_marginals": lambda e, X, y: inspection.edge_marginals(e, X, random_state=0),
    "region_probabilities": lambda e, X, y: inspection.region_probabilities(
        e, X, random_state=0, n_draws=200
    ),
    "marginal_entropy": lambda e, X, y: inspection.marginal_entropy(e, X),
    "k_best_labellings": lambda e, X, y: inspection.k_best_labellings(e, X, k=3),
    **{
        name: (lambda scorer: lambda e, X, y: scorer(e, X, y))(getattr(metrics, name))
        for name in metrics.__all__
        if name.endswith("_scorer") and name != "example_f1_scorer"  # multi-label rows only
    },
}


def _learners():
    return [
        ChainCRF(max_iter=20),
        PerturbMAPCRF(max_iter=3, random_state=0),
        EpsilonCRF(max_iter=2),  # marginals, no draws
        StructuredSVM(max_iter=3, random_state=0),  # no marginals
        TwoStageCRF(
            crf=PerturbMAPCRF(max_iter=2, random_state=0),
            cv=2,
            unary="matrix",
            pairwise_scale=1.0,
            random_state=0,
        ),
    ]


@pytest.fixture(scope="module")
def corpus():
    sentences, tags = _corpus(30)
    return sentences, [[CHUNKS[t] for t in sentence] for sentence in tags]


def _outcome(call, estimator, X, y, **names):
    """``("value", result)`` or ``("error", type and message)`` of one call."""
    try:
        return "value", call(estimator, X, y, **names)
    except (ValueError, TypeError) as error:
        return "error", (type(error), str(error))


def _assert_same(a, b, where=""):
    """Equal results, whatever their container (Bunch, dict, lists of arrays, floats)."""
    if isinstance(a, dict):
        assert type(a) is type(b) and a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple) or (isinstance(a, np.ndarray) and a.dtype == object):
        assert len(a) == len(b), where
        for k, (p, q) in enumerate(zip(a, b, strict=True)):
            _assert_same(p, q, f"{where}[{k}]")
    elif isinstance(a, str) or a is None or np.asarray(a).dtype.kind in "USO":
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


@pytest.mark.parametrize("learner", _learners(), ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_pipeline_is_its_last_step_on_the_transformed_samples(corpus, learner, name):
    sentences, chunks = corpus
    pipeline = make_pipeline(SequenceVectorizer(token_features), learner).fit(sentences, chunks)
    X, y = sentences[:4], chunks[:4]
    names = pipeline[:-1].get_feature_names_out()
    call, given = CALLS[name], {}
    if name in ("explain_weights", "state_features"):
        given = {"names": names}
    bare = _outcome(call, pipeline[-1], pipeline[:-1].transform(X), y, **given)
    piped = _outcome(call, pipeline, X, y)
    assert piped[0] == bare[0], (piped, bare)
    if bare[0] == "error":  # refused in the same words, naming the learner or the argument
        assert piped[1] == bare[1]
        assert type(learner).__name__ in bare[1][1] or "method" in bare[1][1]
    else:
        _assert_same(piped[1], bare[1], name)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_unfitted_pipeline_is_refused_as_unfitted(corpus, name):
    sentences, chunks = corpus
    pipeline = make_pipeline(SequenceVectorizer(token_features), ChainCRF())
    with pytest.raises(NotFittedError):
        CALLS[name](pipeline, sentences[:2], chunks[:2])
