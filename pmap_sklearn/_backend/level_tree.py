"""Exact MAP of group-maximum level models whose groups form a forest, by dynamic programming.

When every group is a singleton or a pair and the pairs form a forest (the Haar quad-tree, a
chain), ``min_z Σ_i c_i(z_i) + Σ_i s_i u_{z_i} + Σ_{(i, p)} d_ip u_{max(z_i, z_p)}`` is a
min-sum problem on a tree, solved exactly from the leaves up (Pearl 1988; the Viterbi
algorithm on a tree). The group maximum makes each message cost O(levels) instead of
O(levels²): a child ``i`` below a parent at level ``z_p`` either stays at or below it (the pair
costs ``d u_{z_p}``, whatever ``z_i``) or goes above it (the pair costs ``d u_{z_i}``), so

``m_{i→p}(z_p) = min( min_{z ≤ z_p} b_i(z) + d u_{z_p},  min_{z > z_p} b_i(z) + d u_z )``,

a running minimum from the bottom and one from the top. Every pass is vectorised over the
models; the same minimisers as Ishikawa's cut (:class:`~.ishikawa.GroupMaxLevels`) without a
max-flow.
"""

from __future__ import annotations

import numpy as np

from .group_prox import _as_forest, leaves_first

#: Beliefs per block of :meth:`LevelTree.map` (models × Σ_i n_levels[i]): bounds its memory.
BLOCK_ENTRIES = 1 << 22


def packed_layout(n_levels):
    """Where each node's levels lie in packed scores (node i's ``n_levels[i]`` levels one after
    the other): ``start`` (n,), and ``owner`` / ``level`` of every entry (Σ n_levels,)."""
    n_levels = np.asarray(n_levels, dtype=np.intp)
    start = (np.cumsum(n_levels) - n_levels).astype(np.intp)
    owner = np.repeat(np.arange(len(n_levels)), n_levels)
    return start, owner, np.arange(len(owner)) - start[owner]


def forest_shaped(n: int, groups, weights) -> bool:
    """Whether the groups of positive weight are singletons and pairs forming a forest (the
    models :class:`LevelTree` solves)."""
    kept = [g for g, d in zip(groups, weights, strict=True) if d > 0]
    return _as_forest(n, kept, np.ones(len(kept))) is not None


class LevelTree:
    """The forest of a level model with singleton and pair group maxima.

    Parameters
    ----------
    n_levels : int ndarray of shape (n,)
    levels : ndarray of shape (max(n_levels),)
        Increasing level values ``u`` shared by the nodes.
    parent : int ndarray of shape (n,)
        ``parent[i]`` in the forest, -1 for a root.
    single : ndarray of shape (n,)
        ``s_i``: weight of node i's own maximum (its singleton groups).
    pair : ndarray of shape (n,)
        ``d`` of the pair (i, parent[i]) (ignored at roots).
    """

    def __init__(self, n_levels, levels, parent, single, pair):
        self.n_levels = np.asarray(n_levels, dtype=np.intp)
        self.levels = np.asarray(levels, dtype=float)
        self.parent = np.asarray(parent, dtype=np.intp)
        self.single = np.asarray(single, dtype=float)
        self.pair = np.asarray(pair, dtype=float)
        self.order = leaves_first(self.parent)
        self.start = packed_layout(self.n_levels)[0]

    @classmethod
    def from_groups(cls, n_levels, levels, groups, weights):
        """The forest of the groups of positive ``weights``, or None if they are not singletons
        and pairs forming a forest."""
        kept = np.asarray(weights, dtype=float) > 0
        groups = [g for g, keep in zip(groups, kept, strict=True) if keep]
        forest = _as_forest(len(n_levels), groups, np.asarray(weights, dtype=float)[kept])
        if forest is None:
            return None
        parent, linear, coupling = forest
        # _as_forest splits max(a, b) = (a + b)/2 + |a - b|/2: undo it
        children = np.flatnonzero(parent >= 0)
        half_pairs = coupling.copy()
        np.add.at(half_pairs, parent[children], coupling[children])
        return cls(n_levels, levels, parent, linear - half_pairs, 2.0 * coupling)

    def map(self, costs: np.ndarray) -> np.ndarray:
        """Minimisers of ``Σ_i costs[b, i, z_i] + Σ_i s_i u_{z_i} + Σ d u_{max(z_i, z_p)}``.

        Parameters
        ----------
        costs : ndarray of shape (B, sum(n_levels))
            Unary costs, packed: node i's levels one after the other.

        Returns
        -------
        int ndarray of shape (B, n)
        """
        per_block = max(1, BLOCK_ENTRIES // max(int(self.n_levels.sum()), 1))
        parts = [self._map_block(costs[b : b + per_block]) for b in range(0, len(costs), per_block)]
        return np.concatenate(parts) if parts else np.zeros((0, len(self.parent)), np.intp)

    def _map_block(self, costs: np.ndarray) -> np.ndarray:
        n_models = len(costs)
        u, counts, parent, start = self.levels, self.n_levels, self.parent, self.start
        belief = [None] * len(parent)  # b_i over node i's own levels, (B, n_levels[i])
        for i in self.order:
            belief_i = costs[:, start[i] : start[i] + counts[i]] + self.single[i] * u[: counts[i]]
            if belief[i] is not None:  # the children's messages, summed
                belief_i += belief[i]
            belief[i] = belief_i
            p = parent[i]
            if p < 0:
                continue
            message = self._message(belief_i, self.pair[i], counts[p])
            if belief[p] is None:
                belief[p] = message
            else:
                belief[p] += message
        z = np.zeros((n_models, len(parent)), np.intp)
        for i in self.order[::-1]:
            p = parent[i]
            if p < 0:
                z[:, i] = np.argmin(belief[i], axis=1)
                continue
            # b_i(z) + d u_{max(z, z_p)}: the pair's cost given the parent's level
            above = np.maximum(np.arange(counts[i]), z[:, p, None])
            z[:, i] = np.argmin(belief[i] + self.pair[i] * u[above], axis=1)
            belief[i] = None
        return z

    def _message(self, belief: np.ndarray, d: float, n_parent: int) -> np.ndarray:
        """``m(z_p) = min(min_{z ≤ z_p} b(z) + d u_{z_p}, min_{z > z_p} b(z) + d u_z)`` for
        ``z_p`` in the parent's levels."""
        n_models, n_own = belief.shape
        u = self.levels
        below = np.empty((n_models, n_parent))
        reach = min(n_own, n_parent)
        np.minimum.accumulate(belief[:, :reach], axis=1, out=below[:, :reach])
        if n_parent > reach:  # parent levels above all of the child's: every z is below
            below[:, reach:] = belief.min(axis=1)[:, None]
        below += d * u[:n_parent]
        # min over z > z_p of b(z) + d u_z: a running minimum from the top, shifted by one
        raised = belief + d * u[:n_own]
        top = np.minimum.accumulate(raised[:, ::-1], axis=1)[:, ::-1]
        shift = min(n_own - 1, n_parent)
        np.minimum(below[:, :shift], top[:, 1 : shift + 1], out=below[:, :shift])
        return below
