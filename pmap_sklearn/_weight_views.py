"""The weights of a fitted model as sklearn-crfsuite and eli5 show them (published in
:mod:`pmap_sklearn.inspection`): the top node features of each label, the non-zero node and
transition weights. With hidden states each state has its own weights, and the views list
them per state."""

from __future__ import annotations

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted


def explain_weights(estimator, feature_names=None, top: int = 10) -> Bunch:
    """The top-weighted node features of each label and the transition table of a fitted model.

    What ``eli5.explain_weights`` shows for sklearn-crfsuite, for every learner on the shared
    structures: the weight of node feature f for label k is the score it adds to ``y_d = k``.

    Parameters
    ----------
    estimator : fitted estimator or Pipeline
        A fitted learner with ``coef_`` and ``structure_``, or a pipeline ending in one (its
        previous steps give the feature names, e.g.
        :class:`~pmap_sklearn.preprocessing.SequenceVectorizer`).
    feature_names : sequence of str, optional
        Names of the node features; by default from the pipeline, else ``x0, x1, ...``.
    top : int, default=10
        Features listed per label and per sign.

    Returns
    -------
    explanation : Bunch
        ``positive`` and ``negative``: dicts from each class to a list of ``(feature, weight)``
        pairs, the largest (most negative) weights first; ``transitions``: the (K, K) score of
        label ``a`` followed by ``b`` on chains (None on grids and graphs, whose pairwise
        weights are per edge feature: see ``structure_.unpack``); ``classes``; ``weights``: the
        (n_features, K) unary weights with the bias as the last row, named ``<bias>``. With
        :class:`~pmap_sklearn.MultiLabelStructure` the classes are the label columns
        ``0 .. L-1`` and the weights each label's logistic coefficients in the units of ``X``
        (``structure_.label_coefficients``), the intercept as ``<bias>``. ``states``: the
        name of each column of ``weights`` (and row and column of ``transitions``): the
        classes, or with hidden states the states (below).

    Notes
    -----
    With hidden states (``n_states_per_label``, ``n_hidden_states``) each state has its own
    weights, and every view lists them per state: state j of label ``c`` is named ``(c, j)``
    and state j of the hidden nodes ``("<hidden>", j)``; ``positive`` and ``negative`` are
    keyed by these names, ``weights`` has one column per state, ``transitions`` is the
    (n_states, n_states) table. The states' weights are not summed into one per label: a
    label scores the log-sum-exp of its states' scores, which no single weight gives.

    Examples
    --------
    >>> from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
    >>> from pmap_sklearn.inspection import explain_weights
    >>> from sklearn.pipeline import make_pipeline
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]] * 10
    >>> y = [["DET", "NOUN"]] * 20
    >>> model = make_pipeline(SequenceVectorizer(), PerturbMAPCRF(random_state=0)).fit(X, y)
    >>> explain_weights(model, top=2).positive["NOUN"][0][0] in ("w=dog", "w=cat")
    True
    """
    if isinstance(top, bool) or not isinstance(top, int | np.integer) or top < 1:
        raise ValueError(f"top must be an int >= 1, got {top!r}")
    model, structure, unary, names, labels = _unary_weights(estimator, feature_names)
    hidden = getattr(structure, "has_hidden_states_", False)
    states = np.asarray(labels)
    if hidden:  # each state's name, a tuple, as one entry
        states = np.empty(len(labels), dtype=object)
        states[:] = labels
    positive, negative = {}, {}
    for k, label in enumerate(labels):
        order = np.argsort(-unary[:, k], kind="stable")
        best, worst = order[:top], order[::-1][:top]
        positive[label] = [(names[i], float(unary[i, k])) for i in best if unary[i, k] > 0]
        negative[label] = [(names[i], float(unary[i, k])) for i in worst if unary[i, k] < 0]
    transitions = None
    if structure.sample_kind == "chain":
        transitions = structure.transition(model.coef_).copy()
    return Bunch(
        positive=positive,
        negative=negative,
        transitions=transitions,
        classes=np.asarray(model.classes_ if hidden else labels),
        weights=unary.copy(),
        states=states,
    )


def _unary_weights(estimator, feature_names):
    """The fitted model of ``estimator`` (a learner or a pipeline ending in one), its
    structure, its (n_features + bias, n_states) node weights, their names and the name of
    each column: the K labels, the states with hidden states (:func:`_state_names`), the
    columns of ``Y`` for a multi-label model (its weights each label's logistic
    coefficients)."""
    model = estimator
    if isinstance(estimator, Pipeline):
        model = estimator[-1]
        if feature_names is None and len(estimator) > 1:
            try:
                feature_names = estimator[:-1].get_feature_names_out()
            except AttributeError:  # a transformer without names: the default x0, x1, ...
                feature_names = None
    check_is_fitted(model, "coef_")
    structure = getattr(model, "structure_", None)
    if structure is None or structure.n_node_weight_sets_ != 1 or structure.unary != "linear":
        raise ValueError(
            f"{type(model).__name__} has no single table of node weights to explain (untied, "
            "scaled or non-linear unary terms)"
        )
    if structure.sample_kind == "multilabel":
        # one logistic model per label: its coefficients in the units of X, label l a column
        unary = structure.label_coefficients(model.coef_).T
        labels = list(range(structure.n_outputs_))
    else:
        unary, _ = structure.unpack(model.coef_)
        labels = _state_names(model)
    n_features = structure.n_features_in_
    if feature_names is None:
        feature_names = [f"x{i}" for i in range(n_features)]
    feature_names = [str(name) for name in feature_names]
    if len(feature_names) != n_features:
        raise ValueError(
            f"feature_names has {len(feature_names)} names, the model has {n_features} node "
            "features"
        )
    names = np.array(feature_names + ["<bias>"] * int(structure.bias), dtype=object)
    return model, structure, unary, names, labels


