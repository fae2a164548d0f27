"""The probabilities of events (entities, labellings, regions) as frequencies over draws of a
model, drawn in rounds until each is as precise as asked.

A sample's events are estimated from the same draws, so it is drawn until the least precise
of them is within the tolerance: a first round of :func:`first_round` draws of every sample
that has events, then more only for the samples whose events' standard error is above ``tol``,
each up to the draws its frequencies call for, at most ``n_draws`` in all. The draws of each
sample come from its own seeds, so the frequencies of a sample depend on ``random_state`` and
on its own draws only (not on the others, nor on the chunks or workers of the draws).
"""

from __future__ import annotations

from numbers import Real

import numpy as np

from ._parallel import SampleSeeds, sample_seeds
from ._validation import check_draws_memory

#: Growth of the draw counts a round asks for: each sample's target is rounded up to the
#: grid ``first · GROWTH^j`` (capped at ``n_draws``), so that the samples of a round share a
#: few draw counts (one call of the solver each) and overshoot their need by at most this.
GROWTH = 2**0.5


def check_tol(tol) -> float:
    """``tol`` as a float, or a ValueError naming it: a standard error in [0, 0.5]."""
    if isinstance(tol, bool) or not isinstance(tol, Real) or not 0 <= tol <= 0.5:
        raise ValueError(
            f"tol must be a real number in [0, 0.5] (the standard error of a probability), "
            f"got {tol!r}"
        )
    return float(tol)


def first_round(tol: float, n_draws: int) -> int:
    """The draws of the first round: the fewest (about ``1 / tol``) at which an event held in
    every draw or in none meets ``tol`` (:func:`standard_errors`); ``n_draws`` at most, and
    with ``tol=0``."""
    if tol == 0 or 1 / tol >= n_draws:
        return n_draws
    n = int(np.ceil(1 / tol))  # the error of an event held n times in n draws is below 1 / n
    while n > 1 and standard_errors([n - 1], n - 1)[0] <= tol:
        n -= 1
    return min(n, n_draws)


def standard_errors(held: np.ndarray, n: int) -> np.ndarray:
    """The standard error :math:`\\sqrt{\\tilde p (1 - \\tilde p) / n}` of the frequencies of
    events held ``held`` times in ``n`` draws, :math:`\\tilde p = (c + 1) / (n + 2)`: the
    frequency with one draw added that holds the event and one that does not, so that an
    event seen in every draw or in none is still uncertain by about :math:`1 / n`."""
    shrunk = (np.asarray(held, dtype=float) + 1) / (n + 2)
    return np.sqrt(shrunk * (1 - shrunk) / n)


def needed_draws(held: np.ndarray, n: int, tol: float) -> int:
    """The draws at which the least precise event, at its shrunk frequency of
    :func:`standard_errors`, has a standard error of at most ``tol``."""
    if len(held) == 0:
        return 0
    shrunk = (np.asarray(held, dtype=float) + 1) / (n + 2)
    return int(np.ceil(np.max(shrunk * (1 - shrunk)) / tol**2))


