r"""Log-partition function of pairwise models: exact value and upper bounds.

For a binary model with attractive Potts terms — ``f(y) = Σ_d u_d(y_d) + Σ_(i,j) w_ij
[y_i != y_j]`` with ``w_ij <= 0``, so that :math:`p(y) \propto \exp f(y)` is log-supermodular — the
thesis (Shpakova 2019, Prop. 2.1) orders the bounds::

    A = log Σ_y exp f(y)  <=  A_logistic = E_ε max_y f(y) + ε·y  <=  A_L-field,

with equality for separable models (no edges). Every function takes the
:class:`~pmap_sklearn.Potentials` of one sample: build them directly, or take them from a fitted
estimator with ``estimator.potentials(X).split()``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from ._backend import BruteForceSolver, GraphCutSolver, Potentials, check_solver
from .perturbation import PERTURBATIONS, perturb_and_map

#: Largest number of labellings :func:`log_partition_exact` enumerates (24 binary nodes).
MAX_EXACT_LABELLINGS = 1 << 24

__all__ = [
    "log_partition_exact",
    "log_partition_perturb",
    "log_partition_lfield",
    "lfield_point",
]


def _one_sample(potentials) -> Potentials:
    if not isinstance(potentials, Potentials):
        raise TypeError(
            f"expected the Potentials of one sample, got {type(potentials).__name__}: build "
            "Potentials(unary, edges, pairwise), or use estimator.potentials(X).split()"
        )
    if potentials.n_samples != 1:
        raise ValueError(
            f"expected the Potentials of one sample, got {potentials.n_samples}: use "
            "potentials.split() and call the bound on each"
        )
    if potentials.n_nodes == 0:
        raise ValueError("the model has no node (D = 0): nothing to bound")
    return potentials.check()


def _attractive_binary(potentials) -> tuple[Potentials, float]:
    """The Potts form of a binary attractive model, and its constant."""
    potentials = _one_sample(potentials)
    if potentials.n_states != 2:
        raise ValueError(
            f"this bound is for binary models (K = 2), got K = {potentials.n_states} labels"
        )
    potts, constant = potentials.as_potts()
    if potts.pairwise.size and potts.pairwise.max() > 0:
        raise ValueError(
            "this bound needs attractive pairwise terms (Potts weights <= 0, a "
            f"log-supermodular model); got a weight of {potts.pairwise.max():.3g}"
        )
    return potts, float(constant[0])


def log_partition_exact(potentials: Potentials) -> float:
    r""":math:`A = \log \sum_y \exp f(y)` by enumerating every labelling (at most 2^24 of them).

    Parameters
    ----------
    potentials : Potentials
        One sample, any number of labels and any pairwise terms.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import Potentials
    >>> from pmap_sklearn.bounds import log_partition_exact
    >>> unary = np.array([[0.0, 1.0], [0.0, -1.0]])
    >>> round(log_partition_exact(Potentials(unary)), 6)  # separable: Σ_d log Σ_k e^u
    1.626523
    """
    potentials = _one_sample(potentials)
    size = potentials.n_states**potentials.n_nodes
    if size > MAX_EXACT_LABELLINGS:
        raise ValueError(
            f"exact enumeration of {potentials.n_states}^{potentials.n_nodes} labellings "
            f"refused (at most 2^24: 24 binary nodes); use log_partition_perturb or "
            "log_partition_lfield"
        )
    return float(BruteForceSolver(MAX_EXACT_LABELLINGS).log_partition(potentials)[0])


def log_partition_perturb(
    potentials: Potentials,
    n_samples: int = 100,
    perturbation: str = "logistic",
    random_state=None,
    solver="graph_cut",
) -> tuple[float, float]:
    r"""Perturb-and-MAP estimate of the upper bound ``A_G = E_z max_y f(y) + z(y)``.

    With zero-mean Gumbel ``z_d(k)`` (Hazan & Jaakkola 2012); for binary models the same expectation
    is ``E_ε max_y f(y) + ε·y`` with one logistic :math:`\varepsilon_d` per node (thesis Eq. 2.4.2),
    whose estimate has a smaller variance. Each sample is one MAP call.

    Parameters
    ----------
    potentials : Potentials
        One sample.
    n_samples : int, default=100
        Number of perturbations (at least 2, for the standard error).
    perturbation : {"logistic", "gumbel"}, default="logistic"
    random_state : int, Generator, RandomState or None
    solver : str or Solver, default="graph_cut"
        The MAP solver (graph cuts need a binary attractive model).

    Returns
    -------
    estimate : float
        Mean of the ``n_samples`` perturbed maxima.
    standard_error : float
        Their standard deviation divided by ``√n_samples``.
    """
    potentials = _one_sample(potentials)
    if perturbation not in PERTURBATIONS:
        raise ValueError(f"perturbation must be one of {PERTURBATIONS}, got {perturbation!r}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, Integral) or n_samples < 2:
        raise ValueError(f"n_samples must be an int >= 2 (for a standard error), got {n_samples!r}")
    average = perturb_and_map(
        check_solver(solver), potentials, int(n_samples), random_state, perturbation
    )
    return float(average.max_mean[0]), float(average.max_sem[0])


def lfield_point(potentials: Potentials) -> np.ndarray:
    r"""Minimum-norm point ``s*`` of the base polytope ``B(F)`` of ``F(S) = f(0) - f(1_S)``.

    ``F`` is a cut function minus a modular term, so ``s*`` is computed exactly by the
    divide-and-conquer algorithm (Fujishige 2005; Jegelka, Lin & Bilmes 2011): with :math:`\lambda =
    F(V)/|V|`, one graph cut minimises :math:`F(S) - \lambda |S|`; if the minimum is 0 then
    :math:`s* = \lambda` on ``V``, otherwise the minimiser ``A`` splits the problem into ``F``
    restricted to ``A`` and ``F`` contracted by ``A`` on the rest. At most ``D`` cuts.

    Parameters
    ----------
    potentials : Potentials
        One binary sample with attractive pairwise terms.

    Returns
    -------
    s : ndarray of shape (D,)
    """
    potts, _ = _attractive_binary(potentials)
    unary, edges, capacity = potts.unary, potts.edges, -potts.pairwise
    solver = GraphCutSolver()
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
        sub_model = Potentials(
            np.column_stack([np.zeros(len(nodes)), shifted]), sub_edges, -sub_capacity
        )
        labels = solver.map(sub_model)
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


def log_partition_lfield(potentials: Potentials) -> float:
    """L-field upper bound ``A_L-field = f(0) + min_{s ∈ B(F)} Σ_d log(1 + e^{-s_d})``.

    The minimiser of this separable function over ``B(F)`` is the minimum-norm point
    (Djolonga & Krause 2015), computed exactly by graph cuts in :func:`lfield_point`.

    Parameters
    ----------
    potentials : Potentials
        One binary sample with attractive pairwise terms.

    Returns
    -------
    float
    """
    potts, constant = _attractive_binary(potentials)
    point = lfield_point(potts)
    return float(constant + potts.unary[:, 0].sum() + np.logaddexp(0.0, -point).sum())
