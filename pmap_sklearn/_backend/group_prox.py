"""Exact proximal operator of a sum of group maxima, by divide and conquer on minimum cuts.

``prox(z) = argmin_w ½‖w − z‖² + Σ_A d_A max_{a∈A} w_a`` (``d_A >= 0``): ``f(w) = Σ_A d_A
max_A w_a`` is the Lovász extension of the set-cover function ``F(S) = Σ_{A ∩ S ≠ ∅} d_A``, and
the level sets ``{w > t}`` of the solution are nested minimisers of ``F(S) + Σ_{i∈S} (t − z_i)``.
Groenevelt's (1991) divide and conquer (Bach 2013, §9.1) guesses one common value ``c = (z(V) −
F(V)) / |V|``, finds a minimiser ``S`` of ``F(S) + Σ_{i∈S} (c − z_i)`` by one cut, and either
stops (the minimum is 0: every coordinate equals ``c``) or recurses on ``S`` (the restriction of
F, the coordinates above ``c``) and on ``V \\ S`` (the contraction ``F(S ∪ ·) − F(S)``: the groups
that meet ``S`` drop out). Restrictions and contractions of a set-cover function are set-cover
functions, so every sub-problem is again a cut; all sub-problems of a round, over every signal of
the batch, share one max-flow.

When every group is a singleton or a pair and the pairs form a forest (the Haar quad-tree, a
chain), ``max(w_a, w_b) = (w_a + w_b)/2 + |w_a − w_b|/2`` makes the problem a linear term plus
a total variation on a tree, solved exactly without cuts by :func:`prox_tree` (dynamic
programming on the derivatives, O(n log n) per signal, vectorised over the signals).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from .mincut import min_cut

#: Signals per block of :func:`prox_tree` (its work arrays hold ~Σ subtree sizes per signal).
TREE_ROWS = 1 << 14


def prox_group_max(z: np.ndarray, groups, weights) -> np.ndarray:
    """Exact ``argmin_w ½‖w − z‖² + Σ_A d_A max_{a∈A} w_a`` of every row of ``z``.

    Parameters
    ----------
    z : ndarray of shape (B, n)
    groups : list of int arrays
        The members of each group.
    weights : ndarray of shape (n_groups,)
        ``d_A >= 0``.

    Returns
    -------
    ndarray of shape (B, n)
    """
    z = np.asarray(z, dtype=float)
    n_rows, n = z.shape
    weights = np.asarray(weights, dtype=float)
    forest = _as_forest(n, groups, weights)
    if forest is not None:
        parent, linear, coupling = forest
        return np.concatenate(
            [
                prox_tree(z[i : i + TREE_ROWS] - linear, parent, coupling)
                for i in range(0, max(n_rows, 1), TREE_ROWS)
            ]
        )[:n_rows]
    keep = [g for g, d in enumerate(weights) if d > 0]
    sizes = np.array([len(groups[g]) for g in keep], dtype=np.intp)
    member = np.concatenate([np.asarray(groups[g], np.intp) for g in keep] or [[]]).astype(np.intp)
    group_of = np.repeat(np.arange(len(keep)), sizes)
    d = weights[keep]
    n_groups = len(keep)
    rows = np.arange(n_rows)[:, None]
    component = np.repeat(np.arange(n_rows), n).reshape(n_rows, n)
    active = np.ones((n_rows, n), bool)
    alive = np.ones((n_rows, len(member)), bool)  # incidences still in the sub-problems
    value = np.zeros((n_rows, n))
    tolerance = 1e-12 * (1.0 + np.abs(z).max(initial=0.0) + d.sum()) * max(n, 1)
    while active.any():
        ids, comp = np.unique(component[active], return_inverse=True)
        flat = np.flatnonzero(active.ravel())
        node_comp = np.full(n_rows * n, -1)
        node_comp[flat] = comp
        # groups still alive, each inside one component
        on = alive & active[rows, member]
        incidence_rows, incidence = np.nonzero(on)
        inc_node = incidence_rows * n + member[incidence]
        inc_group = incidence_rows * n_groups + group_of[incidence]
        count = np.bincount(inc_group, minlength=n_rows * n_groups)
        live = np.flatnonzero(count)
        group_comp = np.zeros(n_rows * n_groups, np.intp)
        group_comp[inc_group] = node_comp[inc_node]
        live_d = d[live % n_groups] if n_groups else np.zeros(0)
        size = np.bincount(comp)
        total = np.bincount(comp, z.ravel()[flat])
        cover = np.bincount(group_comp[live], live_d, minlength=len(ids))
        level = (total - cover) / size
        # the cut: Σ (c − z_i) x_i + Σ_A d_A OR(x_A) over the active nodes
        local = np.full(n_rows * n, -1)
        local[flat] = np.arange(len(flat))
        gain = level[comp] - z.ravel()[flat]
        linear = gain.copy()
        tails, heads, caps, rev = [], [], [], []
        inc_local = local[inc_node]
        inc_count = count[inc_group]
        single = inc_count == 1
        np.add.at(linear, inc_local[single], d[group_of[incidence[single]]])
        pair = inc_count == 2
        if pair.any():
            order = np.argsort(inc_group[pair], kind="stable")
            ends = inc_local[pair][order].reshape(-1, 2)
            half = d[group_of[incidence[pair][order][::2]]] / 2.0
            np.add.at(linear, ends.ravel(), np.repeat(half, 2))
            tails.append(ends[:, 0])
            heads.append(ends[:, 1])
            caps.append(half)
            rev.append(half)
        big = inc_count >= 3
        n_aux = 0
        if big.any():
            aux_groups, aux_index = np.unique(inc_group[big], return_inverse=True)
            n_aux = len(aux_groups)
            linear = np.concatenate([linear, d[aux_groups % n_groups]])
            tails.append(len(flat) + aux_index)
            heads.append(inc_local[big])
            caps.append(np.full(big.sum(), np.inf))
            rev.append(np.zeros(big.sum()))
        x = min_cut(
            len(flat) + n_aux,
            linear,
            np.concatenate(tails or [np.zeros(0, np.intp)]),
            np.concatenate(heads or [np.zeros(0, np.intp)]),
            np.concatenate(caps or [np.zeros(0)]),
            np.concatenate(rev or [np.zeros(0)]),
        )[: len(flat)]
        # each component's minimum: split where it is negative, else all coordinates = c
        covered = np.bincount(inc_group, x[inc_local], minlength=n_rows * n_groups) > 0
        energy = np.bincount(comp, gain * x, minlength=len(ids))
        energy += np.bincount(group_comp[live], live_d * covered[live], minlength=len(ids))
        split = energy < -tolerance
        done = ~split[comp]
        value.ravel()[flat[done]] = level[comp[done]]
        active.ravel()[flat[done]] = False
        # split components: the top part gets a new id; groups meeting it leave the bottom part
        top = np.zeros(n_rows * n, bool)
        top[flat] = x.astype(bool) & ~done
        component.ravel()[flat] = comp + len(ids) * top[flat]
        drop = covered[inc_group] & ~top[inc_node] & split[node_comp[inc_node]]
        alive[incidence_rows[drop], incidence[drop]] = False
    return value


def _as_forest(n: int, groups, weights):
    """``(parent, linear, coupling)`` if the groups are singletons and pairs forming a forest.

    ``Σ_A d_A max_A w = Σ_i c_i w_i + Σ_{(i, parent i)} λ_i |w_i − w_parent(i)|`` with
    ``c_i = d_{i} + ½ Σ_{pairs ∋ i} d_pair`` and ``λ_i = ½ d_pair``; None otherwise.
    """
    linear = np.zeros(n)
    pairs, pair_weights = [], []
    for members, d in zip(groups, weights, strict=True):
        members = np.asarray(members, np.intp)
        if len(members) == 1:
            linear[members[0]] += d
        elif len(members) == 2 and members[0] != members[1]:
            pairs.append(members)
            pair_weights.append(d)
        else:
            return None
    if not pairs:
        return np.full(n, -1), linear, np.zeros(n)
    pairs, pair_weights = np.array(pairs), np.array(pair_weights)
    graph = sparse.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    n_components = csgraph.connected_components(graph, directed=False)[0]
    if len(pairs) != n - n_components:  # a cycle (or a repeated pair): not a forest
        return None
    np.add.at(linear, pairs.ravel(), np.repeat(pair_weights / 2.0, 2))
    weight_of = sparse.coo_matrix((pair_weights, (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    weight_of = (weight_of + weight_of.T).tocsr()
    parent = np.full(n, -1)
    seen = np.zeros(n, bool)
    for root in range(n):
        if not seen[root]:
            order, predecessors = csgraph.breadth_first_order(
                weight_of, root, directed=False, return_predecessors=True
            )
            seen[order] = True
            parent[order[1:]] = predecessors[order[1:]]
    children = np.flatnonzero(parent >= 0)
    coupling = np.zeros(n)
    coupling[children] = np.asarray(weight_of[children, parent[children]]).ravel() / 2.0
    return parent, linear, coupling


def leaves_first(parent: np.ndarray) -> np.ndarray:
    """The nodes of a forest (``parent[i]``, -1 for a root) by decreasing depth: every node
    comes after all of its descendants."""
    depth = np.zeros(len(parent), np.intp)
    for i in range(len(parent)):
        j = i
        while parent[j] >= 0:
            depth[i] += 1
            j = parent[j]
    return np.argsort(-depth, kind="stable")


def prox_tree(z: np.ndarray, parent: np.ndarray, coupling: np.ndarray) -> np.ndarray:
    """Exact ``argmin_w ½‖w − z‖² + Σ_i λ_i |w_i − w_parent(i)|`` on a forest, every row.

    Dynamic programming from the leaves: let ``M_i(w)`` be the optimal cost of node i's subtree
    with ``w_i = w``. Then ``M_i'(w) = w − z_i + Σ_children M_c'(clip(w, a_c, b_c))`` where
    ``M_c'(a_c) = −λ_c`` and ``M_c'(b_c) = λ_c`` (the derivative of the infimal convolution of
    ``M_c`` with ``λ_c |·|`` is ``M_c'`` clipped to ``[−λ_c, λ_c]``). Unrolled, ``M_i'(w) = Σ_{j in
    subtree} (clip(w, L_ij, H_ij) − z_j)``, nested clips being one clip, so each equation
    ``M_i'(w) = t`` is solved exactly by sorting the ``2 |subtree|`` breakpoints. Going down,
    ``w_c = clip(w_parent, a_c, b_c)``.

    Parameters
    ----------
    z : ndarray of shape (B, n)
    parent : int ndarray of shape (n,)
        ``parent[i]``, or -1 for a root.
    coupling : ndarray of shape (n,)
        ``λ_i >= 0`` of the edge to the parent (ignored at roots).

    Returns
    -------
    ndarray of shape (B, n)
    """
    n_rows, n = z.shape
    order = leaves_first(parent)
    # each node's proper descendants, as one block of columns per child: size[i] descendants
    size = np.zeros(n, np.intp)
    for i in order:
        if parent[i] >= 0:
            size[parent[i]] += size[i] + 1
    column = np.zeros(n, np.intp)  # where child i's block starts in its parent's arrays
    filled = np.zeros(n, np.intp)
    for i in order:
        if parent[i] >= 0:
            column[i] = filled[parent[i]]
            filled[parent[i]] += size[i] + 1
    # the clip intervals of every descendant seen from the node, and Σ z over them
    low = {i: np.empty((n_rows, size[i])) for i in range(n) if size[i]}
    high = {i: np.empty((n_rows, size[i])) for i in range(n) if size[i]}
    z_below = np.zeros((n_rows, n))
    own_low, own_high = np.empty((n_rows, n)), np.empty((n_rows, n))
    w = np.empty((n_rows, n))
    empty = np.empty((n_rows, 0))
    for i in order:
        lo, hi = low.pop(i, empty), high.pop(i, empty)
        lam = coupling[i] if parent[i] >= 0 else 0.0
        targets = np.broadcast_to([-lam, lam], (n_rows, 2))
        a, b = _solve_clipped_sum(z[:, i], z_below[:, i], lo, hi, targets).T
        own_low[:, i], own_high[:, i] = a, b
        if parent[i] < 0:
            w[:, i] = a  # a = b: the zero of M_i'
            continue
        p, first = parent[i], column[i]
        z_below[:, p] += z[:, i] + z_below[:, i]
        # seen from the parent: node i's interval, and its descendants' clipped to it
        low[p][:, first], high[p][:, first] = a, b
        block = slice(first + 1, first + 1 + size[i])
        np.clip(a[:, None], lo, hi, out=low[p][:, block])
        np.clip(b[:, None], lo, hi, out=high[p][:, block])
    for i in order[::-1]:
        if parent[i] >= 0:
            w[:, i] = np.clip(w[:, parent[i]], own_low[:, i], own_high[:, i])
    return w


def _solve_clipped_sum(z_own, z_below, low, high, targets):
    """Solve ``w − z_own + Σ_j (clip(w, low_j, high_j) − z_j) = t`` for every target t, where
    ``z_below = Σ_j z_j``.

    Shapes: z_own / z_below (B,), low / high (B, m), targets (B, T); returns (B, T).
    """
    base = low.sum(axis=1) - z_below - z_own  # the value is w + base left of all
    m = low.shape[1]
    if m == 0:
        return targets - base[:, None]
    points = np.concatenate([low, high], axis=1)
    order = np.argsort(points, axis=1)
    points = np.take_along_axis(points, order, axis=1)
    # the slope on [points_k, points_k+1] (1 after the last): 1 + lows passed − highs passed
    slope = np.cumsum(order < m, axis=1, dtype=np.int32)
    slope = (2 * slope - np.arange(2 * m, dtype=np.int32)).astype(float)
    values = np.empty_like(points)
    values[:, 0] = 0.0
    np.cumsum(slope[:, :-1] * np.diff(points, axis=1), axis=1, out=values[:, 1:])
    values += points[:, :1] + base[:, None]
    k = (values[:, None, :] <= targets[:, :, None]).sum(axis=2)  # (B, T) segment index + 1
    rows = np.arange(len(points))[:, None]
    left = np.maximum(k - 1, 0)
    # slope >= 1 on every segment of positive length (a tie may count a high before its low)
    slope = np.maximum(slope[rows, left], 1.0)
    on_segment = points[rows, left] + (targets - values[rows, left]) / slope
    return np.where(k == 0, targets - base[:, None], on_segment)