def event_frequencies(draw, batch, n_events, held, n_draws: int, tol: float, random_state):
    """Each sample's events' frequencies over draws in rounds, and the draws of each sample.

    Parameters
    ----------
    draw : callable
        ``draw(part, n, seeds, members) -> (codes, nodes)``: the (n, part.n_nodes) label
        codes of ``n`` draws of the samples ``members`` of the batch (the batch ``part``),
        each sample's from its seed (a :class:`SampleSeeds`), and per sample the columns of
        its visible nodes, in order.
    batch : SampleBatch
        All samples.
    n_events : ndarray of shape (n_samples,)
        The events of each sample (one without events is not drawn).
    held : callable
        ``held(i, codes) -> (n, n_events[i])`` bool: which of sample ``i``'s events each of
        ``n`` draws holds, from the (n, D) codes of the draws' labels of its D visible nodes.
    n_draws : int
        The most draws of a sample.
    tol : float
        The standard error at which a sample's events stop drawing (:func:`standard_errors`);
        0 draws every sample ``n_draws`` times (the draws of ``sample`` with ``random_state``).
    random_state : int, Generator, RandomState or None

    Returns
    -------
    frequencies : list of ndarray
        Per sample, the frequency of each of its events.
    drawn : ndarray of shape (n_samples,)
        The draws of each sample.
    """
    n_samples = batch.n_samples
    seeds = sample_seeds(random_state, n_samples)  # round 0: those of sample(random_state)
    counts = [np.zeros(int(e)) for e in n_events]
    drawn = np.zeros(n_samples, dtype=np.intp)
    calls = np.zeros(n_samples, dtype=np.intp)  # the draw calls of each sample so far
    first = first_round(tol, n_draws)
    grid = np.unique(np.minimum(n_draws, np.ceil(first * GROWTH ** np.arange(64))))
    target = np.where(np.asarray(n_events) > 0, first, 0)
    while (target > drawn).any():
        todo = np.flatnonzero(target > drawn)
        groups = np.stack([drawn[todo], target[todo]], axis=1)
        for start, stop in np.unique(groups, axis=0):
            members = todo[(drawn[todo] == start) & (target[todo] == stop)]
            round_seeds = SampleSeeds(_round_seeds(seeds, members, calls))
            check_draws_memory(int(stop - start), int(batch.lengths[members].sum()))
            codes, nodes = draw(batch.subset(members), int(stop - start), round_seeds, members)
            for i, columns in zip(members, nodes, strict=True):
                counts[i] += held(i, codes[:, columns]).sum(axis=0)
        drawn[todo] = target[todo]
        calls[todo] += 1
        for i in todo:  # the next target of each sample: its need on the grid, or the cap
            need = needed_draws(counts[i], drawn[i], tol) if tol > 0 else 0
            if need > drawn[i] and drawn[i] < n_draws:
                target[i] = grid[np.searchsorted(grid, need)] if need <= n_draws else n_draws
    frequencies = [c / max(n, 1) for c, n in zip(counts, drawn, strict=True)]
    return frequencies, drawn


def conditioned_potentials(model, problem):
    """The model's potentials of ``problem``'s batch conditioned on its known labels and sets
    (folded into the node scores), for the exact solvers' event queries."""
    weights = model._marginal_weights()
    labels, sets = problem.labels, problem.label_sets
    return model._restricted_potentials(problem.batch, weights, labels, sets, fold=True)[0]


def exact_event_log_probabilities(model, solver, problem, nodes, codes, events) -> np.ndarray:
    """The exact ``log P`` of events "these nodes take these labels" of ``problem``'s batch
    given its known labels (:meth:`ExactEvents.event_log_probabilities`): with hidden states
    a label is the set of its states, and the probability sums over the states that show the
    labels (:meth:`ExactEvents.set_event_log_probabilities`), exactly, as the marginals do.

    Parameters
    ----------
    model : fitted estimator
    solver : ExactEvents
        The model's solver.
    problem : Problem
    nodes, codes, events : ndarray of shape (M,)
        Each event node, its label code (0..K-1) and its event (0..Q-1).

    Returns
    -------
    ndarray of shape (Q,)
    """
    potentials = conditioned_potentials(model, problem)
    structure = model.structure_
    if not structure.has_hidden_states_:
        return solver.event_log_probabilities(potentials, nodes, codes, events)
    allowed = structure.label_states_[: structure.n_labels_][codes]
    return solver.set_event_log_probabilities(potentials, nodes, allowed, events)


