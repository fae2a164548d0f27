"""Model inspection: which features push each label, the label-transition scores, and how sure
the model is of whole structures — entities, tag sequences, regions — and of each node."""

from __future__ import annotations

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from ._docstrings import shared_docstring
from ._event_draws import (
    check_tol,
    exact_edge_marginals,
    exact_event_log_probabilities,
    exact_span_log_probabilities,
    model_event_frequencies,
)
from ._k_best_labellings import k_best_labellings
from ._labels import as_samples
from ._weight_views import explain_weights, state_features, transition_features

__all__ = [
    "explain_weights",
    "state_features",
    "transition_features",
    "entity_probabilities",
    "sequence_probabilities",
    "k_best_labellings",
    "edge_marginals",
    "region_probabilities",
    "marginal_entropy",
]


@shared_docstring
def entity_probabilities(
    estimator,
    X,
    *,
    known_labels=None,
    method=None,
    outside="O",
    n_draws=1000,
    tol=0.03,
    random_state=None,
) -> list:
    """The predicted entities of each sequence with the probability the model gives them.

    Each entity of the predicted (MAP) tags, read as ``conlleval`` reads them
    (:func:`~pmap_sklearn.metrics.entity_spans`), gets the probability that a labelling drawn
    from the model holds it with these tags: the span's tags as predicted, a tag before it
    that does not continue it into a longer entity (for a span that opens with ``I`` or
    ``E``) and a tag after it that does not extend it. For the exact model on chains
    (:class:`~pmap_sklearn.ChainCRF`, ``method="exact"``) the probability is exact, by
    forward-backward constrained to the span; elsewhere it is the frequency of that event
    over draws of :meth:`sample`, each sentence drawn until its entities' standard errors are
    at most ``tol`` (at most ``n_draws`` draws; "Entity confidence" in the user guide gives
    the cost). The usual substitute, the product or mean of the span's token marginals,
    ignores how the tags depend on each other.

    Parameters
    ----------
    estimator : fitted estimator or Pipeline
        A sequence tagger with marginals, or a pipeline ending in one (the steps before it
        transform ``X``).
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    method : {"perturb", "exact"}, optional
        The distribution the labellings are drawn from, as in :meth:`sample`: ``"perturb"``,
        the perturbed MAP labellings (a frequency over up to ``n_draws`` of them, one MAP
        of the sentence each); ``"exact"``, the distribution of the estimator's marginals of
        that name (the exact ones by forward-backward on chains: fast, and no draws). By
        default, the distribution the estimator was fitted to: ``"perturb"`` for the perturb-and-MAP
        learners (:class:`~pmap_sklearn.PerturbMAPCRF`,
        :class:`~pmap_sklearn.MarginalPerturbMAPCRF`), whose stochastic gradient matches the
        features of the training labels to their expectation under the perturbed MAPs
        (Hazan & Jaakkola 2012), and whose entity probabilities are then the better
        calibrated ones ("Entity confidence" in the user guide); the estimator's default
        marginals otherwise, and after ``calibrate_marginals`` (its temperature is fitted
        for them).
    outside : str, default="O"
        The tag outside every entity.
    {{event_known_labels}}
    {{event_draws}}

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
    from .metrics.sequence import _split_tag, entity_spans

    _check_n_draws(n_draws)
    tol = check_tol(tol)
    model, X = _joint_model(estimator, X, "entities")
    asked, method = method, _event_method(model, method)
    predicted = model.predict(X, known_labels=known_labels)
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
    # exact where the solver has the capability for the distribution asked
    exact = _exact_query(model, "set_event_log_probabilities", method, asked, "entities")
    exact = exact is not None
    if not spans:
        probability = np.zeros(0)
    elif exact:  # sequences in chunks of bounded memory, as the predictions take them
        where = np.array([s[:3] for s in spans], dtype=np.intp)

        def chunk_probabilities(index, known, _):
            first, stop = (0, len(predicted)) if index is None else (index.start, index.stop)
            chosen = (where[:, 0] >= first) & (where[:, 0] < stop)
            if not chosen.any():
                return np.zeros(0)
            chunk = model._prediction_problem(X, index, known)
            labels = np.searchsorted(model.classes_, np.concatenate(list(predicted[first:stop])))
            log_p = exact_span_log_probabilities(
                model, structure.solver_, chunk, labels, where[chosen] - [first, 0, 0],
                before[chosen], after[chosen],
            )  # fmt: skip
            return np.exp(log_p)

        probability = model._in_chunks(chunk_probabilities, X, known_labels)
    else:
        sample_of = np.array([s[0] for s in spans], dtype=np.intp)
        first_span = np.searchsorted(sample_of, np.arange(len(predicted) + 1))

        def held(i, drawn):  # the draws that hold each entity of sequence i
            out = []
            for j in range(first_span[i], first_span[i + 1]):
                _, start, end, codes = spans[j]
                held = (drawn[:, start:end] == codes).all(axis=1)
                if start > 0:
                    held &= ~before[j][drawn[:, start - 1]]
                if end < drawn.shape[1]:
                    held &= ~after[j][drawn[:, end]]
                out.append(held)
            return np.stack(out, axis=1)

        problem = model._prediction_problem(X, known_labels=known_labels)
        frequencies = model_event_frequencies(
            model, problem, np.diff(first_span), held, method, n_draws, tol, random_state
        )
        probability = np.concatenate(frequencies)
    result = [[] for _ in range(len(predicted))]
    for (sample, start, end, codes), p in zip(spans, probability, strict=True):
        kind = split[codes[0]][1]
        result[sample].append((kind, start, end, float(p)))
    return result


# ---- structured uncertainty: whole labellings, regions, uncertainty maps ---------------------
@shared_docstring
def sequence_probabilities(
    estimator,
    X,
    y=None,
    *,
    known_labels=None,
    method=None,
    n_draws: int = 1000,
    tol=0.03,
    random_state=None,
) -> np.ndarray:
    """The probability the model gives a whole labelling of each sample.

    The probability of the predicted (MAP) labelling, or of the labellings ``y``:
    sklearn-crfsuite's ``tagger_.probability(yseq)``, for every structure. For a distribution a
    solver gives exactly (``method="exact"`` on chains, forests and with
    ``solver="brute_force"``; :class:`~pmap_sklearn.ChainCRF`'s model) it is exact:
    :math:`\\exp(f(y) - \\log Z)`, the labelling's score minus the log-partition function
    (forward–backward on chains). Elsewhere it is the frequency
    of the labelling over draws of :meth:`sample` (to the standard error ``tol``, at most
    ``n_draws`` draws), which only estimates a
    probability that is not tiny: on a long sequence or a large graph almost every labelling,
    the MAP included, is rarer than one draw in a thousand and gets 0. Use it there on short
    sequences or tiny graphs, and :func:`~pmap_sklearn.inspection.region_probabilities` or
    :func:`~pmap_sklearn.inspection.entity_probabilities` for parts of a labelling.

    Parameters
    ----------
    {{event_estimator}}
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    y : sequence of label arrays, optional
        A labelling of each sample, of the estimator's ``classes_`` and shaped as its labels;
        by default the predicted one.
    {{event_known_labels}}
    {{event_method}}
    {{event_draws}}

    Returns
    -------
    ndarray of shape (n_samples,)
        The probability of each sample's labelling.

    Raises
    ------
    ValueError
        For an estimator without marginals, a label of ``y`` that is not one of ``classes_``,
        or a labelling of the wrong length or shape.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from pmap_sklearn import ChainCRF, SequenceVectorizer
    >>> from pmap_sklearn.inspection import sequence_probabilities
    >>> X = [[{"w": "Ann"}, {"w": "ran"}], [{"w": "Bo"}, {"w": "sat"}]] * 10
    >>> y = [["B-PER", "O"]] * 20
    >>> model = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.1)).fit(X, y)
    >>> best, other = sequence_probabilities(model, X[:1]), sequence_probabilities(
    ...     model, X[:1], [["O", "O"]]
    ... )
    >>> bool(best[0] > 0.5 > other[0])
    True
    """
    _check_n_draws(n_draws)
    tol = check_tol(tol)
    model, X = _joint_model(estimator, X, "labellings")
    structure = model.structure_
    problem = model._prediction_problem(X, known_labels=known_labels)
    batch = problem.batch
    if y is None:
        codes = model._map(batch, model.coef_, problem.labels, problem.label_sets)
        codes = structure.visible_labels(codes)
    else:
        codes = _labelling_codes(model, batch, X, y)
    asked, method = method, _event_method(model, method)
    solver = _exact_query(model, "event_log_probabilities", method, asked, "labellings")
    if solver is not None:  # each sample's labelling is one event over its visible nodes
        nodes = np.flatnonzero((codes >= 0) & (codes < len(model.classes_)))
        probability = np.ones(batch.n_samples)  # a sample without nodes: its empty labelling
        filled = np.bincount(batch.node_sample[nodes], minlength=batch.n_samples) > 0
        event = (np.cumsum(filled) - 1)[batch.node_sample[nodes]]
        probability[filled] = np.exp(
            exact_event_log_probabilities(model, solver, problem, nodes, codes[nodes], event)
        )
        return probability
    targets = [t.ravel() for t in structure._visible_split(batch, codes)]

    def held(i, drawn):  # the draws that are sample i's labelling
        return (drawn == targets[i]).all(axis=1)[:, None]

    ones = np.ones(batch.n_samples, dtype=np.intp)
    frequencies = model_event_frequencies(
        model, problem, ones, held, method, n_draws, tol, random_state
    )
    return np.concatenate(frequencies)


@shared_docstring
def edge_marginals(
    estimator, X, *, known_labels=None, method=None, n_draws: int = 1000, random_state=None
) -> np.ndarray:
    """The pairwise marginals of every edge, :math:`P(y_i = a, y_j = b)`: on chains the
    transition marginals :math:`P(y_d = a, y_{d+1} = b)`.

    For a distribution a solver gives exactly (``method="exact"`` on chains: forward–backward;
    forests: sum-product; ``solver="brute_force"``: enumeration) they are exact, and summed
    over ``b`` (over ``a``) they are the node marginals of :meth:`predict_marginals` with
    ``method="exact"`` at the edge's first (second) node.
    Elsewhere they are the frequencies of each label pair over ``n_draws`` draws of
    :meth:`sample` (summed, the node frequencies of those draws). Transition constraints
    (``ChainStructure(constraints=...)``) give their forbidden pairs zero.

    Parameters
    ----------
    {{event_estimator}}
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    {{event_known_labels}}
    {{event_method}}
    n_draws : int, default=1000
        Draws per sample where the marginals are frequencies.
    random_state : int, Generator or None, optional
        The draws' randomness (see :meth:`sample`).

    Returns
    -------
    ndarray of shape (n_samples,) of arrays
        Each sample's (E, K, K) array: ``[e, a, b]`` the probability that edge e's nodes take
        the labels ``classes_[a]`` and ``classes_[b]``. On chains edge d joins nodes d and
        d + 1; on grids and graphs the edges are those of ``structure_.prepare([x]).edges``.

    Raises
    ------
    ValueError
        For an estimator without marginals, a model with hidden nodes (whose labels no
        draw shows), or ``method="exact"`` asked of a solver without exact edge marginals
        (approximate marginals: message passing, mean field).

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import ChainCRF
    >>> from pmap_sklearn.inspection import edge_marginals
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(4, 2)) for _ in range(20)]
    >>> y = [(x[:, 0] > 0).astype(int) for x in X]
    >>> model = ChainCRF(alpha=0.1).fit(X, y)
    >>> pair = edge_marginals(model, X[:1])[0]  # (3 transitions, 2, 2)
    >>> np.allclose(pair.sum(axis=2), model.predict_marginals(X[:1])[0][:-1])
    True
    """
    _check_n_draws(n_draws)
    model, X = _joint_model(estimator, X, "edges")
    problem = model._prediction_problem(X, known_labels=known_labels)
    batch = problem.batch
    if batch.hidden is not None and batch.hidden.any():
        raise ValueError("the model has hidden nodes: their edges have no labels to count")
    asked, method = method, _event_method(model, method)
    solver = _exact_query(model, "edge_marginals", method, asked, "edge marginals")
    if solver is not None:
        pair = exact_edge_marginals(model, solver, problem)
    else:
        k = len(model.classes_)
        pair = np.zeros((len(batch.edges), k, k))
        drawn = [c for _, c in _drawn(model, X, n_draws, random_state, method, known_labels)]
        for i, draws in enumerate(drawn):
            edges = slice(batch.edge_offsets[i], batch.edge_offsets[i + 1])
            ends = batch.edges[edges] - batch.node_offsets[i]
            first, second = draws[:, ends[:, 0]], draws[:, ends[:, 1]]  # (n_draws, E)
            edge = np.broadcast_to(np.arange(len(ends)), first.shape)
            counts = np.zeros((len(ends), k, k))
            np.add.at(counts, (edge, first, second), 1.0 / n_draws)
            pair[edges] = counts
    return as_samples(np.split(pair, batch.edge_offsets[1:-1]))


@shared_docstring
def region_probabilities(
    estimator,
    X,
    *,
    known_labels=None,
    method=None,
    n_draws: int = 1000,
    tol=0.03,
    random_state=None,
):
    """The regions of each predicted segmentation, with the probability the model keeps each.

    A region is a connected set of nodes with the same predicted (MAP) label: a connected
    component of the sample's graph once the edges between different labels are cut (a run of
    equal tags on a chain). Its probability is that a labelling drawn from the model gives
    every node of the region that label, :math:`P(y_R = k)` — a statement about the region as
    a whole, which the node marginals do not make (the mean of the region's marginals ignores
    that its nodes move together). For a distribution a solver gives exactly
    (``method="exact"`` on chains, forests and with ``solver="brute_force"``) the probability
    is exact, :math:`Z(y_R = k) / Z`, a log-partition with the region clamped; elsewhere
    (perturbed MAPs; graph cuts, α-expansion, TRW-S) it is the frequency of the event over
    draws of :meth:`sample`, each sample drawn until the standard error of each of its
    regions is at most ``tol`` (or it has ``n_draws`` draws).

    Parameters
    ----------
    {{event_estimator}}
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    {{event_known_labels}}
    {{event_method}}
    {{event_draws}}

    Returns
    -------
    regions : ndarray of shape (n_samples,) of arrays
        Per sample, the region of each node (``0 .. n_regions - 1``, numbered in node order),
        shaped like its labels (as :meth:`predict` returns them).
    probabilities : ndarray of shape (n_samples,) of arrays
        Per sample, the probability of each region, shape (n_regions,):
        ``probabilities[i][regions[i]]`` is a map of the region confidences (for superpixel
        graphs, :func:`~pmap_sklearn.superpixels.to_pixels` paints it on the pixels).

    Raises
    ------
    ValueError
        For an estimator without marginals.

    Examples
    --------
    >>> from pmap_sklearn import GridStructure, PerturbMAPCRF
    >>> from pmap_sklearn.datasets import make_grid_data
    >>> from pmap_sklearn.inspection import region_probabilities
    >>> data = make_grid_data(n_samples=6, shape=(8, 8), random_state=0)
    >>> model = PerturbMAPCRF(GridStructure(), random_state=0).fit(data.data, data.target)
    >>> regions, probabilities = region_probabilities(model, data.data[:1], n_draws=100)
    >>> regions[0].shape, bool(((0 <= probabilities[0]) & (probabilities[0] <= 1)).all())
    ((8, 8), True)
    """
    _check_n_draws(n_draws)
    tol = check_tol(tol)
    model, X = _joint_model(estimator, X, "regions")
    structure = model.structure_
    problem = model._prediction_problem(X, known_labels=known_labels)
    batch = problem.batch
    codes = model._map(batch, model.coef_, problem.labels, problem.label_sets)
    codes = structure.visible_labels(codes)
    region, offsets = _regions(batch, codes)
    asked, method = method, _event_method(model, method)
    solver = _exact_query(model, "event_log_probabilities", method, asked, "regions")
    if solver is not None:  # every region one event: its nodes clamped to its label
        nodes = np.flatnonzero(region >= 0)
        log_p = exact_event_log_probabilities(
            model, solver, problem, nodes, codes[nodes], region[nodes]
        )
        probability = np.exp(log_p)
    else:
        from scipy import sparse

        labels = [t.ravel() for t in structure._visible_split(batch, codes)]
        members = []
        for i, regions in enumerate(structure._visible_split(batch, region)):
            local = regions.ravel() - offsets[i]
            members.append(
                sparse.csr_matrix(
                    (np.ones(len(local)), (np.arange(len(local)), local)),
                    shape=(len(local), offsets[i + 1] - offsets[i]),
                )
            )

        def held(i, drawn):  # a draw keeps the regions of sample i where it has no wrong node
            return (members[i].T @ (drawn != labels[i]).T.astype(float)).T == 0

        probability = np.concatenate(
            model_event_frequencies(
                model, problem, np.diff(offsets), held, method, n_draws, tol, random_state
            )
        )
    local = region - offsets[batch.node_sample]
    regions = as_samples(structure._visible_split(batch, local))
    probabilities = as_samples(
        [probability[offsets[i] : offsets[i + 1]] for i in range(batch.n_samples)]
    )
    return regions, probabilities


@shared_docstring
def marginal_entropy(estimator, X, *, method=None, n_perturbations=None) -> np.ndarray:
    """The uncertainty map of each sample: the entropy of every node's marginal, in nats.

    :math:`H_d = -\\sum_k P(y_d = k) \\log P(y_d = k)`, 0 where the model is sure of the node
    and :math:`\\log K` where every label is equally likely (divide by :math:`\\log K` for a
    map in [0, 1]; by :math:`\\log 2` for bits). For superpixel graphs
    :func:`~pmap_sklearn.superpixels.to_pixels` paints it on the pixels.

    Parameters
    ----------
    {{event_estimator}}
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    method : {"perturb", "exact"}, optional
        The marginals' method, as in :meth:`predict_marginals` (by default the estimator's
        model).
    n_perturbations : int, optional
        As in :meth:`predict_marginals`.

    Returns
    -------
    ndarray of shape (n_samples,) of arrays
        Per sample, the entropy of each node, shaped like its labels.

    Raises
    ------
    ValueError
        For an estimator without marginals.

    Examples
    --------
    >>> from pmap_sklearn import GridStructure, PerturbMAPCRF
    >>> from pmap_sklearn.datasets import make_grid_data
    >>> from pmap_sklearn.inspection import marginal_entropy
    >>> data = make_grid_data(n_samples=6, shape=(8, 8), random_state=0)
    >>> model = PerturbMAPCRF(GridStructure(), random_state=0).fit(data.data, data.target)
    >>> entropy = marginal_entropy(model, data.data[:1])[0]
    >>> entropy.shape, bool((entropy >= 0).all() and (entropy <= np.log(2) + 1e-12).all())
    ((8, 8), True)
    """
    model, X = _fitted_learner(estimator, X)
    given = dict(method=method, n_perturbations=n_perturbations)
    marginals = model.predict_marginals(X, **{k: v for k, v in given.items() if v is not None})
    out = []
    for marginal in marginals:
        marginal = np.asarray(marginal, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(marginal > 0, marginal * np.log(marginal), 0.0)
        out.append(np.maximum(-terms.sum(axis=-1), 0.0))
    return as_samples(out)


def _fitted_learner(estimator, X):
    """The fitted learner ``estimator`` ends in, and ``X`` as it takes it: a pipeline's last
    step after the other steps' ``transform``, a :class:`~pmap_sklearn.TwoStageCRF`'s CRF
    after stage one."""
    if isinstance(estimator, Pipeline):
        X = estimator[:-1].transform(X)
        estimator = estimator[-1]
    if hasattr(estimator, "stage_two_samples"):  # checks its own fit
        X = estimator.stage_two_samples(X)
        estimator = estimator.crf_
    check_is_fitted(estimator, "coef_")
    return estimator, X


def _joint_model(estimator, X, what: str):
    """:func:`_fitted_learner`, refusing a learner that has no joint distribution to draw
    from (no marginals): ``what`` would have no probability."""
    model, X = _fitted_learner(estimator, X)
    if not hasattr(model, "sample"):
        name = type(model).__name__
        if not getattr(model, "_marginal_methods", ()):
            raise ValueError(f"{name} has no marginals: {what} have no probability")
        raise ValueError(  # marginals node by node, but no joint draws
            f"{name} has no sample: the probabilities of {what} need draws of whole "
            f"labellings, and its predict_marginals gives each node's on its own; use an "
            "estimator with sample (ChainCRF, PerturbMAPCRF, MarginalPerturbMAPCRF, ...)"
        )
    return model, X


def _event_method(model, method):
    """The distribution whose events are measured: ``method`` (checked), by default the one
    the estimator was fitted to — the perturbed MAPs for the learners whose stochastic
    gradient matches the training labels' features to their expectation under them (Hazan &
    Jaakkola 2012), the estimator's default marginals otherwise and after
    ``calibrate_marginals`` (its temperature is fitted for those)."""
    if method is None:
        fitted = "perturb" in model._marginal_methods and not hasattr(
            model, "marginal_temperature_"
        )
        return "perturb" if fitted else model._default_marginal_method()
    if method not in model._marginal_methods:
        raise ValueError(f"method must be one of {list(model._marginal_methods)}, got {method!r}")
    return method


def _exact_solver(model, capability: str, method: str | None = None):
    """The model's solver where it answers ``capability`` exactly for the distribution of
    ``method`` (None: the estimator's default marginals) — that method is the solver's exact
    marginals — else None (the probabilities are then frequencies over draws). A capability
    the solvers declare (``k_best``) is read from the solver's capabilities, the others from
    its methods. With hidden states the events sum over the states of each label
    (:func:`~pmap_sklearn._event_draws.exact_event_log_probabilities`), exactly; the k-best
    labellings of the visible labels have no exact solver then (None)."""
    solver = model.structure_.solver_
    method = model._default_marginal_method() if method is None else method
    able = getattr(solver.capabilities, capability, None)
    if capability == "k_best" and model.structure_.has_hidden_states_:
        return None
    if (hasattr(solver, capability) if able is None else able) and method == "exact":
        return solver
    return None


def _exact_query(model, capability: str, method: str, asked, what: str):
    """:func:`_exact_solver`, refusing by name a ``method="exact"`` the caller asked for that
    the model's solver cannot answer exactly (its marginals are approximate, or it has no
    exact query of that kind), instead of estimating it from draws without a word. A solver
    without marginals is left to the draws, which name it."""
    from ._backend import SOLVERS

    solver = _exact_solver(model, capability, method)
    own = model.structure_.solver_
    if solver is None and asked == "exact" and own.has_marginals:
        able = [
            repr(name)
            for name, kind in SOLVERS.items()
            if getattr(kind.capabilities, capability, hasattr(kind, capability)) is True
        ]
        raise ValueError(
            f"method='exact': the {own.name!r} solver of {type(model).__name__} gives no "
            f"exact probabilities of {what} (no {capability}); leave method unset for "
            "frequencies over draws of the estimator's model, or use a solver that has "
            f"{capability} ({', '.join(able)}) where the structure takes it"
        )
    return solver


def _check_n_draws(n_draws) -> None:
    if isinstance(n_draws, bool) or not isinstance(n_draws, int | np.integer) or n_draws < 1:
        raise ValueError(f"n_draws must be an int >= 1, got {n_draws!r}")


def _labelling_codes(model, batch, X, y) -> np.ndarray:
    """Label codes of every node of the labellings ``y``, checked: each label one of the
    model's ``classes_`` (no unknown marker: a labelling is whole), one per node."""
    from ._labels import encode

    _, y = model.structure_.check_input(X, y)
    try:
        codes, _ = encode(y, None, model.classes_)
    except ValueError as error:
        raise ValueError(f"y: {error}") from None
    return model.structure_.prepare_labels(batch, codes)


