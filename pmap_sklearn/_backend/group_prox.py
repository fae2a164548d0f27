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
"""

from __future__ import annotations

import numpy as np

from .mincut import min_cut


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
