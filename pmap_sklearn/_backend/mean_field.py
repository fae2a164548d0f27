"""Naive mean field: the fully factorised approximation of the Gibbs distribution, and its
iterations unrolled as a differentiable function of the scores (CRF as RNN, Zheng et al. 2015).

The mean-field marginals :math:`q_d` make the variational free energy stationary:
:math:`q_d(k) \\propto \\exp(u_d(k) + \\sum_{j \\in N(d)} \\sum_l t_{dj}(k, l)\\, q_j(l))`
(Koller & Friedman 2009, §11.5). Parallel updates move every node at once, from the previous
iterate (what CRF-as-RNN unrolls); sequential updates move one colour class of a proper
colouring at a time, each from the freshest neighbours, which never increases the free energy.
Damping mixes a share of the previous iterate back in (parallel updates can oscillate on
strongly coupled models, damped or not: those samples are finished by sequential sweeps).
Mean field is fast — a few matrix products per iteration — but on strongly coupled models it
locks into one mode and its marginals are over-confident.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.special import softmax
from sklearn.utils import check_scalar

from .._validation import NonFiniteError
from .capabilities import Capabilities, PairwiseKind
from .messages import pairwise_statistics, sample_colours
from .potentials import Potentials, Statistics
from .solver import Marginals, Solver


class MeanFieldModel:
    """A model's scores in the form the iterations read: the unary scores (n, K) and the
    pairwise scores — for Potts terms the weighted adjacency matrix of the nodes (every
    product then costs one sparse product of O(E K), not O(E K²)), per-edge tables (E, K, K)
    and the incidence of the edges otherwise."""

    def __init__(self, potentials: Potentials):
        self.potentials = potentials
        self.unary = potentials.unary
        self.edges = potentials.edges
        self.potts = potentials.pairwise_kind is PairwiseKind.POTTS
        if self.potts:
            weights = np.asarray(potentials.pairwise, dtype=float)
            first, second = self.edges[:, 0], self.edges[:, 1]
            self.weights = weights[:, None]
            self.adjacency = sparse.csr_matrix(
                (np.concatenate([weights, weights]), (np.r_[first, second], np.r_[second, first])),
                shape=(potentials.n_nodes, potentials.n_nodes),
            )
        else:
            self.tables = np.ascontiguousarray(potentials.edge_tables())
            self.first, self.second = potentials.edge_ends
        self._check_range()

    def _check_range(self) -> None:
        """Refuse scores whose fields :meth:`field` could overflow: every field is at most
        ``max_k |u_d(k)| + Σ_j max_kl |t_dj(k, l)|`` in absolute value, and past double
        precision's range the iterations turn into NaN. A score of −inf forbids a label (a
        clamp) and is left out."""

        def size(scores):
            return np.where(np.isneginf(scores), 0.0, np.abs(scores))

        with np.errstate(over="ignore", invalid="ignore"):
            bound = size(self.unary).max(axis=1, initial=0.0)
            if self.potts:
                bound = bound + abs(self.adjacency) @ np.ones(len(bound))
            elif len(self.edges):
                largest = size(self.tables).max(axis=(1, 2))
                bound = bound + self.first @ largest + self.second @ largest
            finite = np.isfinite(bound).all() and bound.max(initial=0.0) < 1e300
        if not finite:
            raise NonFiniteError(
                "the scores are too large for mean field (a node's unary and pairwise scores "
                f"add up to {bound.max():.3g}, beyond double precision's range): scale the "
                "features (e.g. with NodeTransformer(StandardScaler())) or regularise more"
            )

    def neighbours(self, rows: np.ndarray) -> np.ndarray:
        """``Σ_j Σ_l t_dj(k, l) rows_j(l)`` of every node d, (n, K): what its neighbours'
        rows send it through the pairwise scores. The map is self-adjoint (node j receives
        ``Σ_k t_dj(k, l) rows_d(k)`` from d), so the backward pass sends gradients through it
        too. For Potts terms ``t_dj(k, l) = w_dj [k ≠ l]``: ``Σ_{l ≠ k} v_l = Σ_l v_l − v_k``."""
        if self.potts:
            return (self.adjacency @ rows.sum(axis=1))[:, None] - self.adjacency @ rows
        to_first = np.einsum("ekl,el->ek", self.tables, rows[self.edges[:, 1]])
        to_second = np.einsum("ekl,ek->el", self.tables, rows[self.edges[:, 0]])
        return self.first @ to_first + self.second @ to_second

    def field(self, q: np.ndarray) -> np.ndarray:
        """``u_d(k) + Σ_j Σ_l t_dj(k, l) q_j(l)``: the neighbours' expected scores, (n, K)."""
        return self.unary + self.neighbours(q)

    def pair_statistics(self, at_first: np.ndarray, at_second: np.ndarray) -> np.ndarray:
        """The pairwise statistics (of the potentials' kind) of the outer products
        ``u_e ⊗ v_e`` of rows at the edges' two ends: for Potts terms
        ``Σ_{k ≠ l} u_k v_l = Σ u Σ v − Σ_k u_k v_k`` per edge."""
        if self.potts:
            return at_first.sum(axis=1) * at_second.sum(axis=1) - (at_first * at_second).sum(1)
        pair = np.einsum("ek,el->ekl", at_first, at_second)
        return pairwise_statistics(pair, self.potentials.pairwise_kind)

    def free_energy_bound(self, q: np.ndarray) -> np.ndarray:
        """``E_q[f] + H(q)`` per sample: a lower bound of the log-partition function."""
        p = self.potentials
        at_first, at_second = q[self.edges[:, 0]], q[self.edges[:, 1]]
        if self.potts:
            pair = self.weights[:, 0] * self.pair_statistics(at_first, at_second)
        else:
            pair = np.einsum("ek,ekl,el->e", at_first, self.tables, at_second)
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 · log 0, 0 · (−inf): 0
            entropy = -np.where(q > 0, q * np.log(q), 0.0).sum(axis=1)
            node = np.where(q > 0, q * self.unary, 0.0).sum(axis=1) + entropy
        return np.bincount(p.node_sample, node, minlength=p.n_samples) + np.bincount(
            p.edge_sample, pair, minlength=p.n_samples
        )


