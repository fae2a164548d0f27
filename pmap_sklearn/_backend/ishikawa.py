"""Ishikawa cuts: exact MAP of ordered-label models by one minimum cut.

A label ``z_i ∈ {0, …, r_i − 1}`` is written by its thresholds ``x_ij = [z_i ≥ j]``, ``j ≥ 1``,
a chain of binary nodes kept monotone by infinite edges (Ishikawa 2003). Every unary cost
becomes linear in the thresholds, a pairwise cost that is convex in the label difference
becomes edges between the chains (their capacities are its second differences), and a group
maximum ``d_A u_{max_a z_a}`` becomes, threshold by threshold, the submodular OR of the group's
thresholds weighted by the level step (Shpakova 2019, §4.5.2). All terms are submodular, so one
max-flow (:func:`~pmap_sklearn._backend.mincut.min_cut`) gives the exact minimiser.

:class:`IshikawaSolver` takes two kinds of models: :class:`Potentials` whose pairwise scores
are concave functions of the label difference (the solver protocol), and
:class:`GroupMaxPotentials`, level models with group-maximum terms (the continuous
log-supermodular priors), built by :class:`GroupMaxLevels`. Both are solved in chunks of at
most ``CHUNK_NODES`` threshold nodes per max-flow, over ``n_jobs`` processes — except group
maxima of singletons and pairs forming a forest, whose exact MAP dynamic programming finds
without a max-flow (:class:`~.level_tree.LevelTree`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._parallel import CHUNK_NODES, map_jobs, map_samples
from .capabilities import Capabilities, PairwiseTerms
from .level_tree import LevelTree, packed_layout
from .mincut import min_cut
from .potentials import Potentials, finite_clamp_scores
from .solver import Solver


class _Thresholds:
    """The threshold nodes of labels with ``n_levels[i]`` levels: node ``(i, j)``, ``j ≥ 1``,
    has index ``start[i] + j − 1``; level ``j`` of node ``i`` is entry ``packed_start[i] + j``
    of packed costs."""

    def __init__(self, n_levels: np.ndarray):
        self.n_levels = np.asarray(n_levels, dtype=np.intp)
        counts = self.n_levels - 1
        self.start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
        self.n = int(counts.sum())
        self.owner = np.repeat(np.arange(len(counts)), counts)
        self.level = np.arange(self.n) - self.start[self.owner] + 1
        self.packed_start, self.packed_owner, self.packed_level = packed_layout(self.n_levels)

    def packed(self, costs: np.ndarray) -> np.ndarray:
        """Costs (B, Σ n_levels) from padded (B, n, max(n_levels)) or packed ones."""
        if costs.ndim == 2:
            return costs
        return costs[:, self.packed_owner, self.packed_level]

    def chain_edges(self):
        """``x_ij >= x_i,j+1``: an infinite edge from each threshold to the next."""
        inner = self.level < self.n_levels[self.owner] - 1
        tails = np.flatnonzero(inner)
        return tails, tails + 1

    def linear(self, costs: np.ndarray) -> np.ndarray:
        """Threshold coefficients ``c_i(j) − c_i(j − 1)`` of packed unary costs, shape
        (B, n)."""
        upper = self.packed_start[self.owner] + self.level
        return costs[:, upper] - costs[:, upper - 1]

    def decode(self, x: np.ndarray) -> np.ndarray:
        """Labels ``z_i = Σ_j x_ij`` from threshold values of shape (B, n_thresholds)."""
        total = np.zeros((len(x), self.n + 1), dtype=np.intp)
        np.cumsum(x, axis=1, out=total[:, 1:])
        return total[:, self.start + self.n_levels - 1] - total[:, self.start]


def _difference_edges(thresholds: _Thresholds, edges, costs, second, k: int):
    """Ishikawa's edges for pairwise costs ``g_e(z_i − z_k)`` convex in the difference.

    ``costs[e, d + k − 1] = g_e(d)``, ``second`` its second differences ``c_m = g(m + 1) −
    2 g(m) + g(m − 1)`` (``m = −(k−2) … k−2``, clipped at 0 against rounding). The
    term ``F(a, b) = Σ_{j ≤ a} Σ_{l > b} c_{j−l}`` (an edge ``(k, l) → (i, j)`` of capacity
    ``c_{j−l}`` per pair of thresholds) has the mixed differences of ``g``; the remainder
    ``g(a − b) − F(a, b)`` is separable and returned as unary costs of both ends.
    """
    n_edges = len(edges)
    second = np.maximum(second, 0.0)
    e_index, m_index = np.nonzero(second > 0)
    m = m_index - (k - 2)
    # every threshold pair (j, l = j − m) with 1 <= j, l <= k − 1
    lo, hi = np.maximum(1, 1 + m), np.minimum(k - 1, k - 1 + m)
    counts = np.maximum(hi - lo + 1, 0)
    rep = np.repeat(np.arange(len(m)), counts)
    j = lo[rep] + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    l_ = j - m[rep]
    i_node, k_node = edges[e_index[rep], 0], edges[e_index[rep], 1]
    heads = thresholds.start[i_node] + j - 1
    tails = thresholds.start[k_node] + l_ - 1
    capacities = second[e_index[rep], m_index[rep]]
    # separable remainder: node i gets g(a) − F(a, 0), node k gets g(−b) − g(0)
    padded = np.zeros((n_edges, 2 * k + 1))
    padded[:, 2 : 2 * k - 1] = second  # padded[p] = c at m = p − k
    window = np.concatenate([np.zeros((n_edges, 1)), np.cumsum(padded, axis=1)], axis=1)
    jj = np.arange(1, k)
    row_sums = window[:, jj + k] - window[:, jj + 1]  # Σ_{l=1}^{k−1} c_{j−l}
    f_a0 = np.concatenate([np.zeros((n_edges, 1)), np.cumsum(row_sums, axis=1)], axis=1)
    zero = costs[:, k - 1 : k]
    unary_i = costs[:, k - 1 :] - f_a0
    unary_k = costs[:, k - 1 :: -1] - zero
    return tails, heads, capacities, unary_i, unary_k


def _whole_numbers(values, what: str) -> np.ndarray:
    """``values`` as an intp array, refusing values that are not whole numbers (a cast would
    truncate 0.5 to 0)."""
    try:
        array = np.asarray(values)
        numeric = array.dtype.kind in "iuf" or array.size == 0
    except ValueError:  # ragged nesting
        raise ValueError(
            f"{what} must be a flat sequence of whole numbers, got {values!r}"
        ) from None
    if not numeric or (array.dtype.kind == "f" and not np.all(np.mod(array, 1) == 0)):
        raise ValueError(f"{what} must hold whole numbers, got {np.asarray(values).tolist()}")
    return array.astype(np.intp)


@dataclass(frozen=True)
class GroupMaxPotentials:
    """Level models with group-maximum terms, the models of the continuous log-supermodular
    priors (Shpakova 2019, §4.5.2).

    Model ``b`` scores a labelling ``z`` (node ``i`` on levels ``0 … n_levels[i] − 1`` of values
    ``levels``) as ``Σ_i unary[b, i, z_i] − Σ_A d_A u_{max_{a∈A} z_a}``; all models share the
    levels and the groups. :class:`IshikawaSolver` maximises them exactly.

    Parameters
    ----------
    unary : ndarray of shape (B, n, max(n_levels)) or (B, sum(n_levels))
        Scores of the levels: padded (entries past a node's levels are ignored), or packed
        (node ``i``'s levels one after the other, ``n_levels[i]`` entries each).
    n_levels : ndarray of shape (n,)
        Levels of each node, at least 1.
    levels : ndarray of shape (max(n_levels),)
        Increasing level values, ``levels[0] = 0``.
    groups : sequence of int arrays
        Members of each group.
    weights : ndarray of shape (n_groups,)
        ``d_A >= 0``.
    """

    unary: np.ndarray
    n_levels: np.ndarray
    levels: np.ndarray
    groups: tuple
    weights: np.ndarray

    def __post_init__(self):
        unary = np.asarray(self.unary, dtype=float)
        n_levels = _whole_numbers(self.n_levels, "n_levels")
        levels = np.asarray(self.levels, dtype=float)
        weights = np.asarray(self.weights, dtype=float)
        if np.isnan(unary).any() or np.isposinf(unary).any():
            raise ValueError("unary holds NaN or +inf scores (-inf forbids a level)")
        if not np.isfinite(levels).all():
            raise ValueError("levels must be finite")
        if len(n_levels) and (n_levels.min() < 1 or n_levels.max() > len(levels)):
            raise ValueError(f"n_levels must lie in [1, {len(levels)}] (the levels given)")
        padded = unary.ndim == 3 and unary.shape[1:] == (len(n_levels), len(levels))
        if not (padded or (unary.ndim == 2 and unary.shape[1] == n_levels.sum())):
            raise ValueError(
                f"unary must have shape (B, {len(n_levels)}, {len(levels)}) (models, nodes, "
                f"levels) or (B, sum(n_levels)) (the levels packed), got {unary.shape}"
            )
        if len(levels) and (levels[0] != 0 or np.any(np.diff(levels) <= 0)):
            raise ValueError("levels must increase from levels[0] = 0")
        if weights.shape != (len(self.groups),) or not np.all((weights >= 0) & (weights < np.inf)):
            raise ValueError(
                f"weights must be {len(self.groups)} finite values >= 0 (one per group)"
            )
        groups = tuple(_whole_numbers(g, f"group {i}").ravel() for i, g in enumerate(self.groups))
        for g, members in enumerate(groups):
            if members.size == 0 or members.min() < 0 or members.max() >= len(n_levels):
                raise ValueError(
                    f"group {g} must hold node indices in [0, {len(n_levels)}), got "
                    f"{members.tolist()}"
                )
        for name, value in [
            ("unary", unary),
            ("n_levels", n_levels),
            ("levels", levels),
            ("groups", groups),
            ("weights", weights),
        ]:
            object.__setattr__(self, name, value)


class IshikawaSolver(Solver):
    """Exact MAP of multi-label models whose pairwise terms are convex in the label difference.

    Labels are ordered (``0 < 1 < … < K − 1``); every edge's score table must be a concave
    function of ``y_i − y_j`` (a cost convex in the difference: total variation, truncated-free
    quadratics, Potts with ``K = 2`` and a non-positive weight…). Minimum cuts on the Ishikawa
    graph — ``K − 1`` threshold nodes per node — solve the samples, many per max-flow (Ishikawa
    2003). It also maximises :class:`GroupMaxPotentials` (level models with group-maximum
    terms; by dynamic programming when the groups are singletons and pairs forming a forest,
    such as the Haar quad-tree). No marginals (use ``perturb_and_map`` for perturbed averages).
    """

    name = "ishikawa"
    capabilities = Capabilities(
        terms=PairwiseTerms.CONVEX_DIFFERENCE,
        group_max=True,
        map_quality="exact; costs convex in the label difference",
    )

    def map(self, potentials, clamp=None, n_jobs=None) -> np.ndarray:
        """MAP labelling of every sample.

        Parameters
        ----------
        potentials : Potentials or GroupMaxPotentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node (:class:`Potentials` only).
        n_jobs : int, optional
            Processes for the chunks of samples (results do not depend on it).

        Returns
        -------
        ndarray of shape (n_nodes,), or (B, n) for :class:`GroupMaxPotentials`
        """
        if isinstance(potentials, GroupMaxPotentials):
            if clamp is not None:
                raise ValueError("group-maximum models take no clamp")
            p = potentials
            model = GroupMaxLevels(p.n_levels, p.levels, p.groups, p.weights)
            return model.map(-p.unary, n_jobs=n_jobs)
        self._check(potentials, clamp)
        p = potentials
        if p.n_states == 1 or p.n_nodes == 0:
            return np.zeros(p.n_nodes, dtype=np.intp)
        # checks the tables (a non-convex one is refused before any cut), once for all chunks
        difference, second = _difference_costs(p)

        def job(chunk):
            nodes = slice(p.node_offsets[chunk.start], p.node_offsets[chunk.stop])
            edges = slice(p.edge_offsets[chunk.start], p.edge_offsets[chunk.stop])
            given = None if clamp is None else clamp[nodes]
            return (p.take(chunk), given, difference[edges], second[edges])

        # consecutive samples per max-flow, about CHUNK_NODES threshold nodes each
        sizes = p.lengths * (p.n_states - 1)
        labels = map_samples(_solve_pairwise, job, sizes, n_jobs, CHUNK_NODES)
        return np.concatenate(labels) if labels else np.zeros(0, np.intp)


def _solve_pairwise(p: Potentials, clamp, difference, second) -> np.ndarray:
    """The exact MAP of convex-difference potentials by one minimum cut (``difference``,
    ``second``: :func:`_difference_costs` of their edges)."""
    k = p.n_states
    costs = -(p.unary if clamp is None else finite_clamp_scores(p, clamp))
    thresholds = _Thresholds(np.full(p.n_nodes, k))
    tails, heads = thresholds.chain_edges()
    capacities = np.full(len(tails), np.inf)
    if p.n_edges:
        e_tails, e_heads, e_caps, unary_i, unary_k = _difference_edges(
            thresholds, p.edges, difference, second, k
        )
        costs = costs.copy()
        np.add.at(costs, p.edges[:, 0], unary_i)
        np.add.at(costs, p.edges[:, 1], unary_k)
        tails = np.concatenate([tails, e_tails])
        heads = np.concatenate([heads, e_heads])
        capacities = np.concatenate([capacities, e_caps])
    linear = thresholds.linear(costs.reshape(1, -1))[0]  # every node has k levels: packed
    x = min_cut(thresholds.n, linear, tails, heads, capacities)
    return thresholds.decode(x[None])[0]


def _difference_costs(p: Potentials):
    """Each edge's cost as a function of ``y_i − y_j``, shape (E, 2K − 1), and its second
    differences, shape (E, 2K − 3); checks that the scores depend on the difference only and
    that the cost is convex in it."""
    k = p.n_states
    tables = -p.edge_tables()
    a, b = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    difference = np.zeros((p.n_edges, 2 * k - 1))
    difference[:, (a - b).ravel() + k - 1] = tables.reshape(p.n_edges, k * k)
    scale = 1e-9 * (1.0 + np.abs(tables).max(initial=0.0))
    rebuilt = difference[:, (a - b) + k - 1]
    second = difference[:, 2:] - 2.0 * difference[:, 1:-1] + difference[:, :-2]
    bad = np.flatnonzero(np.abs(rebuilt - tables).max(axis=(1, 2)) > scale)
    if bad.size == 0:
        bad = np.flatnonzero(second.min(axis=1, initial=0.0) < -scale)
    if bad.size:
        raise ValueError(
            f"edge {int(bad[0])}: Ishikawa cuts need pairwise scores that are concave "
            "functions of the label difference y_i − y_j (costs convex in it); use "
            "solver='message_passing' for other multi-label models"
        )
    return difference, second


class GroupMaxLevels:
    """Many level models ``Σ_i c_i(z_i) + Σ_A d_A u_{max_{a∈A} z_a}`` solved exactly by cuts
    (by :class:`~.level_tree.LevelTree` when the groups form a forest).

    Node ``i`` has ``n_levels[i]`` levels with values ``u_0 = 0 < u_1 < …`` (``levels``, shared
    by all nodes; node ``i`` uses the first ``n_levels[i]``). With ``u_{max z} = Σ_j (u_j −
    u_{j−1}) OR_a [z_a ≥ j]``, each threshold layer holds a weighted OR of the group's
    thresholds: a linear term for one member, ``(x_a + x_b + |x_a − x_b|) / 2`` for two, an
    auxiliary node for more. The graph of one model is built once and repeated for every model
    of a call (nodes offset), ``CHUNK_NODES`` threshold nodes per max-flow.

    Parameters
    ----------
    n_levels, levels, groups, weights
        As in :class:`GroupMaxPotentials` (checked there).
    """

    def __init__(self, n_levels, levels, groups, weights):
        self.thresholds = t = _Thresholds(n_levels)
        self.levels = np.asarray(levels, dtype=float)
        steps = np.diff(levels)
        weights = np.asarray(weights, dtype=float)
        groups = [g for g, d in zip(groups, weights, strict=True) if d > 0]  # the others add 0
        weights = weights[weights > 0]
        # singletons (separable models) and pairs forming a forest (the Haar quad-tree): no
        # cut, so no graph, is needed
        self.tree = LevelTree.from_groups(n_levels, levels, groups, weights)
        if self.tree is not None:
            return
        sizes = np.array([len(g) for g in groups], dtype=np.intp)
        linear = np.zeros(t.n)
        tails, heads = t.chain_edges()
        tails, heads, caps = [tails], [heads], [np.full(len(tails), np.inf)]
        reverse = [np.zeros(len(tails[0]))]
        # singletons: d Σ_j step_j x_ij
        single = np.zeros(len(t.n_levels))
        for members, d in zip(groups, weights, strict=True):
            if len(members) == 1:
                single[members[0]] += d
        linear += single[t.owner] * steps[t.level - 1]
        # pairs, every layer at once
        pairs = np.array([g for g in groups if len(g) == 2], dtype=np.intp).reshape(-1, 2)
        pair_weights = weights[sizes == 2]
        if len(pairs):
            layer = np.arange(1, len(levels))
            a, b = pairs[:, :1], pairs[:, 1:]
            has_a, has_b = t.n_levels[a] > layer, t.n_levels[b] > layer
            w = pair_weights[:, None] * steps[None, :]
            ids_a, ids_b = t.start[a] + layer - 1, t.start[b] + layer - 1
            both = has_a & has_b
            np.add.at(linear, ids_a[has_a], np.where(both, w / 2.0, w)[has_a])
            np.add.at(linear, ids_b[has_b], np.where(both, w / 2.0, w)[has_b])
            tails.append(ids_a[both])
            heads.append(ids_b[both])
            caps.append(w[both] / 2.0)
            reverse.append(w[both] / 2.0)
        # larger groups: per layer an auxiliary node, cost w, forced to 1 by any member
        aux_linear = []
        for members, d in zip(groups, weights, strict=True):
            if len(members) < 3:
                continue
            members = np.asarray(members, dtype=np.intp)
            for j in range(1, int(t.n_levels[members].max())):
                ids = t.start[members[t.n_levels[members] > j]] + j - 1
                aux = t.n + len(aux_linear)
                aux_linear.append(d * steps[j - 1])
                tails.append(np.full(len(ids), aux))
                heads.append(ids)
                caps.append(np.full(len(ids), np.inf))
                reverse.append(np.zeros(len(ids)))
        self.n_nodes = t.n + len(aux_linear)
        self.linear = np.concatenate([linear, aux_linear])
        self.tails = np.concatenate(tails).astype(np.intp)
        self.heads = np.concatenate(heads).astype(np.intp)
        self.capacities = np.concatenate(caps)
        self.reverse = np.concatenate(reverse)

    def map(self, costs: np.ndarray, n_jobs=None) -> np.ndarray:
        """Minimisers of every model.

        Parameters
        ----------
        costs : ndarray of shape (B, n, max(n_levels)) or (B, sum(n_levels))
            Unary costs, padded (entries past a node's levels are ignored) or packed.
        n_jobs : int, optional
            Processes for the chunks of models (results do not depend on it).

        Returns
        -------
        ndarray of shape (B, n) of int
        """
        t = self.thresholds
        costs = t.packed(costs)
        if self.tree is not None:
            return self.tree.map(costs)
        if t.n == 0:  # every node has one level
            return np.zeros((len(costs), len(t.n_levels)), np.intp)
        linear = t.linear(costs)  # (B, n_thresholds)
        per_chunk = max(1, CHUNK_NODES // max(self.n_nodes, 1))
        jobs = [(linear[b : b + per_chunk],) for b in range(0, len(costs), per_chunk)]
        parts = map_jobs(self._solve_chunk, jobs, n_jobs, [len(j[0]) * self.n_nodes for j in jobs])
        return np.concatenate(parts) if parts else np.zeros((0, len(costs[0])), np.intp)

    def _solve_chunk(self, linear: np.ndarray) -> np.ndarray:
        t, b = self.thresholds, len(linear)
        offsets = (np.arange(b) * self.n_nodes)[:, None]
        coefficients = np.empty((b, self.n_nodes))
        coefficients[:, : t.n] = linear + self.linear[: t.n]
        coefficients[:, t.n :] = self.linear[t.n :]
        x = min_cut(
            b * self.n_nodes,
            coefficients.ravel(),
            (self.tails + offsets).ravel(),
            (self.heads + offsets).ravel(),
            np.tile(self.capacities, b),
            np.tile(self.reverse, b),
        )
        return t.decode(x.reshape(b, self.n_nodes)[:, : t.n])
