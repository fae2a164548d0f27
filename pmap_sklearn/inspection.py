"""Model inspection: which features push each label, and the label-transition scores."""

from __future__ import annotations

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

from .structures import ChainStructure

__all__ = ["explain_weights", "state_features", "transition_features"]


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
        (n_features, K) unary weights with the bias as the last row, named ``<bias>``.

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
    model, structure, unary, names = _unary_weights(estimator, feature_names)
    positive, negative = {}, {}
    for k, label in enumerate(model.classes_):
        order = np.argsort(-unary[:, k], kind="stable")
        best, worst = order[:top], order[::-1][:top]
        positive[label] = [(names[i], float(unary[i, k])) for i in best if unary[i, k] > 0]
        negative[label] = [(names[i], float(unary[i, k])) for i in worst if unary[i, k] < 0]
    transitions = None
    if isinstance(structure, ChainStructure):
        transitions = structure.transition(model.coef_).copy()
    return Bunch(
        positive=positive,
        negative=negative,
        transitions=transitions,
        classes=model.classes_,
        weights=unary.copy(),
    )


def _unary_weights(estimator, feature_names):
    """The fitted model of ``estimator`` (a learner or a pipeline ending in one), its
    structure, its (n_features + bias, K) node weights and their names."""
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
    unary, _ = structure.unpack(model.coef_)
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
    return model, structure, unary, names


