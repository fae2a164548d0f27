"""Two-stage learning: per-node class probabilities from any classifier, then a CRF on them.

Most vision CRFs of the 2000s were built this way (Shotton et al. 2006; Domokos, lecture 11 of
"Probabilistic Graphical Models in Computer Vision"): first learn unary energies with a
classifier of the nodes alone, then freeze them and learn only how much to trust them and the
pairwise weights. Stage one is trained out of fold, so stage two learns from probabilities of
the quality the classifier will have on new samples — probabilities predicted on its own
training nodes are over-confident, and a CRF fitted to them would learn to trust them too much.
What stage two keeps of what it learned — its unary form and the share of its pairwise weights —
is chosen on a held-out fold, where it can fall back to stage one's own decisions.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from .._docstrings import shared_docstring
from .._labels import check_markers, unknown_mask
from .._utils import stack_rows, store_parameters
from .._validation import NumberInterval, check_probabilities, check_sample_weight
from ..metrics.hamming import class_weight_by_code
from ..preprocessing import _node_features
from ..samples import GraphSample
from ..structures import check_structure
from ._estimator import stage_two_fit
from ._two_stage_choice import HeldOutChoice, _rounded, _smoothed
from .perturb_map import PerturbMAPCRF

__all__ = ["TwoStageCRF"]


def _crf_has(method: str):
    """``available_if`` test: the stage-two learner has ``method``."""
    return lambda self: hasattr(self.crf if self.crf is not None else PerturbMAPCRF(), method)


class TwoStageCRF(HeldOutChoice, MetaEstimatorMixin, BaseEstimator):
    r"""Two-stage learning: a node classifier's out-of-fold log-probabilities, then a CRF.

    Stage one fits ``classifier`` (any scikit-learn classifier with ``predict_proba``) to the
    nodes of all samples, each node on its own. Its class probabilities :math:`p_k(x_d)` become
    the node features of stage two, as :math:`\log \max(p_k(x_d), \epsilon)`, and the CRF
    ``crf`` learns how much to trust each of them — the weights of the unary scores
    :math:`\sum_j w_{kj} \log p_j(x_d)`, so a single weight on :math:`\log p_k` is the special
    case the classic pipelines set by hand — together with the pairwise weights, by any of the
    library's learners. The probabilities stage two is fitted on are predicted out of fold: the
    samples are split into ``cv`` folds and each fold's nodes get the probabilities of a
    classifier fitted on the other folds (all nodes of a sample stay in one fold). The final
    classifier is then fitted on every node and gives the probabilities at prediction time.

    By default stage two is not kept as its likelihood fits it: the unary form (a K×K matrix
    or one weight), the smoothing — a share of the learned pairwise weights (from none, stage
    one's own decisions, to twice the learned ones) or a uniform Potts weight — and class
    offsets on the log-probabilities are those whose MAP labellings of the last fold's samples
    score best, stage two being fitted for that choice on the other folds' samples (see
    ``scoring``). A likelihood's pairwise
    weights make a MAP labelling that is smoother than the truth where the unary scores are
    weak, and the smoothing takes the classes with the longest boundary for their area —
    thin objects on superpixels — first; the offsets give them back their share. A matrix
    learned on out-of-fold probabilities corrects mistakes the final classifier need not
    make ("Scene segmentation" in the user guide measures both).

    Parameters
    ----------
    classifier : estimator with ``fit`` and ``predict_proba``, default=None
        The node classifier of stage one (cloned); None: ``LogisticRegression(max_iter=1000)``.
    crf : structured learner of this library, default=None
        The learner of stage two (cloned; its ``structure`` says what the samples are); None:
        ``PerturbMAPCRF("chain", random_state=random_state)``.
    cv : int or cross-validation splitter, default=5
        The folds of samples for the out-of-fold probabilities. An int: that many folds (at
        most the number of samples, or of groups), shuffled with ``random_state``, or
        :class:`~sklearn.model_selection.GroupKFold`'s when ``fit`` is given ``groups``. A
        splitter (e.g. ``GroupKFold(3)``) is called as ``cv.split(samples, groups=groups)``;
        its test folds must hold every sample exactly once, and no train fold a sample of its
        test fold. Splitters that need one class per sample (``StratifiedKFold``) do not apply.
    min_proba : float, default=1e-6
        ε: probabilities are floored at it before the log, so a class the classifier rules out
        costs a finite score.
    random_state : int, Generator, RandomState or None, default=None
        The split of the samples into folds (an int ``cv`` without groups), and the default
        stage two's seed.
    n_jobs : int or None, default=None
        Folds fitted in parallel (joblib).
    unknown_label : int, float, str or None, default=-1
        The label that marks an unknown node in ``y``: left out of stage one's training, and
        set as stage two's ``unknown_label`` (which handles it as that learner does).
    ignore_label : int, float, str or None, default=None
        The label that marks a node to ignore (e.g. void pixels): left out of stage one's
        training and set as stage two's ``ignore_label`` (removed from its fit, not scored).
    class_weight : None, "balanced" or dict, default=None
        Set on both stages where they take it (e.g. ``LogisticRegression``,
        ``HistGradientBoostingClassifier``, :class:`~pmap_sklearn.PerturbMAPCRF`; a
        :class:`~sklearn.pipeline.Pipeline` classifier's last step), with a warning for one
        that does not; None leaves theirs as given.
    unary : {"auto", "matrix", "scale"}, default="auto"
        What stage two learns of the log-probabilities. ``"matrix"``: a K×K matrix and a bias,
        :math:`u_d(k) = \sum_j w_{kj} \log p_j(x_d) + b_k` — it can correct the classifier,
        and re-learns the class frequencies of the training nodes. ``"scale"``: one weight,
        :math:`u_d(k) = \lambda \log p_k(x_d)` (stage two's structure with
        ``unary="scaled", bias=False``) — the lecture's two-stage learning: the unary terms are
        frozen and only how far to trust them is learned with the pairwise weights, so a class
        balance set in stage one (``class_weight="balanced"``) is kept. ``"auto"``: the one
        whose MAP labellings of held-out samples score best (below). The matrix corrects
        the mistakes of the classifiers that gave the out-of-fold probabilities; where the
        final classifier, fitted on every sample, makes other mistakes (on new video
        sequences, say) the corrections do not carry over, and the held-out fold shows it.
    pairwise_scale : "auto" or float >= 0, default="auto"
        The share of stage two's learned pairwise weights the fitted model keeps. A
        likelihood fits how often neighbours disagree in the model's *draws*; where the
        unary scores are weak its MAP labelling is much smoother than its draws, and loses
        thin and rare classes first (see "Scene segmentation" in the user guide). ``"auto"``:
        the scale among 0 (the unary scores alone), 1/8, 1/4, 1/2, 1 and 2 — or, with
        ``unary="scale"`` and Potts pairwise terms, a uniform Potts weight of 1/8, 1/4, 1/2
        or 1 on every edge, in the units of the log-probabilities, in place of the learned
        weights (the smoothing classic pipelines set by hand) — whose MAP labellings of
        held-out samples score best (below), each with class offsets
        :math:`\delta_k` added to the log-probabilities (stage one's class priors re-weighted,
        :math:`p_k e^{\delta_k}`): none, or a share of 1/4, 1/2 or 1 of the offsets under
        which the model's MAP labellings of the samples it is fitted on predict each class as often
        (pixels, where nodes have ``node_sizes``) as stage one's decisions do. A number: that
        scale (1: the learned weights as they are), and no offsets.
    scoring : callable or None, default=None
        How the ``"auto"`` choices are scored. Stage two is fitted, for each unary form, on
        the out-of-fold samples of every fold but the last, and its MAP labellings of the
        last fold's samples — which neither stage two nor the classifier that gave them
        their probabilities has seen — are scored at each pairwise scale and share of the
        class offsets (the offsets are fitted on up to 64 of the other samples); the best is
        then refitted on every sample. None: the mean intersection over union of the classes
        (:func:`~pmap_sklearn.metrics.segmentation_scores`, each node weighted by its
        ``node_sizes``, the known labels only), among the candidates whose global accuracy is
        at least the classifier's own decisions' there and whose class-average accuracy is
        at most half a point below theirs — the
        weights as fitted (no offsets) unless another candidate's is a point higher; if
        none is, stage one's decisions (``unary="scale"`` with no pairwise weight and no
        offsets). A
        scorer ``scoring(estimator, X, y)`` (higher is better; e.g.
        :data:`~pmap_sklearn.metrics.global_accuracy_scorer`): the best score. Where
        stage two has marginals, their temperature (``crf_.marginal_temperature_``) is then
        fitted on up to 16 of the held-out samples (``calibrate_marginals``, 20 perturbed
        MAPs each). With nothing to choose (a given ``unary`` and ``pairwise_scale``), stage
        two is fitted once.
    verbose : int, default=0
        Report on standard output which stage runs: each out-of-fold fit of stage one as it
        ends (fold, nodes, seconds), stage two, the final classifier. Passed on as stage two's
        ``verbose`` (its progress per epoch) when not 0.

    Attributes
    ----------
    classifier_ : estimator
        Stage one fitted on all the known nodes.
    crf_ : estimator
        Stage two fitted on the out-of-fold log-probabilities, its pairwise weights scaled by
        ``pairwise_scale_``.
    unary_ : str
        Stage two's unary form, ``"matrix"`` or ``"scale"`` (``unary`` with ``"auto"``
        resolved).
    pairwise_ : str
        The smoothing kept: ``"learned"`` (stage two's pairwise weights, times
        ``pairwise_scale_``) or ``"potts"`` (a uniform Potts weight ``pairwise_scale_`` on
        every edge, on the scale of the log-probabilities).
    pairwise_scale_ : float
        The scale of the learned pairwise weights (``pairwise_scale`` with ``"auto"``
        resolved), or the uniform Potts weight.
    class_offsets_ : ndarray of shape (n_classes,)
        The offsets added to stage one's log-probabilities before stage two (zeros unless
        chosen, see ``pairwise_scale``).
    choice_scores_ : dict or None
        ``{(unary form, smoothing, its scale, share of the class offsets): score}`` of the
        held-out choice (the mean IoU, or ``scoring``'s score); None when there was nothing
        to choose.
    classes_ : ndarray
        The classes (sorted), the columns of stage one's probabilities.
    n_features_in_ : int
        Node features of the samples.

    See Also
    --------
    NodeTransformer : a transformer applied to the node features (no labels involved).

    References
    ----------
    .. [1] J. Shotton, J. Winn, C. Rother and A. Criminisi. TextonBoost: joint appearance,
       shape and context modeling for multi-class object recognition and segmentation.
       ECCV 2006.

    Examples
    --------
    >>> from pmap_sklearn import PerturbMAPCRF, TwoStageCRF
    >>> from pmap_sklearn.datasets import make_chain_data
    >>> data = make_chain_data(n_samples=60, random_state=0)
    >>> model = TwoStageCRF(crf=PerturbMAPCRF(random_state=0), cv=3, random_state=0)
    >>> model.fit(data.data, data.target).score(data.data, data.target) > 0.7
    True
    """

    _parameter_constraints: dict = {
        "classifier": [None, HasMethods(["fit", "predict_proba"])],
        "crf": [None, HasMethods(["fit", "predict"])],
        "cv": [
            NumberInterval(Integral, 2, None, closed="left"),
            HasMethods(["split", "get_n_splits"]),
        ],
        "min_proba": [NumberInterval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [None, NumberInterval(Integral, None, None, closed="neither")],
        "unknown_label": "no_validation",
        "ignore_label": "no_validation",
        "class_weight": [None, StrOptions({"balanced"}), dict],
        "unary": [StrOptions({"auto", "matrix", "scale"})],
        "pairwise_scale": [StrOptions({"auto"}), NumberInterval(Real, 0, None, closed="left")],
        "scoring": [None, callable],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        classifier=None,
        crf=None,
        *,
        cv=5,
        min_proba=1e-6,
        random_state=None,
        n_jobs=None,
        unknown_label=-1,
        ignore_label=None,
        class_weight=None,
        unary="auto",
        pairwise_scale="auto",
        scoring=None,
        verbose=0,
    ):
        store_parameters(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.two_d_array = False  # X is a sequence of structured samples
        return tags

    # ---- pickling: the held-out scores by pairs ------------------------------------------------
    def __getstate__(self):
        """The attributes, ``choice_scores_`` as a list of ``(key, score)`` pairs: its keys are
        tuples, which ``skops.io`` cannot store (it stores dictionaries with string keys)."""
        state = super().__getstate__()
        if isinstance(state.get("choice_scores_"), dict):
            state = {**state, "choice_scores_": list(state["choice_scores_"].items())}
        return state

    def __setstate__(self, state):
        if isinstance(state.get("choice_scores_"), list):
            state = {**state, "choice_scores_": {tuple(k): v for k, v in state["choice_scores_"]}}
        super().__setstate__(state)

    # ---- the two stages ---------------------------------------------------------------------
    @shared_docstring
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, groups=None, sample_weight=None):
        """Fit stage one out of fold, stage two on its log-probabilities, stage one on all.

        Parameters
        ----------
        X : sequence of samples
            Chains (D, F), images (H, W[, F]) or :class:`~pmap_sklearn.GraphSample`, as the
            stage-two learner's structure takes them (dense or sparse node features).
        y : sequence of label arrays
            One label per node, of any discrete kind; ``unknown_label`` marks unknown ones.
        groups : array-like of shape (n_samples,), optional
            A group per sample (e.g. the video a frame comes from, the document of a
            sentence): the samples of a group stay in one fold, so stage two learns from
            probabilities of the quality the classifier has on groups it never saw.
        {{fit_sample_weight}}
            Both stages take them: the classifier each node with its sample's weight (its
            ``fit`` must take ``sample_weight``), stage two each sample, and the held-out
            choice scores each node with its size times its sample's weight.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        structure = self._structure()
        if check_structure(structure).sample_kind == "multilabel":
            raise ValueError(
                "TwoStageCRF classifies each node from its own features; the nodes of "
                "MultiLabelStructure are labels that share their sample's features: fit its "
                "learner directly (its logistic start is already a classifier per label)"
            )
        X, y = list(X), list(y)
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} samples but y has {len(y)}")
        if sample_weight is not None:
            X, y, groups, sample_weight = self._without_zero_weights(X, y, groups, sample_weight)
        if len(X) < 2:
            raise ValueError(
                f"TwoStageCRF needs at least 2 samples for its out-of-fold probabilities, got "
                f"{len(X)}"
            )
        features, offsets = self._stacked_features(X, self._grids())
        labels = self._flat_labels(X, y, offsets)
        check_markers([labels], unknown_label=self.unknown_label, ignore_label=self.ignore_label)
        known = ~unknown_mask(labels, (self.unknown_label, self.ignore_label))
        if not known.any():
            raise ValueError("y has no known label: stage one needs labelled nodes")
        classes = np.unique(labels[known])
        if len(classes) < 2:
            raise ValueError(
                f"y holds {len(classes)} class {list(classes)}: at least two are needed"
            )
        class_weight_by_code(self.class_weight, classes)  # both stages' weights, checked once
        node_weight = None
        if sample_weight is not None:  # each node weighs its sample's weight in stage one
            node_weight = np.repeat(sample_weight, np.diff(offsets))
        folds = self._folds(len(X), groups)
        report = _Report(self.verbose)
        report(
            f"stage one: {type(self._classifier()).__name__} out of fold, {len(folds)} folds "
            f"of {len(X)} samples"
        )
        jobs = Parallel(n_jobs=self.n_jobs, return_as="generator")(
            delayed(_fold_probabilities)(
                self._classifier(),
                features,
                labels,
                known,
                offsets,
                train,
                test,
                classes,
                node_weight,
            )
            for train, test in folds
        )
        probabilities = np.zeros((len(labels), len(classes)))
        for number, (nodes, fold) in enumerate(jobs, 1):
            probabilities[nodes] = fold
            report(f"stage one: fold {number}/{len(folds)} done ({len(nodes)} nodes predicted)")
        samples = self._stage_two(X, probabilities, offsets)
        choice = self._choose(
            samples, y, labels, known, classes, offsets, folds, probabilities, report, sample_weight
        )
        if choice.scores is not None:
            report(
                f"choice: unary={choice.unary!r}, {choice.pairwise} pairwise weights x "
                f"{choice.pairwise_scale:g}, "
                f"class offsets {np.round(choice.class_offsets, 2)} ({_rounded(choice)})"
            )
        crf = self._crf(choice.unary)
        report(f"stage two: {type(crf).__name__} on the out-of-fold log-probabilities")
        with stage_two_fit():
            crf = crf.fit(samples, y, **weights_of(sample_weight))
        crf = _smoothed(crf, choice.pairwise, choice.pairwise_scale, choice.uniform)
        if choice.temperature is not None:
            crf.marginal_temperature_ = choice.temperature
        report(f"stage one: the final classifier on all {int(known.sum())} known nodes")
        classifier = self._classifier().fit(
            features[known],
            labels[known],
            **weights_of(None if node_weight is None else node_weight[known]),
        )
        report("done")
        # the fitted model is replaced only now, when both stages have succeeded
        self.classes_, self.n_features_in_ = classes, features.shape[1]
        self.crf_, self.classifier_ = crf, classifier
        self.unary_, self.pairwise_ = choice.unary, choice.pairwise
        self.pairwise_scale_ = choice.pairwise_scale
        self.class_offsets_, self.choice_scores_ = choice.class_offsets, choice.scores
        return self

    def _without_zero_weights(self, X, y, groups, sample_weight):
        """The samples of positive weight, their groups and weights (None when all are 1),
        the weights checked; a classifier whose ``fit`` takes no ``sample_weight`` is refused
        (it would fit every node alike)."""
        sample_weight = check_sample_weight(sample_weight, len(X))
        classifier = self._classifier()
        if not has_fit_parameter(classifier, "sample_weight"):
            raise ValueError(
                f"sample_weight: the classifier {type(classifier).__name__}.fit takes no "
                "sample_weight, so stage one would weigh every node alike; give a classifier "
                "that takes it (LogisticRegression, HistGradientBoostingClassifier, "
                "RandomForestClassifier, ...)"
            )
        keep = np.flatnonzero(sample_weight > 0)
        if groups is not None and np.shape(groups) == (len(X),):
            groups = np.asarray(groups)[keep]
        X, y, sample_weight = [X[i] for i in keep], [y[i] for i in keep], sample_weight[keep]
        return X, y, groups, None if np.all(sample_weight == 1.0) else sample_weight

    def stage_two_samples(self, X) -> list:
        """The samples of stage two: the node features replaced by stage one's log-probabilities
        (plus ``class_offsets_``).

        Parameters
        ----------
        X : sequence of samples

        Returns
        -------
        list
            Samples of the same kinds and shapes, with ``len(classes_)`` node features.
        """
        check_is_fitted(self, "crf_")
        X = list(X)
        features, offsets = self._stacked_features(X, self._grids())
        if features.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {features.shape[1]} node features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_}"
            )
        probabilities = _aligned(self.classifier_, features, self.classes_)
        return self._stage_two(X, probabilities, offsets, self.class_offsets_)

    def predict(self, X, decoding="map", known_labels=None):
        """Stage two's prediction on stage one's log-probabilities.

        Parameters
        ----------
        X : sequence of samples
        decoding : {"map", "marginal"}, default="map"
            As the stage-two learner's ``predict``.
        known_labels : sequence of label arrays, optional
            As the stage-two learner's ``predict``.

        Returns
        -------
        ndarray of shape (n_samples,) of arrays
            The labelling of each sample.
        """
        samples = self.stage_two_samples(X)  # checks the fit first
        return self.crf_.predict(samples, decoding=decoding, known_labels=known_labels)

    @available_if(_crf_has("predict_marginals"))
    def predict_marginals(
        self,
        X,
        method=None,
        n_perturbations=None,
        known_labels=None,
        *,
        n_sweeps=None,
        as_dicts=False,
    ):
        """Stage two's node marginals on stage one's log-probabilities.

        Parameters
        ----------
        X : sequence of samples
        method : str, optional
            As in the stage-two learner's
            :meth:`~pmap_sklearn.PerturbMAPCRF.predict_marginals`, as are the others.
        n_perturbations : int, optional
        known_labels : sequence of label arrays, optional
        n_sweeps : int, optional
        as_dicts : bool, default=False

        Returns
        -------
        ndarray of shape (n_samples,) of arrays, or list of lists of dict
            (D, K) marginals of each sample (see the stage-two learner).
        """
        samples = self.stage_two_samples(X)  # checks the fit first
        return self.crf_.predict_marginals(
            samples, method, n_perturbations, known_labels, n_sweeps=n_sweeps, as_dicts=as_dicts
        )

    @available_if(_crf_has("sample"))
    def sample(
        self, X, n_draws=100, known_labels=None, method=None, random_state=None, *, n_sweeps=None
    ):
        """Joint labellings drawn from stage two's model on stage one's log-probabilities.

        Parameters
        ----------
        X : sequence of samples
        n_draws : int, default=100
            Draws per sample.
        known_labels : sequence of label arrays, optional
            As in the stage-two learner's :meth:`~pmap_sklearn.PerturbMAPCRF.sample`, as
            are the others.
        method : str, optional
        random_state : int, RandomState instance or None, default=None
        n_sweeps : int, optional

        Returns
        -------
        ndarray of shape (n_samples,) of arrays
            The draws of each sample (see the stage-two learner's ``sample``).
        """
        samples = self.stage_two_samples(X)  # checks the fit first
        return self.crf_.sample(
            samples, n_draws, known_labels, method, random_state, n_sweeps=n_sweeps
        )

    @available_if(_crf_has("predict_proba"))
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
        """Stage two's ``predict_proba`` (the name a Pipeline delegates).

        Parameters
        ----------
        X : sequence of samples
        as_dicts : bool, default=False
            As in the stage-two learner's :meth:`~pmap_sklearn.PerturbMAPCRF.predict_proba`,
            as are the others.
        method : str, optional
        n_perturbations : int, optional
        known_labels : sequence of label arrays, optional
        n_sweeps : int, optional

        Returns
        -------
        ndarray or list
            The marginals of each sample.
        """
        samples = self.stage_two_samples(X)  # checks the fit first
        return self.crf_.predict_proba(
            samples,
            as_dicts=as_dicts,
            method=method,
            n_perturbations=n_perturbations,
            known_labels=known_labels,
            n_sweeps=n_sweeps,
        )

    @shared_docstring
    def score(self, X, y, sample_weight=None):
        """Stage two's score (mean of ``1 − Hamming loss`` over the samples).

        Parameters
        ----------
        X : sequence of samples
        y : sequence of label arrays
        {{score_sample_weight}}

        Returns
        -------
        float
        """
        samples = self.stage_two_samples(X)
        return self.crf_.score(samples, y, **weights_of(sample_weight))

    # ---- helpers ----------------------------------------------------------------------------
    def _unary_forms(self) -> list:
        """The unary forms of ``unary="auto"``: one weight on the log-probabilities and the
        K×K matrix, where stage two's structure can scale its node features."""
        structure = check_structure(self._structure())
        return ["scale", "matrix"] if "unary" in structure.get_params() else ["matrix"]

    def _classifier(self):
        classifier = clone(
            self.classifier if self.classifier is not None else LogisticRegression(max_iter=1000)
        )
        return self._with_class_weight(classifier)

    def _with_class_weight(self, estimator):
        """``estimator`` with this ``class_weight`` (a pipeline: on its last step), or a
        warning naming the estimator that takes none, which then fits unbalanced."""
        if self.class_weight is None:
            return estimator
        final, prefix = estimator, ""
        if isinstance(estimator, Pipeline):
            final, prefix = estimator.steps[-1][1], f"{estimator.steps[-1][0]}__"
        if "class_weight" in final.get_params(deep=False):
            estimator.set_params(**{f"{prefix}class_weight": self.class_weight})
        else:
            warnings.warn(
                f"class_weight={self.class_weight!r} does not reach {type(final).__name__}, "
                "which takes no class_weight, so it fits unbalanced: give a classifier that "
                "takes it (LogisticRegression, HistGradientBoostingClassifier, ...) or "
                "balance it yourself",
                UserWarning,
                stacklevel=3,
            )
        return estimator

    def _crf(self, unary=None):
        """Stage two, with this estimator's ``unknown_label`` and ``ignore_label`` (so one
        marker serves both stages), its node features read as ``unary`` says (``self.unary``
        by default)."""
        crf = clone(self.crf) if self.crf is not None else PerturbMAPCRF("chain")
        if self.crf is None:
            crf.set_params(random_state=self.random_state)
        own = crf.get_params(deep=False)
        crf.set_params(
            **{
                name: getattr(self, name)
                for name in ("unknown_label", "ignore_label")
                if name in own
            }
        )
        if self.verbose and "verbose" in own:
            crf.set_params(verbose=self.verbose)
        if (unary or self.unary) == "scale":  # one weight on the log-probabilities, no bias
            structure = check_structure(own["structure"])
            if "unary" not in structure.get_params():
                raise ValueError(
                    f"unary='scale' needs a stage-two structure with a unary parameter "
                    f"(ChainStructure, GridStructure, GraphStructure), got "
                    f"{type(structure).__name__}"
                )
            crf.set_params(structure=structure.set_params(unary="scaled", bias=False))
        return self._with_class_weight(crf)

    def _structure(self):
        """Stage two's ``structure`` parameter, or an error naming what ``crf`` must be."""
        crf = self.crf if self.crf is not None else PerturbMAPCRF()
        params = crf.get_params(deep=False)
        if "structure" not in params:
            raise ValueError(
                f"crf must be a structured learner of this library (with a structure "
                f"parameter, e.g. PerturbMAPCRF('grid')), got {type(crf).__name__}; to "
                "transform the node features first, put the transformer in front of "
                "TwoStageCRF: make_pipeline(NodeTransformer(...), TwoStageCRF(...))"
            )
        return params["structure"]

    def _grids(self) -> bool:
        return check_structure(self._structure()).sample_kind == "grid"

    @staticmethod
    def _stacked_features(X, grids: bool = False):
        """The node features of all samples stacked (n_nodes, F), and each sample's offset;
        with ``grids`` a 2-D sample is a grey image (H, W), one feature per pixel. An empty
        ``X`` is refused as the structured learners refuse it."""
        if len(X) == 0:
            raise ValueError("X is empty: at least one sample is needed")
        blocks = [
            _node_features(np.asarray(x)[..., None] if grids and np.ndim(x) == 2 else x, i)
            for i, x in enumerate(X)
        ]
        widths = {b.shape[1] for b in blocks}
        if len(widths) > 1:
            raise ValueError(
                f"the samples have different numbers of node features: {sorted(widths)}"
            )
        offsets = np.concatenate([[0], np.cumsum([b.shape[0] for b in blocks])])
        return stack_rows(blocks), offsets

    def _flat_labels(self, X, y, offsets) -> np.ndarray:
        """The labels of all nodes, one array, after checking each sample's count."""
        flat = []
        for i, labels in enumerate(y):
            labels = np.asarray(labels)
            n_nodes = offsets[i + 1] - offsets[i]
            if labels.size != n_nodes or labels.ndim == 0:
                raise ValueError(
                    f"sample {i}: y has shape {labels.shape} but X has {n_nodes} nodes"
                )
            flat.append(labels.ravel())
        kinds = {a.dtype.kind in "USO" for a in flat}
        if len(kinds) > 1:
            raise ValueError(
                "y mixes numeric and string labels: give every sample labels of one kind"
            )
        return np.concatenate(flat)

    def _stage_two(self, X, probabilities, offsets, class_offsets=0.0) -> list:
        """Samples whose node features are ``log max(p, min_proba) + class_offsets``."""
        scores = np.log(np.maximum(probabilities, self.min_proba)) + class_offsets
        grids = self._grids()
        samples = []
        for i, x in enumerate(X):
            block = scores[offsets[i] : offsets[i + 1]]
            if isinstance(x, GraphSample):
                samples.append(dataclasses.replace(x, node_features=block))
            elif grids or np.ndim(x) == 3:
                samples.append(block.reshape(np.shape(x)[:2] + (-1,)))
            else:
                samples.append(block)
        return samples


