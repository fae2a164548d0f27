"""Mean-field CRF learned end to end: CRF as RNN (Zheng et al. 2015) without the CNN."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.utils._param_validation import StrOptions

from .._backend import MeanFieldModel, MeanFieldSolver, Statistics, unrolled
from .._utils import store_parameters, user_stacklevel
from .._validation import NumberInterval
from ._sgd_learner import BaseStructuredSGD, ClassWeightedSGD

__all__ = ["MeanFieldCRF"]

#: Node features beyond this size saturate the unrolled softmax from the first steps (on the
#: library's grid data, features ×100 cost a fifth of the training accuracy, ×10⁴ leave 0.6).
LARGE_FEATURE = 1e3


def _warn_large_features(features) -> None:
    """Warn, asking to scale them, when the node features are too large for mean field's
    gradients: its softmax saturates, the gradient through it vanishes and the fit stalls
    near chance without any error."""
    values = features.data if sparse.issparse(features) else features
    largest = float(np.abs(values).max(initial=0.0))
    if largest > LARGE_FEATURE:
        warnings.warn(
            f"MeanFieldCRF: node features as large as {largest:.3g}: the unrolled mean field's "
            "softmax saturates and learning stalls; scale the features (e.g. with "
            "NodeTransformer(StandardScaler()))",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


class MeanFieldCRF(ClassWeightedSGD):
    r"""CRF whose marginals are ``n_sweeps`` of mean field, learned end to end.

    Mean-field inference unrolled for :math:`T` iterations is a differentiable function of the
    weights (CRF as RNN, Zheng et al. 2015): from :math:`q^0_d = \operatorname{softmax}(u_d)`,
    each iteration sets :math:`q^{s+1}_d = \delta q^s_d + (1 - \delta)
    \operatorname{softmax}(u_d + \sum_{j \in N(d)} t_{dj} q^s_j)` for every node at once. The
    learner minimises a per-node loss of :math:`q^T` — the log-loss
    :math:`-\log q^T_d(y_d)` or the expected Hamming loss :math:`1 - q^T_d(y_d)`, averaged over
    each sample's nodes and over the samples — plus :math:`\frac\alpha2 \lVert w \rVert^2`,
    with the gradient by backpropagation through the :math:`T` iterations and the library's SGD
    engine. Its model is the unrolled mean field: :meth:`predict_marginals` gives
    :math:`q^T` and :meth:`predict` its argmax (the structure's solver is a
    :class:`~pmap_sklearn.solvers.MeanFieldSolver` with the same :math:`T` and damping).

    Mean field shines where it is cheap and the coupling is moderate: a few matrix products per
    iteration, any K, pairwise terms of any sign. Where the coupling is strong it locks into one
    mode and its marginals are over-confident, so a learned model keeps its pairwise weights
    small enough for :math:`T` iterations to express them (see "Baselines" in the user guide).

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="grid"
        Graph structure of the samples; its solver becomes the mean field of this model.
    loss : {"log", "hamming"}, default="log"
        The per-node loss of the marginals: log-loss, or the expected Hamming loss.
    class_weight : None, "balanced" or dict, default=None
        Weights of the labels, for rare classes: each node's loss is weighted by its label's
        weight (and the logistic start weighs each node so). ``"balanced"``:
        ``n_nodes / (K · n_nodes_k)`` over the known training labels; a dict
        ``{label: weight}`` (1 for labels it leaves out).
    n_sweeps : int, default=10
        T, the mean-field iterations unrolled in learning and run in prediction (Zheng et al.
        train with 5 and predict with 10; cross-validation on multi-class grids prefers 10).
    damping : float, default=0.0
        δ, the share of the previous iterate kept at each iteration, in [0, 1).
    l1_ratio : float in [0, 1], default=0.0
        The elastic-net mixing of the penalty, as for :class:`~pmap_sklearn.PerturbMAPCRF`.
    alpha, max_iter, batch_size, learning_rate, eta0, power_t, average, tol : as in PerturbMAPCRF
        The SGD engine's settings, as for :class:`~pmap_sklearn.PerturbMAPCRF` (``"auto"``:
        decided from the data); on dense features ``"auto"`` is AdaGrad for 30 epochs without a
        stopping rule (the mean-field objective has no perturbation noise).
    n_iter_no_change, early_stopping, validation_fraction, warm_start : as in PerturbMAPCRF
        The stopping rule and warm starts, as for :class:`~pmap_sklearn.PerturbMAPCRF`; a warm
        start after a change of ``loss``, ``n_sweeps`` or ``damping`` (the structure's
        solver is that mean field) fits afresh too.
    random_state, n_jobs, n_shards, verbose, unknown_label, init, ignore_label : as in PerturbMAPCRF
        As for :class:`~pmap_sklearn.PerturbMAPCRF`.

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
        Weights ``w``; ``structure_.unpack(coef_)`` splits them.
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
    t_ : int
    eta0_ : float
    sgd_settings_ : dict
    loss_curve_ : list of float
    validation_scores_ : list of float

    See Also
    --------
    EpsilonCRF : the ε-family by convex message passing.
    MarginalPerturbMAPCRF : a per-node (Hamming) loss of perturb-and-MAP marginals.

    References
    ----------
    .. [1] S. Zheng, S. Jayasumana, B. Romera-Paredes, V. Vineet, Z. Su, D. Du, C. Huang and
       P. H. S. Torr. Conditional random fields as recurrent neural networks. ICCV 2015.

    Examples
    --------
    >>> from pmap_sklearn import MeanFieldCRF
    >>> from pmap_sklearn.datasets import make_grid_data
    >>> data = make_grid_data(n_samples=8, random_state=0)
    >>> model = MeanFieldCRF(random_state=0).fit(data.data, data.target)
    >>> model.score(data.data, data.target) > 0.8
    True
    """

    _parameter_constraints: dict = {
        **{
            name: constraint
            for name, constraint in BaseStructuredSGD._parameter_constraints.items()
            if name != "n_perturbations"  # no perturbation: its marginals are mean field's
        },
        "loss": [StrOptions({"log", "hamming"})],
        "class_weight": [None, StrOptions({"balanced"}), dict],
        "n_sweeps": [NumberInterval(Integral, 1, None, closed="left")],
        "damping": [NumberInterval(Real, 0, 1, closed="left")],
    }
    _marginal_methods = ("exact",)
    #: the structure's solver is the mean field of these: a warm start after a change fits afresh
    _warm_start_depends_on = (*ClassWeightedSGD._warm_start_depends_on, "n_sweeps", "damping")
    _objective_kind = "node_loss"
    _dense_sgd = "mean_field"
    #: One draw of a perturbed MAP where a query asks for them: the model's marginals are the
    #: mean field's own (not a parameter).
    n_perturbations = 1
    #: the unrolled mean field is the model: its marginals are the solver's
    _exact_marginals_are_the_model = True

    def __init__(
        self,
        structure="grid",
        *,
        loss="log",
        class_weight=None,
        n_sweeps=10,
        damping=0.0,
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
        random_state=None,
        n_jobs=None,
        n_shards=1,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
        init="auto",
    ):
        store_parameters(self, locals())

    def _make_structure(self):
        """The structure, its solver the mean field of this model."""
        structure = super()._make_structure()
        structure.solver = MeanFieldSolver(
            self.n_sweeps, self.damping, schedule="parallel", finish_oscillations=False
        )
        return structure

    def _make_oracle(self, batch, labels):
        """``oracle(part, w, rng)``: minus the per-node loss of the unrolled mean field over the
        samples ``part`` (each sample the mean over its nodes) and minus its gradient, by
        backpropagation through the iterations (mapped to ``w`` by the joint feature, the
        scores being linear in ``w``)."""
        structure = self.structure_
        _warn_large_features(batch.features)
        node_loss = log_loss_gradient if self.loss == "log" else hamming_gradient
        node_weight = 1.0 / batch.lengths[batch.node_sample]
        label_weight = self._node_weights(labels)
        if label_weight is not None:
            node_weight = node_weight * label_weight
        if batch.sample_weight is not None:  # each sample's terms times its weight
            node_weight = node_weight * batch.node_weight

        def oracle(part, w, rng):
            sub = batch.subset(part)
            nodes = batch.node_index(part)
            model = MeanFieldModel(structure.potentials(sub, w))
            iterates = unrolled(model, self.n_sweeps, self.damping)
            value, gradient_q = node_loss(iterates[-1], labels[nodes], node_weight[nodes])
            statistics = unrolled_backward(model, iterates, gradient_q, self.damping)
            return -structure.joint_feature_of(sub, statistics), -value

        return oracle


def unrolled_backward(model: MeanFieldModel, iterates, gradient_q, damping) -> Statistics:
    """Backpropagation through :func:`unrolled`: the gradient of a loss with respect to the
    unary and pairwise scores, as :class:`Statistics` of the potentials' kind (``∂L/∂u``, and
    ``∂L/∂t`` summed as the pairwise scores are shared: per edge for Potts weights and
    tables, over the edges for a shared table), from ``∂L/∂q_T``.

    Each step ``q_{s+1} = δ q_s + (1 − δ) p_s``, ``p_s = softmax(a_s)``, ``a_s = u + M(q_s)``
    sends ``(1 − δ) g`` through the softmax (``p ⊙ (g − <p, g>)``) to ``a_s``, which reaches
    ``u`` directly, the pairwise scores through ``q_s`` at both ends of each edge, and ``q_s``
    through the pairwise scores; ``δ g`` goes to ``q_s`` directly. The first iterate is
    ``softmax(u)``.
    """
    first_end, second_end = model.edges[:, 0], model.edges[:, 1]
    grad_unary = np.zeros_like(model.unary)
    no_rows = np.zeros((len(first_end), model.unary.shape[1]))
    grad_pairwise = model.pair_statistics(no_rows, no_rows)
    g = gradient_q
    for s in range(len(iterates) - 2, -1, -1):
        q = iterates[s]
        p = (iterates[s + 1] - damping * q) / (1.0 - damping)  # the forward pass's softmax
        g_p = (1.0 - damping) * g
        g_a = p * (g_p - (p * g_p).sum(axis=1, keepdims=True))
        grad_unary += g_a
        g_first, g_second = g_a[first_end], g_a[second_end]  # (E, K) at each end
        # a_i(k) += Σ_l t(k, l) q_j(l) and a_j(l) += Σ_k t(k, l) q_i(k)
        grad_pairwise += model.pair_statistics(g_first, q[second_end])
        grad_pairwise += model.pair_statistics(q[first_end], g_second)
        # a_i's gradient reaches q_j as Σ_k t(k, l) g_i(k), a_j's reaches q_i as Σ_l t(k, l) g_j(l)
        g = damping * g + model.neighbours(g_a)
    q0 = iterates[0]
    grad_unary += q0 * (g - (q0 * g).sum(axis=1, keepdims=True))
    return Statistics(grad_unary, grad_pairwise)


def log_loss_gradient(q: np.ndarray, labels: np.ndarray, weights: np.ndarray):
    """``Σ_d c_d (−log q_d(y_d))`` and its gradient in q (labels < 0 and c_d = 0 add nothing)."""
    known = np.flatnonzero((labels >= 0) & (weights > 0))
    picked = np.maximum(q[known, labels[known]], 1e-300)
    gradient = np.zeros_like(q)
    gradient[known, labels[known]] = -weights[known] / picked
    return float(-(weights[known] * np.log(picked)).sum()), gradient


def hamming_gradient(q: np.ndarray, labels: np.ndarray, weights: np.ndarray):
    """``Σ_d c_d (1 − q_d(y_d))``, the expected weighted Hamming loss, and its gradient in q."""
    known = np.flatnonzero((labels >= 0) & (weights > 0))
    gradient = np.zeros_like(q)
    gradient[known, labels[known]] = -weights[known]
    return float((weights[known] * (1.0 - q[known, labels[known]])).sum()), gradient
