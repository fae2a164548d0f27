"""The surrogate likelihoods: pseudo-likelihood and composite (block) likelihood (Besag 1975),
and piecewise training (Sutton & McCallum 2005), each minimised by L-BFGS-B."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from sklearn.utils._param_validation import StrOptions

from .._backend import (
    PairwiseKind,
    Statistics,
    conditional_scores,
)
from .._docstrings import shared_docstring
from .._utils import onehot, store_parameters
from ..metrics.hamming import label_weights
from ._estimator import TOL_CONSTRAINTS
from ._full_batch import FULL_BATCH_CONSTRAINTS, LbfgsSurrogateCRF


@shared_docstring
class PseudoLikelihoodCRF(LbfgsSurrogateCRF):
    r"""CRF trained by maximum pseudo-likelihood (Besag 1975).

    Minimises :math:`(1/N) \sum_n \sum_i -\log P(y_i | y_{N(i)}, x_n) + (\alpha /2)\|w\|^2`: each
    node's conditional given its neighbours' true labels, exact and cheap on any graph with any K,
    by L-BFGS. The classic baseline of Pletscher & Ong's Table 1.

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure; the pairwise weights stay attractive with the graph-cut solver.
    class_weight : None, "balanced" or dict, default=None
        Weights of the labels, for rare classes: each node's conditional is weighted by its
        label's weight. ``"balanced"``: ``n_nodes / (K · n_nodes_k)`` over the known training
        labels; a dict ``{label: weight}`` (1 for labels it leaves out).
    alpha : float, default=1.0
        L2 regularisation (the paper's λ).
    max_iter : int, default=200
        L-BFGS iterations.
    tol : float, default=1e-5
        L-BFGS tolerance on the projected gradient.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals` (perturb-and-MAP marginals).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the perturbations of :meth:`predict_marginals`.
    n_jobs : int or None, default=None
        Processes for the graph cuts of prediction.
    {{lbfgs_warm_start}}
    verbose : int, default=0
        Progress per L-BFGS iteration.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels (filled in by the MAP of a model fitted on the complete samples).
    {{ignore_label}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
    objective_ : float
        The final regularised negative mean pseudo-log-likelihood.

    See Also
    --------
    PartClampCRF : composite likelihood on forests and its tightened lower bound.
    """

    _parameter_constraints: dict = {
        **FULL_BATCH_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        "class_weight": [None, StrOptions({"balanced"}), dict],
    }

    def __init__(
        self,
        structure="grid",
        *,
        class_weight=None,
        alpha=1.0,
        max_iter=200,
        tol=1e-5,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        store_parameters(self, locals())

    def _objective(self, batch, labels, w):
        """Negative mean pseudo-log-likelihood (regularised) and its gradient; with
        ``class_weight`` each node's conditional weighs its label's weight."""
        weights = label_weights(self.class_weight, self.classes_, labels, batch.node_weight)
        node_weight = None if weights is None else weights[labels]
        if batch.sample_weight is not None:  # each sample's conditionals times its weight
            node_weight = (
                batch.node_weight if node_weight is None else node_weight * batch.node_weight
            )
        potentials = self.structure_.potentials(batch, w)
        scores = conditional_scores(potentials, labels)
        log_norm = logsumexp(scores, axis=1)
        terms = log_norm - scores[np.arange(len(labels)), labels]
        value = np.sum(terms) if node_weight is None else node_weight @ terms
        conditional = np.exp(scores - log_norm[:, None])
        unary = conditional - onehot(labels, self.structure_.n_states_)
        if node_weight is not None:
            conditional *= node_weight[:, None]
            unary *= node_weight[:, None]
        ends = batch.edges
        first, second = labels[ends[:, 0]], labels[ends[:, 1]]
        columns = np.arange(len(ends))
        k = self.structure_.n_states_
        # every edge enters the conditionals of both its ends: observed pairs count twice
        pair = np.zeros((len(ends), k, k))
        pair[columns, :, second] += conditional[ends[:, 0]]
        pair[columns, first, :] += conditional[ends[:, 1]]
        observed = 2.0 if node_weight is None else node_weight[ends].sum(axis=1)
        pair[columns, first, second] -= observed
        gradient = self._joint(batch, unary, pair)
        n = batch.weight_total
        return value / n + 0.5 * self.alpha * w @ w, gradient / n + self.alpha * w


def _normalised(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log Σ_k exp(scores_k), softmax(scores))`` of every row, from one exponential (several
    times faster than scipy's ``logsumexp`` and ``softmax`` on many short rows)."""
    top = scores.max(axis=1, keepdims=True) if scores.size else np.zeros((len(scores), 1))
    shifted = np.exp(scores - top)
    total = shifted.sum(axis=1, keepdims=True)
    shifted /= total
    return (np.log(total) + top)[:, 0], shifted


@shared_docstring
class PiecewiseCRF(LbfgsSurrogateCRF):
    r"""CRF trained piecewise (Sutton & McCallum 2005): every factor normalised on its own.

    Replaces :math:`p(y \mid x)` by the product of independently normalised factors, each node's
    :math:`p_d(y_d \mid x) \propto \exp u_d(y_d)` and each edge's
    :math:`p_{ij}(y_i, y_j \mid x) \propto \exp t_{ij}(y_i, y_j)`, and minimises
    :math:`-\frac1N \sum_n \big[\sum_d \log p_d(y_{nd}) + \sum_{ij} \log p_{ij}(y_{ni},
    y_{nj})\big] + \frac\alpha2 \lVert w \rVert^2` by L-BFGS. The likelihood splits into one
    small problem per factor — the unary pieces a multinomial logistic regression of the nodes,
    the pairwise pieces one over the :math:`K^2` label pairs of the edges — so learning needs no
    inference at all; the classic fast baseline for loopy CRFs (Domokos, lecture 11). The pieces
    learn each part as if the others were absent: a pairwise piece sees only how often
    neighbours agree, not how much the unary terms already explain.

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure (any K; Potts or tables; untied weights where the structure has them;
        ``ChainStructure()`` for chains); the Potts weights stay attractive with the graph-cut
        solver.
    class_weight : None, "balanced" or dict, default=None
        Weights of the labels, for rare classes: each node's piece is weighted by its label's
        weight and each edge's by the mean of its two nodes'. ``"balanced"``:
        ``n_nodes / (K · n_nodes_k)`` over the known training labels; a dict
        ``{label: weight}`` (1 for labels it leaves out).
    alpha : float, default=1e-3
        L2 regularisation.
    max_iter : int, default=200
        L-BFGS iterations.
    tol : float, default=1e-5
        L-BFGS tolerance on the projected gradient.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals` (perturb-and-MAP marginals).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the perturbations of :meth:`predict_marginals`.
    n_jobs : int or None, default=None
        Processes for the solver calls of prediction.
    {{lbfgs_warm_start}}
    verbose : int, default=0
        Progress per L-BFGS iteration.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels (filled in by the MAP of a model fitted on the complete samples).
    {{ignore_label}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
    objective_ : float
        The final regularised negative mean piecewise log-likelihood.

    See Also
    --------
    PseudoLikelihoodCRF : each node's conditional given its neighbours' true labels.
    TwoStageCRF : a classifier's probabilities, then a CRF on them.

    References
    ----------
    .. [1] C. Sutton and A. McCallum. Piecewise training for undirected models. UAI 2005.

    Examples
    --------
    >>> from pmap_sklearn import PiecewiseCRF
    >>> from pmap_sklearn.datasets import make_grid_data
    >>> data = make_grid_data(n_samples=6, random_state=0)
    >>> model = PiecewiseCRF().fit(data.data, data.target)
    >>> _, potts = model.structure_.unpack(model.coef_)
    >>> bool((potts < 0).all())  # neighbours that agree: attractive Potts weights
    True
    """

    _parameter_constraints: dict = {
        **FULL_BATCH_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        "class_weight": [None, StrOptions({"balanced"}), dict],
    }

    def __init__(
        self,
        structure="grid",
        *,
        class_weight=None,
        alpha=1e-3,
        max_iter=200,
        tol=1e-5,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        store_parameters(self, locals())

    def _objective(self, batch, labels, w):
        """Negative mean piecewise log-likelihood (regularised) and its gradient: for every
        piece, its expected statistics minus the observed ones (Sutton & McCallum 2005, §3)."""
        return self._objective_of(batch, labels)(w)

    def _objective_of(self, batch, labels):
        """:meth:`_objective` of these samples as ``w -> (value, gradient)``, what depends on
        the labels alone (the pieces' weights, the observed pairs) computed once."""
        weights = label_weights(self.class_weight, self.classes_, labels, batch.node_weight)
        node_weight = np.ones(len(labels)) if weights is None else weights[labels]
        if batch.sample_weight is not None:  # each sample's pieces times its weight
            node_weight = node_weight * batch.node_weight
        edge_weight = 0.5 * node_weight[batch.edges].sum(axis=1)
        first, second = labels[batch.edges[:, 0]], labels[batch.edges[:, 1]]
        nodes, n = np.arange(len(labels)), batch.weight_total

        def objective(w):
            potentials = self.structure_.potentials(batch, w)
            unary_norm, node = _normalised(potentials.unary)
            value = node_weight @ (unary_norm - potentials.unary[nodes, labels])
            node[nodes, labels] -= 1.0
            node *= node_weight[:, None]
            pair_value, pair = _pairwise_pieces(potentials, first, second, edge_weight)
            gradient = self.structure_.joint_feature_of(batch, Statistics(node, pair))
            value += pair_value
            return value / n + 0.5 * self.alpha * w @ w, gradient / n + self.alpha * w

        return objective


def _pairwise_pieces(potentials, first, second, edge_weight) -> tuple[float, np.ndarray]:
    """The pairwise pieces of the piecewise likelihood: ``Σ_e c_e [log Z_e − t_e(y_i, y_j)]``
    over the edges (``Z_e`` the sum of ``exp t_e`` over the K² label pairs, ``c_e`` the edge
    weights) and its gradient with respect to the pairwise scores, as pairwise statistics of
    the potentials' kind (expected minus observed)."""
    k = potentials.n_states
    if potentials.pairwise_kind is PairwiseKind.POTTS:
        # K agreeing pairs score 0 and K² − K disagreeing ones t: Z = K + (K² − K) e^t, in
        # one exponential per edge instead of a table of K² scores
        t, differ = potentials.pairwise, first != second
        top = np.maximum(t, 0.0)
        agree, disagree = k * np.exp(-top), (k * k - k) * np.exp(t - top)
        log_z = top + np.log(agree + disagree)
        value = edge_weight @ (log_z - t * differ)
        return float(value), edge_weight * (disagree / (agree + disagree) - differ)
    observed = first * k + second
    if potentials.pairwise_kind is PairwiseKind.SHARED:  # one table: one normaliser
        table = potentials.pairwise.reshape(1, k * k)
        pair_norm, pair = _normalised(table)
        counts = np.bincount(observed, edge_weight, minlength=k * k)
        value = edge_weight.sum() * pair_norm[0] - counts @ table[0]
        return float(value), (edge_weight.sum() * pair[0] - counts).reshape(k, k)
    tables = np.asarray(potentials.edge_tables()).reshape(len(observed), k * k)
    pair_norm, pair = _normalised(tables)
    edges = np.arange(len(observed))
    value = edge_weight @ (pair_norm - tables[edges, observed])
    pair[edges, observed] -= 1.0
    pair *= edge_weight[:, None]
    return float(value), pair.reshape(-1, k, k)
