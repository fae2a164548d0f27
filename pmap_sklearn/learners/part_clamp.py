"""Part & Clamp (Pletscher & Ong 2012): learning on a tightening lower bound of the likelihood,
clamped feedback vertex sets with exact sum-product on the forests left."""

from __future__ import annotations

from numbers import Integral
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp, softmax
from sklearn.utils._param_validation import StrOptions

from .._backend import (
    ForestSolver,
    MessagePassingSolver,
    feedback_vertex_set,
)
from .._docstrings import shared_docstring
from .._utils import store_parameters
from .._validation import NumberInterval
from ._estimator import TOL_CONSTRAINTS
from ._full_batch import FULL_BATCH_CONSTRAINTS, FullBatchCRF


class _Bound(NamedTuple):
    """The clamped-forest bound of eq. 7 (summed over samples, or of one decomposition of
    one sample) and what its gradient (eqs. 16–17) is made of."""

    #: ``Σ_n log Z_bound(x_n)``
    total: float
    #: (n_nodes, K) node marginals mixed over the states
    node: np.ndarray
    #: (E, K, K) edge marginals mixed over the states
    pair: np.ndarray
    #: ``log Z(y_F)`` of every state (per sample and decomposition)
    state_log_z: list


@shared_docstring
class PartClampCRF(FullBatchCRF):
    r"""CRF trained on the Part & Clamp lower bound of the likelihood (Pletscher & Ong).

    For every training sample, a feedback vertex set F leaves a forest (*Part*, Algorithm 1); for a
    set of clamped states ``Y_F`` of F the partition function is bounded from below by :math:`Z \ge
    \sum_{y_F \in Y_F} Z(y_F)` (eq. 7), each ``Z(y_F)`` exact by sum-product on the forest. ``Y_F``
    starts with the true labels of F — the bound is then composite likelihood (Lemma 2) — and is
    tightened (*Clamp*, §5.2) with states found by MAX-TIGHTEN (hybrid max/sum message passing, eqs.
    12–14) or plain MAP. ``n_decompositions`` feedback vertex sets combine by the arithmetic or
    geometric mean or the maximum of their bounds (eqs. 8–10). The objective (eq. 15) is ``(1/N) Σ_n
    [log Z_bound(x_n) − f(y_n | x_n)] + (α/2)‖w‖²``, whose gradient mixes the forest marginals of
    the states (eqs. 16–17).

    ``schedule="batch"`` minimises it by L-BFGS, tightens every sample, and repeats ``n_rounds``
    times, the state sets growing. ``schedule="online"`` keeps at most ``budget`` states per
    sample — after each tightening the state of lowest ``Z(y_F)`` is dropped, never the truth —
    as the paper's online variant does; its weight update is a short warm-started L-BFGS run
    rather than an SGD step (no step size to tune; the paper's steps use all images at once).

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure (any K); the pairwise weights stay attractive with the graph-cut solver.
    n_decompositions : int, default=1
        Feedback vertex sets per graph (the first deterministic, the others randomised).
    combine : {"arithmetic", "geometric", "max"}, default="arithmetic"
        How the bounds of several decompositions combine (eqs. 8–10).
    tighten : {"max_tighten", "map"}, default="max_tighten"
        How new states of F are found.
    schedule : {"batch", "online"}, default="batch"
        How weight steps and tightening alternate (see above).
    budget : int, default=2
        States kept per sample and decomposition by the online schedule.
    n_rounds : int, default=5
        L-BFGS runs, each after a tightening (the first is composite likelihood).
    fvs_order : {"bfs", "dfs"}, default="bfs"
        Exploration of Algorithm 1.
    alpha : float, default=1.0
        L2 regularisation (the paper's λ).
    max_iter : int, default=100
        L-BFGS iterations per round.
    tol : float, default=1e-5
        L-BFGS tolerance on the projected gradient.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals` (MPM prediction by perturb-and-MAP).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the randomised decompositions and the perturbations.
    n_jobs : int or None, default=None
        Processes for the graph cuts of MAP tightening and prediction.
    warm_start : bool, default=False
        Start from the previous ``coef_`` (the states restart from the truth) on the same data
        (``X`` and ``y``) and parameters, when the previous fit was made with ``warm_start=True``;
        after a change of the data or of ``structure``, ``alpha``, ``class_weight``,
        ``unknown_label`` or ``ignore_label``, a warm start fits afresh (as ``warm_start=False``
        does): the state belongs to the last fit's objective.
    verbose : int, default=0
        Progress.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels (filled in by the MAP of a model fitted on the complete samples).
    {{ignore_label}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
        L-BFGS iterations, all rounds.
    lower_bound_history_ : list of float
        The mean bound ``(1/N) Σ_n log Z_bound(x_n)`` at the start of each round, right after
        its tightening, at that round's starting weights (the weights move between rounds, so
        this curve need not rise).
    lower_bound_by_states_ : ndarray of shape (n_states_kept,)
        The mean bound at the fitted weights ``coef_`` with the first 1, 2, … states of every
        ``Y_F`` (in the order they were clamped, the truth first): how much each added state
        tightens the bound (the paper's Fig. 2). Non-decreasing, since every added state adds
        a term ``Z(y_F) > 0`` to eq. 7.
    fvs_fraction_ : float
        ``|F| / |V|`` of the first decomposition, averaged over the training samples.

    See Also
    --------
    PseudoLikelihoodCRF, ContrastiveDivergenceCRF : the baselines of the paper's Table 1.
    EpsilonCRF : an upper-bound (convex entropy) learner for the same models.

    References
    ----------
    .. [1] P. Pletscher and C. S. Ong. Part & Clamp: efficient structured output learning.
       AISTATS 2012.
    """

    _parameter_constraints: dict = {
        **FULL_BATCH_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        "n_decompositions": [NumberInterval(Integral, 1, None, closed="left")],
        "combine": [StrOptions({"arithmetic", "geometric", "max"})],
        "tighten": [StrOptions({"max_tighten", "map"})],
        "schedule": [StrOptions({"batch", "online"})],
        "budget": [NumberInterval(Integral, 1, None, closed="left")],
        "n_rounds": [NumberInterval(Integral, 1, None, closed="left")],
        "fvs_order": [StrOptions({"bfs", "dfs"})],
    }

    def __init__(
        self,
        structure="grid",
        *,
        n_decompositions=1,
        combine="arithmetic",
        tighten="max_tighten",
        schedule="batch",
        budget=2,
        n_rounds=5,
        fvs_order="bfs",
        alpha=1.0,
        max_iter=100,
        tol=1e-5,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        store_parameters(self, locals())

    # ---- Part: decompositions and the states of F ----------------------------------------
    def _decompose(self, batch, labels, rng):
        """Per sample, ``n_decompositions`` pairs (decomposition, states), states = truth."""
        cache, parts = {}, []
        for i in range(batch.n_samples):
            edges = batch.edges[batch.edges_of(i)] - batch.node_offsets[i]
            key = (batch.lengths[i], edges.tobytes())
            if key not in cache:
                cache[key] = [
                    ForestSolver().session(
                        batch.lengths[i],
                        edges,
                        feedback_vertex_set(
                            batch.lengths[i], edges, self.fvs_order, None if m == 0 else rng
                        ),
                    )
                    for m in range(self.n_decompositions)
                ]
            truth = labels[batch.nodes_of(i)]
            parts.append([(d, truth[d.clamped][None, :].copy()) for d in cache[key]])
        self.fvs_fraction_ = float(np.mean([p[0][0].fvs.mean() for p in parts]))
        return parts

    # ---- the bound --------------------------------------------------------------------------
    def _bound(self, batch, parts, w) -> _Bound:
        """``Σ_n c_n log Z_bound(x_n)`` (``c`` the sample weights, 1 without), its gradient
        statistics over the batch (each sample's times its weight) and ``log Z(y_F)`` of every
        state."""
        weights = np.ones(batch.n_samples) if batch.sample_weight is None else batch.sample_weight
        structure = self.structure_
        potentials = structure.potentials(batch, w)
        tables = potentials.edge_tables()
        k = structure.n_states_
        node = np.zeros((batch.n_nodes, k))
        pair = np.zeros((len(batch.edges), k, k))
        total, state_log_z = 0.0, []
        # samples sharing one decomposition object (one graph) are solved together
        groups = {}
        for i, sample_parts in enumerate(parts):
            for m, (decomposition, _) in enumerate(sample_parts):
                groups.setdefault((id(decomposition), m), []).append(i)
        per_sample = [[None] * self.n_decompositions for _ in parts]
        for (_, m), samples in groups.items():
            decomposition = parts[samples[0]][m][0]
            rows = np.concatenate([np.full(len(parts[i][m][1]), j) for j, i in enumerate(samples)])
            states = np.concatenate([parts[i][m][1] for i in samples])
            unary = np.stack([potentials.unary[batch.nodes_of(i)] for i in samples])
            table = np.stack([tables[batch.edges_of(i)] for i in samples])
            log_z, node_rows, pair_rows = decomposition.marginals(unary[rows], table[rows], states)
            for j, i in enumerate(samples):
                mine = rows == j
                weight = softmax(log_z[mine])
                per_sample[i][m] = _Bound(
                    logsumexp(log_z[mine]),
                    np.tensordot(weight, node_rows[mine], axes=1),
                    np.tensordot(weight, pair_rows[mine], axes=1),
                    log_z[mine],
                )
        for i, results in enumerate(per_sample):
            values = np.array([r.total for r in results])
            if self.combine == "arithmetic":  # eq. 8: log mean of Z^m, mixture weights ∝ Z^m
                bound = logsumexp(values) - np.log(len(values))
                mix = softmax(values)
            elif self.combine == "geometric":  # eq. 9: mean of log Z^m
                bound, mix = values.mean(), np.full(len(values), 1.0 / len(values))
            else:  # eq. 10: the largest
                bound, mix = values.max(), np.eye(len(values))[np.argmax(values)]
            if batch.sample_weight is not None:
                bound, mix = weights[i] * bound, weights[i] * mix
            total += bound
            node[batch.nodes_of(i)] = sum(c * r.node for c, r in zip(mix, results, strict=True))
            pair[batch.edges_of(i)] = sum(c * r.pair for c, r in zip(mix, results, strict=True))
            state_log_z.append([r.state_log_z for r in results])
        return _Bound(total, node, pair, state_log_z)

    def _objective(self, batch, labels, parts, w):
        n = batch.weight_total  # the weighted mean with sample weights
        total, node, pair, _ = self._bound(batch, parts, w)
        score = batch.weighted_sum(self.structure_.potentials(batch, w).score(labels))
        observed = self.structure_.joint_feature(batch, labels, batch.sample_weight)
        gradient = (self._joint(batch, node, pair) - observed) / n
        return (total - score) / n + 0.5 * self.alpha * w @ w, gradient + self.alpha * w

    # ---- Clamp: new states -------------------------------------------------------------------
    def _tighten(self, batch, parts, w):
        """Add to every sample's ``Y_F`` the state of F found by MAX-TIGHTEN or MAP."""
        structure = self.structure_
        potentials = structure.potentials(batch, w)
        start = structure.solver_.map(potentials, n_jobs=self.n_jobs)
        for m in range(self.n_decompositions):
            fvs = np.concatenate([p[m][0].fvs for p in parts])
            labels = (
                start
                if self.tighten == "map"
                else MessagePassingSolver().marginal_map(potentials, fvs, start)
            )
            for i, sample_parts in enumerate(parts):
                decomposition, states = sample_parts[m]
                new = labels[batch.nodes_of(i)][decomposition.clamped]
                if not (states == new).all(axis=1).any():
                    sample_parts[m] = (decomposition, np.vstack([states, new]))

    def _prune(self, batch, parts, w):
        """Keep ``budget`` states: drop the lowest ``Z(y_F)``, never the truth (row 0)."""
        state_log_z = self._bound(batch, parts, w).state_log_z
        for i, sample_parts in enumerate(parts):
            for m, (decomposition, states) in enumerate(sample_parts):
                while len(states) > self.budget:
                    log_z = state_log_z[i][m][: len(states)]
                    drop = 1 + int(np.argmin(log_z[1:]))
                    states = np.delete(states, drop, axis=0)
                    state_log_z[i][m] = np.delete(log_z, drop)
                sample_parts[m] = (decomposition, states)

    # ---- optimisers -------------------------------------------------------------------------
    def _optimise(self, batch, labels, state, rng, validation_score):
        parts = self._decompose(batch, labels, rng)
        n = batch.weight_total
        for round_ in range(self.n_rounds):
            if round_:
                self._tighten(batch, parts, state.coef)
                if self.schedule == "online":
                    self._prune(batch, parts, state.coef)
            state.record(bounds=self._bound(batch, parts, state.coef).total / n)
            w, n_iter, _ = self._minimise(
                lambda w: self._objective(batch, labels, parts, w), state.coef
            )
            state.coef, state.n_iter = w, state.n_iter + n_iter
        state.record(by_states=self._bound_by_states(batch, parts, state.coef))

    def _bound_by_states(self, batch, parts, w):
        """The mean bound at ``w`` with the first 1, 2, … states of every ``Y_F``."""
        most = max(len(states) for sample_parts in parts for _, states in sample_parts)
        return np.array(
            [
                self._bound(batch, [[(d, s[:k]) for d, s in p] for p in parts], w).total
                / batch.weight_total
                for k in range(1, most + 1)
            ]
        )

    def _set_fitted_attributes(self, state) -> None:
        self.lower_bound_history_ = state.recorded("bounds")
        self.lower_bound_by_states_ = state.recorded("by_states")[-1]
