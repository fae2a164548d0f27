"""The double-SGD engine of the perturb-and-MAP learners, as an estimator layer.

:class:`BaseStructuredSGD` resolves the SGD settings of a fit from the data (every ``"auto"``
from :mod:`pmap_sklearn._optim.defaults`), starts from the logistic regression of the unary
terms, searches a step size (``eta0="auto"``) and runs :func:`~pmap_sklearn._optim.sgd.run_sgd`
on the learner's stochastic gradient: a learner only says what that gradient is
(``_make_oracle``).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, replace

import numpy as np

from .._optim import defaults
from .._optim import sgd as _sgd
from .._optim.shards import Shards, split_by_size
from .._optim.step_search import calibrate_eta0
from .._parallel import start_workers
from ..metrics.hamming import label_weights, node_label_weights
from ..perturbation import perturb_and_map
from ..samples import SampleBatch
from ._estimator import SGD_CONSTRAINTS, BaseStructuredEstimator, PartialFitMixin

__all__ = ["BaseStructuredSGD", "ClassWeightedSGD", "SGDSettings", "bucket_by_length"]

#: Mini-batches of a bucket of samples sorted by length (see :func:`bucket_by_length`).
BUCKET_BATCHES = 32


def bucket_by_length(order, lengths, batch_size: int, rng) -> np.ndarray:
    """Reorder an epoch's permutation so that its mini-batches hold chains of similar lengths.

    The permutation is cut into buckets of ``BUCKET_BATCHES`` mini-batches, each bucket sorted
    by chain length and cut into mini-batches, and the full mini-batches are shuffled (the
    last, shorter one stays last). Every sample is still seen once per epoch in a random
    mini-batch, but a batched Viterbi pass loops over about the mean length of a mini-batch
    instead of its longest chain (the bucketing of neural sequence models).
    """
    lengths = np.asarray(lengths)[order]
    size = batch_size * BUCKET_BATCHES
    ranked = np.concatenate(
        [
            order[start : start + size][np.argsort(lengths[start : start + size], kind="stable")]
            for start in range(0, len(order), size)
        ]
    )
    n_full = len(order) // batch_size
    batches = rng.permutation(n_full)[:, None] * batch_size + np.arange(batch_size)
    return np.concatenate([ranked[batches.ravel()], ranked[n_full * batch_size :]])


@dataclass(frozen=True)
class SGDSettings:
    """The settings of one SGD fit with every ``"auto"`` resolved
    (:meth:`BaseStructuredSGD._settings`); ``average`` counts samples from the fit's start."""

    alpha: float
    learning_rate: str
    batch_size: int
    max_iter: int
    tol: float | None
    average: bool | int


