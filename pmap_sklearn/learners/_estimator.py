r"""The fit contract of the structured estimators, in one place.

:class:`BaseStructuredEstimator` owns ``fit``: it validates the parameters, asks a fresh
structure (or the fitted one, on a warm start) for the problem of the training data in one call
(:meth:`~pmap_sklearn.structures.BaseStructure.fit_problem`: samples and labels validated,
labels encoded, the structure's dimensions fitted), checks that the structure's solver answers
the queries the optimiser will make, and hands the problem to the optimiser through these
hooks:

- ``_new_state(rng)``: the optimiser's initial state (with ``estimate`` and ``n_iter``);
- ``_fit_batch(batch, labels, state, rng)``: run the optimiser. The default trains in two
  stages when some labels are unknown (Shpakova et al. 2018, Alg. 3): first on the fully
  labelled samples, then on all samples with targets filled in by that first model, through
  ``_optimise(batch, targets, state, rng, validation_score)`` and
  ``_targets(batch, labels, w_supervised, rng)`` (by default the MAP fills them in);
- ``_set_fitted_attributes(state)``: optimiser-specific fitted attributes.

``fit``'s ``sample_weight`` is checked here once
(:func:`~pmap_sklearn._validation.check_sample_weight`) and handed to the structure, which
drops the samples of weight 0 and gives the others' weights to the batch
(:attr:`~pmap_sklearn.samples.SampleBatch.sample_weight`): every subset the optimiser takes
(mini-batches, held-out samples, the semi-supervised stages) carries them, and each objective
becomes the weighted mean :math:`\sum_n c_n \ell_n / \sum_n c_n` of its per-sample terms.

A fit that raises leaves a fitted estimator exactly as it was. A warm start continues the fit
state only on the data, sample weights and parameters it was fitted on
(``_warm_start_depends_on``), and otherwise fits afresh. The queries of the fitted model
(predict, marginals, draws, calibration, score) are :class:`~._queries.StructuredQueries`;
:class:`~._sgd_learner.BaseStructuredSGD` adds the double-SGD engine.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import StrOptions

from .._backend import check_capabilities
from .._docstrings import shared_docstring
from .._optim import defaults
from .._parallel import N_JOBS_CONSTRAINT, one_blas_thread, single_blas_thread
from .._state import compact_attributes, expand_attributes, fingerprint
from .._utils import release_freed_memory
from .._validation import NumberInterval, check_generator, check_sample_weight
from ..metrics.hamming import mean_hamming_loss
from ..samples import SampleBatch
from ..structures import BaseStructure, check_structure
from ._queries import StructuredQueries

#: Parameter constraints in layers, composed by each estimator as scikit-learn does
#: (``{**SHARED, **RANDOMISED, ..., "own": [...]}``): what every structured learner takes,
SHARED_CONSTRAINTS: dict = {
    "structure": [StrOptions({"chain", "grid", "graph"}), BaseStructure],
    "alpha": [NumberInterval(Real, 0, None, closed="left")],
    "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
    "warm_start": ["boolean"],
    "verbose": ["verbose"],
    "unknown_label": [None, Real, str],
    "ignore_label": [None, Real, str],
}
#: learners that draw random numbers,
RANDOMISED_CONSTRAINTS: dict = {"random_state": ["random_state", np.random.Generator]}
#: learners that spread solver calls over processes,
PARALLEL_CONSTRAINTS: dict = {"n_jobs": N_JOBS_CONSTRAINT}
#: full-batch optimisers with a stopping tolerance,
TOL_CONSTRAINTS: dict = {"tol": [NumberInterval(Real, 0, None, closed="left")]}
#: learners that step on mini-batches,
BATCH_CONSTRAINTS: dict = {"batch_size": [NumberInterval(Integral, 1, None, closed="left")]}
#: and the SGD learners (schedules, averaging, early stopping).
SGD_CONSTRAINTS: dict = {
    **SHARED_CONSTRAINTS,
    **RANDOMISED_CONSTRAINTS,
    **PARALLEL_CONSTRAINTS,
    **BATCH_CONSTRAINTS,
    "alpha": [NumberInterval(Real, 0, None, closed="left"), StrOptions({"auto"})],
    "l1_ratio": [NumberInterval(Real, 0, 1, closed="both")],
    "max_iter": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "learning_rate": [StrOptions({"auto", "optimal", "constant", "invscaling", "adagrad"})],
    "eta0": [StrOptions({"auto"}), NumberInterval(Real, 0, None, closed="neither")],
    "power_t": [NumberInterval(Real, None, None, closed="neither")],
    "average": ["boolean", NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "tol": [NumberInterval(Real, None, None, closed="neither"), None, StrOptions({"auto"})],
    "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left")],
    "early_stopping": ["boolean"],
    "validation_fraction": [NumberInterval(Real, 0, 1, closed="neither")],
    "n_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
    "init": [StrOptions({"auto", "logistic", "zeros"})],
    "batch_size": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "n_shards": [NumberInterval(Integral, 1, None, closed="left")],
}


class BaseStructuredEstimator(StructuredQueries, BaseEstimator):
    """The scikit-learn contract shared by the structured learners (see the module docstring);
    the queries of the fitted model come from :class:`~._queries.StructuredQueries`."""

    _parameter_constraints: dict = SHARED_CONSTRAINTS
    #: Whether the optimiser learns structures with hidden states (a label a set of states).
    _learns_hidden_states = False
    #: Whether the optimiser learns from sets of labels in ``y`` (a node takes one of a set).
    _learns_label_sets = False
    #: The parameters a warm start's state depends on (those the estimator has): a warm start
    #: after a change of one of them, or of the training data, fits afresh (:meth:`_fitted_on`).
    _warm_start_depends_on: tuple = (
        "structure",
        "alpha",
        "l1_ratio",
        "class_weight",
        "loss",
        "unknown_label",
        "ignore_label",
    )
    #: The kind of objective, which picks the rules of ``alpha="auto"``
    #: (:mod:`pmap_sklearn._optim.defaults`): ``"likelihood"``, ``"node_loss"`` (node-averaged
    #: losses) or ``"hinge"``; learners without ``alpha="auto"`` leave it None.
    _objective_kind: str | None = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.two_d_array = False  # X is a sequence of structured samples
        return tags

    # ---- pickling: an L1 model's weights by their non-zeros ------------------------------------
    def __getstate__(self):
        """Pickle mostly-zero weight vectors (``coef_`` and the fit state of an L1 model) by
        their non-zeros; loading gives back the same arrays.

        The fit state that only a warm start reads (the SGD learners' average, step sizes and
        L1 penalties, BCFW's dual blocks, L-BFGS's weights) is pickled with ``warm_start=True``
        only, and a warm start after loading then continues exactly; without it a pickle holds
        the fitted model alone (an L1 model's non-zero weights), and a warm start after loading
        fits afresh. A model trained last by ``partial_fit`` keeps its state: a stream pickled
        between two chunks continues exactly after loading."""
        attributes = super().__getstate__()
        streaming = getattr(attributes.get("_state"), "fitted_on", {}).get("partial_fit", False)
        if not (self.warm_start or streaming):  # (a copy: the attributes may be the live __dict__)
            attributes = {key: value for key, value in attributes.items() if key != "_state"}
        return compact_attributes(attributes)

    def __setstate__(self, state):
        super().__setstate__(expand_attributes(state))

    # ---- fitting ---------------------------------------------------------------------------
    @shared_docstring
    @_fit_context(prefer_skip_nested_validation=True)
    @one_blas_thread
    def fit(self, X, y, sample_weight=None):
        """Fit the model (see the estimator for its optimiser).

        Parameters
        ----------
        X : sequence of samples
            Samples in the structure's format (chain: (D, F) arrays; grid: (H, W[, F]) images;
            graph: :class:`~pmap_sklearn.GraphSample`).
        y : sequence of label arrays
            One label per node, of any discrete kind (ints, strings, bools); ``classes_`` is
            the sorted set of the labels seen. ``unknown_label`` (default ``-1``) marks an
            unknown label (see the estimator for how it is used); learners that learn from
            partial annotation (:class:`~pmap_sklearn.ChainCRF`,
            :class:`~pmap_sklearn.MarginalPerturbMAPCRF`) also take a ``set`` of labels at a
            node, which takes one of them (:ref:`label-sets`).
        {{fit_sample_weight}}

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._atomically(self._fit, X, y, sample_weight)

    def _atomically(self, method, *args):
        """``method(*args)``, the estimator's attributes restored if it raises."""
        previous = dict(self.__dict__)
        try:
            return method(*args)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(previous)
            raise
        finally:
            release_freed_memory()

    def _fit(self, X, y, sample_weight=None):
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, _n_samples(X))
        self._check_fit_parameters()
        self._start_workers()
        vars(self).pop("marginal_temperature_", None)  # fitted for the weights being replaced
        fitted_on = self._fitted_on(X, y, sample_weight) if self.warm_start else {}
        warm = (
            self.warm_start
            and hasattr(self, "_state")
            and None not in fitted_on.values()
            and self._state.fitted_on == fitted_on
        )
        structure = self.structure_ if warm else self._make_structure()
        problem = structure.fit_problem(
            X,
            y,
            unknown_label=self.unknown_label,
            ignore_label=getattr(self, "ignore_label", None),
            classes=self.classes_ if warm else None,
            sample_weight=sample_weight,
        )
        if warm:
            state = copy.deepcopy(self._state)  # the fit continues it; a failure must not
            rng = state.rng
        else:
            rng = check_generator(getattr(self, "random_state", None))
        self._check_structure(structure, problem.has_unknown)
        self._check_label_sets(problem)
        _warn_on_class_probabilities(problem.batch, len(problem.classes), structure)
        self.classes_ = problem.classes
        self.structure_ = structure
        if not warm:
            state = self._new_state(rng)
        state = self._fit_batch(problem.batch, problem.labels, state, rng, problem.label_sets)
        return self._commit(state, fitted_on)

    def _commit(self, state, fitted_on: dict):
        """Make ``state`` the fitted model (``coef_``, ``n_iter_`` and the optimiser's own
        attributes), recording what it was ``fitted_on``."""
        state.fitted_on = fitted_on
        self._state = state
        self.coef_ = state.estimate.copy()
        self.n_iter_ = state.n_iter
        self._set_fitted_attributes(state)
        self.n_features_in_ = self.structure_.n_features_in_
        return self

    def _fitted_on(self, X, y, sample_weight=None) -> dict:
        """The fingerprints of what a warm start's state depends on: the training data (``X``
        and ``y`` as given), the sample weights (all 1 being none) and the parameters of
        :attr:`_warm_start_depends_on`. A warm start continues the state only when they are
        those of the last fit (made with ``warm_start=True``); otherwise it fits afresh, as
        ``warm_start=False`` does: BCFW's dual blocks are those of other samples, the SGD
        average and step sizes those of another objective, the structure's solver that of
        other parameters."""
        params = self.get_params(deep=False)
        depends_on = {name: params[name] for name in self._warm_start_depends_on if name in params}
        if sample_weight is not None and np.all(sample_weight == 1.0):
            sample_weight = None  # the fit of no weights
        return {
            "data": fingerprint((X, y)),
            "sample_weight": fingerprint(sample_weight),
            "parameters": fingerprint(depends_on),
        }

    def _alpha_scale(self, batch: SampleBatch) -> float:
        """How many units of evidence the objective sums (``alpha="auto"`` on sparse features
        is :data:`~pmap_sklearn._optim.defaults.SPARSE_ALPHA` over it): one per sample, each
        sample's likelihood or loss being of a whole labelling — its weight, with
        ``sample_weight`` (a weight counts as that many copies of the sample)."""
        return batch.weight_total

    def _resolved_alpha(self, batch: SampleBatch, evidence: float | None = None) -> float:
        """``alpha``, with ``"auto"`` resolved from what the data is
        (:mod:`pmap_sklearn._optim.defaults`, by the learner's :attr:`_objective_kind`): on
        multi-label rows :data:`~pmap_sklearn._optim.defaults.MULTILABEL_ALPHA` (their nodes
        see dense ``X`` standardised: the same model whatever the units of ``X``); on sparse
        node features :data:`~pmap_sklearn._optim.defaults.SPARSE_ALPHA` over the objective's
        units of evidence (crfsuite's ``c2 = 0.1``) — ``batch``'s, or ``evidence`` (a stream's
        so far); else :data:`~pmap_sklearn._optim.defaults.DENSE_ALPHA`."""
        if not isinstance(self.alpha, str):
            return float(self.alpha)
        if self.structure_.sample_kind == "multilabel":
            return defaults.MULTILABEL_ALPHA[self._objective_kind]
        if self.structure_.has_sparse_features(batch):
            if evidence is None:
                evidence = self._alpha_scale(batch)
            return defaults.SPARSE_ALPHA / evidence
        return defaults.DENSE_ALPHA[self._objective_kind]

    def _stream_alpha(self, batch: SampleBatch, state, continuing: bool) -> float | None:
        """Count ``batch``'s evidence into ``state.evidence`` (the samples given so far, from
        zero for a fit or a first ``partial_fit`` call) and return the ``alpha`` a continuing
        stream resolves ``"auto"`` to over it, or None (the settings it has stand).

        A stream's ``alpha="auto"`` on sparse features is over the evidence of every sample
        given so far, as a fit's is over its training set's (a stream cannot tell a new sample
        from one given again: each epoch of calls counts its samples again).
        """
        state.evidence = self._alpha_scale(batch) + (state.evidence if continuing else 0.0)
        if continuing and self.alpha == "auto":
            return self._resolved_alpha(batch, state.evidence)
        return None

    def _make_structure(self) -> BaseStructure:
        """A fresh structure from the ``structure`` parameter."""
        return check_structure(self.structure)

    def _check_fit_parameters(self) -> None:
        """Checks between parameters that ``_parameter_constraints`` cannot express."""

    def _start_workers(self) -> None:
        """Start the parallel workers the fit will use before its serial setup (none here)."""

    def _check_structure(self, structure: BaseStructure, has_unknown: bool) -> None:
        """Check, before any work, that the structure's solver handles its models and the
        queries the optimiser will make (:meth:`_solver_needs`)."""
        if structure.has_hidden_states_ and not self._learns_hidden_states:
            raise ValueError(
                f"{type(self).__name__} does not learn hidden states (the structure's "
                "n_states_per_label / n_hidden_states): use StructuredSVM (the latent "
                "structured SVM), MarginalPerturbMAPCRF or PerturbMAPCRF"
            )
        need = structure.requirements(**self._solver_needs(has_unknown))
        check_capabilities(structure.solver_, need, type(self).__name__)

    def _check_label_sets(self, problem) -> None:
        """Refuse sets of labels in ``y`` unless the optimiser learns from them."""
        if problem.label_sets is not None and not self._learns_label_sets:
            raise ValueError(
                f"{type(self).__name__} does not learn from sets of labels in y (a set or "
                "frozenset at a node): use ChainCRF (exact marginal likelihood on chains) or "
                "MarginalPerturbMAPCRF, or give one label (or unknown_label) per node"
            )

    def _solver_needs(self, has_unknown: bool) -> dict:
        """The queries the optimiser makes of the solver, as keywords of
        :meth:`~pmap_sklearn.structures.BaseStructure.requirements`: by default, clamps to fill
        in unknown labels from the supervised model."""
        return {"clamps": has_unknown}

    def _new_state(self, rng):
        """The optimiser's initial state (with ``estimate``, ``n_iter`` and ``rng``)."""
        raise NotImplementedError

    def _fit_batch(self, batch: SampleBatch, labels: np.ndarray, state, rng, label_sets=None):
        """Fit on the batch, self-training in two stages when labels are unknown (in one
        stage with hidden states, where an unknown label is the set of every label's states,
        summed over or imputed like the hidden states themselves). Samples whose nodes are
        labelled or hold sets of labels (codes below -1, ``label_sets``) count as labelled in
        the first stage, their sets filled in with the unknown labels in the second."""
        unknown = np.bincount(batch.node_sample, labels == -1, minlength=batch.n_samples) > 0
        if self.structure_.has_hidden_states_:
            unknown[:] = False
        complete = np.flatnonzero(~unknown)
        if len(complete) == 0:
            raise ValueError(
                f"every sample has unknown labels (unknown_label={self.unknown_label!r}): at "
                "least one fully labelled sample is needed to fit the supervised model w_1"
            )
        train = np.arange(batch.n_samples)
        validation_score = None
        if getattr(self, "early_stopping", False):
            held_out = self._validation_samples(complete, rng)
            train = np.setdiff1d(train, held_out)
            validation_score = self._validation_scorer(
                batch.subset(held_out), labels[batch.node_index(held_out)]
            )
        supervised = np.intersect1d(train, complete)
        # every sample (sorted, unique): the batch itself, not a second copy of it
        every = len(supervised) == batch.n_samples
        sub = batch if every else batch.subset(supervised)
        sub_labels = labels if every else labels[batch.node_index(supervised)]
        sets = {} if label_sets is None else {"label_sets": label_sets}
        targets = self._targets(sub, sub_labels, None, rng)
        self._optimise(sub, targets, state, rng, validation_score)
        self.supervised_coef_ = state.estimate.copy()
        if len(supervised) < len(train) or sets:  # Alg. 3: continue from w_1 on all samples
            sub = batch.subset(train)
            sub_labels = labels[batch.node_index(train)]
            targets = self._targets(sub, sub_labels, state.estimate, rng, **sets)
            self._optimise(sub, targets, state, rng, validation_score)
        return state

    def _optimise(self, batch, targets, state, rng, validation_score, partial=False):
        """Run the optimiser on ``batch`` from ``state`` (updated in place); ``partial``: one
        pass of ``partial_fit`` (:class:`PartialFitMixin`)."""
        raise NotImplementedError

    def _set_fitted_attributes(self, state) -> None:
        """Optimiser-specific fitted attributes."""

    def _targets(self, batch: SampleBatch, labels: np.ndarray, w_supervised, rng):
        """What the optimiser learns from: the labels (``-1`` = unknown), with the unknown ones
        filled in from the supervised weights ``w_supervised`` (None while every label is
        known). By default the known labels, the unknown ones the MAP of ``w_1`` given them —
        self-training with hard labels, the paper's baseline for weak labels; learners with
        other targets (losses, beliefs, distributions) override it."""
        if w_supervised is None:
            return labels
        return self._map(batch, w_supervised, clamp=labels)

    def _validation_samples(self, complete: np.ndarray, rng: np.random.Generator):
        """Held-out fully labelled samples for early stopping."""
        n_held_out = int(round(self.validation_fraction * len(complete)))
        if n_held_out < 1 or n_held_out >= len(complete):
            raise ValueError(
                f"validation_fraction={self.validation_fraction} leaves {n_held_out} of "
                f"{len(complete)} fully labelled samples for validation; need at least 1 and "
                "fewer than all"
            )
        return np.sort(rng.permutation(complete)[:n_held_out])

    def _validation_scorer(self, batch: SampleBatch, labels: np.ndarray):
        """``w ->`` 1 − the mean Hamming loss of the MAP labellings of the held-out samples
        (weighted by their sample weights, as scikit-learn's early stopping scores)."""
        structure = self.structure_
        truth = structure.visible_codes(labels)  # hidden nodes are not scored

        def score(w):
            predicted = structure.visible_labels(self._map(batch, w))
            return 1.0 - mean_hamming_loss(
                batch.split(truth), batch.split(predicted), sample_weight=batch.sample_weight
            )

        return score

    def _start_from_logistic(self, batch, targets, coef, rng, alpha: float) -> None:
        """Set the unary weights of ``coef`` (in place) to per-node multinomial logistic
        regression on the known labels, with the same L2 penalty ``alpha``.

        Without pairwise terms a Gumbel-perturbed MAP is a sample of the softmax of the unary
        scores (the Gumbel-max trick), so this is the perturb-and-MAP maximum likelihood of the
        model without its pairwise part: SGD then starts with the unary terms where they
        belong instead of at zero, where the first perturbed MAPs are noise and the pairwise
        weights run ahead of the unary ones.
        """
        if self.structure_.unary == "scaled":  # the scores as they are: λ = 1, no bias
            self.structure_.unpack(coef)[0][0] = 1.0
            return
        nodes, labels, weights = self._node_targets(targets)
        if self.structure_.has_hidden_states_:  # the states' regressions, from a first guess
            codes = np.full(batch.n_nodes, -1)
            codes[nodes] = labels
            labels = self.structure_.initial_states(batch, codes, rng)[nodes]
        # each node's sample weight: the start of the weighted objective
        sample_weight = None if batch.sample_weight is None else batch.node_weight[nodes]
        total = max(len(nodes), 1) if sample_weight is None else sample_weight.sum()
        max_rows = defaults.LOGISTIC_ROWS  # a start needs no more: a random subset, seeded
        dense_width = self.structure_.dense_node_feature_width()
        if dense_width is not None:  # rows the batch does not hold: their memory bounded too
            max_rows = min(max_rows, max(defaults.LOGISTIC_DENSE_ENTRIES // dense_width, 1))
        if len(nodes) > max_rows:
            keep = np.sort(rng.choice(len(nodes), max_rows, replace=False))
            nodes, labels = nodes[keep], labels[keep]
            weights = None if weights is None else weights[keep]
            sample_weight = None if sample_weight is None else sample_weight[keep]
        present = np.unique(labels)
        if len(present) < 2:
            return
        unary, _ = self.structure_.unpack(coef)
        # the penalty of (1/N) Σ_n ℓ_n − (α/2)‖w‖² (Σ_n c_n ℓ_n / Σ_n c_n with sample weights),
        # scaled to the share of the rows kept
        kept = len(nodes) if sample_weight is None else sample_weight.sum()
        penalty = alpha * max(batch.weight_total, 1e-300) * kept / total
        if sample_weight is not None:
            weights = sample_weight if weights is None else weights * sample_weight
        model = LogisticRegression(
            C=1.0 / max(penalty, 1e-12), fit_intercept=False, max_iter=defaults.LOGISTIC_ITERATIONS
        )
        # one BLAS thread whatever n_jobs (which limits BLAS): the same start bit for bit
        with warnings.catch_warnings(), single_blas_thread():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(self.structure_.node_features(batch, nodes), labels, sample_weight=weights)
        start = np.zeros(unary.shape[-2:])
        if len(present) == 2:  # one logit difference, split evenly between the two labels
            start[:, present[1]] = model.coef_[0] / 2.0
            start[:, present[0]] = -model.coef_[0] / 2.0
        else:
            start[:, present] = model.coef_.T
        unary[...] = start  # every weight set when untied
        self.structure_.project(coef)

    def _node_targets(self, targets):
        """The per-node classification problem of the targets: ``(nodes, labels,
        sample_weight)`` — every known node with its label, unweighted (the samples' weights
        are the caller's)."""
        nodes = np.flatnonzero(targets >= 0)
        return nodes, targets[nodes], None


class PartialFitMixin:
    """``partial_fit`` of the stochastic learners: one pass of the fit's optimiser over a
    chunk of samples, continuing its state (scikit-learn's ``SGDClassifier.partial_fit``).

    The first call (on an unfitted estimator) fits the structure's dimensions on its chunk, with
    ``K`` from ``classes``, and the optimiser resolves its ``"auto"`` settings there; later
    calls keep both and continue the fit state — a fitted model's too, as scikit-learn's
    ``partial_fit`` after ``fit`` does. The learner's ``_optimise(..., partial=True)`` runs
    the pass; ``_check_partial_fit(structure)`` refuses what it cannot continue.
    """

    @shared_docstring
    @_fit_context(prefer_skip_nested_validation=True)
    @one_blas_thread
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Fit one pass (epoch) over a chunk of samples, continuing the fit so far.

        The step schedule, AdaGrad's sums, the average of the iterates and the random stream
        continue from the last call (or from the last ``fit``: ``fit`` itself always starts afresh).
        The first call fits the structure (feature dimensions) on its chunk and resolves every
        ``"auto"`` setting (``alpha``, the step rule, ``eta0``, ``batch_size``, ``average``:
        ``sgd_settings_``) from it, as ``fit`` would on that chunk alone; later calls keep them, so
        the first chunk should be a fair sample of the stream. The one exception is ``alpha="auto"``
        on sparse features, over the evidence of every sample given so far (each epoch of calls
        counts its samples again: set ``alpha``, e.g. ``0.2 / n_samples``, to fit the objective of
        ``fit`` on all of it). Each call runs one pass whatever ``max_iter`` (which only sets where
        ``average="auto"`` starts averaging), without ``tol``, ``n_iter_no_change`` or
        ``early_stopping``: as in scikit-learn, the number of passes and when to stop are the
        caller's. The features of every chunk must have the first chunk's dimensions: a
        :class:`~pmap_sklearn.SequenceVectorizer` with ``hashing=True`` keeps them fixed (see
        :ref:`out-of-core` in the user guide).

        Parameters
        ----------
        X : sequence of samples
            The chunk's samples, in the structure's format (see :meth:`fit`).
        y : sequence of label arrays
            Their labels, each one of ``classes``. Unknown labels (``unknown_label``) are
            filled in by the current model's MAP given the known ones (self-training, as the
            second stage of :meth:`fit`): they need a model, so not in the first call.
        classes : array-like of shape (K,), default=None
            Every label the stream may hold. Required in the first call (a chunk need not
            hold every label); in later calls None or the same classes.
        {{fit_sample_weight}}

        Returns
        -------
        self : object
            The estimator, fitted on the chunks so far.
        """
        return self._atomically(self._partial_fit, X, y, classes, sample_weight)

    def _partial_fit(self, X, y, classes, sample_weight):
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, _n_samples(X))
        self._check_fit_parameters()
        self._start_workers()
        first = not hasattr(self, "coef_")
        if first:
            classes = _first_classes(classes)
        else:
            if not hasattr(self, "_state"):
                raise ValueError(
                    f"this {type(self).__name__} was pickled without its fit state "
                    "(warm_start=False), which partial_fit continues: pickle it with "
                    "warm_start=True, or call fit (or partial_fit on a new estimator)"
                )
            _check_same_classes(classes, self.classes_)
            classes = self.classes_
        for stale in ("marginal_temperature_", "supervised_coef_"):  # of the weights replaced
            vars(self).pop(stale, None)
        structure = self._make_structure() if first else self.structure_
        problem = structure.fit_problem(
            X,
            y,
            unknown_label=self.unknown_label,
            ignore_label=getattr(self, "ignore_label", None),
            classes=classes,
            sample_weight=sample_weight,
            refit=first,
        )
        self._check_partial_fit(structure)
        self._check_structure(structure, problem.has_unknown)
        self._check_label_sets(problem)
        if first:
            _warn_on_class_probabilities(problem.batch, len(problem.classes), structure)
            rng = check_generator(getattr(self, "random_state", None))
        else:
            state = copy.deepcopy(self._state)  # the pass continues it; a failure must not
            rng = state.rng
        self.classes_ = problem.classes
        self.structure_ = structure
        if first:
            state = self._new_state(rng)
        batch, labels = problem.batch, problem.labels
        fill_in = problem.label_sets is not None or (
            not structure.has_hidden_states_ and bool(np.any(labels == -1))
        )
        if fill_in and first:
            raise ValueError(
                "the first partial_fit needs fully labelled samples: unknown labels (and sets "
                "of labels) are filled in by the model the earlier chunks fitted; start the "
                "stream with a chunk of fully labelled samples"
            )
        sets = {} if problem.label_sets is None else {"label_sets": problem.label_sets}
        targets = self._targets(batch, labels, state.estimate if fill_in else None, rng, **sets)
        self._optimise(batch, targets, state, rng, None, partial=True)
        return self._commit(state, {"partial_fit": True})

    def _check_partial_fit(self, structure) -> None:
        """Refuse, before any pass, what ``partial_fit`` cannot continue: ``class_weight=
        "balanced"``, whose weights are of the whole training set (as scikit-learn refuses
        it)."""
        if getattr(self, "class_weight", None) == "balanced":
            raise ValueError(
                "class_weight='balanced' weighs the labels by their counts in the whole "
                "training set, which partial_fit never sees: give class_weight as a dict, "
                "e.g. from sklearn.utils.class_weight.compute_class_weight('balanced', "
                "classes=classes, y=labels of a large enough sample of the stream)"
            )


def _first_classes(classes) -> np.ndarray:
    """The ``classes`` of a first ``partial_fit``, sorted and checked."""
    if classes is None:
        raise ValueError(
            "classes must be given in the first call to partial_fit: every label the stream "
            "may hold (e.g. numpy.unique of all the labels), as a chunk may lack some"
        )
    classes = np.unique(np.asarray(classes).ravel())
    if len(classes) < 2:
        raise ValueError(f"classes holds {len(classes)} label(s) {classes.tolist()}: need two")
    return classes


def _check_same_classes(classes, fitted: np.ndarray) -> None:
    """Refuse ``classes`` in a later ``partial_fit`` that are not those of the first call."""
    if classes is None:
        return
    given = np.unique(np.asarray(classes).ravel())
    if len(given) != len(fitted) or not np.all(given == fitted):
        raise ValueError(
            f"classes={given.tolist()} differs from the classes of the first partial_fit (or "
            f"fit), classes_={fitted.tolist()}: give the same classes or None"
        )


def _n_samples(X) -> int:
    """The number of samples in ``X`` (rows of an array or matrix, items of a sequence), for
    the length of ``sample_weight``."""
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape):
        return int(shape[0])
    try:
        return len(X)
    except TypeError:
        raise TypeError(
            f"X must be a sequence of samples, got {type(X).__name__}: sample_weight has one "
            "weight per sample"
        ) from None


#: The start of the warning of :func:`_warn_on_class_probabilities` (which a two-stage fit,
#: whose stage two is fitted on such features by design, silences: :func:`stage_two_fit`).
CLASS_PROBABILITY_WARNING = "the node features are a classifier's"


def _warn_on_class_probabilities(batch: SampleBatch, n_classes: int, structure) -> None:
    """Warn when the node features are, node by node, a distribution over the ``n_classes``
    labels — a classifier's probabilities (more than half of them strictly between 0 and 1: a
    one-hot code is not one) or log-probabilities (rows whose exponentials sum to 1): a CRF
    fitted on them with its defaults smooths thin classes away, where
    :class:`~pmap_sklearn.TwoStageCRF` chooses the smoothing on held-out folds."""
    features = batch.features
    if not isinstance(features, np.ndarray) or features.ndim != 2:
        return
    if getattr(structure, "bias", False):  # the stacked features end with the bias column
        features = features[:, :-1]
    if (
        structure.sample_kind == "multilabel"
        or features.shape[1] != n_classes
        or n_classes < 2
        or features.shape[0] < 2
    ):
        return
    if features.min() >= 0 and features.max() <= 1:
        inside = np.mean((features > 0) & (features < 1)) > 0.5
        kind = "probabilities" if inside and np.allclose(features.sum(axis=1), 1) else None
    elif features.max() <= 0:
        kind = "log-probabilities" if np.allclose(logsumexp(features, axis=1), 0) else None
    else:
        kind = None
    if kind is not None:
        warnings.warn(
            f"{CLASS_PROBABILITY_WARNING} {kind} over the {n_classes} labels (each node's "
            "sum to 1): a CRF fitted on them with its defaults tends to smooth thin classes "
            "away, below the classifier's class average. TwoStageCRF fits both stages on "
            "honest folds and chooses a smoothing that keeps the class average (user guide, "
            "scene segmentation: two-stage CRFs)",
            UserWarning,
            stacklevel=7,  # the caller of fit (through fit's decorators)
        )


@contextlib.contextmanager
def stage_two_fit():
    """A context in which a fit on a classifier's (log-)probabilities does not warn of it: the
    stage two of :class:`~pmap_sklearn.TwoStageCRF`."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=CLASS_PROBABILITY_WARNING)
        yield