def unrolled(model: MeanFieldModel, n_sweeps: int, damping: float) -> list[np.ndarray]:
    """Parallel mean field from ``softmax(u)``: the iterates ``q_0 … q_T``, with
    ``q_{s+1} = damping · q_s + (1 − damping) · softmax(field(q_s))``."""
    q = softmax(model.unary, axis=1)
    iterates = [q]
    for _ in range(n_sweeps):
        q = damping * q + (1.0 - damping) * softmax(model.field(q), axis=1)
        iterates.append(q)
    return iterates


#: A node's last parallel update moving its marginal by more than this, back against the
#: update before (and by at least half as much), is a swing of an oscillation, not the damped
#: approach of a fixed point.
OSCILLATION_STEP = 1e-2


def _oscillating_samples(potentials: Potentials, iterates: list[np.ndarray]) -> np.ndarray:
    """The samples (bool, (n_samples,)) whose parallel iterates swing back and forth: some node
    whose last update reverses the one before without shrinking to a fixed point. Jacobi
    updates of an attractive model overshoot, every node copying its neighbours' previous
    labels, and settle into a 2-cycle between labellings that damping only slows (Wainwright &
    Jordan 2008, §5.3: coordinate ascent, one node or colour class at a time, cannot)."""
    if len(iterates) < 3:
        return np.zeros(potentials.n_samples, dtype=bool)
    last, before = iterates[-1] - iterates[-2], iterates[-2] - iterates[-3]
    size, size_before = np.abs(last).max(axis=1), np.abs(before).max(axis=1)
    swings = (
        ((last * before).sum(axis=1) < 0) & (size > OSCILLATION_STEP) & (size >= 0.5 * size_before)
    )
    return np.bincount(potentials.node_sample[swings], minlength=potentials.n_samples) > 0


