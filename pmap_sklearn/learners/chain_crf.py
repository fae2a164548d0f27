"""Exact conditional random field: maximum likelihood by L-BFGS (Lafferty et al. 2001)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._backend import weighted_marginals
from .._docstrings import shared_docstring
from .._optim import defaults
from .._optim.lbfgs import minimise
from .._state import FitState
from .._utils import onehot, store_parameters
from .._validation import NumberInterval
from ._estimator import (
    PARALLEL_CONSTRAINTS,
    RANDOMISED_CONSTRAINTS,
    SHARED_CONSTRAINTS,
    TOL_CONSTRAINTS,
    BaseStructuredEstimator,
)


def crfsuite_penalty(c1: float, c2: float, n_samples: int) -> tuple[float, float]:
    r"""``(alpha, l1_ratio)`` of the library's elastic net for crfsuite's ``c1`` and ``c2``.

    crfsuite (Okazaki 2007; its L-BFGS trainer) minimises the *summed* negative log-likelihood
    plus :math:`c_1 \|w\|_1 + c_2 \|w\|^2` (``c2`` is not halved: its gradient is
    :math:`2 c_2 w`). The learners here maximise the *mean* log-likelihood minus
    :math:`\alpha (\rho \|w\|_1 + (1 - \rho)/2 \, \|w\|^2)`; dividing crfsuite's objective by
    the number of sequences N gives the same minimiser with

    .. math:: \alpha = (c_1 + 2 c_2) / N, \qquad \rho = c_1 / (c_1 + 2 c_2).

    sklearn-crfsuite's tutorial (``c1 = c2 = 0.1``) is ``alpha = 0.3 / N``, ``l1_ratio = 1/3``.

    Parameters
    ----------
    c1, c2 : float
        crfsuite's L1 and L2 coefficients (>= 0, not both 0).
    n_samples : int
        The number of training sequences.

    Returns
    -------
    alpha : float
    l1_ratio : float

    Raises
    ------
    TypeError
        If ``c1`` or ``c2`` is not a real number (a string, even a numeric one, or a bool).
    ValueError
        If they are negative, not finite or both 0, or ``n_samples`` is not an int >= 1.

    Examples
    --------
    >>> from pmap_sklearn import crfsuite_penalty
    >>> alpha, l1_ratio = crfsuite_penalty(0.1, 0.1, n_samples=1000)
    >>> round(alpha, 6), round(l1_ratio, 4)
    (0.0003, 0.3333)
    """
    for name, value in (("c1", c1), ("c2", c2)):
        if isinstance(value, bool | np.bool_) or not isinstance(value, Real):
            raise TypeError(
                f"{name} must be a real number (crfsuite's "
                f"{'L1' if name == 'c1' else 'L2'} coefficient), got {type(value).__name__} "
                f"{value!r}" + (f": pass float({value!r})" if isinstance(value, str) else "")
            )
    c1, c2 = float(c1), float(c2)
    if not (np.isfinite(c1) and np.isfinite(c2) and c1 >= 0 and c2 >= 0 and c1 + c2 > 0):
        raise ValueError(f"c1 and c2 must be finite, >= 0 and not both 0, got {c1}, {c2}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be an int >= 1, got {n_samples!r}")
    total = c1 + 2.0 * c2
    return total / n_samples, c1 / total


@shared_docstring
class ChainCRF(BaseStructuredEstimator):
    r"""Conditional random field trained by exact maximum conditional likelihood.

    Maximises :math:`(1/N) \sum_n \log P(y_n | x_n) - \alpha (\rho \|w\|_1 + (1 - \rho)/2
    \, \|w\|^2)` (:math:`\rho` = ``l1_ratio``: the elastic net of scikit-learn's
    :class:`~sklearn.linear_model.SGDClassifier`) with L-BFGS, or with OWL-QN (Andrew & Gao 2007)
    when ``l1_ratio > 0``: the L1 part sets weights exactly to zero, and every weight is
    penalised (node features, bias and transitions), as crfsuite does. The
    log-partition, the node marginals and the expected transition counts come from the structure's
    solver — on chains, forward-backward in the exp domain with one normaliser per position, falling
    back to the log domain where scores spread over more than ~600 nats — so the gradient
    :math:`\operatorname{mean} (\Psi (x, y) - E[\Psi (x, y)])` is exact. Unknown labels
    (``-1``) are marginalised exactly: their sample contributes ``log Σ_{y agreeing with the known
    labels} exp f(y) − A(x)``.

    On sparse token features the defaults are crfsuite's model and its tutorial's setting
    (Okazaki 2007; sklearn-crfsuite's ``CRF(c1=0.1, c2=0.1, max_iterations=100)``): weights for
    the observed (feature, label) pairs only, ``c1 = c2 = 0.1`` by OWL-QN, 100 iterations —
    crfsuite's accuracy, non-zero weights and fit time on the treebank (see "Defaults on token
    features" in the user guide). On dense features: every pair, L2 only, up to 1000
    iterations.

    Any structure whose solver computes exact marginals works (a chain, or a tiny grid / graph
    with ``solver="brute_force"``). The fit is deterministic and vectorised over the samples;
    ``random_state`` seeds the draws of :meth:`sample`.

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="chain"
    alpha : float or "auto", default="auto"
        Regularisation strength. "auto": ``0.3 / n_samples`` with sparse node features
        (crfsuite's tutorial penalty ``c1 = c2 = 0.1`` on the summed likelihood, with
        ``l1_ratio="auto"``), 0.1 on multi-label data
        (:class:`~pmap_sklearn.MultiLabelStructure`: chosen by cross-validation on the
        training splits of yeast and scene), 1e-4 otherwise. crfsuite's ``c1``, ``c2`` are
        ``alpha = (c1 + 2 c2) / n_samples`` and ``l1_ratio = c1 / (c1 + 2 c2)``: see
        :func:`~pmap_sklearn.crfsuite_penalty`.
    l1_ratio : float in [0, 1] or "auto", default="auto"
        The share of L1 in the penalty (0: L2 only, by L-BFGS-B; > 0: OWL-QN, sparse weights).
        "auto": 1/3 with sparse node features (crfsuite's ``c1 = c2 = 0.1``), 0 otherwise.
    all_possible_states : bool or "auto", default="auto"
        Whether every (node feature, label) pair has a weight. False: only the pairs seen in
        the training labels (a feature non-zero at a node of that label) do, the others stay
        at zero — crfsuite's default model (sklearn-crfsuite's ``all_possible_states=False``),
        fewer weights to fit and to store; the optimiser then works on those weights only.
        Needs the linear unary model of a structure with one table of node weights. "auto":
        False with sparse node features (token features), True otherwise (dense features,
        multi-label rows, other unary models): see "Defaults on token features" in the user
        guide.
    max_iter : int or "auto", default="auto"
        L-BFGS (OWL-QN) iterations at most; the fit stops at ``tol`` if it comes first.
        "auto": 100 with sparse node features (crfsuite's tutorial budget, its fit time and
        accuracy on the treebank), 1000 otherwise (the OCR words' chains stop at ``tol`` in
        390 iterations on one fold of training words, 490 on nine).
    tol : float, default=1e-6
        L-BFGS tolerance on the projected gradient (OWL-QN: on the largest entry of the
        pseudo-gradient; it also stops when ten iterations gain less than L-BFGS-B's
        precision).
    warm_start : bool, default=False
        Start from the previous ``coef_`` on the same data (``X`` and ``y``) and parameters, when
        the previous fit was made with ``warm_start=True``; after a change of the data or of
        ``structure``, ``alpha``, ``l1_ratio``, ``all_possible_states``, ``unknown_label`` or
        ``ignore_label``, a warm start fits afresh (as ``warm_start=False`` does): the state belongs
        to the last fit's objective.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the draws of :meth:`sample` (forward filtering, backward sampling) when it is
        given none.
    n_jobs : int or None, default=None
        Processes for the solver calls of prediction (chains are solved in one vectorised
        call).
    verbose : int, default=0
    {{unknown_label_known}}
    {{ignore_label}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
        L-BFGS iterations of the last fit.
    alpha_ : float
        The regularisation strength of the last fit (``alpha`` with "auto" resolved).
    l1_ratio_ : float
        ``l1_ratio`` of the last fit, "auto" resolved.
    all_possible_states_ : bool
        ``all_possible_states`` of the last fit, "auto" resolved.
    objective_ : float
        Final regularised mean log-likelihood.
    n_nonzero_ : int
        Non-zero weights of ``coef_`` (fewer than ``coef_.size`` with ``l1_ratio > 0``).

    See Also
    --------
    PerturbMAPCRF : the perturb-and-MAP likelihood, for models without exact marginals.

    References
    ----------
    .. [1] J. Lafferty, A. McCallum and F. Pereira. Conditional random fields: probabilistic
       models for segmenting and labeling sequence data. ICML 2001.
    .. [2] G. Andrew and J. Gao. Scalable training of L1-regularized log-linear models. ICML
       2007 (OWL-QN).
    .. [3] N. Okazaki. CRFsuite: a fast implementation of conditional random fields (CRFs).
       2007 (its L-BFGS trainer and default model).

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import ChainCRF
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=n) for n in rng.integers(3, 8, size=40)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(len(yi), 3)) for yi in y]
    >>> crf = ChainCRF().fit(X, y)
    >>> crf.score(X, y) > 0.8
    True
    """

    _parameter_constraints: dict = {
        **SHARED_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        **RANDOMISED_CONSTRAINTS,
        **PARALLEL_CONSTRAINTS,
        "alpha": [NumberInterval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "l1_ratio": [NumberInterval(Real, 0, 1, closed="both"), StrOptions({"auto"})],
        "all_possible_states": ["boolean", StrOptions({"auto"})],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    }
    _marginal_methods = ("exact",)
    _learns_hidden_states = True
    _objective_kind = "likelihood"
    _warm_start_depends_on = (
        *BaseStructuredEstimator._warm_start_depends_on,
        "all_possible_states",
    )

    _learns_label_sets = True

    def __init__(
        self,
        structure="chain",
        *,
        alpha="auto",
        l1_ratio="auto",
        all_possible_states="auto",
        max_iter="auto",
        tol=1e-6,
        warm_start=False,
        random_state=None,
        n_jobs=None,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        store_parameters(self, locals())

    @staticmethod
    def _has_one_weight_table(structure) -> bool:
        """Whether the node weights are one (feature, label) table read linearly: what
        ``all_possible_states=False`` needs."""
        return structure.unary == "linear" and structure.n_node_weight_sets_ == 1

    def _check_structure(self, structure, has_unknown) -> None:
        super()._check_structure(structure, has_unknown)
        if self.all_possible_states is False and not self._has_one_weight_table(structure):
            raise ValueError(
                "all_possible_states=False needs one table of node weights (the linear unary "
                f"model, tied weights); {type(structure).__name__} has "
                f"unary={structure.unary!r} with {structure.n_node_weight_sets_} weight sets"
            )

    def _token_features(self, batch) -> bool:
        """Whether the rules for sparse node features apply: token features (one table of
        node weights read through sparse features), not multi-label rows."""
        structure = self.structure_
        return (
            structure.sample_kind != "multilabel"
            and structure.has_sparse_features(batch)
            and self._has_one_weight_table(structure)
        )

    def _resolved_settings(self, batch) -> tuple[float, float, bool, int]:
        """``alpha``, ``l1_ratio``, ``all_possible_states`` and ``max_iter`` of this fit,
        each "auto" resolved from what the data is: on token features
        :data:`~pmap_sklearn._optim.defaults.CHAIN_CRF_SPARSE` (crfsuite's default model and
        its tutorial's penalty and budget), else
        :data:`~pmap_sklearn._optim.defaults.CHAIN_CRF_DENSE` and the common ``alpha`` rule."""
        auto = dict(defaults.CHAIN_CRF_DENSE, alpha=self._resolved_alpha(batch))
        if self._token_features(batch):
            auto = dict(defaults.CHAIN_CRF_SPARSE)
            # crfsuite's penalty per unit of evidence (summed sample weights: copies count)
            per_sample, auto["l1_ratio"] = crfsuite_penalty(*auto.pop("crfsuite_c"), 1)
            auto["alpha"] = per_sample / batch.weight_total
        settings = [auto["alpha"] if self.alpha == "auto" else self.alpha]
        for name in ("l1_ratio", "all_possible_states", "max_iter"):
            value = getattr(self, name)
            settings.append(auto[name] if isinstance(value, str) else value)
        return float(settings[0]), float(settings[1]), bool(settings[2]), int(settings[3])

    def _free_weights(
        self, batch, labels, all_possible_states, label_sets=None
    ) -> np.ndarray | None:
        """Where the weights may be non-zero: None (everywhere) with ``all_possible_states``,
        else the (feature, label) pairs seen in the known training labels (a set of labels:
        each of its labels) and every pairwise weight."""
        if all_possible_states:
            return None
        free = np.ones(self.structure_.size_, dtype=bool)
        unary, _ = self.structure_.unpack(free)
        structure = self.structure_
        if structure.has_hidden_states_:
            states = structure.allowed_states(labels, label_sets)
        else:
            states = onehot(labels, structure.n_states_)
            if label_sets is not None:
                in_set = labels < -1
                states[in_set] = label_sets[-2 - labels[in_set]]
        seen = abs(batch.features).T @ states.astype(float)
        unary[...] = np.asarray(seen) != 0
        return free

    def _solver_needs(self, has_unknown):
        return {"marginals": True, "clamps": has_unknown}

    def _new_state(self, rng):
        return FitState(coef=np.zeros(self.structure_.size_))

    def _set_fitted_attributes(self, state) -> None:
        self.objective_ = state.recorded("objective")[-1]
        self.n_nonzero_ = int(np.count_nonzero(state.estimate))

    def _log_likelihood(self, batch, labels, w, observed_feature=None, label_sets=None):
        r"""Mean log-likelihood of the labelled batch and its gradient (unregularised); with
        sample weights the weighted mean :math:`\sum_n c_n \log P(y_n | x_n) / \sum_n c_n`.

        Nodes labelled -1 are summed over (exact marginal likelihood of the known labels): ``log
        P(y_known | x) = A(x | y_known) − A(x)``, with gradient ``E[Ψ | y_known] − E[Ψ]``; a
        node with a set of labels (code below -1, ``label_sets``) over the labels of its set. When
        every label is known the clamped terms are simply ``f(y)`` and :math:`\Psi (y)`; pass
        ``observed_feature = Σ_n c_n Ψ(x_n, y_n)`` to skip the second forward-backward pass.
        """
        structure = self.structure_
        potentials = structure.potentials(batch, w)
        weights = batch.sample_weight
        marginals = weighted_marginals(structure.solver_, potentials, weights)
        expected = structure.joint_feature_of(batch, marginals.statistics)
        if observed_feature is not None:  # Σ_n c_n f(y_n | x_n) = w · Σ_n c_n Ψ(x_n, y_n)
            clamped, clamped_log_z = observed_feature, w @ observed_feature
        else:  # with hidden states: summed over the states of each label
            restricted, clamp = structure.restrict(potentials, labels, label_sets)
            given = weighted_marginals(structure.solver_, restricted, weights, clamp)
            clamped = structure.joint_feature_of(batch, given.statistics)
            clamped_log_z = batch.weighted_sum(given.log_partition)
        n = batch.weight_total
        log_z = batch.weighted_sum(marginals.log_partition)
        return float(clamped_log_z - log_z) / n, (clamped - expected) / n

    def _fit_batch(self, batch, labels, state, rng, label_sets=None):
        """L-BFGS (OWL-QN with ``l1_ratio > 0``) on the exact regularised conditional
        log-likelihood, from ``state.coef``."""
        alpha, l1_ratio, all_states, max_iter = self._resolved_settings(batch)
        self.alpha_, self.l1_ratio_, self.all_possible_states_ = alpha, l1_ratio, all_states
        l1, l2 = alpha * l1_ratio, alpha * (1.0 - l1_ratio)
        structure = self.structure_
        observed = None
        if (labels >= 0).all() and not structure.has_hidden_states_:
            # Ψ(x_n, y_n) does not depend on w: compute it once
            observed = structure.joint_feature(batch, labels, batch.sample_weight)

        free = self._free_weights(batch, labels, all_states, label_sets)
        if structure.has_hidden_states_ and not state.coef.any():
            # the likelihood is flat across alike states: start them apart (logistic
            # regressions of their first guess, the k-means split of each label)
            self._start_from_logistic(batch, labels, state.coef, np.random.default_rng(0), l2)
        # The optimiser works on the free weights only (the others stay at zero): its vector
        # operations and its curvature pairs cost the free weights, not the whole table.
        index = slice(None) if free is None else np.flatnonzero(free)
        w = np.zeros_like(state.coef)

        def negative_objective(free_w):
            w[index] = free_w
            value, gradient = self._log_likelihood(batch, labels, w, observed, label_sets)
            gradient = gradient[index] - l2 * free_w
            return -(value - 0.5 * l2 * free_w @ free_w), -gradient

        free_w, n_iter, value = minimise(
            negative_objective,
            state.coef[index],
            name=type(self).__name__,
            max_iter=max_iter,
            tol=self.tol,
            verbose=self.verbose,
            l1=l1,
        )
        w = np.zeros_like(state.coef)
        w[index] = free_w
        state = FitState(coef=w, n_iter=n_iter)
        state.record(objective=-value)
        return state