class BaseStructuredSGD(PartialFitMixin, BaseStructuredEstimator):
    """Shared fit / partial_fit / predict / predict_marginals / score of the perturb-and-MAP
    learners.

    The SGD parameters are documented in :class:`~pmap_sklearn.PerturbMAPCRF`; each concrete
    learner has its own explicit signature with its defaults (``__init__`` only stores them).
    """

    _parameter_constraints: dict = SGD_CONSTRAINTS
    _marginal_methods = ("perturb", "exact", "gibbs")

    def _check_fit_parameters(self) -> None:
        if self.learning_rate == "optimal" and self.alpha == 0:
            raise ValueError("learning_rate='optimal' needs alpha > 0")

    def _start_workers(self) -> None:
        if self.n_shards > 1:  # each epoch's shards run on the workers
            start_workers(self.n_jobs)

    def _new_state(self, rng):
        return _sgd.SGDState(coef=self.structure_.project(np.zeros(self.structure_.size_)), rng=rng)

    _objective_kind = "likelihood"
    #: The learner's dense-feature rule in :data:`~pmap_sklearn._optim.defaults.SGD_DENSE`.
    _dense_sgd = "likelihood"

    def _settings(self, batch: SampleBatch) -> SGDSettings:
        """The SGD settings of this fit, every ``"auto"`` resolved from what the data is.

        Sparse node features (token features of words: many rare one-hot columns) take
        :data:`~pmap_sklearn._optim.defaults.SGD_SPARSE`: AdaGrad steps (a step size per feature,
        large for rare ones), mini-batches of 32, a fixed budget of epochs and the average of the
        iterates of its second half (tail averaging: the early iterates are far from the optimum);
        multi-label rows without a bias (uncentred) run that for the dense rule's 50 epochs
        (:data:`~pmap_sklearn._optim.defaults.SGD_MULTILABEL_SPARSE`; with a bias their
        features are centred and take the dense rule). Dense features (OCR pixels,
        image features) take the learner's rule of :data:`~pmap_sklearn._optim.defaults.SGD_DENSE` —
        for the perturb-and-MAP likelihood the ``1/(α t)`` schedule, about 5 steps per epoch,
        averaging from the start and a stopping rule — except on general graphs (superpixels) with
        more than two labels, which take :data:`~pmap_sklearn._optim.defaults.SGD_GRAPH_MULTICLASS`
        (AdaGrad for a fixed budget) where the learner's dense rule is the schedule (see "Choosing"
        in the user guide).
        """
        structure, n_samples = self.structure_, batch.n_samples
        sparse = structure.has_sparse_features(batch)
        dense = defaults.SGD_DENSE[self._dense_sgd]
        auto = defaults.SGD_SPARSE if sparse else {}
        if sparse and structure.sample_kind == "multilabel":
            auto = defaults.SGD_MULTILABEL_SPARSE
        graph_multiclass = structure.sample_kind == "graph" and structure.n_states_ > 2
        if not sparse and graph_multiclass and dense["learning_rate"] == "optimal":
            auto = defaults.SGD_GRAPH_MULTICLASS
        auto = {**dense, **auto}
        alpha = self._resolved_alpha(batch)
        learning_rate = self.learning_rate
        if learning_rate == "auto":
            learning_rate = auto["learning_rate"]
            if learning_rate == "optimal" and alpha == 0:
                learning_rate = "adagrad"  # the 1/(α t) schedule needs α > 0
        max_iter = auto["max_iter"] if self.max_iter == "auto" else self.max_iter
        tol = self.tol
        if isinstance(tol, str):  # with early stopping, on the validation score
            tol = defaults.EARLY_STOPPING_TOL if self.early_stopping else auto["tol"]
        if self.batch_size == "auto":
            batch_size = int(min(auto["batch_size"], max(2, n_samples // 5), n_samples))
        else:
            batch_size = min(self.batch_size, n_samples)
        average = self.average
        if isinstance(average, str):
            # tail averaging needs the budget: with a stopping rule, average from the start
            tail = sparse and tol is None and max_iter >= 2
            average = n_samples * (max_iter // 2) if tail else True
        return SGDSettings(alpha, learning_rate, batch_size, max_iter, tol, average)

    def _init(self) -> str:
        """``init``, with ``"auto"`` resolved: the logistic start on grids and graphs, zeros on
        chains (where early stopping from zero regularises better); the logistic start with
        hidden states, whose states are alike at zero
        (:data:`~pmap_sklearn._optim.defaults.CHAIN_INIT`)."""
        if self.init != "auto":
            return self.init
        chains = self.structure_.sample_kind == "chain"
        if chains and not self.structure_.has_hidden_states_:
            return defaults.CHAIN_INIT
        return defaults.OTHER_INIT

    def _set_fitted_attributes(self, state) -> None:
        self.t_ = state.t
        self.eta0_ = state.eta0
        self.loss_curve_ = list(state.loss_curve)
        self.validation_scores_ = list(state.validation_scores)

    def _make_oracle(self, batch: SampleBatch, targets):
        """Return ``oracle(part, w, rng) -> (Σ gradient of ℓ, Σ estimate of ℓ)`` over the samples
        ``part`` of ``batch`` (a slice or indices), drawing the perturbations from ``rng``; with
        sample weights (``batch.sample_weight``, of mean 1 over the samples being fitted) the
        sums weigh each sample's terms by its weight."""
        raise NotImplementedError

    def _optimise(self, batch, targets, state, rng, validation_score, partial=False):
        # a later partial_fit keeps the settings of the stream's first call (or of the fit it
        # continues); a fit, or a first call, resolves them on its samples
        continuing = partial and state.eta0 is not None
        if continuing:
            settings = SGDSettings(**self.sgd_settings_)
        else:
            settings = self._settings(batch)  # alpha="auto" counts the summed sample weight
        alpha = self._stream_alpha(batch, state, continuing)
        if alpha is not None:
            settings = replace(settings, alpha=alpha)
        self.sgd_settings_ = asdict(settings)
        # weights of mean 1: a mini-batch's weighted sum over its size estimates the weighted
        # mean of the batch's objective without bias, as the engine's sum / n_samples gives it
        batch = batch.with_unit_mean_weight()
        batch_size = settings.batch_size
        # the elastic net alpha (l1_ratio ‖w‖_1 + (1 − l1_ratio)/2 ‖w‖²): its L2 and L1 strengths
        l2, l1 = settings.alpha * (1.0 - self.l1_ratio), settings.alpha * self.l1_ratio
        chains = self.structure_.sample_kind == "chain"

        oracles = _OracleFactory(self, batch, targets, batch_size, chains)

        def make_oracle(order):
            return oracles(order, rng)

        if state.eta0 is None:  # a fresh run
            if self._init() == "logistic":
                self._start_from_logistic(batch, targets, state.coef, rng, settings.alpha)
            state.eta0 = self.eta0
            if self.eta0 == "auto":
                adagrad = settings.learning_rate == "adagrad"
                search = {"start": defaults.ADAGRAD_STEP_SEARCH_START if adagrad else None}
                if self.structure_.has_sparse_features(batch):
                    search.update(defaults.SPARSE_STEP_SEARCH)
                state.eta0 = calibrate_eta0(
                    make_oracle,
                    state.coef,
                    batch.n_samples,
                    rng=rng,
                    alpha=l2,
                    l1=l1,
                    batch_size=batch_size,
                    project=self.structure_.project,
                    average=bool(settings.average),
                    make_steps=self._calibration_steps(settings.learning_rate),
                    budget=self._calibration_epochs(settings) * batch.n_nodes,
                    sizes=batch.lengths,
                    min_work=defaults.STEP_SEARCH_MIN_NODES,
                    **search,
                )
        elif self.eta0 != "auto":  # a warm start: an eta0 set since the last fit applies
            state.eta0 = self.eta0
        average = settings.average
        if not isinstance(average, bool):  # samples from the start of this fit (or stream)
            if not (continuing and state.average_start is not None):
                state.average_start = state.n_seen + average
            average = state.average_start
        shards = self._shards(batch, targets, batch_size, rng)
        try:
            _sgd.run_sgd(
                make_oracle,
                state,
                batch.n_samples,
                rng=rng,
                alpha=l2,
                l1=l1,
                batch_size=batch_size,
                steps=self._step_rule(state, settings),
                average=average,
                max_iter=1 if partial else settings.max_iter,  # partial_fit: one pass, no stopping
                tol=None if partial else settings.tol,
                n_iter_no_change=self.n_iter_no_change,
                project=self.structure_.project,
                validation_score=validation_score,
                verbose=self.verbose,
                name=type(self).__name__,
                shards=shards,
            )
        finally:  # the shards' shared files
            if shards is not None:
                shards.close()

    def _shards(self, batch: SampleBatch, targets, batch_size: int, rng) -> Shards | None:
        """The shards of a data-parallel fit (``n_shards > 1``; None otherwise): ``batch`` split
        by node count (:func:`~pmap_sklearn._optim.shards.split_by_size`, from ``rng``), each
        shard's oracle factory that of the fit on its samples, mixed by their shares of the
        (weighted) samples."""
        n_shards = self.n_shards
        if n_shards == 1:
            return None
        if n_shards > batch.n_samples:
            raise ValueError(
                f"n_shards={n_shards} exceeds the {batch.n_samples} samples being fitted: each "
                "shard needs at least one; lower n_shards (a shard of a few samples makes noisy "
                "steps: keep many mini-batches per shard)"
            )
        learner = copy.copy(self)  # what a worker needs of the estimator, not its last fit
        for name in ("_state", "coef_", "supervised_coef_", "loss_curve_", "validation_scores_"):
            vars(learner).pop(name, None)
        learner.n_jobs = 1  # the shards are the parallel tasks: their solver calls run in them
        chains = self.structure_.sample_kind == "chain"
        factories, weights = [], []
        for part in split_by_size(batch.lengths, n_shards, rng):
            shard = batch.subset(part)
            shard_targets = targets[batch.node_index(part)]
            factories.append(_OracleFactory(learner, shard, shard_targets, batch_size, chains))
            weights.append(shard.weight_total)
        weights = np.asarray(weights, float) / np.sum(weights)
        sizes = [factory.batch.n_samples for factory in factories]
        return Shards(factories, sizes, weights, self.n_jobs)

    def _step_rule(self, state, settings: SGDSettings) -> _sgd.StepRule:
        """The steps of the resolved ``learning_rate`` from ``state.eta0`` (AdaGrad's sums of
        squares are kept in ``state`` for warm starts)."""
        if settings.learning_rate == "adagrad":
            steps = self._adagrad(state.eta0, state.squares)
            state.squares = steps.squares
            return steps
        return _sgd.Schedule(settings.learning_rate, state.eta0, self.power_t, settings.alpha)

    @staticmethod
    def _calibration_epochs(settings: SGDSettings) -> float:
        """The budget of ``eta0="auto"`` in epochs
        (:data:`~pmap_sklearn._optim.defaults.STEP_SEARCH_EPOCHS`)."""
        if settings.tol is None:
            return max(defaults.STEP_SEARCH_EPOCHS, defaults.STEP_SEARCH_SHARE * settings.max_iter)
        return defaults.STEP_SEARCH_EPOCHS

    def _calibration_steps(self, learning_rate: str):
        """``eta -> steps`` of the candidate passes of ``eta0="auto"``: AdaGrad's from fresh
        sums, constant steps for the schedules."""
        if learning_rate == "adagrad":
            return self._adagrad
        return lambda eta: _sgd.Schedule("constant", eta)

    def _adagrad(self, eta0, squares=None) -> _sgd.ProximalAdaGrad:
        """AdaGrad steps over the structure's weight rows, from ``squares`` (fresh: zeros)."""
        width = self.structure_.weight_row_width_
        if squares is None:
            squares = np.zeros(self.structure_.size_ // width)
        return _sgd.ProximalAdaGrad(eta0, squares, width)

    def _perturbed_marginals(self, batch, w, rng, clamp=None, label_sets=None) -> np.ndarray:
        """Marginals (n_nodes, K) from ``n_perturbations`` perturbed MAPs per sample under
        ``w``; with ``clamp`` (flat labels, ``-1`` = free, the codes of ``label_sets`` below)
        the conditional marginals ``q(y_d | y_given)`` of the free nodes."""
        structure = self.structure_
        potentials, clamp = self._restricted_potentials(batch, w, clamp, label_sets)
        marginals = perturb_and_map(
            structure.solver_,
            potentials,
            self.n_perturbations,
            rng,
            self._perturbation,
            clamp=clamp,
            n_jobs=self.n_jobs,
            maxima=False,
        ).marginals
        return structure.visible_marginals(marginals)


class _OracleFactory:
    """``(order, rng) -> oracle`` over the samples ``order`` of ``batch``, gathered once (once
    per epoch; the mini-batches are then contiguous views of it), the fit's and each shard's
    (picklable: a shard's travels to a worker with each epoch's task)."""

    def __init__(self, learner, batch: SampleBatch, targets, batch_size: int, chains: bool):
        self.learner, self.batch, self.targets = learner, batch, targets
        self.batch_size, self.chains = batch_size, chains

    def __call__(self, order, rng):
        batch = self.batch
        if self.chains:  # a chain solver's loops run over the longest chain of a mini-batch
            order = bucket_by_length(order, batch.lengths, self.batch_size, rng)
        return self.learner._make_oracle(batch.subset(order), self.targets[batch.node_index(order)])


class ClassWeightedSGD(BaseStructuredSGD):
    """An SGD learner with ``class_weight`` over hard label targets: each fit's per-label
    weights (:func:`~pmap_sklearn.metrics.hamming.label_weights`) for the oracle, and the
    logistic start weighs each node by its label's."""

    def _optimise(self, batch, targets, state, rng, validation_score, partial=False):
        self._label_weights = label_weights(
            self.class_weight, self.classes_, targets, batch.node_weight
        )
        super()._optimise(batch, targets, state, rng, validation_score, partial)

    def _node_weights(self, labels: np.ndarray) -> np.ndarray | None:
        """Each node's label weight (0 for an unknown label, -1), or None without
        ``class_weight``."""
        return node_label_weights(getattr(self, "_label_weights", None), labels)

    def _node_targets(self, targets):
        nodes, labels, _ = super()._node_targets(targets)
        return nodes, labels, self._node_weights(labels)