def _drawn(model, X, n_draws: int, random_state, method, known_labels=None) -> list:
    """Per sample, ``n_draws`` draws of :meth:`sample` (given ``known_labels``) as it returns
    them, and their label codes, (n_draws, D)."""
    draws = model.sample(
        X, n_draws=n_draws, known_labels=known_labels, method=method, random_state=random_state
    )
    lookup = np.asarray(model.classes_)
    return [(d, np.searchsorted(lookup, np.asarray(d).reshape(n_draws, -1))) for d in draws]


def _regions(batch, codes: np.ndarray):
    """The region of every node — connected components of the graph without the edges between
    different labels, all samples at once — numbered sample by sample in the order of their
    first node (-1 for a hidden node), and the offsets of each sample's regions."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    n_nodes = batch.n_nodes
    first, second = batch.edges.T
    kept = (codes[first] == codes[second]) & (codes[first] >= 0)
    graph = sparse.coo_matrix(
        (np.ones(kept.sum()), (first[kept], second[kept])), shape=(n_nodes, n_nodes)
    )
    _, component = connected_components(graph, directed=False)
    visible = np.flatnonzero(codes >= 0)
    start = np.full(component.max(initial=-1) + 1, n_nodes)
    np.minimum.at(start, component[visible], visible)
    order = np.argsort(start, kind="stable")
    n_regions = int(np.sum(start < n_nodes))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    region = np.where(codes >= 0, rank[component], -1)
    region_sample = batch.node_sample[start[order[:n_regions]]]
    offsets = np.searchsorted(region_sample, np.arange(batch.n_samples + 1))
    return region, offsets
