"""Base class of the SGD-trained structured estimators: the scikit-learn contract in one place.

A subclass only says what its stochastic gradient is (:meth:`_make_oracle`); fitting, warm
starts, early stopping, prediction, marginals and scoring are shared.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _sgd
from .metrics import hamming_loss
from .perturbation import gumbel
from .structures import SampleBatch, _BaseStructure, check_structure

#: Largest number of (sample copy) nodes solved in one vectorised marginals call.
_MARGINALS_CHUNK_NODES = 200_000


def check_generator(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


class BaseStructuredEstimator(BaseEstimator):
    """The scikit-learn contract shared by the structured learners: validation of samples and
    labels, the semi-supervised stages (SPEC §2, Alg. 3), warm starts, MAP prediction, scoring.

    A subclass provides its optimiser through ``_new_state``, ``_optimise`` and ``_targets``.
    """

    _parameter_constraints: dict = {
        "structure": [StrOptions({"chain", "grid", "graph"}), _BaseStructure],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    # ---- fitting ---------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the model (see the estimator for its optimiser).

        Parameters
        ----------
        X : sequence of samples
            Samples in the structure's format (chain: (D, F) arrays; grid: (H, W[, F]) images;
            graph: :class:`~pmap_sklearn.structures.GraphSample`).
        y : sequence of int arrays
            One label per node; ``-1`` marks an unknown label. Samples with unknown labels are
            used semi-supervised (SPEC §2, Alg. 3): the model is first fitted on the fully
            labelled samples (``w_1``), the unknown labels are then filled in from ``w_1``
            conditionally on the known ones (see the estimator), and fitting continues from
            ``w_1`` on all samples.

        Returns
        -------
        self
        """
        self._check_fit_parameters()
        warm = self.warm_start and hasattr(self, "_state")
        if not warm:
            self.structure_ = check_structure(self.structure).fit(X, y)
        batch = self.structure_.prepare(X)
        labels = self.structure_.prepare_labels(batch, y, allow_unknown=True)
        if warm:  # continue the random stream: a warm start must not replay its perturbations
            state = self._state
            rng = state.rng
        else:
            rng = check_generator(self.random_state)
            state = self._new_state(rng)
        unknown = np.bincount(batch.node_sample, labels < 0, minlength=batch.n_samples) > 0
        complete = np.flatnonzero(~unknown)
        if len(complete) == 0:
            raise ValueError(
                "every sample has unknown labels (-1): at least one fully labelled sample is "
                "needed to fit the supervised model w_1"
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
        sub = batch.subset(supervised)
        sub_labels = labels[batch.node_index(supervised)]
        self._optimise(sub, self._targets(sub, sub_labels, None, rng), state, rng, validation_score)
        self.supervised_coef_ = state.best.copy()
        if len(supervised) < len(train):  # Alg. 3: continue from w_1 on all samples
            sub = batch.subset(train)
            targets = self._targets(sub, labels[batch.node_index(train)], state.best, rng)
            self._optimise(sub, targets, state, rng, validation_score)
        self._state = state
        self.coef_ = state.best.copy()
        self.n_iter_ = state.n_iter
        self._set_fitted_attributes(state)
        self.classes_ = np.arange(self.structure_.n_states_)
        self.n_features_in_ = self.structure_.n_features_in_
        return self

    def _check_fit_parameters(self) -> None:
        """Checks between parameters that ``_parameter_constraints`` cannot express."""

    def _new_state(self, rng):
        """The optimiser's initial state (with ``coef``, ``best``, ``n_iter`` and ``rng``)."""
        raise NotImplementedError

    def _optimise(self, batch, targets, state, rng, validation_score):
        """Run the optimiser on ``batch`` from ``state`` (updated in place)."""
        raise NotImplementedError

    def _set_fitted_attributes(self, state) -> None:
        """Optimiser-specific fitted attributes."""

    def _targets(self, batch: SampleBatch, labels: np.ndarray, w_supervised, rng):
        """What the oracle learns from: built from the labels (``-1`` = unknown), with the
        unknown ones filled in from the supervised weights ``w_supervised`` (None while every
        label is known)."""
        raise NotImplementedError

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
        def score(w):
            predicted = self.structure_.map(batch, w, n_jobs=self.n_jobs)
            return 1.0 - hamming_loss(batch.split(labels), batch.split(predicted))

        return score

    # ---- prediction ------------------------------------------------------------------------
    def _prepare_fitted(self, X) -> SampleBatch:
        check_is_fitted(self, "coef_")
        return self.structure_.prepare(X)

    def predict(self, X, decoding: str = "map") -> list[np.ndarray]:
        """Labelling of each sample.

        Parameters
        ----------
        X : sequence of samples
        decoding : {"map", "marginal"}, default="map"
            ``"map"``: the MAP labelling; ``"marginal"``: the per-node argmax of the estimated
            marginals (:meth:`predict_marginals`), which minimises the expected Hamming loss.

        Returns
        -------
        y : list of int arrays
            One array per sample, shaped like its labels ((D,) or (H, W)).
        """
        if decoding == "marginal":
            if not hasattr(self, "predict_marginals"):
                raise ValueError(f"{type(self).__name__} has no marginals: use decoding='map'")
            return [m.argmax(axis=-1) for m in self.predict_marginals(X)]
        if decoding != "map":
            raise ValueError(f"decoding must be 'map' or 'marginal', got {decoding!r}")
        batch = self._prepare_fitted(X)
        return batch.split(self.structure_.map(batch, self.coef_, n_jobs=self.n_jobs))

    def score(self, X, y) -> float:
        """``1 − Hamming loss`` of the MAP labelling (mean over samples)."""
        return 1.0 - hamming_loss(y, self.predict(X))


class BaseStructuredSGD(BaseStructuredEstimator):
    """Shared fit / predict / predict_marginals / score of the perturb-and-MAP learners.

    Its ``__init__`` holds the SGD parameters with :class:`~pmap_sklearn.PerturbMAPCRF`'s
    defaults (documented there); estimators with other parameters or defaults define their own
    signature and pass these on.
    """

    _parameter_constraints: dict = {
        **BaseStructuredEstimator._parameter_constraints,
        "learning_rate": [StrOptions({"optimal", "constant", "invscaling"})],
        "eta0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "power_t": [Interval(Real, None, None, closed="neither")],
        "average": ["boolean", Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, None, None, closed="neither"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_perturbations": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        structure="chain",
        *,
        alpha=1e-4,
        max_iter=50,
        batch_size=16,
        learning_rate="optimal",
        eta0="auto",
        power_t=0.5,
        average=True,
        tol=1e-3,
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=0.1,
        warm_start=False,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.structure = structure
        self.alpha = alpha
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.average = average
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.warm_start = warm_start
        self.n_perturbations = n_perturbations
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _check_fit_parameters(self) -> None:
        if self.learning_rate == "optimal" and self.alpha == 0:
            raise ValueError("learning_rate='optimal' needs alpha > 0")

    def _new_state(self, rng):
        return _sgd.SGDState(coef=self.structure_.project(np.zeros(self.structure_.size_)), rng=rng)

    def _set_fitted_attributes(self, state) -> None:
        self.t_ = state.t
        self.eta0_ = state.eta0
        self.loss_curve_ = list(state.loss_curve)
        self.validation_scores_ = list(state.validation_scores)

    def _make_oracle(self, batch: SampleBatch, targets):
        """Return ``oracle(part, w, rng) -> (Σ gradient of ℓ, Σ estimate of ℓ)`` over the samples
        ``part`` of ``batch`` (a slice or indices), drawing the perturbations from ``rng``."""
        raise NotImplementedError

    def _optimise(self, batch, targets, state, rng, validation_score):
        def make_oracle(order):
            # One gather per epoch; the mini-batches are then contiguous views of it.
            return self._make_oracle(batch.subset(order), targets[batch.node_index(order)])

        batch_size = min(self.batch_size, batch.n_samples)
        if state.eta0 is None:
            state.eta0 = self.eta0
            if self.eta0 == "auto":
                state.eta0 = _sgd.calibrate_eta0(
                    make_oracle,
                    state.coef,
                    batch.n_samples,
                    rng=rng,
                    alpha=self.alpha,
                    batch_size=batch_size,
                    project=self.structure_.project,
                    average=bool(self.average),
                )
        _sgd.run_sgd(
            make_oracle,
            state,
            batch.n_samples,
            rng=rng,
            alpha=self.alpha,
            batch_size=batch_size,
            schedule=self.learning_rate,
            eta0=state.eta0,
            power_t=self.power_t,
            average=self.average,
            max_iter=self.max_iter,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            project=self.structure_.project,
            validation_score=validation_score,
            verbose=self.verbose,
        )

    def predict_marginals(self, X, method: str = "perturb", n_perturbations: int | None = None):
        """Node marginals ``P(y_d = k | x)`` of each sample.

        Parameters
        ----------
        X : sequence of samples
        method : {"perturb", "exact"}, default="perturb"
            ``"perturb"``: frequency of each label over ``n_perturbations`` Gumbel-perturbed MAP
            labellings (SPEC §1, any structure); ``"exact"``: forward-backward (chains only).
        n_perturbations : int, optional
            Defaults to the estimator's ``n_perturbations``.

        Returns
        -------
        marginals : list of float arrays
            One array of shape (D, K) (or (H, W, K)) per sample; rows sum to 1.
        """
        batch = self._prepare_fitted(X)
        if method == "exact":
            if not hasattr(self.structure_, "marginals"):
                raise ValueError(
                    f"exact marginals need a chain; {type(self.structure_).__name__} is loopy "
                    "(use method='perturb')"
                )
            node, _, _ = self.structure_.marginals(batch, self.coef_)
            return batch.split(node)
        if method != "perturb":
            raise ValueError(f"method must be 'perturb' or 'exact', got {method!r}")
        n_perturbations = n_perturbations or self.n_perturbations
        rng = check_generator(self.random_state)
        return batch.split(
            perturbed_marginals(
                self.structure_, batch, self.coef_, n_perturbations, rng, self.n_jobs
            )
        )


def perturbed_marginals(
    structure, batch, w, n_perturbations, rng, n_jobs=None, clamp=None
) -> np.ndarray:
    """Node marginals (n_nodes, K) estimated from ``n_perturbations`` perturbed MAPs per sample.

    With ``clamp`` (flat labels, ``-1`` = free) they are the conditional marginals
    ``q(y_d | y_given)`` of the free nodes given the clamped ones. The copies of a sample are
    solved together in vectorised chunks.
    """
    n_states = structure.n_states_
    counts = np.zeros(batch.n_nodes * n_states)
    per_chunk = max(1, _MARGINALS_CHUNK_NODES // (n_perturbations * max(batch.lengths.max(), 1)))
    for begin in range(0, batch.n_samples, per_chunk):
        copies = np.repeat(
            np.arange(begin, min(begin + per_chunk, batch.n_samples)), n_perturbations
        )
        replicated = batch.subset(copies)
        noise = gumbel(rng, (replicated.n_nodes, n_states))
        nodes = batch.node_index(copies)
        fixed = None if clamp is None else clamp[nodes]
        labels = structure.map(replicated, w, noise, clamp=fixed, n_jobs=n_jobs)
        counts += np.bincount(nodes * n_states + labels, minlength=counts.size)
    return counts.reshape(batch.n_nodes, n_states) / n_perturbations