class _Report:
    """``[TwoStageCRF] <what>, <seconds> s elapsed`` on standard output when ``verbose``."""

    def __init__(self, verbose):
        self.verbose, self.started = verbose, time.perf_counter()

    def __call__(self, what: str) -> None:
        if self.verbose:
            elapsed = time.perf_counter() - self.started
            print(f"[TwoStageCRF] {what}, {elapsed:.2f} s elapsed", file=sys.stdout, flush=True)


def _aligned(classifier, features, classes) -> np.ndarray:
    """``classifier.predict_proba(features)`` with one column per class of ``classes`` (0 for
    a class the classifier never saw)."""
    proba = check_probabilities(
        classifier.predict_proba(features), f"{type(classifier).__name__}.predict_proba's output"
    )
    out = np.zeros((proba.shape[0], len(classes)))
    out[:, np.searchsorted(classes, classifier.classes_)] = proba
    return out


def _fold_probabilities(
    classifier, features, labels, known, offsets, train, test, classes, node_weight=None
):
    """Fit on the known nodes of the samples ``train`` (each weighted by ``node_weight``, its
    sample's weight, when given); the probabilities of the nodes of the samples ``test``."""

    def nodes(samples):
        return np.concatenate([np.arange(offsets[s], offsets[s + 1]) for s in samples])

    fit_nodes = nodes(train)
    fit_nodes = fit_nodes[known[fit_nodes]]
    test_nodes = nodes(test)
    present = np.unique(labels[fit_nodes])
    if len(present) < 2:  # a fold with one class: it is all the classifier can say
        fold = np.zeros((len(test_nodes), len(classes)))
        fold[:, np.searchsorted(classes, present)] = 1.0
        return test_nodes, fold
    weights = weights_of(None if node_weight is None else node_weight[fit_nodes])
    classifier.fit(features[fit_nodes], labels[fit_nodes], **weights)
    return test_nodes, _aligned(classifier, features[test_nodes], classes)


def weights_of(sample_weight) -> dict:
    """``{"sample_weight": sample_weight}`` to pass on to a ``fit`` or ``score``, or nothing
    when there are none (so estimators without the parameter still fit unweighted data)."""
    return {} if sample_weight is None else {"sample_weight": sample_weight}
