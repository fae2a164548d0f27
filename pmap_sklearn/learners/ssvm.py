"""Structured SVM trained by block-coordinate Frank-Wolfe (Lacoste-Julien et al. 2013) or by
stochastic subgradient descent (Ratliff, Bagnell & Zinkevich 2007; Shalev-Shwartz et al. 2011)."""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._docstrings import shared_docstring
from .._optim import defaults
from .._optim import sgd as _sgd
from .._progress import Progress
from .._state import FitState
from .._utils import SparseVector, onehot, store_parameters
from .._validation import NumberInterval
from ..metrics.hamming import class_weight_by_code, loss_weights
from ._concave_convex import ConcaveConvex
from ._estimator import (
    BATCH_CONSTRAINTS,
    PARALLEL_CONSTRAINTS,
    RANDOMISED_CONSTRAINTS,
    SHARED_CONSTRAINTS,
    BaseStructuredEstimator,
    PartialFitMixin,
)


@dataclass
class BCFWState(FitState):
    r"""The fit state of BCFW: ``coef`` is :math:`\hat{w} = \sum_i w_i` (before the projection onto
    the constraint set by ``structure``, kept rather than its bound method, which ``skops.io``
    cannot store); the dual blocks, their loss terms and the average of the primal iterates."""

    structure: object = None
    # (n, size): w_i; with sparse node features a list of SparseVector over each sample's rows
    blocks: np.ndarray | list | None = None
    block_losses: np.ndarray | None = None  # (n,): ℓ_i
    average: np.ndarray | None = None  # weighted average of the primal iterates
    n_steps: int = 0
    gaps: list = field(default_factory=list)
    # with pairwise steps, each block's labellings {bytes: [weight, labels]} (None: its truth)
    atoms: list | None = None

    @property
    def current(self) -> np.ndarray:
        r"""The primal iterate :math:`w = \Pi_C(\hat{w})` (cut weights ``<= 0`` on loopy
        structures)."""
        return self.structure.project(self.coef.copy())

    @property
    def estimate(self) -> np.ndarray:
        """The averaged primal iterate when averaging, the current one otherwise."""
        return self.average.copy() if self.average is not None else self.current


