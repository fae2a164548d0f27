"""Mean-field CRF learned end to end: CRF as RNN (Zheng et al. 2015) without the CNN."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.utils._param_validation import StrOptions

from ._backend import (
    MeanFieldModel,
    MeanFieldSolver,
    hamming_gradient,
    log_loss_gradient,
    unrolled,
    unrolled_backward,
)
from ._base import BaseStructuredSGD
from ._utils import NumberInterval, user_stacklevel
from .perturb_map import ClassWeightedSGD

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
    r"""CRF whose marginals are ``n_iterations`` of mean field, learned end to end.

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
    n_iterations : int, default=10
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
        start after a change of ``loss``, ``n_iterations`` or ``damping`` (the structure's
        solver is that mean field) fits afresh too.
    random_state, n_jobs, verbose, unknown_label, init, ignore_label : as in PerturbMAPCRF
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
        "n_iterations": [NumberInterval(Integral, 1, None, closed="left")],
        "damping": [NumberInterval(Real, 0, 1, closed="left")],
    }
    _marginal_methods = ("exact",)
    #: the structure's solver is the mean field of these: a warm start after a change fits afresh
    _warm_start_depends_on = (*ClassWeightedSGD._warm_start_depends_on, "n_iterations", "damping")
    #: ``"auto"`` on dense features: AdaGrad for a fixed budget of 30 epochs (the objective is
    #: deterministic; on the blocky 4-class grids of ``benchmarks/multilabel.py`` 3-fold
    #: cross-validation on the training images chose AdaGrad over the 1/(α t) schedule,
    #: 6.2–6.7 % against 9.2–9.6 % error, and T = 10 over 5).
    _dense_max_iter, _dense_tol = 30, None
    _dense_learning_rate = "adagrad"
    #: CV on yeast and scene's training splits (node-averaged loss): 0.03 over 0.003 and 0.3
    _multilabel_alpha = 0.03
    #: the unrolled mean field is the model: its marginals are the solver's
    _exact_marginals_are_the_model = True

    def __init__(
        self,
        structure="grid",
        *,
        loss="log",
        class_weight=None,
        n_iterations=10,
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
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
        init="auto",
    ):
        super().__init__(
            structure,
            alpha=alpha,
            max_iter=max_iter,
            batch_size=batch_size,
            learning_rate=learning_rate,
            eta0=eta0,
            power_t=power_t,
            average=average,
            tol=tol,
            n_iter_no_change=n_iter_no_change,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            warm_start=warm_start,
            n_perturbations=1,
            random_state=random_state,
            n_jobs=n_jobs,
            verbose=verbose,
            unknown_label=unknown_label,
            ignore_label=ignore_label,
            init=init,
            l1_ratio=l1_ratio,
        )
        self.loss = loss
        self.class_weight = class_weight
        self.n_iterations = n_iterations
        self.damping = damping

    def _make_structure(self):
        """The structure, its solver the mean field of this model."""
        structure = super()._make_structure()
        structure.solver = MeanFieldSolver(self.n_iterations, self.damping, schedule="parallel")
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

        def oracle(part, w, rng):
            sub = batch.subset(part)
            nodes = batch.node_index(part)
            model = MeanFieldModel(structure.potentials(sub, w))
            iterates = unrolled(model, self.n_iterations, self.damping)
            value, gradient_q = node_loss(iterates[-1], labels[nodes], node_weight[nodes])
            statistics = unrolled_backward(model, iterates, gradient_q, self.damping)
            return -structure.joint_feature_of(sub, statistics), -value

        return oracle
