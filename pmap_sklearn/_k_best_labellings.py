"""The k most probable labellings of each sample, with their probabilities (published as
:func:`pmap_sklearn.inspection.k_best_labellings`)."""

from __future__ import annotations

import numpy as np

from ._docstrings import shared_docstring


@shared_docstring
def k_best_labellings(
    estimator,
    X,
    k: int = 5,
    *,
    known_labels=None,
    method=None,
    n_draws: int = 1000,
    random_state=None,
):
    """The ``k`` most probable labellings of each sample, with their probabilities: the
    second-best reading of a sentence, and how much less likely it is than the best.

    For a distribution a solver lists exactly (``method="exact"`` on chains — the list
    Viterbi algorithm of Seshadri & Sundberg 1994, which keeps the k best partial scores of
    every position and label — and with ``solver="brute_force"``, by enumeration) they are
    the k labellings of largest probability :math:`\\exp(f(y) - \\log Z)`, the first one the
    MAP labelling of :meth:`predict`. Elsewhere (perturbed MAPs, the default of the
    perturb-and-MAP learners also on chains; graph cuts, α-expansion, TRW-S; forests and
    mean field) they are the distinct labellings of ``n_draws`` draws of :meth:`sample`,
    ranked by frequency, and their probabilities are those frequencies: the most frequent
    labelling of the perturbed MAPs is not always the MAP, and a labelling rarer than about
    one draw in ``n_draws`` is not listed.

    A sample with fewer than ``k`` labellings of positive probability (a short chain, one
    that transition constraints or ``known_labels`` restrict) or fewer than ``k`` distinct
    draws gets fewer: all of them, whose probabilities then sum to 1. Labellings of equal
    probability come in no particular order (the exact ones), in the order of their label
    codes (the frequencies). Transition constraints
    (``ChainStructure(constraints=...)``) are honoured: a labelling they forbid is never
    listed.

    Parameters
    ----------
    {{event_estimator}}
    X : sequence of samples
        As the estimator (or the pipeline) takes them.
    k : int, default=5
        Labellings per sample.
    known_labels : sequence of label arrays, optional
        Labels known at prediction time (None elsewhere), as in :meth:`predict`: every
        labelling keeps them, and the probabilities are conditional on them.
    {{event_method}}
    n_draws : int, default=1000
        Draws per sample where the probabilities are frequencies.
    random_state : int, Generator or None, optional
        The draws' randomness (see :meth:`sample`).

    Returns
    -------
    labellings : ndarray of shape (n_samples,) of arrays
        Per sample, an array of ``classes_`` of shape (m, D) (or (m, H, W)), m <= k: its
        labellings, shaped as :meth:`predict` returns a labelling, the most probable first.
    probabilities : ndarray of shape (n_samples,) of arrays
        Per sample, the (m,) probabilities of its labellings, non-increasing.

    Raises
    ------
    ValueError
        For ``k`` or ``n_draws`` below 1, an estimator without marginals, a sample whose
        constraints and known labels allow no labelling, or ``method="exact"`` with hidden
        states (the most probable labelling of the visible labels sums over the hidden
        states, which is NP-hard already for hidden Markov models, Lyngsø & Pedersen 2002,
        and is not the k best state sequences: ``method="perturb"`` ranks the perturbed
        MAPs' labels).
    sklearn.exceptions.NotFittedError
        For an estimator that is not fitted.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from pmap_sklearn import ChainCRF, SequenceVectorizer
    >>> from pmap_sklearn.inspection import k_best_labellings
    >>> X = [[{"w": "Ann"}, {"w": "ran"}], [{"w": "Bo"}, {"w": "sat"}]] * 10
    >>> y = [["B-PER", "O"]] * 20
    >>> model = make_pipeline(SequenceVectorizer(), ChainCRF(alpha=0.1)).fit(X, y)
    >>> labellings, probabilities = k_best_labellings(model, X[:1], k=3)
    >>> labellings[0][0].tolist(), bool(probabilities[0][0] > probabilities[0][1])
    (['B-PER', 'O'], True)
    >>> len(k_best_labellings(model, X[:1], k=10)[0][0])  # a chain of 2 nodes has 4
    4
    """
    from .inspection import _check_n_draws, _drawn, _event_method, _exact_query, _joint_model

    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    _check_n_draws(n_draws)
    model, X = _joint_model(estimator, X, "labellings")
    asked, method = method, _event_method(model, method)
    structure = model.structure_
    if method == "exact" and getattr(structure, "has_hidden_states_", False):
        raise ValueError(
            "method='exact' with hidden states: the most probable labellings of the visible "
            "labels sum over the hidden states, which no solver lists exactly; use "
            "method='perturb' (the perturbed MAPs' labels ranked by frequency)"
        )
    solver = _exact_query(model, "k_best", method, asked, "the most probable labellings")
    if solver is not None:

        def chunk_labellings(index, known, _):
            problem = model._prediction_problem(X, index, known)
            batch = problem.batch
            potentials, clamp = model._restricted_potentials(
                batch, model._marginal_weights(), problem.labels, problem.label_sets
            )
            labels, log_p = solver.k_best(potentials, k, clamp)
            ranks = [structure.format_labels(batch, codes, model.classes_) for codes in labels]
            out = np.empty((batch.n_samples, 2), dtype=object)
            for i, listed in enumerate(np.isfinite(log_p).sum(axis=1).tolist()):
                out[i, 0] = np.stack([rank[i] for rank in ranks[:listed]])
                out[i, 1] = np.exp(log_p[i, :listed])
            return out

        out = model._in_chunks(chunk_labellings, X, known_labels)
        return out[:, 0].copy(), out[:, 1].copy()
    labellings, probabilities = [], []
    for draws, codes in _drawn(model, X, n_draws, random_state, method, known_labels):
        _, first, counts = np.unique(codes, axis=0, return_index=True, return_counts=True)
        order = np.argsort(-counts, kind="stable")[:k]
        labellings.append(np.asarray(draws)[first[order]])
        probabilities.append(counts[order] / n_draws)
    from ._labels import as_samples

    return as_samples(labellings), as_samples(probabilities)