def state_features(estimator, feature_names=None) -> dict:
    """The non-zero node weights as sklearn-crfsuite's ``CRF.state_features_``: a dict
    ``{(feature, label): weight}``.

    The weight of a (feature, label) pair is the score it adds to a node of that label whose
    feature is 1. Features are named as the pipeline names them
    (:class:`~pmap_sklearn.preprocessing.SequenceVectorizer`: ``name=value`` where crfsuite
    writes ``name:value``); the structure's bias column is ``"<bias>"``. An L1 model
    (``l1_ratio > 0``) has few entries. A multi-label model gives ``{(feature, l): c}``, label
    column l's logistic coefficient in the units of ``X`` (as in :func:`explain_weights`).
    With hidden states each state has its own weights: the keys name the state,
    ``(feature, (label, j))`` for state j of a label and ``(feature, ("<hidden>", j))`` for
    the hidden nodes' states (:func:`explain_weights`, Notes).

    Parameters
    ----------
    estimator : fitted estimator or Pipeline
        As in :func:`explain_weights`.
    feature_names : sequence of str, optional
        As in :func:`explain_weights`.

    Returns
    -------
    dict
        ``{(feature, label): weight}`` over the non-zero weights, features in column order.

    Examples
    --------
    >>> from pmap_sklearn import ChainCRF, SequenceVectorizer
    >>> from pmap_sklearn.inspection import state_features, transition_features
    >>> from sklearn.pipeline import make_pipeline
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]] * 10
    >>> y = [["DET", "NOUN"]] * 20
    >>> model = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.1, l1_ratio=0.5)).fit(X, y)
    >>> weights = state_features(model)  # the bias column fell to zero under L1
    >>> sorted(weights)[:2], weights[("w=dog", "NOUN")] > 0
    ([('w=a', 'DET'), ('w=cat', 'NOUN')], True)
    >>> transition_features(model)[("DET", "NOUN")] > 0
    True
    """
    _, _, unary, names, labels = _unary_weights(estimator, feature_names)
    rows, columns = np.nonzero(unary)
    return {
        (names[i], labels[k]): float(unary[i, k])
        for i, k in zip(rows.tolist(), columns.tolist(), strict=True)
    }


def transition_features(estimator) -> dict:
    """The non-zero transition weights of a chain model as sklearn-crfsuite's
    ``CRF.transition_features_``: a dict ``{(label_from, label_to): weight}``, the score of
    ``label_from`` followed by ``label_to``.

    Parameters
    ----------
    estimator : fitted estimator or Pipeline
        A learner on chains (``ChainStructure``), or a pipeline ending in one.

    Returns
    -------
    dict
        ``{(label_from, label_to): weight}`` over the non-zero transitions; with hidden states
        ``{(state_from, state_to): weight}``, each state named ``(label, j)``
        (:func:`explain_weights`, Notes).

        A multi-label model (:class:`~pmap_sklearn.MultiLabelStructure`) gives the 2×2 table
        of each edge ``(l, m)`` of its label graph: ``{((l, a), (m, b)): weight}``, the score
        of label column l taking value a while label m takes value b
        (``structure_.tables(coef_)`` over ``structure_.edges_``); an empty dict with
        ``label_graph="independent"``.

    Raises
    ------
    ValueError
        For a model on grids or graphs (their pairwise weights are per edge feature, not label
        transitions).
    """
    model = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    check_is_fitted(model, "coef_")
    structure = getattr(model, "structure_", None)
    if getattr(structure, "sample_kind", None) == "multilabel":
        tables = structure.tables(model.coef_)
        edges, a, b = np.nonzero(tables)
        pairs = structure.edges_[edges].tolist()
        return {
            ((first, i), (second, j)): float(tables[e, i, j])
            for (first, second), e, i, j in zip(
                pairs, edges.tolist(), a.tolist(), b.tolist(), strict=True
            )
        }
    if getattr(structure, "sample_kind", None) != "chain":
        raise ValueError(
            f"{type(model).__name__} is not a chain model: its pairwise weights are per edge "
            "feature (see structure_.unpack), not label transitions"
        )
    table = structure.transition(model.coef_)
    labels = _state_names(model)
    rows, columns = np.nonzero(table)
    return {
        (labels[a], labels[b]): float(table[a, b])
        for a, b in zip(rows.tolist(), columns.tolist(), strict=True)
    }


def _state_names(model) -> list:
    """The name of each state of the model's potentials: its class without hidden states;
    with them ``(class, j)`` for the j-th state of a label and ``("<hidden>", j)`` for the
    j-th state of the hidden nodes."""
    structure, classes = model.structure_, model.classes_.tolist()
    if not getattr(structure, "has_hidden_states_", False):
        return classes
    names, seen = [], {}
    for label in structure.state_labels_.tolist():
        owner = classes[label] if label >= 0 else "<hidden>"
        names.append((owner, seen.setdefault(label, 0)))
        seen[label] += 1
    return names
