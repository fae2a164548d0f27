"""Part & Clamp (Pletscher & Ong) and the likelihood surrogates it is compared with:
pseudo-likelihood, composite likelihood, contrastive divergence and piecewise training."""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp, softmax
from sklearn.utils._param_validation import StrOptions

from . import _sgd
from ._backend import (
    ForestSolver,
    GibbsSampler,
    MessagePassingSolver,
    PairwiseKind,
    Statistics,
    conditional_scores,
    feedback_vertex_set,
    pairwise_statistics,
)
from ._base import (
    PARALLEL_CONSTRAINTS,
    RANDOMISED_CONSTRAINTS,
    SHARED_CONSTRAINTS,
    TOL_CONSTRAINTS,
    BaseStructuredEstimator,
)
from ._lbfgs import minimise
from ._state import FitState
from ._utils import NumberInterval, onehot, user_stacklevel
from .perturb_map import label_weights
from .structures import BaseStructure, GraphStructure, GridStructure, check_structure


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


#: The full-batch surrogate-likelihood learners: grid and graph structures, perturb-and-MAP
#: marginals (random, parallel).
_FULL_BATCH_CONSTRAINTS: dict = {
    **SHARED_CONSTRAINTS,
    **RANDOMISED_CONSTRAINTS,
    **PARALLEL_CONSTRAINTS,
    "structure": [StrOptions({"grid", "graph", "chain"}), BaseStructure],
    "n_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
}


class _FullBatchCRF(BaseStructuredEstimator):
    """Shared contract of the full-batch surrogate-likelihood learners: grid and graph
    structures of any K (the pairwise weights kept attractive where the solver needs it),
    MAP prediction by the structure's solver, marginals by perturb-and-MAP (or by Gibbs
    chains started from perturbed MAPs: the weights define a Gibbs distribution)."""

    _marginal_methods = ("perturb", "gibbs")

    def _make_structure(self):
        if self.structure == "grid":
            return GridStructure()
        if self.structure == "graph":
            return GraphStructure()
        return check_structure(self.structure)

    def _check_structure(self, structure, has_unknown):
        super()._check_structure(structure, has_unknown)
        if structure.solver_.needs_attractive and structure.pairwise_kind is not PairwiseKind.POTTS:
            raise ValueError(
                f"{type(self).__name__} keeps attractive weights as box constraints, which needs "
                "Potts pairwise terms with the graph-cut solver: use pairwise='potts', or "
                "solver='message_passing' for tables"
            )

    def _box(self):
        """L-BFGS-B bounds: Potts weights <= 0 where graph cuts need attractive terms."""
        structure = self.structure_
        if not structure.solver_.needs_attractive:
            return None
        n_unary = structure.n_unary_weights_
        return [(None, None)] * n_unary + [(None, 0.0)] * (structure.size_ - n_unary)

    def _new_state(self, rng):
        return FitState(coef=np.zeros(self.structure_.size_), rng=rng)

    def _minimise(self, objective, w0):
        """``objective(w) -> (value, gradient)`` minimised by L-BFGS-B from ``w0``, within
        :meth:`_box`: ``(w, n_iter, value)`` (on one BLAS thread, see
        :func:`~pmap_sklearn._lbfgs.minimise`)."""
        return minimise(
            objective,
            w0,
            name=type(self).__name__,
            max_iter=self.max_iter,
            tol=self.tol,
            verbose=self.verbose,
            bounds=self._box(),
        )

    def _joint(self, batch, node, pair):
        statistics = Statistics(node, pairwise_statistics(pair, self.structure_.pairwise_kind))
        return self.structure_.joint_feature_of(batch, statistics)


class _LbfgsSurrogateCRF(_FullBatchCRF):
    """A full-batch learner whose surrogate objective is smooth and deterministic
    (``_objective(batch, labels, w) -> (value, gradient)``): minimised by L-BFGS-B, the
    attractive weights kept by box constraints."""

    def _optimise(self, batch, labels, state, rng, validation_score):
        w, n_iter, value = self._minimise(self._objective_of(batch, labels), state.coef)
        state.coef, state.n_iter = w, state.n_iter + n_iter
        self.objective_ = value

    def _objective_of(self, batch, labels):
        """``w -> (value, gradient)`` of the surrogate on these samples."""
        return lambda w: self._objective(batch, labels, w)


