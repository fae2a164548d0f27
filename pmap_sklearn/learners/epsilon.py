"""The ε-family of Hazan & Urtasun (2010): CRF (ε = 1) to structured SVM (ε = 0) by primal-dual
message passing, for pairwise models of any K and any sign."""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions

from .._backend import (
    COUNTING_NUMBERS,
    MessagePassingSolver,
    Potentials,
    Statistics,
    counting_numbers,
    pairwise_statistics,
)
from .._docstrings import shared_docstring
from .._optim import lbfgs as _lbfgs
from .._optim import sgd as _sgd
from .._parallel import one_blas_thread
from .._progress import Progress
from .._state import FitState
from .._utils import store_parameters, user_stacklevel
from .._validation import NonFiniteError, NumberInterval
from ..structures import ChainStructure, GraphStructure, GridStructure, check_structure
from ._estimator import (
    PARALLEL_CONSTRAINTS,
    SHARED_CONSTRAINTS,
    TOL_CONSTRAINTS,
    BaseStructuredEstimator,
)

#: The largest ``epsilon × |counting number|``: up to it the fitted weights scale with it (the
#: model is ``w / epsilon``); at 1e10 they already collapse toward 0 on a 24² grid.
MAX_TEMPERATURE = 1e8


class _Scores(NamedTuple):
    """The scores of one weight vector that the messages see."""

    potentials: Potentials
    #: (n_nodes, K) unary scores plus the loss ℓ_v
    node: np.ndarray
    #: (E, K, K) pairwise tables
    tables: np.ndarray


class _Lemma2(NamedTuple):
    """Lemma 2: the gradient at the current messages and the beliefs it is made of."""

    gradient: np.ndarray
    #: (n_nodes, K) node beliefs
    node: np.ndarray
    #: (E, K, K) edge beliefs
    edge: np.ndarray


