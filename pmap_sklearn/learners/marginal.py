"""MarginalPerturbMAPCRF: marginal and weighted-marginal perturb-and-MAP (Shpakova et al. 2018,
Alg. 2-4)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._docstrings import shared_docstring
from .._optim.sgd import dot, lazy_when_sparse
from .._utils import onehot, store_parameters
from .._validation import NumberInterval
from ..metrics.hamming import class_weight_by_code, loss_weights
from ..perturbation import gumbel
from ._sgd_learner import BaseStructuredSGD


@shared_docstring
class MarginalPerturbMAPCRF(BaseStructuredSGD):
    r"""CRF trained on the perturb-and-MAP approximation of the marginal likelihood.

    Maximises :math:`(1/N) \sum_n \sum_d \sum_k C_d(k) [B_G(x_n | y_d = k) - A_G(x_n)] - (\alpha
    /2)\|w\|^2`, the perturb-and-MAP approximation of the (weighted) sum of node log-marginals ``log
    P(y_d | x)``, which fits the Hamming loss used for evaluation (Shpakova et al. 2018). ``A_G =
    E_z max_y [f(y) + Σ_d z_d(y_d)]`` and ``B_G`` is the same maximum with node d clamped to k.
    :math:`C_d(k) = \theta_d(k) q_d(k)`: θ are the loss weights (``1/D`` for the Hamming loss, the
    size-balanced weights with ``class_weight="balanced"``) and q the target distribution of the
    node: one-hot for a known label, the model's conditional marginal (times ``unlabeled_weight``)
    for an unknown one. Each SGD step draws one Gumbel perturbation per sample, shared by A and
    every B (the paper's Gumbel reduction), and moves ``w`` along :math:`\sum_{d,k} C_d(k) [\Psi (x,
    y*_{B,d,k}) - \Psi (x, y*_A)]`.

    With hidden states (the structure's ``n_states_per_label`` or hidden nodes) a node's label
    is a set of states S and its term is :math:`\log \sum_{k \in S} P(y_d = k | x)`,
    estimated by the perturbed MAP with node d restricted to S, its own perturbation included
    (with the same Gumbel reduction: where ``y*_A`` has a state of S the term is zero). The
    learner thus sums over the hidden states instead of committing to one imputation, as the
    latent structured SVM does; an unknown label (``unknown_label``) allows the states of
    every label and adds no term.

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="chain"
        Graph structure of the samples (see :ref:`choosing`).
    class_weight : None, "balanced" or dict, default=None
        Loss weights θ: None = Hamming (:math:`\theta_d = 1/D`); "balanced" = size-balanced weighted
        Hamming (``θ_d(k) = V_d / (K' V_k)`` with the node sizes of the sample, Kolesnikov et al.
        2014); a dict ``{label: weight}`` (labels among ``classes_``, weights finite and ``>= 0``)
        multiplies ``1/D``.
    unlabeled_weight : float, default=1.0
        κ: weight of the unknown-label terms (Alg. 4) relative to the labelled ones.
    gumbel_reduction : bool, default=True
        Skip the clamped problems whose clamp agrees with ``y*_A`` (their gradient is exactly 0).
    dynamic : bool, default=True
        Solve the clamped problems from the A solve: one max-product forward/backward pass on
        chains, dynamic graph cuts (residual graph re-use) on loopy graphs. False solves each one
        from scratch. For a fixed perturbation the gradient does not depend on either switch.
    max_iter : int or "auto", default="auto"
        Epochs. The marginal objective supervises one node per term, so it needs more passes
        than :class:`~pmap_sklearn.PerturbMAPCRF` (about 100 epochs on OCR). ``"auto"``: 8
        with sparse node features (AdaGrad converges in few passes over a corpus), 30 (with
        AdaGrad) on ``GraphStructure`` graphs with more than two labels, 100 otherwise.
    batch_size : int or "auto", default="auto"
        Samples per SGD step; ``"auto"``: ``min(32, max(2, n_samples // 5))``, about 5
        steps per epoch (with 10 training images a batch of 32 would make one step per
        epoch, and the weights get nowhere: see :ref:`perturb-and-map-grids`).
    tol : float, None or "auto", default="auto"
        As in :class:`~pmap_sklearn.PerturbMAPCRF`, but off by default: the stochastic estimate
        of this objective is too noisy for a stopping rule on the training objective (use
        ``early_stopping=True`` to stop on a validation score instead). ``"auto"``: 1e-3 on the
        validation score with ``early_stopping``, None otherwise.
    alpha : float or "auto", default="auto"
        L2 regularisation strength (the paper's λ). "auto": ``0.2 / n_nodes`` with sparse
        node features (each sample's terms average its nodes', so the evidence is counted in
        nodes), 0.03 on multi-label data (:class:`~pmap_sklearn.MultiLabelStructure`: chosen
        by cross-validation on the training splits of yeast and scene), 1e-4 otherwise.
    l1_ratio : float in [0, 1], default=0.0
        The elastic-net mixing of the penalty, as in :class:`~pmap_sklearn.PerturbMAPCRF`: the
        objective loses :math:`\alpha (\rho \|w\|_1 + (1 - \rho) \|w\|^2 / 2)`,
        :math:`\rho` = ``l1_ratio`` (0: the L2 penalty alone); the L1 part, by the cumulative
        penalty of Tsuruoka et al. (2009), sets weights to exactly zero (see "Sparse models:
        L1" in the user guide).
    learning_rate : {"auto", "optimal", "constant", "invscaling", "adagrad"}, default="auto"
        Step-size schedule or AdaGrad, as in :class:`~pmap_sklearn.PerturbMAPCRF`
        (``"auto"``: AdaGrad with sparse node features and on ``GraphStructure`` graphs with
        more than two labels, ``"optimal"`` otherwise).
    eta0 : float or "auto", default="auto"
        Initial step size; ``"auto"`` calibrates it on a subsample before the first epoch
        (as :class:`PerturbMAPCRF` does: judged on held-out samples with sparse node features).
    power_t : float, default=0.5
        Exponent of the ``"invscaling"`` schedule.
    average : bool, int or "auto", default="auto"
        Average the SGD iterates (from the start, or after that many samples); ``"auto"``: the
        second half of the epochs with sparse node features and no stopping rule (tail
        averaging, see "Sequence labelling" in the user guide), from the start otherwise.
    n_iter_no_change : int, default=5
        Epochs without improvement by ``tol`` before stopping.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the samples and stop on their score (1 − Hamming).
    validation_fraction : float, default=0.1
        Fraction of the samples held out with ``early_stopping``.
    warm_start : bool, default=False
        Continue the previous fit (weights, schedule position and average, random stream) on the
        same data (``X`` and ``y``) and parameters, when the previous fit was made with
        ``warm_start=True``; after a change of the data or of ``structure``, ``alpha``,
        ``l1_ratio``, ``class_weight``, ``unknown_label``, ``ignore_label``, ``unlabeled_weight`` or
        ``gumbel_reduction``, a warm start fits afresh (as ``warm_start=False`` does): the state
        belongs to the last fit's objective.
    n_perturbations : int, default=100
        Perturbations M used by :meth:`predict_marginals` and for the marginals q of the
        unknown labels.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the perturbations and the sample order; results do not depend on ``n_jobs``.
    n_jobs : int or None, default=None
        Processes for per-sample graph cuts (joblib); see :ref:`parallel`.
    {{n_shards}}
    verbose : int, default=0
        Report progress: the first three epochs, every tenth of ``max_iter`` and the last
        (``verbose >= 2``: more detail; ``verbose >= 3``: every epoch).
    unknown_label : int, float, str or None, default=-1
        The label that marks an unknown node in ``y`` (None: every label is known).
    {{ignore_label}}
    {{init}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    supervised_coef_ : ndarray of shape (n_weights,)
        ``w_1``, the weights fitted on the fully labelled samples only (equal to ``coef_`` when
        every label is known); not set by :meth:`partial_fit`.
    target_distributions_ : list of ndarray or None
        With unknown labels: per training sample, the (D, K) targets q (one-hot for known
        labels, conditional marginals under ``w_1`` for unknown ones). None otherwise.
    structure_, classes_, n_features_in_, n_iter_, t_, eta0_, loss_curve_, validation_scores_
        As in :class:`~pmap_sklearn.PerturbMAPCRF`.

    See Also
    --------
    PerturbMAPCRF : the perturb-and-MAP likelihood of whole labellings.
    StructuredSVM : the max-margin baseline with the same (weighted) Hamming losses.

    References
    ----------
    .. [1] T. Shpakova, F. Bach and A. Osokin. Marginal weighted maximum log-likelihood for
       efficient learning of perturb-and-MAP models. UAI 2018.
    .. [2] P. Kohli and P. Torr. Dynamic graph cuts for efficient inference in Markov random
       fields. PAMI 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import MarginalPerturbMAPCRF
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=n) for n in rng.integers(3, 8, size=40)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(len(yi), 3)) for yi in y]
    >>> crf = MarginalPerturbMAPCRF(random_state=0).fit(X, y)
    >>> crf.score(X, y) > 0.8
    True
    """

    _objective_kind = "node_loss"
    _dense_sgd = "marginal"
    _learns_hidden_states = True
    _warm_start_depends_on = (
        *BaseStructuredSGD._warm_start_depends_on,
        "unlabeled_weight",
        "gumbel_reduction",
    )
    _parameter_constraints: dict = {
        **BaseStructuredSGD._parameter_constraints,
        "class_weight": [None, StrOptions({"balanced"}), dict],
        "unlabeled_weight": [NumberInterval(Real, 0, None, closed="left")],
        "gumbel_reduction": ["boolean"],
        "dynamic": ["boolean"],
    }

    _learns_label_sets = True

    def __init__(
        self,
        structure="chain",
        *,
        class_weight=None,
        unlabeled_weight=1.0,
        gumbel_reduction=True,
        dynamic=True,
        alpha="auto",
        l1_ratio=0.0,
        max_iter="auto",
        batch_size="auto",
        learning_rate="auto",
        eta0="auto",
        power_t=0.5,
        average="auto",
        tol="auto",
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=0.1,
        warm_start=False,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        n_shards=1,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
        init="auto",
    ):
        store_parameters(self, locals())

    def _alpha_scale(self, batch):
        """Units of evidence of ``alpha="auto"``: nodes (each sample's terms average its
        nodes' log-marginals), each counted with its sample's weight."""
        if batch.sample_weight is None:
            return float(batch.n_nodes)
        return float(batch.sample_weight @ batch.lengths)

    def _solver_needs(self, has_unknown):
        """Every step solves single-node clamped maximisers."""
        return {"clamps": True}

    def _node_weights(self, batch, distribution: np.ndarray) -> np.ndarray:
        r"""Loss weights :math:`\theta_d(k)` (n_nodes, K) of the stacked nodes of ``batch`` (see
        :func:`~pmap_sklearn.metrics.loss_weights`)."""
        class_weight = class_weight_by_code(self.class_weight, self.classes_)
        return loss_weights(distribution, batch.node_sizes, batch.node_sample, class_weight)

    def _targets(self, batch, labels, w_supervised, rng, label_sets=None):
        r"""The coefficients :math:`C_d(k) = \theta_d(k) q_d(k)` (× κ on unknown nodes), (n_nodes,
        K). A node with a set of labels (a code below -1) is filled in like an unknown one,
        from :math:`q` given every label and set (so within its set), and weighs as a labelled
        node: its term is then the expected log-marginal of its labels under :math:`q`, the
        self-training form of :math:`\log P(y_d \in S_d)`."""
        structure = self.structure_
        distribution = onehot(structure.visible_codes(labels), structure.n_labels_)
        unknown = labels < 0
        self.target_distributions_ = None
        if w_supervised is not None and unknown.any():
            # Alg. 3 step 2: conditional marginals q(y_d | y_given) under w_1, computed once.
            q = self._perturbed_marginals(batch, w_supervised, rng, labels, label_sets)
            distribution[unknown] = q[unknown]
            self.target_distributions_ = batch.split(distribution)
        scale = np.where(labels == -1, self.unlabeled_weight, 1.0)
        return self._node_weights(batch, distribution) * distribution * scale[:, None]

    def _node_targets(self, coefficients):
        r"""Every (node, label) of positive coefficient, weighted by it: the node terms
        :math:`\sum_d \sum_k C_d(k) \log P(y_d = k)` of the weighted marginal likelihood."""
        nodes, labels = np.nonzero(coefficients > 0)
        return nodes, labels, coefficients[nodes, labels]

    def _make_oracle(self, batch, coefficients):
        structure = self.structure_
        solver = structure.solver_
        if batch.sample_weight is not None:  # each sample's terms C_d(k) times its weight
            coefficients = coefficients * batch.node_weight[:, None]
        # with hidden states a label is a set of states: the clamps are set-valued
        sets = structure.label_states_ if structure.has_hidden_states_ else None

        def oracle(part, w, rng):
            sub = batch.subset(part)
            coef = coefficients[batch.node_index(part)]
            perturbation = gumbel(rng, (sub.n_nodes, structure.n_states_))
            nodes, labels = np.nonzero(coef > 0)  # row-major: nodes in increasing order
            solution = solver.clamped_maps(
                structure.potentials(sub, w, perturbation),
                nodes,
                labels,
                coef[nodes, labels],
                skip_agreeing=self.gumbel_reduction,
                dynamic=self.dynamic,
                n_jobs=self.n_jobs,
                sets=sets,
            )
            gradient = structure.joint_feature_of(sub, solution.statistics, compact=True)
            # Σ C (B̂ − Â): the f part is w·gradient, the z part the change of perturbation
            # between y*_B and y*_A; B̂ = max of f + Σ_{s≠d} z_s leaves out the clamped node's
            # z_d(k), while a set-valued clamp keeps it (B̂ = max over the set of f + Σ_s z_s).
            gap = solution.perturbation_gap(perturbation)
            objective = dot(w, gradient) + gap
            if sets is None:
                objective -= float((coef * perturbation).sum())
            return gradient, objective

        return lazy_when_sparse(oracle, structure, batch)