@shared_docstring
class StructuredSVM(PartialFitMixin, ConcaveConvex, BaseStructuredEstimator):
    r"""Structured SVM with Hamming or size-weighted Hamming loss, trained by BCFW.

    Minimises ``(α/2)‖w‖² + (1/N) Σ_n max_y [Δ(y_n, y) + f(y|x_n) − f(y_n|x_n)]`` over the weights
    allowed by the structure (cut weights ``<= 0`` for graph cuts) with block-coordinate Frank-Wolfe
    on the dual: each step solves one loss-augmented MAP — the loss is unary, so Viterbi and graph
    cuts stay exact — and moves that sample's dual block with an analytic line search. The
    constraint enters as :math:`w = \Pi_C(\hat{w})`, the projection of the unconstrained dual point;
    the loss-augmented MAP uses the projected ``w`` and the line search maximises a minorant of the
    dual, so every step is an ascent step.

    With hidden states (the structure's ``n_states_per_label`` or hidden nodes) it is the
    latent structured SVM (Yu & Joachims 2009): the loss counts a node wrong when its state
    lies outside its label's states, and the concave-convex procedure alternates the imputation
    of the states (the MAP restricted to each node's label) with the convex problem (see
    ``latent_iter``).

    ``algorithm="subgradient"`` minimises the same primal by projected stochastic subgradient
    descent instead (the lecture's algorithm; Ratliff, Bagnell & Zinkevich 2007): each step
    solves the loss-augmented MAPs :math:`y^*` of a mini-batch and moves
    :math:`w \leftarrow \Pi_C((1 - \eta_t \alpha) w + \eta_t \operatorname{mean}(\Psi(x, y) -
    \Psi(x, y^*)))` with Pegasos' steps :math:`\eta_t = 1 / (\alpha (t + 1))` (Shalev-Shwartz
    et al. 2011), and returns the average of the iterates weighted by their step number. It
    keeps no dual: its memory is one weight vector, where BCFW keeps one block per sample, and
    it has no duality gap to stop on.

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="chain"
    algorithm : {"bcfw", "subgradient"}, default="bcfw"
        Block-coordinate Frank-Wolfe on the dual (line search, duality gap, converges without a
        step size), or projected stochastic subgradient descent on the primal (no dual blocks:
        the memory of one weight vector, for data sets whose dual would not fit; it alone
        has :meth:`partial_fit`, BCFW's dual blocks being those of the training samples).
    alpha : float or "auto", default="auto"
        Regularisation strength λ. "auto": ``0.2 / n_samples`` with sparse node features (as
        the likelihood learners: crfsuite's ``c2 = 0.1`` on the summed loss), 1 on multi-label
        data (chosen by cross-validation on the training splits of yeast and scene), 1e-3
        otherwise.
    class_weight : None, "balanced" or dict, default=None
        The loss Δ: Hamming (``1/D`` per node), size-balanced weighted Hamming (Kolesnikov et
        al. 2014), or
        per-label weights (see :func:`~pmap_sklearn.metrics.loss_weights`).
    max_iter : int or "auto", default="auto"
        Passes over the samples. "auto": 10 with sparse node features, 200 on multi-label
        data (:class:`~pmap_sklearn.MultiLabelStructure`), 50 otherwise. BCFW still stops
        earlier at ``tol``; a fit that ends at the "auto" budget does not warn, as the budget
        is a setting and not a limit: on the OCR words the weighted average of 50 passes
        scores higher than a longer run (test accuracy 0.783, 300 passes: 0.754). A
        ``max_iter`` you set warns when the duality gap has not reached ``tol``.
    batch_size : int or "auto", default="auto"
        Samples whose loss-augmented MAPs are solved together with the same ``w`` (vectorised
        on chains) before their blocks are updated one after the other; 1 is exact BCFW.
        "auto": 16 with sparse node features (thousands of short sentences: a pass takes half
        the time of single ones, for the same accuracy per pass) and on multi-label data, 1
        otherwise. On multi-label data BCFW also takes pairwise steps (Osokin et al. 2016): a
        block moves weight from one of its labellings to the loss-augmented MAP when that
        raises the dual more than the Frank-Wolfe step, which otherwise zig-zags between the
        few labellings of each block near the optimum.
    tol : float, default=1e-4
        BCFW stops when the duality gap of a pass (summed block gaps) falls below ``tol``; the
        subgradient algorithm runs ``max_iter`` passes.
    average : bool, default=True
        Return the weighted average :math:`\bar{w} \propto \sum_k k w_k` of the primal iterates
        (BCFW-wavg of the reference, which converges much faster in the primal); it stays feasible.
    warm_start : bool, default=False
        Continue the previous fit (BCFW's dual blocks, or the subgradient schedule; the average, the
        random stream) on the same data (``X`` and ``y``) and parameters, when the previous fit was
        made with ``warm_start=True``; after a change of the data or of ``structure``,
        ``algorithm``, ``alpha``, ``average``, ``class_weight``, ``unknown_label`` or
        ``ignore_label`` (BCFW's dual blocks are those of the last fit's samples), a warm start fits
        afresh (as ``warm_start=False`` does): the state belongs to the last fit's objective.
    random_state : int, Generator, RandomState or None, default=None
        Order of the blocks.
    n_jobs : int or None, default=None
        Processes for the per-sample graph cuts.
    verbose : int, default=0
    {{unknown_label_known}}
    {{ignore_label}}
    latent_iter : int, default=10
        With hidden states (the structure's ``n_states_per_label`` or hidden nodes): the most
        rounds of the concave-convex procedure of the latent structured SVM (Yu & Joachims
        2009) — impute the states, solve the convex problem until its objective falls below
        the previous round's latent objective (up to 4 × ``max_iter`` passes) — which stops
        earlier when the latent objective falls by less than ``tol``, and undoes a round that
        raises it (keeping the best weights). Unused otherwise.

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    supervised_coef_ : ndarray
        Weights fitted on the fully labelled samples (unknown labels ``-1`` are then filled by
        this model's MAP given the known ones, as the paper's baseline does, and the SVM is
        refitted on all samples).
    alpha_ : float
        The regularisation strength of the last fit or ``partial_fit`` call (``alpha`` with
        "auto" resolved; see :meth:`partial_fit`).
    batch_size_ : int
        The mini-batch of the last fit (``batch_size`` with "auto" resolved).
    duality_gaps_ : list of float
        Duality gap estimate of each pass (BCFW; empty with the subgradient algorithm).
    loss_curve_ : list of float
        Estimate of the primal objective along each pass (the subgradient algorithm; BCFW: the
        dual objective plus the gap).
    latent_objectives_ : list of float
        With hidden states, the latent objective after each round of the concave-convex
        procedure, never rising (a round that would raise it is undone and ends the fit);
        empty otherwise.
    structure_, classes_, n_features_in_, n_iter_

    Notes
    -----
    BCFW's rate constant grows like :math:`1/\alpha`: the Frank-Wolfe corners
    :math:`\psi /(\alpha N)` lie far from the optimum when α is small, and the normalised Hamming
    losses (per-node weights ``1/D``, or balanced weights summing to 1 per sample) ask for small
    weights. Watch ``duality_gaps_`` and raise ``max_iter`` (or α) when the gap is still large.

    With sparse node features (CSR samples, e.g. from
    :class:`~pmap_sklearn.SequenceVectorizer`) each dual block is kept on the rows of its
    sample's features and the pairwise weights — the only ones its corners ever touch — and
    its weighted average row by row, so memory and steps scale with the samples' non-zeros,
    not with N × n_weights; the iterates are those of dense blocks.

    See Also
    --------
    MarginalPerturbMAPCRF : a probabilistic model fitted to the same losses.

    References
    ----------
    .. [1] S. Lacoste-Julien, M. Jaggi, M. Schmidt and P. Pletscher. Block-coordinate
       Frank-Wolfe optimization for structural SVMs. ICML 2013.
    .. [2] C.-N. J. Yu and T. Joachims. Learning structural SVMs with latent variables.
       ICML 2009.
    .. [3] A. Osokin, J.-B. Alayrac, I. Lukasewitz, P. Dokania and S. Lacoste-Julien. Minding
       the gaps for block Frank-Wolfe optimization of structured SVMs. ICML 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import StructuredSVM
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=n) for n in rng.integers(3, 8, size=40)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(len(yi), 3)) for yi in y]
    >>> svm = StructuredSVM(random_state=0).fit(X, y)
    >>> svm.score(X, y) > 0.8
    True
    """

    _parameter_constraints: dict = {
        **SHARED_CONSTRAINTS,
        **RANDOMISED_CONSTRAINTS,
        **PARALLEL_CONSTRAINTS,
        **BATCH_CONSTRAINTS,
        "algorithm": [StrOptions({"bcfw", "subgradient"})],
        "alpha": [NumberInterval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "batch_size": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "class_weight": [None, StrOptions({"balanced"}), dict],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "average": ["boolean"],
        "latent_iter": [NumberInterval(Integral, 1, None, closed="left")],
    }
    _learns_hidden_states = True

    def __init__(
        self,
        structure="chain",
        *,
        algorithm="bcfw",
        alpha="auto",
        class_weight=None,
        max_iter="auto",
        batch_size="auto",
        tol=1e-4,
        average=True,
        warm_start=False,
        random_state=None,
        n_jobs=None,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
        latent_iter=10,
    ):
        store_parameters(self, locals())

    _objective_kind = "hinge"

    def _resolve_settings(self, batch) -> int:
        """Set ``alpha_``, ``batch_size_`` and whether BCFW takes pairwise steps for this fit
        and return its passes: ``"auto"`` resolved from what the data is
        (:data:`~pmap_sklearn._optim.defaults.SSVM_MULTILABEL` on multi-label data,
        :data:`~pmap_sklearn._optim.defaults.SSVM_SPARSE` on sparse node features,
        :data:`~pmap_sklearn._optim.defaults.SSVM_DENSE` otherwise)."""
        if self.structure_.sample_kind == "multilabel":
            auto = defaults.SSVM_MULTILABEL
        elif self.structure_.has_sparse_features(batch):
            auto = defaults.SSVM_SPARSE
        else:
            auto = defaults.SSVM_DENSE
        self._use_pairwise_steps = auto.get("pairwise_steps", False)
        self.alpha_ = self._resolved_alpha(batch)
        batch_size = auto["batch_size"] if self.batch_size == "auto" else self.batch_size
        self.batch_size_ = min(batch_size, batch.n_samples)
        return auto["max_iter"] if self.max_iter == "auto" else self.max_iter

    def _check_partial_fit(self, structure) -> None:
        """``partial_fit`` continues the subgradient algorithm only: BCFW keeps one dual block
        per training sample, which a stream of new samples has not got, and the latent SVM's
        concave-convex rounds impute the hidden states of the whole training set."""
        super()._check_partial_fit(structure)
        if self.algorithm != "subgradient":
            raise ValueError(
                "StructuredSVM(algorithm='bcfw') keeps a dual block per training sample and "
                "cannot continue on new samples: use algorithm='subgradient' for partial_fit"
            )
        if structure.has_hidden_states_:
            raise ValueError(
                "StructuredSVM's partial_fit does not learn hidden states (its concave-convex "
                "rounds impute them over the whole training set): use fit, or PerturbMAPCRF"
            )

    def _new_state(self, rng):
        size = self.structure_.size_
        if self.algorithm == "subgradient":
            return _sgd.SGDState(coef=self.structure_.project(np.zeros(size)), rng=rng)
        return BCFWState(coef=np.zeros(size), rng=rng, structure=self.structure_)

    #: BCFW's dual blocks and both algorithms' averages belong to the algorithm, the averaging and
    #: the samples of the last fit: a warm start after a change fits afresh
    _warm_start_depends_on = (
        *BaseStructuredEstimator._warm_start_depends_on,
        "algorithm",
        "average",
    )

    def _set_fitted_attributes(self, state) -> None:
        if isinstance(state, _sgd.SGDState):
            self.duality_gaps_, self.loss_curve_ = [], list(state.loss_curve)
            return
        self.duality_gaps_ = list(state.gaps)
        self.loss_curve_ = list(state.recorded("primal"))

    def _targets(self, batch, labels, w_supervised, rng):
        r"""Complete labels (unknown ones from the supervised model's conditional MAP) and the
        loss weight :math:`\theta_d(y_d)` of each node."""
        if w_supervised is not None:
            labels = self._map(batch, w_supervised, clamp=labels)
        structure = self.structure_
        visible = structure.visible_codes(labels)  # -1: hidden nodes, unknown labels
        distribution = onehot(visible, structure.n_labels_)
        class_weight = class_weight_by_code(self.class_weight, self.classes_)
        theta = loss_weights(distribution, batch.node_sizes, batch.node_sample, class_weight)
        theta = np.where(visible >= 0, theta[np.arange(len(labels)), np.maximum(visible, 0)], 0.0)
        return labels, theta

    def _loss_augmented_map(self, batch, w, labels, theta, allowed=None):
        """``argmax_y Δ(y_n, y) + f(y|x_n)`` for every sample: the loss is added to the unary
        scores of the wrong labels (with hidden states, of the states outside each node's label,
        ``allowed`` false), so the structure's exact oracle solves it."""
        potentials = self._augmented(batch, w, labels, theta, allowed)
        return self.structure_.solver_.map(potentials, n_jobs=self.n_jobs)

    def _augmented(self, batch, w, labels, theta, allowed=None):
        """The potentials of ``Δ(y_n, y) + f(y|x_n)``: a labelling's score is its hinge value
        plus ``f(y_n)``."""
        if allowed is None:
            augmentation = np.repeat(theta[:, None], self.structure_.n_states_, axis=1)
            augmentation[np.arange(len(labels)), labels] = 0.0
        else:
            augmentation = theta[:, None] * ~allowed
        return self.structure_.potentials(batch, w).add_unary(augmentation)

    def _optimise(self, batch, targets, state, rng, validation_score, partial=False):
        continuing = partial and bool(state.t)
        if not continuing:  # a later partial_fit keeps the stream's batch_size_ and passes
            max_iter = self._resolve_settings(batch)  # alpha="auto" counts the summed weight
        if isinstance(state, _sgd.SGDState):  # the subgradient algorithm, the one that streams
            alpha = self._stream_alpha(batch, state, continuing)
            if alpha is not None:
                self.alpha_ = alpha
        if partial:
            max_iter = 1
        # weights of mean 1: the mean hinge over n samples is the weighted mean (BCFW's blocks
        # scaled by their sample's weight, the subgradient's mini-batches unbiased)
        batch = batch.with_unit_mean_weight()
        if self.structure_.has_hidden_states_:
            self._concave_convex(batch, targets, state, rng, max_iter)
            return
        self.latent_objectives_ = []
        self._solve(batch, (*targets, None), state, rng, max_iter)

    def _solve(self, batch, targets, state, rng, max_iter: int) -> None:
        """The convex problem of ``targets = (labels, theta, allowed)``: every node's state (the
        imputed ones with hidden states), its loss weight, and the states its label allows
        (None: its state alone)."""
        if self.algorithm == "subgradient":
            self._subgradient_descent(batch, targets, state, rng, max_iter)
            return
        labels, theta, allowed = targets
        structure, n = self.structure_, batch.n_samples
        compact = structure.has_sparse_features(batch)
        if state.blocks is None or len(state.blocks) != n:
            # A new set of samples (first fit, or the second semi-supervised stage): new dual.
            # With sparse features a block lives on its sample's rows only (made at its first
            # step): dense blocks would take n × n_weights.
            state.blocks = [None] * n if compact else np.zeros((n, structure.size_))
            state.block_losses = np.zeros(n)
            state.coef = np.zeros(structure.size_)
            state.average = np.zeros(structure.size_) if self.average else None
            state.n_steps = 0
            state.atoms = None
        pairwise_steps = getattr(self, "_use_pairwise_steps", False) and not compact
        if pairwise_steps and state.atoms is None:
            state.atoms = [None] * n
        progress = Progress(type(self).__name__, max_iter, self.verbose, unit="pass")
        converged = False if self.tol > 0 else None
        scale = 1.0 / (self.alpha_ * n)
        # sample i's block: corners c_i ψ_i / (α n) and losses c_i L_i / n (c of mean 1); a
        # pass visits the blocks in proportion to their weight, as it would visit the copies of
        # a sample (a block's curvature grows as c_i²: visited uniformly, the heavy blocks
        # would hold the pass back), and weighs each block gap by 1 / c_i, so that the pass's
        # sum still estimates the duality gap
        block_weight = batch.sample_weight
        visits = None if block_weight is None else block_weight / block_weight.sum()
        for epoch in range(max_iter):
            gap = 0.0
            order = rng.permutation(n) if visits is None else rng.choice(n, size=n, p=visits)
            average = None
            if compact and state.average is not None:
                average = _RowWeightedAverage(state, structure.weight_row_width_)
            for begin in range(0, n, self.batch_size_):
                index = order[begin : begin + self.batch_size_]
                sub = batch.subset(index)
                nodes = batch.node_index(index)
                truth, weights = labels[nodes], theta[nodes]
                allow = None if allowed is None else allowed[nodes]
                if pairwise_steps:
                    targets_of_sub = (truth, weights, allow)
                    gap += self._pairwise_steps(state, index, sub, targets_of_sub, scale)
                    continue
                predicted = self._loss_augmented_map(
                    sub, self._primal(state), truth, weights, allow
                )
                wrong = weights * _mistakes(predicted, truth, allow)
                losses = np.bincount(sub.node_sample, wrong, minlength=len(index)) / n
                if batch.sample_weight is not None:
                    losses *= block_weight[index]
                if compact:
                    for j, i in enumerate(index):
                        sample, local = sub.subset(slice(j, j + 1)), sub.node_index(slice(j, j + 1))
                        corner = structure.joint_feature_difference(
                            sample, truth[local], predicted[local], compact=True
                        )
                        weight = 1.0 if block_weight is None else block_weight[i]
                        gap += (
                            self._sparse_block_step(
                                state, i, sample, corner, scale * weight, losses[j], average
                            )
                            / weight
                        )
                    continue
                corners = scale * structure.joint_feature_per_sample(sub, truth, predicted)
                if batch.sample_weight is not None:
                    corners *= block_weight[index, None]
                for j, i in enumerate(index):
                    block_gap = self._block_step(state, i, corners[j], losses[j])
                    gap += block_gap if block_weight is None else block_gap / block_weight[i]
            if average is not None:
                state.average = average.settle(
                    self._current_rows(state, slice(None)), state.n_steps
                )
            state.n_iter = epoch + 1
            if (self.batch_size_ > 1 or block_weight is not None) and gap < self.tol:
                # A mini-batch's corners are the maximisers at the iterate of its start, not
                # at the iterate of each block's step: the pass's block gaps underestimate the
                # gap (their sum can be negative), so a stop is confirmed by the exact gap (as
                # is a weighted pass's, whose sampled blocks estimate it).
                gap = self._exact_gap(batch, targets, state)
            state.gaps.append(gap)
            # The primal objective is the dual one plus the duality gap (estimated along the
            # pass, as the block gaps are taken at the iterate of their step).
            current = state.current
            dual = state.block_losses.sum() - 0.5 * self.alpha_ * current @ current
            state.record(primal=float(dual + gap))
            progress.update(epoch + 1, dual + gap, **{"duality gap": gap})
            if gap < self.tol:
                converged = True
                break
        if not converged and self.max_iter == "auto":
            converged = None  # the default budget is a setting, not a limit (see max_iter)
        progress.finish(state.n_iter, converged, f"duality gap < tol={self.tol}")

    def _subgradient_descent(self, batch, targets, state, rng, max_iter: int) -> None:
        """``max_iter`` passes of projected stochastic subgradient descent on the primal, with
        Pegasos' steps ``1 / (α (t + 1))`` and the iterates averaged with weights ∝ t."""
        structure = self.structure_

        def make_oracle(order):
            sub_targets = _gather(targets, batch.node_index(order))
            return self._hinge_oracle(batch.subset(order), *sub_targets)

        _sgd.run_sgd(
            make_oracle,
            state,
            batch.n_samples,
            rng=rng,
            alpha=self.alpha_,
            batch_size=self.batch_size_,
            # 'optimal' with η0 = 1/α: η_t = 1 / (α (t + 1)), Pegasos' step
            steps=_sgd.Schedule("optimal", 1.0 / self.alpha_, alpha=self.alpha_),
            average=self.average,
            average_weights="linear",
            max_iter=max_iter,
            tol=None,
            n_iter_no_change=1,
            project=structure.project,
            verbose=self.verbose,
            name=type(self).__name__,
        )

    def _hinge_oracle(self, batch, labels, theta, allowed=None):
        """``oracle(part, w, rng)``: the ascent direction ``Σ_n Ψ(x_n, y_n) − Ψ(x_n, y*_n)`` of
        minus the structured hinge loss at the loss-augmented MAPs ``y*``, and minus the hinge
        losses ``Σ_n Δ(y_n, y*_n) + f(y*_n) − f(y_n)`` (both over the samples ``part``, each
        sample's terms times its weight ``c_n`` with sample weights)."""
        structure = self.structure_

        def oracle(part, w, rng):
            sub = batch.subset(part)
            truth, weights, allow = _gather((labels, theta, allowed), batch.node_index(part))
            predicted = self._loss_augmented_map(sub, w, truth, weights, allow)
            gradient = structure.joint_feature_difference(
                sub, truth, predicted, sub.sample_weight, compact=True
            )
            wrong = weights * _mistakes(predicted, truth, allow)
            if sub.sample_weight is not None:  # each sample's hinge times its weight
                wrong = wrong * sub.node_weight
            return gradient, _sgd.dot(w, gradient) - float(np.sum(wrong))

        return _sgd.lazy_when_sparse(oracle, structure, batch)

    def _exact_gap(self, batch, targets, state) -> float:
        r"""The duality gap at the current iterate :math:`w`: the primal
        :math:`(\alpha/2)\|w\|^2 + (1/N) \sum_n H_n(w)` minus the dual
        :math:`\sum_n \ell_n - (\alpha/2)\|w\|^2`, with the structured hinge losses
        :math:`H_n(w) = \Delta(y_n, y^*_n) + f(y^*_n) - f(y_n)` at every sample's
        loss-augmented MAP (one pass of MAPs, no step)."""
        w = state.current
        minus_hinge = self._hinge_oracle(batch, *targets)(slice(None), w, None)[1]
        return float(
            self.alpha_ * (w @ w) - minus_hinge / batch.n_samples - state.block_losses.sum()
        )

    def _block_step(self, state, i, corner, corner_loss) -> float:
        """Frank-Wolfe step on block i towards ``(corner, corner_loss)``; returns its gap."""
        direction = state.blocks[i] - corner
        gap = self.alpha_ * (direction @ state.current) - state.block_losses[i] + corner_loss
        norm = direction @ direction
        if norm <= 0:
            return max(gap, 0.0)
        step = min(max(gap / (self.alpha_ * norm), 0.0), 1.0)
        direction *= step
        state.blocks[i] -= direction
        state.coef -= direction
        state.block_losses[i] += step * (corner_loss - state.block_losses[i])
        state.n_steps += 1
        if state.average is not None:  # w̄_k = (k-1)/(k+1) w̄_{k-1} + 2/(k+1) w_k
            rate = 2.0 / (state.n_steps + 1)
            state.average *= 1.0 - rate
            state.average += rate * state.current
        return gap

    def _pairwise_steps(self, state, index, batch, targets, scale) -> float:
        r"""One mini-batch of block steps with pairwise steps (dense blocks): for each sample the
        loss-augmented MAP ``s`` (the Frank-Wolfe corner) and the labelling ``v`` of its block's
        active set with the lowest loss-augmented score; each block then takes the Frank-Wolfe
        step towards ``s`` or the pairwise step that moves weight from ``v`` to ``s`` only
        (Lacoste-Julien & Jaggi 2015; Osokin et al. 2016, BCPFW), whichever raises the dual
        more, each by its exact line search at the current iterate. Returns the sum of the
        blocks' Frank-Wolfe gaps."""
        structure, n = self.structure_, len(state.blocks)
        truth, weights, allow = targets
        potentials = self._augmented(batch, self._primal(state), truth, weights, allow)
        predicted = structure.solver_.map(potentials, n_jobs=self.n_jobs)
        away, away_keys, away_weights = _away_atoms(state, index, batch, potentials, truth)
        losses, away_losses = (
            np.bincount(batch.node_sample, weights * _mistakes(y, truth, allow), len(index)) / n
            for y in (predicted, away)
        )
        corners = scale * structure.joint_feature_per_sample(batch, truth, predicted)
        away_corners = scale * structure.joint_feature_per_sample(batch, truth, away)
        block = batch.sample_weight
        if block is not None:  # each block's corners and losses times its sample's weight
            losses, away_losses = losses * block, away_losses * block
            corners *= block[:, None]
            away_corners *= block[:, None]
        gap = 0.0
        for j, i in enumerate(index):
            current = state.current
            towards = corners[j] - state.blocks[i]
            block_gap = losses[j] - state.block_losses[i] - self.alpha_ * (towards @ current)
            pairwise = corners[j] - away_corners[j]
            gain = losses[j] - away_losses[j] - self.alpha_ * (pairwise @ current)
            direction, change, step, is_pairwise = _best_step(
                self.alpha_,
                (towards, losses[j] - state.block_losses[i], block_gap, 1.0),
                (pairwise, losses[j] - away_losses[j], gain, away_weights[j]),
            )
            block_gap = block_gap if towards.any() else max(block_gap, 0.0)
            gap += block_gap if block is None else block_gap / block[j]
            if direction is None:
                continue
            direction *= step
            state.blocks[i] += direction
            state.coef += direction
            state.block_losses[i] += step * change
            state.n_steps += 1
            if state.average is not None:  # w̄_k = (k-1)/(k+1) w̄_{k-1} + 2/(k+1) w_k
                rate = 2.0 / (state.n_steps + 1)
                state.average *= 1.0 - rate
                state.average += rate * state.current
            local = batch.node_index(slice(j, j + 1))
            _move_weight(state, i, predicted[local], away_keys[j], step, is_pairwise)
        return gap

    def _primal(self, state) -> np.ndarray:
        r"""The primal iterate :math:`\Pi_C(\hat{w})`, to read: ``ŵ`` itself when the projection
        leaves its pairwise weights as they are (always on chains), else a projected copy — a copy
        of 10⁶ weights per mini-batch costs more than its Viterbi."""
        pairwise = state.coef[self.structure_.n_unary_weights_ :]
        if np.array_equal(self.structure_.project_pairwise(pairwise.copy()), pairwise):
            return state.coef
        return state.current

    def _current_rows(self, state, index) -> np.ndarray:
        r"""Rows ``index`` (sorted, the pairwise rows last; or every row with a slice) of the
        primal iterate :math:`\Pi_C(\hat{w})`, a copy, without projecting all of ``ŵ``: the
        projection
        only touches the pairwise rows, which every sample's rows include."""
        structure = self.structure_
        width = structure.weight_row_width_
        rows = state.coef.reshape(-1, width)
        values = rows.copy() if isinstance(index, slice) else rows[index]  # never a view
        pairwise = state.coef[structure.n_unary_weights_ :].copy()
        values[len(values) - len(pairwise) // width :] = structure.project_pairwise(
            pairwise
        ).reshape(-1, width)
        return values

    def _sparse_block_step(self, state, i, sample, corner, scale, corner_loss, average) -> float:
        r""":meth:`_block_step` for a block kept on sample i's rows (sparse node features):
        ``corner`` is :math:`\psi_i(y*)` as a :class:`SparseVector` (on rows within the sample's),
        ``scale`` its factor :math:`1 / (\alpha N)`; ``average`` keeps the weighted average by
        rows."""
        block = state.blocks[i]
        if block is None:
            rows = self.structure_.weight_support(sample)
            block = SparseVector(rows, np.zeros((len(rows), corner.values.shape[1])), corner.size)
            state.blocks[i] = block
        direction = block.values.copy()
        direction[np.searchsorted(block.index, corner.index)] -= scale * corner.values
        current = self._current_rows(state, block.index)
        gap = (
            self.alpha_ * np.einsum("ij,ij->", direction, current)
            - state.block_losses[i]
            + corner_loss
        )
        norm = np.einsum("ij,ij->", direction, direction)
        if norm <= 0:
            return max(gap, 0.0)
        step = min(max(gap / (self.alpha_ * norm), 0.0), 1.0)
        direction *= step
        block.values[...] -= direction
        state.coef.reshape(-1, direction.shape[1])[block.index] -= direction
        state.block_losses[i] += step * (corner_loss - state.block_losses[i])
        state.n_steps += 1
        if average is not None:
            after = self._current_rows(state, block.index)
            average.step(block.index, current, after, state.n_steps)
        return gap

    def dual_objective(self) -> float:
        r"""The BCFW dual objective of the current state.

        Returns
        -------
        float
            :math:`\sum \ell_i - (\alpha /2)\|\Pi_C(\hat{w})\|^2`, a lower bound of the optimal
            primal objective.
        """
        check_is_fitted(self, "coef_")
        if not hasattr(self, "_state"):
            raise ValueError(
                "the dual is not kept: this model was pickled with warm_start=False, which "
                "keeps the fitted weights alone"
            )
        if not isinstance(self._state, BCFWState):
            raise ValueError("algorithm='subgradient' keeps no dual: its objective is loss_curve_")
        w = self._state.current
        return float(self._state.block_losses.sum() - 0.5 * self.alpha_ * w @ w)


class _RowWeightedAverage:
    r"""BCFW's weighted average :math:`\bar{w}_k = \sum_{j \le k} j w_j / T(k)`, ``T(k) = k (k + 1)
    / 2`` (Lacoste-Julien et al. 2013, §4; the recursion ``w̄_k = (k−1)/(k+1) w̄_{k−1} + 2/(k+1)
    w_k``), kept a row at a time for sparse steps: a row whose value ``v`` did not change from step
    ``a`` to step ``b`` adds ``v (T(b) − T(a))`` to the sum ``S = T(k) w̄_k``."""

    def __init__(self, state: BCFWState, width: int):
        self.sums = (state.average * _triangle(state.n_steps)).reshape(-1, width)
        self.last = np.full(len(self.sums), state.n_steps)  # step each row's sum is at

    def step(self, index, before, after, k: int) -> None:
        """Rows ``index`` were ``before`` from their last step to step ``k − 1`` and are
        ``after`` at step ``k``."""
        spans = _triangle(k - 1) - _triangle(self.last[index])
        self.sums[index] += before * spans[:, None] + k * after
        self.last[index] = k

    def settle(self, current: np.ndarray, k: int) -> np.ndarray:
        """The average at step ``k``, every row ``current`` since its last step."""
        if k == 0:
            return np.zeros(self.sums.size)
        self.sums += current * (_triangle(k) - _triangle(self.last))[:, None]
        self.last[:] = k
        return self.sums.ravel() / _triangle(k)


def _triangle(k):
    """``T(k) = 1 + 2 + … + k`` (float: exact far beyond any number of steps)."""
    return np.asarray(k, dtype=float) * (np.asarray(k, dtype=float) + 1.0) / 2.0


def _away_atoms(state, index, batch, potentials, truth):
    """For each sample of a mini-batch, the labelling of its block's active set with the
    lowest loss-augmented score (the one a pairwise step takes weight from), its key and its
    weight. A block that has not moved holds its true labelling alone (its zero corner)."""
    keys, weights, labellings, copies = [], [], [], []
    for j, i in enumerate(index):
        atoms = state.atoms[i]
        if atoms is None:
            own = truth[batch.node_index(slice(j, j + 1))]
            atoms = state.atoms[i] = {_key(own): [1.0, _compact(own)]}
        for key, (weight, labels) in atoms.items():
            keys.append(key)
            weights.append(weight)
            labellings.append(labels)
            copies.append(j)
    copies = np.asarray(copies, dtype=np.intp)
    scores = potentials.take(copies).score(np.concatenate(labellings).astype(np.intp))
    order = np.lexsort((scores, copies))  # by sample, then score: each sample's lowest first
    first = order[np.searchsorted(copies[order], np.arange(len(index)))]
    away = np.concatenate([labellings[k] for k in first]).astype(np.intp)
    return away, [keys[k] for k in first], np.asarray(weights)[first]


def _best_step(alpha, *candidates):
    r"""Of the candidate steps ``(direction, loss change, slope, largest step)`` of a block,
    the one whose exact line search raises the dual :math:`\sum_i \ell_i - (\alpha/2)
    \|w\|^2` most (``slope``: its derivative along the direction), as ``(direction, loss
    change, step, whether it is the second candidate)``; a None direction when none rises."""
    best, best_rise = (None, 0.0, 0.0, False), 0.0
    for position, (direction, change, slope, largest) in enumerate(candidates):
        norm = float(direction @ direction)
        if norm <= 0 or slope <= 0:
            continue
        step = min(slope / (alpha * norm), largest)
        rise = step * slope - 0.5 * alpha * step * step * norm
        if rise > best_rise:
            best, best_rise = (direction, change, step, position == 1), rise
    return best


def _move_weight(state, i, labels, away_key, step, pairwise: bool) -> None:
    """Block i's active set after a step of ``step`` towards ``labels`` (added when new): a
    pairwise step takes that weight from the labelling ``away_key``, a Frank-Wolfe step from
    every labelling in proportion; a labelling left without weight is dropped."""
    atoms = state.atoms[i]
    if not pairwise:
        for atom in atoms.values():
            atom[0] *= 1.0 - step
    key = _key(labels)
    if key in atoms:
        atoms[key][0] += step
    else:
        atoms[key] = [step, _compact(labels)]
    if pairwise:
        atoms[away_key][0] -= step
    for dropped in [k for k, atom in atoms.items() if atom[0] <= 1e-12]:
        del atoms[dropped]


def _compact(labels: np.ndarray) -> np.ndarray:
    """A labelling kept small (a byte a node below 256 states)."""
    return labels.astype(np.uint8 if labels.max(initial=0) < 256 else np.intp)


def _key(labels: np.ndarray) -> bytes:
    return np.asarray(labels, dtype=np.intp).tobytes()


def _gather(targets, nodes):
    """The ``(labels, theta, allowed)`` of some nodes (``allowed`` may be None)."""
    return tuple(None if part is None else part[nodes] for part in targets)


def _mistakes(predicted, truth, allowed) -> np.ndarray:
    """Whether each node's predicted state is wrong: another label than ``truth`` or, with
    hidden states, a state outside the node's label (``allowed`` false)."""
    if allowed is None:
        return predicted != truth
    return ~allowed[np.arange(len(predicted)), predicted]