@shared_docstring
class EpsilonCRF(BaseStructuredEstimator):
    r"""Structured prediction by the ε-family of Hazan & Urtasun, with primal-dual message passing.

    Minimises the approximated program of Hazan & Urtasun (2010, Theorem 1),

    :math:`(1/N) \sum_n [\varepsilon \ln \sum_{\hat{y}} \exp ((\ell (y_n, \hat{y}) + f(\hat{y} |
    x_n)) / \varepsilon ) - f(y_n | x_n)] + (\alpha /2)\|w\|^2`

    with the soft-max replaced by its local-entropy approximation ``max_b ⟨b, ℓ + θ⟩ + ε [Σ_α c_α
    H(b_α) + Σ_v c_v H(b_v)]`` over the local polytope. ε = 1 with ``loss=None`` is the CRF, ε = 1
    with the loss the loss-augmented CRF, ε → 0 the structured SVM (at ε = 0 exactly its hinge, with
    subgradient steps). The program is minimised jointly in the weights and the messages: each
    iteration runs ``n_sweeps`` passes of the closed-form message update (Lemma 1) over all
    nodes of all samples, then a gradient step on the weights (Lemma 2) with a backtracking line
    search (ε > 0) or a :math:`1/(\alpha t)` step (ε = 0). The messages persist across iterations,
    so no inference runs to convergence.

    No MAP oracle is needed: the model may have any number of labels and pairwise terms of any sign
    on any graph. With Bethe counting numbers (:math:`c_\alpha = 1`, ``c_v = 1 − deg v``) the
    approximation is exact on chains and trees.

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="chain"
        Graph structure. ``"grid"`` and ``"graph"`` become
        ``GridStructure(pairwise="table", solver="message_passing")`` (and the graph
        equivalent): a K×K table per edge feature, any K. A structure instance is used as given.
    epsilon : float, default=1.0
        ε >= 0: 1 is the (loss-augmented) CRF, 0 the structured SVM.
    loss : {"hamming"} or None, default="hamming"
        The loss inside the soft-max: the Hamming loss :math:`(1/D) \sum_d [y_d \ne \hat{y}_d]` of
        each sample (as :class:`~pmap_sklearn.StructuredSVM`), or None (the plain CRF at ε = 1).
    counting_numbers : {"auto", "convex", "bethe"} or (float, float), default="auto"
        ``"convex"``: :math:`c_\alpha = c_v = 1` (the paper's experiments; a convex program);
        ``"bethe"``: :math:`c_\alpha = 1`, ``c_v = 1 − deg v`` (exact on chains and trees, not
        convex on loopy graphs: only stationary points are guaranteed); ``"auto"``: Bethe on the
        samples that are forests (chains, trees, no edges: exact and convex there, so at ε = 1
        without a loss this is the CRF), convex on loopy samples; or a pair ``(c_edge, c_node)``.
    alpha : float, default=1e-2
        L2 regularisation strength (the paper's C with p = 2); > 0 for the dual bound.
    max_iter : int, default=300
        Iterations (message sweeps + weight step).
    tol : float, default=1e-6
        Stop when the primal-dual gap falls below ``tol · max(1, |primal|)``.
    n_sweeps : int, default=1
        Passes of Lemma 1 over all nodes per weight step.
    warm_start : bool, default=False
        Continue from the previous ``coef_`` on the same data (``X`` and ``y``) and parameters, when
        the previous fit was made with ``warm_start=True``; after a change of the data or of
        ``structure``, ``epsilon``, ``loss``, ``counting_numbers``, ``alpha``, ``unknown_label`` or
        ``ignore_label``, a warm start fits afresh (as ``warm_start=False`` does): the state belongs
        to the last fit's objective.
    n_jobs : int or None, default=None
        Processes for the structure's MAP solver with ``predict(X, decoding="map")``; the
        message passing itself is vectorised over the whole batch.
    verbose : int, default=0
        Report the primal objective of the first three iterations, every tenth of ``max_iter``
        and the last (``verbose >= 2``: the gap and step; ``verbose >= 3``: every iteration).
    unknown_label : int, float, str or None, default=-1
        The label that marks an unknown node in ``y``; such samples are self-trained (a model
        fitted on the fully labelled samples fills them in with its belief argmax).
    {{ignore_label}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
        The weights θ.
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
        Iterations of the last fit.
    primal_history_ : list of float
        The Theorem-1 objective (in weights and messages) after each iteration's message
        sweeps: an upper bound of the approximated program at the current weights.
    dual_history_ : list of float
        The dual objective at the current beliefs (a lower bound once the beliefs are
        consistent); NaN when ``alpha = 0``.
    gap_history_ : list of float
        ``primal − dual`` per iteration.

    See Also
    --------
    ChainCRF : the exact CRF on chains (ε = 1, ``loss=None``, Bethe numbers).
    StructuredSVM : the exact structured hinge with MAP oracles (ε = 0).

    References
    ----------
    .. [1] T. Hazan and R. Urtasun. A primal-dual message-passing algorithm for approximated
       large scale structured prediction. NIPS 2010.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import EpsilonCRF
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=(6, 6)) for _ in range(10)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(6, 6, 3)) for yi in y]
    >>> model = EpsilonCRF("grid", epsilon=0.5).fit(X, y)
    >>> model.score(X, y) > 0.85
    True
    """

    _parameter_constraints: dict = {
        **SHARED_CONSTRAINTS,
        **PARALLEL_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        "epsilon": [NumberInterval(Real, 0, None, closed="left")],
        "loss": [StrOptions({"hamming"}), None],
        "counting_numbers": [StrOptions(set(COUNTING_NUMBERS)), tuple],
        "n_sweeps": [NumberInterval(Integral, 1, None, closed="left")],
    }
    _marginal_methods = ("beliefs",)
    _warm_start_depends_on = (
        *BaseStructuredEstimator._warm_start_depends_on,
        "epsilon",
        "counting_numbers",
    )

    def __init__(
        self,
        structure="chain",
        *,
        epsilon=1.0,
        loss="hamming",
        counting_numbers="auto",
        alpha=1e-2,
        max_iter=300,
        tol=1e-6,
        n_sweeps=1,
        warm_start=False,
        n_jobs=None,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        store_parameters(self, locals())

    # ---- the structure ----------------------------------------------------------------------
    def _resolve_structure(self):
        if self.structure == "grid":
            return GridStructure(pairwise="table", solver="message_passing")
        if self.structure == "graph":
            return GraphStructure(pairwise="table", solver="message_passing")
        if self.structure == "chain":
            return ChainStructure()
        return self.structure

    def _make_structure(self):
        return check_structure(self._resolve_structure())

    def _belief_solver(self) -> MessagePassingSolver:
        """The solver whose belief sessions run the messages of the learning and the
        marginals (with this estimator's counting numbers)."""
        return MessagePassingSolver(counting_numbers=self.counting_numbers)

    def _solver_needs(self, has_unknown):
        """The structure's solver only decodes MAP labellings (``decoding="map"``): the
        learning runs its own messages, and unknown labels are filled from beliefs."""
        return {}

    def _check_fit_parameters(self) -> None:
        if self.epsilon == 0 and self.alpha == 0:
            raise ValueError("epsilon=0 needs alpha > 0 (the subgradient steps are 1/(alpha t))")
        largest = 1.0
        if isinstance(self.counting_numbers, tuple):
            counting_numbers(self.counting_numbers, np.zeros(0))
            largest = max(largest, *(abs(float(c)) for c in self.counting_numbers))
        if float(self.epsilon) * largest > MAX_TEMPERATURE:
            raise ValueError(
                f"epsilon={self.epsilon!r} with counting numbers up to {largest:g} smooths the "
                f"messages at a temperature above {MAX_TEMPERATURE:g}: float64 messages no longer "
                f"resolve the scores, the model flattens to uniform and the weights stay at 0. "
                f"epsilon=1 is the CRF likelihood, epsilon=0 the structured SVM"
            )

    def _new_state(self, rng):
        return FitState(coef=np.zeros(self.structure_.size_), rng=rng)

    def _set_fitted_attributes(self, state) -> None:
        self.primal_history_ = state.recorded("primal")
        self.dual_history_ = state.recorded("dual")
        self.gap_history_ = [
            p - d for p, d in zip(self.primal_history_, self.dual_history_, strict=True)
        ]

    def _targets(self, batch, labels, w_supervised, rng):
        """Known labels; unknown ones become the belief argmax of the supervised weights."""
        if w_supervised is None:
            return labels
        guess = self._beliefs(batch, w_supervised).argmax(axis=1)
        return np.where(labels >= 0, labels, guess)

    # ---- the objective ----------------------------------------------------------------------
    def _loss_scores(self, batch, labels) -> np.ndarray:
        """ℓ_v(y_v, ŷ_v) (n_nodes, K): ``1/D`` on every wrong label (0 without a loss)."""
        k = self.structure_.n_states_
        scores = np.zeros((batch.n_nodes, k))
        if self.loss == "hamming":
            scores += (1.0 / batch.lengths[batch.node_sample])[:, None]
            scores[np.arange(batch.n_nodes), labels] = 0.0
        return scores

    def _scores(self, batch, w, loss_scores) -> _Scores:
        potentials = self.structure_.potentials(batch, w)
        return _Scores(potentials, potentials.unary + loss_scores, potentials.edge_tables())

    def _optimise(self, batch, labels, state, rng, validation_score):
        # the weighted mean over the samples (Σ_n c_n · / Σ_n c_n with sample weights)
        structure, n = self.structure_, batch.weight_total
        alpha, epsilon = self.alpha, float(self.epsilon)
        loss_scores = self._loss_scores(batch, labels)
        observed = structure.joint_feature(batch, labels, batch.sample_weight) / n  # d / N
        scores = self._scores(batch, state.coef, loss_scores)
        bp = self._belief_solver().beliefs(scores.potentials, epsilon)
        bp.set_scores(scores.node, scores.tables)
        # With negative counting numbers (Bethe) the objective at fixed messages is no bound
        # (Claim 3): every evaluation then runs the messages to their fixed point.
        settle = bool((bp.node_count < 0).any())

        def primal(w, scores=None):
            """The Theorem-1 objective at weights w and the current messages."""
            scores = scores if scores is not None else self._scores(batch, w, loss_scores)
            bp.set_scores(scores.node, scores.tables)
            if settle:
                bp.run(max_sweeps=1000, tol=1e-10)
            truth = batch.weighted_sum(scores.potentials.score(labels))
            value = (batch.weighted_sum(bp.objective()) - truth) / n + 0.5 * alpha * w @ w
            if not np.isfinite(value):
                raise NonFiniteError(
                    "the EpsilonCRF objective is not finite (features too large): scale the "
                    "features (e.g. with NodeTransformer(StandardScaler())) or regularise more"
                )
            return value

        progress = Progress(type(self).__name__, self.max_iter, self.verbose, unit="iteration")
        w, converged, step, stalled = state.coef, False, 1.0, None
        memory = _lbfgs.CurvatureMemory(
            lambda v: (
                self._lemma2(bp, batch, v, self._scores(batch, v, loss_scores), observed).gradient
            )
        )
        for iteration in range(1, self.max_iter + 1):
            scores = self._scores(batch, w, loss_scores)
            bp.set_scores(scores.node, scores.tables)
            for _ in range(0 if settle else self.n_sweeps):
                bp.sweep()
            value = primal(w, scores)
            gradient, node, edge = self._lemma2(bp, batch, w, scores, observed)
            data_gradient = gradient - alpha * w
            dual = np.nan
            if alpha > 0:
                if batch.sample_weight is None:
                    linear = np.sum(node * loss_scores) / n
                else:
                    linear = batch.node_weight @ np.sum(node * loss_scores, axis=1) / n
                entropy = batch.weighted_sum(bp.entropy(node, edge)) if epsilon else 0.0
                entropy = epsilon * entropy / n
                dual = linear + entropy - data_gradient @ data_gradient / (2 * alpha)
            state.record(primal=float(value), dual=float(dual))
            state.n_iter += 1
            gap = value - dual
            progress.update(iteration, value, gap=float(gap), step=step)
            # (a gap below 0 means beliefs not yet consistent: no bound, go on)
            if 0 <= gap <= self.tol * max(1.0, abs(value)):
                converged = True
                break
            if epsilon > 0:
                direction = memory.direction(gradient)
                w_new, step = _lbfgs.backtrack(primal, w, value, gradient, direction)
                if step == 0.0:  # no decrease along a descent direction: rounding has won
                    stalled = iteration
                    break
                memory.update(w_new - w, gradient, w_new)
                w = w_new
            else:  # the structured hinge: a subgradient step of size 1 / (α (t + 1))
                step = _sgd.learning_rate("optimal", state.n_iter, alpha, 1.0 / alpha, 0.0)
                w = w - step * gradient
        state.coef = w
        if stalled is not None:
            advice = (
                "the objective is too flat or too steep for double precision: scale the "
                "features (e.g. with NodeTransformer(StandardScaler())) or lower epsilon"
            )
            if not np.any(w):
                raise NonFiniteError(
                    f"EpsilonCRF learned nothing: its line search found no decrease from w = 0 "
                    f"at iteration {stalled}; {advice}"
                )
            warnings.warn(
                f"EpsilonCRF stopped at iteration {stalled}: its line search found no decrease "
                f"(primal-dual gap {gap:.3g}); {advice}",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
            return
        progress.finish(state.n_iter, converged, f"primal-dual gap < tol={self.tol}")
        if converged and not np.any(w) and np.any(data_gradient):
            warnings.warn(
                f"EpsilonCRF stopped at w = 0: the primal-dual gap {gap:.3g} is below tol × "
                f"|objective| = {self.tol * abs(value):.3g} before any step, so the weights are "
                "all zero; the objective is dominated by its entropy or loss term: lower "
                "epsilon or tol, or scale the features",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )

    def _lemma2(self, bp, batch, w, scores: _Scores, observed) -> _Lemma2:
        r"""Lemma 2: the gradient in w of the Theorem-1 objective at the current messages, and
        the node and edge beliefs it is made of (``observed`` is :math:`(1/N) \sum_n \Psi (x_n,
        y_n)`)."""
        bp.set_scores(scores.node, scores.tables)
        edge = bp.edge_beliefs()
        node = bp.node_beliefs(edge)
        weighted_node, weighted_edge = node, edge
        if batch.sample_weight is not None:  # each sample's beliefs times its weight
            weighted_node = node * batch.node_weight[:, None]
            weighted_edge = edge * batch.edge_weight[:, None, None]
        statistics = Statistics(weighted_node, pairwise_statistics(weighted_edge, bp.pairwise_kind))
        expected = self.structure_.joint_feature_of(batch, statistics)
        return _Lemma2(expected / batch.weight_total - observed + self.alpha * w, node, edge)

    # ---- prediction -------------------------------------------------------------------------
    def _beliefs(self, batch, w) -> np.ndarray:
        """Node beliefs of the model without the loss, messages run to convergence."""
        potentials = self.structure_.potentials(batch, w)
        bp = self._belief_solver().beliefs(potentials, float(self.epsilon))
        bp.run(max_sweeps=500, tol=1e-9)
        return bp.node_beliefs()

    @one_blas_thread
    def predict(self, X, decoding: str = "marginal", known_labels=None) -> np.ndarray:
        """Labelling of each sample.

        Parameters
        ----------
        X : sequence of samples
            Samples in the structure's format.
        decoding : {"marginal", "map"}, default="marginal"
            ``"marginal"``: the argmax of the node beliefs (without the loss), as in Hazan &
            Urtasun; ``"map"``: the MAP labelling by the structure's solver (exact on chains
            and on binary attractive grids with graph cuts). The beliefs are the model the
            ε-family learns, so they decode by default, where the other learners decode the MAP.
        known_labels : None
            The other learners' constrained decoding, which the beliefs have not: refused when
            given.

        Returns
        -------
        y : ndarray of shape (n_samples,) of arrays
            One array of ``classes_`` per sample, shaped like its labels.
        """
        _refuse_options(known_labels=known_labels)
        if decoding not in ("marginal", "map"):
            raise ValueError(f"decoding must be 'marginal' or 'map', got {decoding!r}")

        def predict(index, *_):
            batch = self._prediction_problem(X, index).batch
            if decoding == "map":
                codes = self._map(batch, self.coef_)
            else:
                codes = self._beliefs(batch, self.coef_).argmax(axis=1)
            return self.structure_.format_labels(batch, codes, self.classes_)

        return self._in_chunks(predict, X)

    @one_blas_thread
    def predict_marginals(
        self,
        X,
        method: str | None = None,
        n_perturbations=None,
        known_labels=None,
        *,
        n_sweeps=None,
        as_dicts: bool = False,
    ):
        """Node beliefs ``b_v(k)`` of each sample (the model without the loss).

        Parameters
        ----------
        X : sequence of samples
            Samples in the structure's format.
        method : {"beliefs"}, optional
            The only method: the beliefs of the convex message passing at ``epsilon`` (exact
            marginals on chains and trees at ε = 1 with Bethe numbers; one-hot at ε = 0).
        n_perturbations, known_labels, n_sweeps : None
            The options of the other learners' marginals (perturbed MAPs, clamps, Gibbs
            chains), which the beliefs have not: refused by name when given.
        as_dicts : bool, default=False
            Return, per sample, a list of ``{label: probability}`` dicts, one per node
            (sklearn-crfsuite's form).

        Returns
        -------
        marginals : ndarray of shape (n_samples,) of arrays, or list of lists of dict
            One float array of shape (D, K) (or (H, W, K)) per sample over ``classes_``, or
            their dicts.
        """
        if method not in (None, "beliefs"):
            raise ValueError(f"method must be 'beliefs', got {method!r}")
        _refuse_options(
            n_perturbations=n_perturbations, known_labels=known_labels, n_sweeps=n_sweeps
        )

        def predict(index, *_):
            batch = self._prediction_problem(X, index).batch
            return self.structure_.format_marginals(batch, self._beliefs(batch, self.coef_))

        marginals = self._in_chunks(predict, X)
        return self._as_dicts(marginals) if as_dicts else marginals


def _refuse_options(**options) -> None:
    """A ValueError naming the first given option that EpsilonCRF's queries cannot honour."""
    for name, value in options.items():
        if value is not None:
            raise ValueError(
                f"EpsilonCRF's marginals are the beliefs of its message passing: {name} (an option "
                "of the perturb-and-MAP and exact marginals) does not apply; leave it None"
            )
