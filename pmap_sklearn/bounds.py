"""Log-partition function of binary supermodular models: exact value and upper bounds.

A model is the score ``f(y) = Σ_d unary[d, y_d] + Σ_(i,j) w_ij [y_i != y_j]`` with ``w_ij <= 0``
(SPEC §1), i.e. ``p(y) ∝ exp f(y)`` is log-supermodular. Thesis Prop. 2.1::

    A = log Σ_y exp f(y)  <=  A_logistic = E_ε max_y f(y) + ε·y  <=  A_L-field,

with equality for separable models (no edges). :func:`binary_potentials` turns a fitted
estimator on a grid or superpixel graph into these arrays, one model per sample.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ._backend.cut import graph_cut_map
from ._base import check_generator
from .perturbation import gumbel, logistic

#: Largest number of nodes :func:`log_partition_exact` enumerates (2^D labellings).
MAX_EXACT_NODES = 24

__all__ = [
    "log_partition_exact",
    "log_partition_perturb",
    "log_partition_lfield",
    "lfield_point",
    "binary_potentials",
]


def _check_model(unary, edges, weights, supermodular: bool = True):
    unary = np.asarray(unary, dtype=float)
    if unary.ndim != 2 or unary.shape[1] != 2:
        raise ValueError(
            f"unary must have shape (n_nodes, 2) (binary models only), got {unary.shape}"
        )
    if not np.isfinite(unary).all():
        raise ValueError("unary contains non-finite values")
    edges = np.zeros((0, 2), dtype=np.intp) if edges is None else np.asarray(edges)
    weights = np.zeros(0) if weights is None else np.asarray(weights, dtype=float)
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(f"edges must be an int array of shape (n_edges, 2), got {edges.shape}")
    if weights.shape != (len(edges),):
        raise ValueError(f"weights must have shape ({len(edges)},), got {weights.shape}")
    if len(edges) and (edges.min() < 0 or edges.max() >= len(unary)):
        raise ValueError(f"edges refer to nodes outside 0..{len(unary) - 1}")
    if np.any(edges[:, 0] == edges[:, 1]):
        raise ValueError("edges contain a self-loop")
    if not np.isfinite(weights).all():
        raise ValueError("weights contain non-finite values")
    if supermodular and weights.size and weights.max() > 0:
        raise ValueError(
            f"pairwise weights must be <= 0 (a log-supermodular model); got {weights.max():.3g}"
        )
    return unary, edges.astype(np.intp), weights


def log_partition_exact(unary, edges=None, weights=None) -> float:
    """``A = log Σ_y exp f(y)`` by enumerating the ``2^D`` labellings (``D <= 24``).

    Parameters
    ----------
    unary : array of shape (D, 2)
        Node scores of labels 0 and 1.
    edges : int array of shape (E, 2), optional
    weights : array of shape (E,), optional
        Score added when the two ends of an edge disagree (any sign here).

    Returns
    -------
    float
    """
    unary, edges, weights = _check_model(unary, edges, weights, supermodular=False)
    n_nodes = len(unary)
    if n_nodes > MAX_EXACT_NODES:
        raise ValueError(
            f"exact enumeration of 2^{n_nodes} labellings refused (at most "
            f"{MAX_EXACT_NODES} nodes); use log_partition_perturb or log_partition_lfield"
        )
    gain = unary[:, 1] - unary[:, 0]
    parts = []
    chunk = 1 << 16
    for start in range(0, 1 << n_nodes, chunk):
        codes = np.arange(start, min(start + chunk, 1 << n_nodes))
        labels = (codes[:, None] >> np.arange(n_nodes)) & 1
        disagree = labels[:, edges[:, 0]] != labels[:, edges[:, 1]]
        parts.append(logsumexp(labels @ gain + disagree @ weights))
    return float(unary[:, 0].sum() + logsumexp(parts))


def log_partition_perturb(
    unary, edges=None, weights=None, n_samples=100, perturbation="logistic", random_state=None
):
    """Perturb-and-MAP estimate of the upper bound ``A_G = A_logistic`` (SPEC §1-2).

    ``A_G = E_z max_y f(y) + Σ_d z_d(y_d)`` with zero-mean Gumbel ``z_d(k)``; for binary models
    the same expectation is ``E_ε max_y f(y) + ε·y`` with one logistic ``ε_d`` per node (thesis
    Eq. 2.4.2), whose estimate has a smaller variance. Each sample is one graph cut.

    Parameters
    ----------
    unary, edges, weights : see :func:`log_partition_exact` (weights ``<= 0``).
    n_samples : int, default=100
    perturbation : {"logistic", "gumbel"}, default="logistic"
    random_state : int, Generator, RandomState or None

    Returns
    -------
    estimate : float
        Mean of the ``n_samples`` perturbed maxima.
    standard_error : float
        Their standard deviation divided by ``√n_samples``.
    """
    unary, edges, weights = _check_model(unary, edges, weights)
    if perturbation not in ("logistic", "gumbel"):
        raise ValueError(f"perturbation must be 'logistic' or 'gumbel', got {perturbation!r}")
    if int(n_samples) < 2:
        raise ValueError(f"n_samples must be at least 2 to give a standard error, got {n_samples}")
    rng = check_generator(random_state)
    values = np.empty(int(n_samples))
    rows = np.arange(len(unary))
    for m in range(len(values)):
        if perturbation == "gumbel":
            perturbed = unary + gumbel(rng, unary.shape)
        else:
            perturbed = unary.copy()
            perturbed[:, 1] += logistic(rng, len(unary))
        labels = graph_cut_map(perturbed, edges, weights)
        disagree = labels[edges[:, 0]] != labels[edges[:, 1]]
        values[m] = perturbed[rows, labels].sum() + weights @ disagree
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def lfield_point(unary, edges=None, weights=None) -> np.ndarray:
    """Minimum-norm point ``s*`` of the base polytope ``B(F)`` of ``F(S) = f(0) - f(1_S)``.

    ``F`` is a cut function minus a modular term, so ``s*`` is computed exactly by the
    divide-and-conquer algorithm (Fujishige 2005; Jegelka, Lin & Bilmes 2011): with
    ``λ = F(V)/|V|``, one graph cut minimises ``F(S) - λ|S|``; if the minimum is 0 then
    ``s* = λ`` on ``V``, otherwise the minimiser ``A`` splits the problem into ``F`` restricted to
    ``A`` and ``F`` contracted by ``A`` on the rest. At most ``D`` cuts.

    Returns
    -------
    s : ndarray of shape (D,)
    """
    unary, edges, weights = _check_model(unary, edges, weights)
    capacity = -weights
    point = np.empty(len(unary))
    scale = 1.0 + np.abs(unary).sum() + capacity.sum()
    # Each pending problem: its nodes (global ids) and their gains g' (F'(S) = cut'(S) - g'(S)).
    pending = [(np.arange(len(unary)), unary[:, 1] - unary[:, 0])]
    while pending:
        nodes, gain = pending.pop()
        level = -gain.sum() / len(nodes)  # λ = F'(V')/|V'|: the cut of V' inside V' is 0
        inside = np.zeros(len(unary), dtype=bool)
        inside[nodes] = True
        local = np.full(len(unary), -1)
        local[nodes] = np.arange(len(nodes))
        keep = inside[edges[:, 0]] & inside[edges[:, 1]]
        sub_edges, sub_capacity = local[edges[keep]], capacity[keep]
        shifted = gain + level
        labels = graph_cut_map(
            np.column_stack([np.zeros(len(nodes)), shifted]), sub_edges, -sub_capacity
        )
        cut = sub_capacity @ (labels[sub_edges[:, 0]] != labels[sub_edges[:, 1]])
        minimum = cut - shifted @ labels
        if minimum > -1e-12 * scale:
            point[nodes] = level
            continue
        chosen = labels == 1
        # Edges leaving A inside V' become unary terms: cut when the A-end is taken (restriction
        # to A), saved when the other end joins A (contraction by A).
        crossing = chosen[sub_edges[:, 0]] != chosen[sub_edges[:, 1]]
        to_other = np.zeros(len(nodes))
        np.add.at(to_other, sub_edges[crossing].ravel(), np.repeat(sub_capacity[crossing], 2))
        pending.append((nodes[chosen], gain[chosen] - to_other[chosen]))
        pending.append((nodes[~chosen], gain[~chosen] + to_other[~chosen]))
    return point


def log_partition_lfield(unary, edges=None, weights=None) -> float:
    """L-field upper bound ``A_L-field = f(0) + min_{s ∈ B(F)} Σ_d log(1 + e^{-s_d})``.

    The minimiser of this separable function over ``B(F)`` is the minimum-norm point
    (Djolonga & Krause 2015), computed exactly by graph cuts in :func:`lfield_point`.

    Parameters
    ----------
    unary, edges, weights : see :func:`log_partition_exact` (weights ``<= 0``).

    Returns
    -------
    float
    """
    unary, edges, weights = _check_model(unary, edges, weights)
    point = lfield_point(unary, edges, weights)
    return float(unary[:, 0].sum() + np.logaddexp(0.0, -point).sum())


def binary_potentials(estimator, X) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The models a fitted estimator on a grid or graph assigns to samples.

    Parameters
    ----------
    estimator : fitted estimator with ``structure_`` (a grid or graph structure) and ``coef_``
    X : samples in the structure's format

    Returns
    -------
    list of (unary, edges, weights)
        One binary model per sample, in the format of the functions of this module.
    """
    structure = getattr(estimator, "structure_", None)
    if structure is None or not hasattr(estimator, "coef_"):
        raise ValueError("binary_potentials needs a fitted estimator with structure_ and coef_")
    if not hasattr(structure, "edge_weights"):
        raise ValueError(
            f"binary_potentials needs a grid or graph structure (a [y_i != y_j] pairwise "
            f"term), got {type(structure).__name__}"
        )
    batch = structure.prepare(X)
    unary = structure.node_scores(batch, estimator.coef_)
    weights = structure.edge_weights(batch, estimator.coef_)
    models = []
    for i in range(batch.n_samples):
        edges = batch.edges[batch.edges_of(i)] - batch.node_offsets[i]
        models.append((unary[batch.nodes_of(i)], edges, weights[batch.edges_of(i)]))
    return models