class MeanFieldSolver(Solver):
    """Naive mean-field marginals, and the MAP as their argmax, for any K, any pairwise terms
    and any graph.

    Parameters
    ----------
    n_sweeps : int, default=10
        Updates of every node (parallel) or sweeps over the colour classes (sequential).
    damping : float, default=0.0
        Share of the previous iterate kept at each update, in [0, 1).
    schedule : {"sequential", "parallel"}, default="sequential"
        One colour class of a proper colouring at a time from the freshest neighbours (never
        increases the free energy), or every node at once from the previous iterate (what
        CRF as RNN unrolls, :class:`~pmap_sklearn.MeanFieldCRF`'s model). On strongly coupled
        models parallel updates oscillate between labellings, damped or not, and would stop at
        a poor one (on random attractive 8-node chains, Potts weight 5, K = 2, their argmax
        scored 8.6 below the MAP on average against 1.5 for sequential updates); the samples
        whose last parallel updates still swing back and forth are finished by sequential
        sweeps from the start (2-3 times the cost per iteration), so they end where the
        sequential schedule does.
    finish_oscillations : bool, default=True
        Whether parallel updates that oscillate are finished by sequential sweeps. False keeps
        the ``n_sweeps`` parallel iterates as they are: the network
        :class:`~pmap_sklearn.MeanFieldCRF` learns through is its model.
    """

    name = "mean_field"
    capabilities = Capabilities(
        marginals=True,
        map_quality="approximate: the argmax of the mean-field marginals (sequential updates "
        "lock into one mode of a strongly coupled model, not always the best; parallel updates "
        "that oscillate between labellings end with sequential sweeps)",
    )

    def __init__(
        self,
        n_sweeps: int = 10,
        damping: float = 0.0,
        schedule: str = "sequential",
        *,
        finish_oscillations: bool = True,
    ):
        self.n_sweeps = check_scalar(n_sweeps, "n_sweeps", Integral, min_val=0)
        if isinstance(n_sweeps, bool):
            raise ValueError("n_sweeps must be an int, got a bool")
        self.damping = check_scalar(
            damping, "damping", Real, min_val=0.0, max_val=1.0, include_boundaries="left"
        )
        if not np.isfinite(damping):  # NaN passes every comparison
            raise ValueError(f"damping must be a number in [0, 1), got {damping!r}")
        if schedule not in ("parallel", "sequential"):
            raise ValueError(f"schedule must be 'parallel' or 'sequential', got {schedule!r}")
        self.schedule = schedule
        if not isinstance(finish_oscillations, bool | np.bool_):
            raise ValueError(
                f"finish_oscillations must be True or False, got {finish_oscillations!r}"
            )
        self.finish_oscillations = bool(finish_oscillations)

    def __repr__(self) -> str:
        kept = "" if self.finish_oscillations else ", finish_oscillations=False"
        return (
            f"MeanFieldSolver(n_sweeps={self.n_sweeps}, damping={self.damping}, "
            f"schedule={self.schedule!r}{kept})"
        )

    def _iterate(self, potentials: Potentials, clamp=None) -> tuple[MeanFieldModel, np.ndarray]:
        self._check(potentials, clamp)
        if clamp is not None and np.any(np.asarray(clamp) >= 0):  # clamped: one label allowed
            clamp = np.asarray(clamp)
            clamped = np.flatnonzero(clamp >= 0)
            forbid = np.zeros(potentials.unary.shape)
            forbid[clamped] = -np.inf
            forbid[clamped, clamp[clamped]] = 0.0
            potentials = potentials.add_unary(forbid)
        model = MeanFieldModel(potentials)
        if self.schedule == "sequential":
            return model, self._sequential(model)
        iterates = unrolled(model, self.n_sweeps, self.damping)
        q = iterates[-1]
        if not self.finish_oscillations:
            return model, q
        swinging = _oscillating_samples(potentials, iterates)
        if swinging.any():  # those samples as the sequential schedule leaves them
            nodes = swinging[potentials.node_sample]
            q = q.copy()
            q[nodes] = self._sequential(model, nodes)[nodes]
        return model, q

    def _sequential(self, model: MeanFieldModel, only=None) -> np.ndarray:
        """Sequential sweeps from ``softmax(u)`` over the colour classes (of the nodes
        ``only``, a mask; every node by default)."""
        colours = sample_colours(model.potentials)
        if only is not None:
            colours = np.where(only, colours, -1)
        classes = [np.flatnonzero(colours == c) for c in range(colours.max(initial=-1) + 1)]
        q = softmax(model.unary, axis=1)
        for _ in range(self.n_sweeps):
            for nodes in classes:
                fresh = softmax(model.field(q)[nodes], axis=1)
                q[nodes] = self.damping * q[nodes] + (1.0 - self.damping) * fresh
        return q

    def marginals(self, potentials: Potentials, clamp=None) -> Marginals:
        """Mean-field node marginals, the products ``q_i ⊗ q_j`` as pairwise marginals, and
        the mean-field lower bound of the log-partition function.

        Parameters
        ----------
        potentials : Potentials
            The models.
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.

        Returns
        -------
        Marginals
        """
        model, q = self._iterate(potentials, clamp)
        pair = model.pair_statistics(q[potentials.edges[:, 0]], q[potentials.edges[:, 1]])
        statistics = Statistics(q, pair)
        return Marginals(statistics, model.free_energy_bound(q))

    def map(self, potentials: Potentials, clamp=None, n_jobs=None) -> np.ndarray:
        """The argmax of every node's mean-field marginal (clamped nodes keep their label).

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        n_jobs : int, optional
            Unused (the iterations are vectorised over all samples).

        Returns
        -------
        ndarray of shape (n_nodes,)
        """
        if isinstance(potentials, Potentials) and potentials.n_nodes == 0:
            return np.zeros(0, dtype=np.intp)
        return self._iterate(potentials, clamp)[1].argmax(axis=1)

    def sample(self, potentials: Potentials, n_draws: int, rng, clamp=None) -> np.ndarray:
        """Joint draws from the mean-field distribution :math:`q(y) = \\prod_i q_i(y_i)`: each
        node independently from its marginal (the model of a mean-field learner; a sample of
        the Gibbs model only where the mean field is exact).

        Parameters
        ----------
        potentials : Potentials
        n_draws : int
        rng : numpy.random.Generator
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.

        Returns
        -------
        ndarray of shape (n_draws, n_nodes)
        """
        if isinstance(potentials, Potentials) and potentials.n_nodes == 0:
            return np.zeros((n_draws, 0), dtype=np.intp)
        q = self._iterate(potentials, clamp)[1]
        with np.errstate(divide="ignore"):
            logits = np.log(q)
        return (logits + rng.gumbel(size=(n_draws, *q.shape))).argmax(axis=2)