class PseudoLikelihoodCRF(_LbfgsSurrogateCRF):
    r"""CRF trained by maximum pseudo-likelihood (Besag 1975).

    Minimises :math:`(1/N) \sum_n \sum_i -\log P(y_i | y_{N(i)}, x_n) + (\alpha /2)\|w\|^2`: each
    node's conditional given its neighbours' true labels, exact and cheap on any graph with any K,
    by L-BFGS. The classic baseline of Pletscher & Ong's Table 1.

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure; the pairwise weights stay attractive with the graph-cut solver.
    alpha : float, default=1.0
        L2 regularisation (the paper's λ).
    max_iter : int, default=200
        L-BFGS iterations.
    tol : float, default=1e-5
        L-BFGS tolerance on the projected gradient.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals` (perturb-and-MAP marginals).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the perturbations of :meth:`predict_marginals`.
    n_jobs : int or None, default=None
        Processes for the graph cuts of prediction.
    warm_start : bool, default=False
        Start from the previous ``coef_`` on the same data (``X`` and ``y``) and parameters, when
        the previous fit was made with ``warm_start=True``; after a change of the data or of
        ``structure``, ``alpha``, ``class_weight``, ``unknown_label`` or ``ignore_label``, a warm
        start fits afresh (as ``warm_start=False`` does): the state belongs to the last fit's
        objective.
    verbose : int, default=0
        Progress per L-BFGS iteration.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels (filled in by the MAP of a model fitted on the complete samples).
    ignore_label : int, float, str or None, default=None
        The label that marks a node to ignore (e.g. void pixels): ignored nodes are removed
        from the samples for the fit — they neither count in the loss nor get filled in, unlike
        ``unknown_label`` — and are not counted by :meth:`score`. Chains are cut at them;
        grids cannot lose nodes (give GraphSample objects instead).

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
    objective_ : float
        The final regularised negative mean pseudo-log-likelihood.

    See Also
    --------
    PartClampCRF : composite likelihood on forests and its tightened lower bound.
    """

    _parameter_constraints: dict = {
        **_FULL_BATCH_CONSTRAINTS,
        **TOL_CONSTRAINTS,
    }

    def __init__(
        self,
        structure="grid",
        *,
        alpha=1.0,
        max_iter=200,
        tol=1e-5,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        self.structure = structure
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_perturbations = n_perturbations
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.verbose = verbose
        self.unknown_label = unknown_label
        self.ignore_label = ignore_label

    def _objective(self, batch, labels, w):
        """Negative mean pseudo-log-likelihood (regularised) and its gradient."""
        potentials = self.structure_.potentials(batch, w)
        scores = conditional_scores(potentials, labels)
        log_norm = logsumexp(scores, axis=1)
        value = np.sum(log_norm - scores[np.arange(len(labels)), labels])
        conditional = np.exp(scores - log_norm[:, None])
        first, second = labels[batch.edges[:, 0]], labels[batch.edges[:, 1]]
        columns = np.arange(len(batch.edges))
        k = self.structure_.n_states_
        # every edge enters the conditionals of both its ends: observed pairs count twice
        pair = np.zeros((len(batch.edges), k, k))
        pair[columns, :, second] += conditional[batch.edges[:, 0]]
        pair[columns, first, :] += conditional[batch.edges[:, 1]]
        pair[columns, first, second] -= 2.0
        gradient = self._joint(batch, conditional - onehot(labels, k), pair)
        n = batch.n_samples
        return value / n + 0.5 * self.alpha * w @ w, gradient / n + self.alpha * w


def _normalised(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log Σ_k exp(scores_k), softmax(scores))`` of every row, from one exponential (several
    times faster than scipy's ``logsumexp`` and ``softmax`` on many short rows)."""
    top = scores.max(axis=1, keepdims=True) if scores.size else np.zeros((len(scores), 1))
    shifted = np.exp(scores - top)
    total = shifted.sum(axis=1, keepdims=True)
    shifted /= total
    return (np.log(total) + top)[:, 0], shifted


class PiecewiseCRF(_LbfgsSurrogateCRF):
    r"""CRF trained piecewise (Sutton & McCallum 2005): every factor normalised on its own.

    Replaces :math:`p(y \mid x)` by the product of independently normalised factors, each node's
    :math:`p_d(y_d \mid x) \propto \exp u_d(y_d)` and each edge's
    :math:`p_{ij}(y_i, y_j \mid x) \propto \exp t_{ij}(y_i, y_j)`, and minimises
    :math:`-\frac1N \sum_n \big[\sum_d \log p_d(y_{nd}) + \sum_{ij} \log p_{ij}(y_{ni},
    y_{nj})\big] + \frac\alpha2 \lVert w \rVert^2` by L-BFGS. The likelihood splits into one
    small problem per factor — the unary pieces a multinomial logistic regression of the nodes,
    the pairwise pieces one over the :math:`K^2` label pairs of the edges — so learning needs no
    inference at all; the classic fast baseline for loopy CRFs (Domokos, lecture 11). The pieces
    learn each part as if the others were absent: a pairwise piece sees only how often
    neighbours agree, not how much the unary terms already explain.

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure (any K; Potts or tables; untied weights where the structure has them;
        ``ChainStructure()`` for chains); the Potts weights stay attractive with the graph-cut
        solver.
    class_weight : None, "balanced" or dict, default=None
        Weights of the labels, for rare classes: each node's piece is weighted by its label's
        weight and each edge's by the mean of its two nodes'. ``"balanced"``:
        ``n_nodes / (K · n_nodes_k)`` over the known training labels; a dict
        ``{label: weight}`` (1 for labels it leaves out).
    alpha : float, default=1e-3
        L2 regularisation.
    max_iter : int, default=200
        L-BFGS iterations.
    tol : float, default=1e-5
        L-BFGS tolerance on the projected gradient.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals` (perturb-and-MAP marginals).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the perturbations of :meth:`predict_marginals`.
    n_jobs : int or None, default=None
        Processes for the solver calls of prediction.
    warm_start : bool, default=False
        Start from the previous ``coef_`` on the same data (``X`` and ``y``) and parameters, when
        the previous fit was made with ``warm_start=True``; after a change of the data or of
        ``structure``, ``alpha``, ``class_weight``, ``unknown_label`` or ``ignore_label``, a warm
        start fits afresh (as ``warm_start=False`` does): the state belongs to the last fit's
        objective.
    verbose : int, default=0
        Progress per L-BFGS iteration.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels (filled in by the MAP of a model fitted on the complete samples).
    ignore_label : int, float, str or None, default=None
        The label that marks a node to ignore (e.g. void pixels): ignored nodes are removed
        from the samples for the fit — they neither count in the loss nor get filled in, unlike
        ``unknown_label`` — and are not counted by :meth:`score`. Chains are cut at them;
        grids cannot lose nodes (give GraphSample objects instead).

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
    objective_ : float
        The final regularised negative mean piecewise log-likelihood.

    See Also
    --------
    PseudoLikelihoodCRF : each node's conditional given its neighbours' true labels.
    TwoStageCRF : a classifier's probabilities, then a CRF on them.

    References
    ----------
    .. [1] C. Sutton and A. McCallum. Piecewise training for undirected models. UAI 2005.

    Examples
    --------
    >>> from pmap_sklearn import PiecewiseCRF
    >>> from pmap_sklearn.datasets import make_grid_data
    >>> data = make_grid_data(n_samples=6, random_state=0)
    >>> model = PiecewiseCRF().fit(data.data, data.target)
    >>> _, potts = model.structure_.unpack(model.coef_)
    >>> bool((potts < 0).all())  # neighbours that agree: attractive Potts weights
    True
    """

    _parameter_constraints: dict = {
        **_FULL_BATCH_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        "class_weight": [None, StrOptions({"balanced"}), dict],
    }

    def __init__(
        self,
        structure="grid",
        *,
        class_weight=None,
        alpha=1e-3,
        max_iter=200,
        tol=1e-5,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        self.structure = structure
        self.class_weight = class_weight
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_perturbations = n_perturbations
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.verbose = verbose
        self.unknown_label = unknown_label
        self.ignore_label = ignore_label

    def _objective(self, batch, labels, w):
        """Negative mean piecewise log-likelihood (regularised) and its gradient: for every
        piece, its expected statistics minus the observed ones (Sutton & McCallum 2005, §3)."""
        return self._objective_of(batch, labels)(w)

    def _objective_of(self, batch, labels):
        """:meth:`_objective` of these samples as ``w -> (value, gradient)``, what depends on
        the labels alone (the pieces' weights, the observed pairs) computed once."""
        weights = label_weights(self.class_weight, self.classes_, labels)
        node_weight = np.ones(len(labels)) if weights is None else weights[labels]
        edge_weight = 0.5 * node_weight[batch.edges].sum(axis=1)
        first, second = labels[batch.edges[:, 0]], labels[batch.edges[:, 1]]
        nodes, n = np.arange(len(labels)), batch.n_samples

        def objective(w):
            potentials = self.structure_.potentials(batch, w)
            unary_norm, node = _normalised(potentials.unary)
            value = node_weight @ (unary_norm - potentials.unary[nodes, labels])
            node[nodes, labels] -= 1.0
            node *= node_weight[:, None]
            pair_value, pair = _pairwise_pieces(potentials, first, second, edge_weight)
            gradient = self.structure_.joint_feature_of(batch, Statistics(node, pair))
            value += pair_value
            return value / n + 0.5 * self.alpha * w @ w, gradient / n + self.alpha * w

        return objective


def _pairwise_pieces(potentials, first, second, edge_weight) -> tuple[float, np.ndarray]:
    """The pairwise pieces of the piecewise likelihood: ``Σ_e c_e [log Z_e − t_e(y_i, y_j)]``
    over the edges (``Z_e`` the sum of ``exp t_e`` over the K² label pairs, ``c_e`` the edge
    weights) and its gradient with respect to the pairwise scores, as pairwise statistics of
    the potentials' kind (expected minus observed)."""
    k = potentials.n_states
    if potentials.pairwise_kind is PairwiseKind.POTTS:
        # K agreeing pairs score 0 and K² − K disagreeing ones t: Z = K + (K² − K) e^t, in
        # one exponential per edge instead of a table of K² scores
        t, differ = potentials.pairwise, first != second
        top = np.maximum(t, 0.0)
        agree, disagree = k * np.exp(-top), (k * k - k) * np.exp(t - top)
        log_z = top + np.log(agree + disagree)
        value = edge_weight @ (log_z - t * differ)
        return float(value), edge_weight * (disagree / (agree + disagree) - differ)
    observed = first * k + second
    if potentials.pairwise_kind is PairwiseKind.SHARED:  # one table: one normaliser
        table = potentials.pairwise.reshape(1, k * k)
        pair_norm, pair = _normalised(table)
        counts = np.bincount(observed, edge_weight, minlength=k * k)
        value = edge_weight.sum() * pair_norm[0] - counts @ table[0]
        return float(value), (edge_weight.sum() * pair[0] - counts).reshape(k, k)
    tables = np.asarray(potentials.edge_tables()).reshape(len(observed), k * k)
    pair_norm, pair = _normalised(tables)
    edges = np.arange(len(observed))
    value = edge_weight @ (pair_norm - tables[edges, observed])
    pair[edges, observed] -= 1.0
    pair *= edge_weight[:, None]
    return float(value), pair.reshape(-1, k, k)


class ContrastiveDivergenceCRF(_FullBatchCRF):
    r"""CRF trained by contrastive divergence (Hinton 2002).

    Each step runs ``n_gibbs`` sweeps of Gibbs sampling started at the true labels of every training
    sample — chromatic Gibbs: the nodes of one colour of a proper colouring are conditionally
    independent, so a colour class is sampled at once — and moves the weights along :math:`(1/N)
    \sum_n [\Psi (x_n, y_n) - \Psi (x_n, \tilde{y}_n)] - \alpha w`, all samples in one step as in
    Pletscher & Ong's Table 1. Steps are normalised, :math:`\eta_0 / \sqrt{t}` in weight space,
    since CD has no objective to search a step on.

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure; the pairwise weights stay attractive with the graph-cut solver.
    n_gibbs : int, default=5
        Gibbs sweeps per step.
    alpha : float, default=1.0
        L2 regularisation.
    max_iter : int, default=200
        Steps.
    eta0 : float, default=1.0
        Length of the first step in weight space.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the Gibbs samples and the perturbations.
    n_jobs : int or None, default=None
        Processes for the graph cuts of prediction.
    warm_start : bool, default=False
        Continue from the previous ``coef_`` and step count on the same data (``X`` and ``y``) and
        parameters, when the previous fit was made with ``warm_start=True``; after a change of the
        data or of ``structure``, ``alpha``, ``class_weight``, ``unknown_label`` or
        ``ignore_label``, a warm start fits afresh (as ``warm_start=False`` does): the state belongs
        to the last fit's objective.
    verbose : int, default=0
        Progress per step.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels.
    ignore_label : int, float, str or None, default=None
        The label that marks a node to ignore (e.g. void pixels): ignored nodes are removed
        from the samples for the fit — they neither count in the loss nor get filled in, unlike
        ``unknown_label`` — and are not counted by :meth:`score`. Chains are cut at them;
        grids cannot lose nodes (give GraphSample objects instead).

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
        The average of the iterates of the second half of the steps.
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int

    See Also
    --------
    PartClampCRF : the tightened lower bound Pletscher & Ong compare it with.
    """

    _parameter_constraints: dict = {
        **_FULL_BATCH_CONSTRAINTS,
        "n_gibbs": [NumberInterval(Integral, 1, None, closed="left")],
        "eta0": [NumberInterval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        structure="grid",
        *,
        n_gibbs=5,
        alpha=1.0,
        max_iter=200,
        eta0=1.0,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        self.structure = structure
        self.n_gibbs = n_gibbs
        self.alpha = alpha
        self.max_iter = max_iter
        self.eta0 = eta0
        self.n_perturbations = n_perturbations
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.verbose = verbose
        self.unknown_label = unknown_label
        self.ignore_label = ignore_label

    def _new_state(self, rng):
        return _sgd.SGDState(coef=np.zeros(self.structure_.size_), rng=rng)

    def _optimise(self, batch, labels, state, rng, validation_score):
        structure, n = self.structure_, batch.n_samples
        chains = GibbsSampler(self.n_gibbs).session(structure.potentials(batch, state.coef))
        observed = structure.joint_feature(batch, labels)

        def make_oracle(order):  # full batch: the samples in their order
            def oracle(part, w, rng):
                sample = chains.sample(structure.potentials(batch, w), labels, rng)
                # CD's ascent direction Ψ(truth) − Ψ(Gibbs sample); no objective to report
                return observed - structure.joint_feature(batch, sample), 0.0

            return oracle

        _sgd.run_sgd(
            make_oracle,
            state,
            n,
            rng=rng,
            alpha=self.alpha,
            batch_size=n,
            steps=_sgd.Normalised(self.eta0),
            average=state.n_seen + n * (self.max_iter // 2),  # the second half of the steps
            max_iter=self.max_iter,
            tol=None,
            n_iter_no_change=1,
            project=structure.project,  # attractive weights for graph cuts
            verbose=self.verbose,
            shuffle=False,
            name=type(self).__name__,
        )


class PartClampCRF(_FullBatchCRF):
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
    ignore_label : int, float, str or None, default=None
        The label that marks a node to ignore (e.g. void pixels): ignored nodes are removed
        from the samples for the fit — they neither count in the loss nor get filled in, unlike
        ``unknown_label`` — and are not counted by :meth:`score`. Chains are cut at them;
        grids cannot lose nodes (give GraphSample objects instead).
    solver : {"batch", "online"}, optional
        Deprecated: the old name of ``schedule`` (it clashed with the structure's MAP solver);
        it will be removed in 0.3.

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
        **PseudoLikelihoodCRF._parameter_constraints,
        "n_decompositions": [NumberInterval(Integral, 1, None, closed="left")],
        "combine": [StrOptions({"arithmetic", "geometric", "max"})],
        "tighten": [StrOptions({"max_tighten", "map"})],
        "schedule": [StrOptions({"batch", "online"})],
        "solver": [StrOptions({"batch", "online", "deprecated"})],
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
        solver="deprecated",
    ):
        self.structure = structure
        self.n_decompositions = n_decompositions
        self.combine = combine
        self.tighten = tighten
        self.schedule = schedule
        self.solver = solver
        self.budget = budget
        self.n_rounds = n_rounds
        self.fvs_order = fvs_order
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_perturbations = n_perturbations
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.verbose = verbose
        self.unknown_label = unknown_label
        self.ignore_label = ignore_label

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
        """``Σ_n log Z_bound(x_n)``, its gradient statistics over the batch and ``log Z(y_F)``
        of every state."""
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
            total += bound
            node[batch.nodes_of(i)] = sum(c * r.node for c, r in zip(mix, results, strict=True))
            pair[batch.edges_of(i)] = sum(c * r.pair for c, r in zip(mix, results, strict=True))
            state_log_z.append([r.state_log_z for r in results])
        return _Bound(total, node, pair, state_log_z)

    def _objective(self, batch, labels, parts, w):
        n = batch.n_samples
        total, node, pair, _ = self._bound(batch, parts, w)
        score = self.structure_.potentials(batch, w).score(labels).sum()
        observed = self.structure_.joint_feature(batch, labels)
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
    def _schedule(self) -> str:
        if self.solver == "deprecated":
            return self.schedule
        warnings.warn(
            "PartClampCRF(solver=...) was renamed schedule= (solver names the structure's MAP "
            "solver elsewhere); solver= will be removed in 0.3",
            FutureWarning,
            stacklevel=user_stacklevel(),
        )
        return self.solver

    def _optimise(self, batch, labels, state, rng, validation_score):
        parts = self._decompose(batch, labels, rng)
        n = batch.n_samples
        for round_ in range(self.n_rounds):
            if round_:
                self._tighten(batch, parts, state.coef)
                if self._schedule() == "online":
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
                / batch.n_samples
                for k in range(1, most + 1)
            ]
        )

    def _set_fitted_attributes(self, state) -> None:
        self.lower_bound_history_ = state.recorded("bounds")
        self.lower_bound_by_states_ = state.recorded("by_states")[-1]