def state_features(estimator, feature_names=None) -> dict:
    """The non-zero node weights as sklearn-crfsuite's ``CRF.state_features_``: a dict
    ``{(feature, label): weight}``.

    The weight of a (feature, label) pair is the score it adds to a node of that label whose
    feature is 1. Features are named as the pipeline names them
    (:class:`~pmap_sklearn.preprocessing.SequenceVectorizer`: ``name=value`` where crfsuite
    writes ``name:value``); the structure's bias column is ``"<bias>"``. An L1 model
    (``l1_ratio > 0``) has few entries.

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
    ([('w=a', 'DET'), ('w=a', 'NOUN')], True)
    >>> transition_features(model)[("DET", "NOUN")] > 0
    True
    """
    model, _, unary, names = _unary_weights(estimator, feature_names)
    rows, columns = np.nonzero(unary)
    labels = model.classes_.tolist()
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
        ``{(label_from, label_to): weight}`` over the non-zero transitions.
    """
    model = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    check_is_fitted(model, "coef_")
    structure = getattr(model, "structure_", None)
    if not isinstance(structure, ChainStructure):
        raise ValueError(
            f"{type(model).__name__} is not a chain model: its pairwise weights are per edge "
            "feature (see structure_.unpack), not label transitions"
        )
    table = structure.transition(model.coef_)
    labels = model.classes_.tolist()
    rows, columns = np.nonzero(table)
    return {
        (labels[a], labels[b]): float(table[a, b])
        for a, b in zip(rows.tolist(), columns.tolist(), strict=True)
    }


def entity_probabilities(estimator, X, *, outside="O", n_draws=1000, random_state=None) -> list:
    """The predicted entities of each sequence with the probability the model gives them.

    Each entity of the predicted (MAP) tags, read as ``conlleval`` reads them
    (:func:`~pmap_sklearn.metrics.entity_spans`), gets the probability that a labelling drawn
    from the model holds it with these tags: the span's tags as predicted, a tag before it
    that does not continue it into a longer entity (for a span that opens with ``I`` or
    ``E``) and a tag after it that does not extend it. On chains, where the estimator's model
    is the exact one (:class:`~pmap_sklearn.ChainCRF`, and
    :class:`~pmap_sklearn.PerturbMAPCRF` with its default marginals), the probability is exact,
    by forward-backward constrained to the span; elsewhere it is the frequency of that event
    over ``n_draws`` draws of :meth:`sample`. The usual substitute, the product or mean of the
    span's token marginals, ignores how the tags depend on each other.

    Parameters
    ----------
    estimator : fitted estimator or Pipeline
        A sequence tagger with marginals, or a pipeline ending in one (the steps before it
        transform ``X``).
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    outside : str, default="O"
        The tag outside every entity.
    n_draws : int, default=1000
        Draws per sequence where the probability is a frequency.
    random_state : int, Generator or None, optional
        The draws' randomness (see :meth:`sample`).

    Returns
    -------
    list of list of (type, start, end, probability)
        Per sequence, its predicted entities (``end`` one past the last token).

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from pmap_sklearn import ChainCRF, SequenceVectorizer
    >>> from pmap_sklearn.inspection import entity_probabilities
    >>> X = [[{"w": "Ann"}, {"w": "Lee"}, {"w": "ran"}], [{"w": "Bo"}, {"w": "sat"}]] * 10
    >>> y = [["B-PER", "I-PER", "O"], ["B-PER", "O"]] * 10
    >>> model = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.1)).fit(X, y)
    >>> [(kind, start, end) for kind, start, end, _ in entity_probabilities(model, X[:1])[0]]
    [('PER', 0, 2)]
    """
    from .metrics import _split_tag, entity_spans

    model = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    if isinstance(estimator, Pipeline):
        X = estimator[:-1].transform(X)
    check_is_fitted(model, "coef_")
    if not hasattr(model, "sample"):
        raise ValueError(f"{type(model).__name__} has no marginals: entities have no probability")
    predicted = model.predict(X)
    classes = model.classes_.tolist()
    split = [_split_tag(tag, outside) for tag in classes]  # names the tags it cannot read
    code = {tag: i for i, tag in enumerate(classes)}
    spans, before, after = [], [], []
    for sample, tags in enumerate(predicted):
        tags = np.asarray(tags, dtype=object).ravel().tolist()
        for kind, start, end in entity_spans(tags, outside):
            first, last = _split_tag(tags[start], outside)[0], _split_tag(tags[end - 1], outside)[0]
            # conlleval continues an entity of this type from a B / I before a span that opens
            # with I / E, and extends one that does not close with E / S by an I / E after it
            before.append([first in "IE" and p in "BI" and t == kind for p, t in split])
            after.append([last not in "ES" and p in "IE" and t == kind for p, t in split])
            spans.append((sample, start, end, [code[t] for t in tags[start:end]]))
    before, after = np.array(before, bool), np.array(after, bool)
    structure = model.structure_
    # exact where the solver has the capability and its model is the estimator's
    exact = (
        hasattr(structure.solver_, "span_log_probabilities")
        and model._default_marginal_method() == "exact"
        and structure.n_states_ == len(classes)
    )
    if not spans:
        probability = np.zeros(0)
    elif exact:
        potentials, _ = model._restricted_potentials(
            model._prepare_fitted(X), model._marginal_weights()
        )
        labels = np.searchsorted(model.classes_, np.concatenate(list(predicted)))
        where = np.array([s[:3] for s in spans], dtype=np.intp)
        log_p = structure.solver_.span_log_probabilities(potentials, labels, where, before, after)
        probability = np.exp(log_p)
    else:
        draws = model.sample(X, n_draws=n_draws, random_state=random_state)
        lookup = np.asarray(model.classes_)
        probability = np.empty(len(spans))
        coded = {}
        for j, (sample, start, end, codes) in enumerate(spans):
            if sample not in coded:  # the draws of a sample as label codes, once
                coded[sample] = np.searchsorted(lookup, draws[sample])
            drawn = coded[sample]
            held = (drawn[:, start:end] == codes).all(axis=1)
            if start > 0:
                held &= ~before[j][drawn[:, start - 1]]
            if end < drawn.shape[1]:
                held &= ~after[j][drawn[:, end]]
            probability[j] = held.mean()
    result = [[] for _ in range(len(predicted))]
    for (sample, start, end, codes), p in zip(spans, probability, strict=True):
        kind = split[codes[0]][1]
        result[sample].append((kind, start, end, float(p)))
    return result
