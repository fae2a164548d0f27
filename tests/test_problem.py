"""The seam between estimators and structures: the validated problem a structure hands over."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_multilabel_classification

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    MultiLabelStructure,
    PerturbMAPCRF,
)
from pmap_sklearn.datasets import make_chain_data
from pmap_sklearn.structures import Problem


def _chains(n=6):
    data = make_chain_data(n_samples=n, n_states=3, random_state=0)
    return list(data.data), list(data.target)


def test_fit_problem_encodes_the_labels_and_fits_the_structure():
    X, y = _chains()
    words = np.array(["a", "b", "c"])
    structure = ChainStructure()
    problem = structure.fit_problem(X, [words[t] for t in y])
    assert isinstance(problem, Problem)
    assert problem.classes.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(problem.labels, np.concatenate(y))
    assert problem.batch.n_samples == len(X) and problem.batch.n_nodes == sum(map(len, y))
    assert structure.n_states_ == 3 and structure.n_features_in_ == X[0].shape[1]
    assert not problem.has_unknown


def test_fit_problem_marks_unknown_and_drops_ignored_nodes():
    X, y = _chains()
    y = [t.copy() for t in y]
    y[0][0], y[1][1] = -1, 9  # unknown, ignored
    problem = ChainStructure().fit_problem(X, y, unknown_label=-1, ignore_label=9)
    assert problem.has_unknown and (problem.labels == -1).sum() == 1
    assert 9 not in problem.classes
    assert problem.batch.n_nodes == sum(map(len, y)) - 1  # the ignored node is gone
    assert problem.batch.n_samples == len(X) + 1  # its chain cut in two


def test_fit_problem_with_classes_keeps_the_fitted_structure():
    X, y = _chains()
    structure = ChainStructure()
    first = structure.fit_problem(X, y)
    solver = structure.solver_
    again = structure.fit_problem(X[:2], y[:2], classes=first.classes)
    assert structure.solver_ is solver  # not fitted again
    with pytest.raises(ValueError, match="not one of the classes"):
        structure.fit_problem(X[:1], [np.full(len(y[0]), 7)], classes=first.classes)
    np.testing.assert_array_equal(again.labels, np.concatenate(y[:2]))


def test_fit_problem_refuses_what_cannot_be_learned():
    X, y = _chains()
    with pytest.raises(ValueError, match="at least two are needed"):
        ChainStructure().fit_problem(X, [np.zeros(len(t), int) for t in y])
    with pytest.raises(ValueError, match="both"):
        ChainStructure().fit_problem(X, y, unknown_label=-1, ignore_label=-1)
    images = [np.zeros((3, 3)), np.ones((3, 3))]
    labels = [np.zeros((3, 3), int), np.ones((3, 3), int)]
    labels[0][0, 0] = 5
    with pytest.raises(ValueError, match="cannot lose"):
        GridStructure().fit_problem(images, labels, ignore_label=5)


def test_problem_encodes_known_labels_and_held_out_labels():
    X, y = _chains()
    structure = ChainStructure()
    classes = structure.fit_problem(X, y).classes
    assert structure.problem(X).labels is None
    known = [np.array([None] * len(t), dtype=object) for t in y[:2]]
    known[0][0] = 2
    problem = structure.problem(X, index=slice(0, 2), known_labels=known, classes=classes)
    assert problem.batch.n_samples == 2
    assert problem.labels[0] == 2 and (problem.labels[1:] == -1).all()
    held = structure.problem(X, labels=y, classes=classes, markers=(-1,))
    np.testing.assert_array_equal(held.labels, np.concatenate(y))
    with pytest.raises(ValueError, match="known_labels has 1"):
        structure.problem(X[:2], known_labels=known[:1], classes=classes)
    with pytest.raises(ValueError, match="sample 0"):
        structure.problem(X[:1], known_labels=[[5] * len(y[0])], classes=classes)


def test_graph_problems_drop_ignored_nodes_with_their_edges():
    samples = [
        GraphSample(np.eye(3), [[0, 1], [1, 2]]),
        GraphSample(np.eye(3), [[0, 1], [0, 2]]),
    ]
    problem = GraphStructure().fit_problem(samples, [[0, 1, 9], [1, 0, 1]], ignore_label=9)
    assert problem.batch.n_nodes == 5 and len(problem.batch.edges) == 3


def test_the_multilabel_problem_checks_X_once(monkeypatch):
    """X is validated at the boundary and not again while the structure fits and stacks it."""
    from pmap_sklearn import _validation
    from pmap_sklearn.structures import multilabel

    X, Y = make_multilabel_classification(n_samples=30, n_classes=4, random_state=0)
    calls = []
    check = _validation.check_feature_matrix

    def counted(*args, **kwargs):
        calls.append(1)
        return check(*args, **kwargs)

    monkeypatch.setattr(multilabel, "check_feature_matrix", counted)
    problem = MultiLabelStructure("chain").fit_problem(X, Y)
    assert len(calls) == 1
    assert problem.batch.n_samples == 30 and problem.batch.n_nodes == 30 * 4
    np.testing.assert_array_equal(problem.labels, Y.ravel())
    for matrix in (X, sparse.csr_matrix(X)):
        assert MultiLabelStructure().fit_problem(matrix, Y).batch.n_nodes == 120


def test_estimators_fit_through_the_structure_seam(monkeypatch):
    """Every structure fit of an estimator goes through ``fit_problem``, once."""
    from pmap_sklearn.structures import BaseStructure

    X, y = _chains(8)
    calls = []
    original = BaseStructure.fit_problem

    def recorded(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BaseStructure, "fit_problem", recorded)
    PerturbMAPCRF(max_iter=2, random_state=0).fit(X, y)
    ChainCRF(max_iter=5).fit(X, y)
    assert calls == ["ChainStructure", "ChainStructure"]


def test_sample_kind_says_what_a_sample_is():
    assert ChainStructure().sample_kind == "chain"
    assert GridStructure().sample_kind == "grid"
    assert GraphStructure().sample_kind == "graph"
    assert MultiLabelStructure().sample_kind == "multilabel"