def exact_span_log_probabilities(model, solver, problem, labels, spans, before, after):
    """The exact ``log P`` of entity spans on chains (:func:`span_log_probabilities`): the
    span's labels, a label before it outside ``before`` and one after it outside ``after``;
    with hidden states, or with an exact solver that has no span query (forests, brute
    force), one event of label sets per span (the states of its labels, of the labels
    allowed before and after it) summed over the states that show it.

    Parameters
    ----------
    model : fitted estimator
    solver : ExactEvents
    problem : Problem
    labels : ndarray of shape (n_nodes,)
        The label codes the spans take.
    spans : ndarray of shape (S, 3)
        ``(sample, start, end)`` of each span, positions in its sample.
    before, after : ndarray of shape (S, K) of bool
        The labels forbidden just before and just after each span.

    Returns
    -------
    ndarray of shape (S,)
    """
    potentials = conditioned_potentials(model, problem)
    structure = model.structure_
    if not structure.has_hidden_states_ and hasattr(solver, "span_log_probabilities"):
        return solver.span_log_probabilities(potentials, labels, spans, before, after)
    # set events: those of the chain solver's states, or each label alone on the others
    states = structure.label_states_[: structure.n_labels_]  # (K, n_states)
    offsets, lengths = problem.batch.node_offsets, problem.batch.lengths
    nodes, allowed, events = [], [], []
    for q, (sample, start, end) in enumerate(spans):
        inside = offsets[sample] + np.arange(start, end)
        span_nodes, span_allowed = [inside], [states[labels[inside]]]
        if start > 0:  # the states of the labels allowed just before and just after
            span_nodes.append([inside[0] - 1])
            span_allowed.append(states[~before[q]].any(axis=0)[None])
        if end < lengths[sample]:
            span_nodes.append([inside[-1] + 1])
            span_allowed.append(states[~after[q]].any(axis=0)[None])
        nodes.append(np.concatenate(span_nodes))
        allowed.append(np.concatenate(span_allowed))
        events.append(np.full(len(nodes[-1]), q))
    return solver.set_event_log_probabilities(
        potentials, np.concatenate(nodes), np.concatenate(allowed), np.concatenate(events)
    )


def exact_edge_marginals(model, solver, problem) -> np.ndarray:
    """The exact (E, K, K) label-pair marginals of every edge of ``problem``'s batch: the
    solver's state-pair marginals summed over the states of each label."""
    pair = solver.edge_marginals(conditioned_potentials(model, problem))
    structure = model.structure_
    if not structure.has_hidden_states_:
        return pair
    states = structure.label_states_[: structure.n_labels_].astype(float)  # (K, n_states)
    return np.einsum("as,est,bt->eab", states, pair, states)


def model_event_frequencies(model, problem, n_events, held, method, n_draws, tol, random_state):
    """Per sample of ``problem``, the frequency of each of its ``n_events`` events over draws
    of the model given its known labels (``held(i, codes)``: which of sample i's events each
    draw holds), drawn in rounds to the tolerance ``tol``
    (:func:`event_frequencies`)."""
    structure, batch = model.structure_, problem.batch
    method, n_sweeps = model._draw_method(method, None)
    if random_state is None:
        random_state = getattr(model, "random_state", None)

    def draw(part, n, seeds, members):
        known = None if problem.labels is None else problem.labels[batch.node_index(members)]
        states = model._batch_draws(part, n, method, seeds, known, n_sweeps, problem.label_sets)
        nodes = structure._visible_split(part, np.arange(part.n_nodes))  # shaped as labels
        return structure.visible_labels(states), [n.ravel() for n in nodes]

    return event_frequencies(draw, batch, n_events, held, n_draws, tol, random_state)[0]


def _round_seeds(seeds: np.ndarray, members: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """The seeds of the next draws of the samples ``members``: a sample's own seed for its
    first draws, then seeds spawned from it, one per further call."""
    out = np.empty(len(members), dtype=np.int64)
    for j, i in enumerate(members):
        if calls[i] == 0:
            out[j] = seeds[i]
        else:
            sequence = np.random.SeedSequence(int(seeds[i]), spawn_key=(int(calls[i]),))
            out[j] = sequence.generate_state(1, np.uint64)[0] >> np.uint64(1)
    return out
