"""Exact binary MAP by s-t minimum cut (PyMaxflow): :class:`GraphCutSolver`.

The score ``f(y) = sum_d u_d(y_d) + sum_(i,j) w_ij [y_i != y_j]`` with ``w_ij <= 0`` is
supermodular, so ``argmax f`` is the minimum cut of the energy ``-f`` (Greig et al. 1989;
Kolmogorov & Zabih 2004); any binary pairwise table with ``T00 + T11 >= T01 + T10`` is brought
to that form first (:meth:`Potentials.as_potts`). Label 1 is the sink side:
a node labelled 1 cuts its source edge, so the cost of label 1 relative to label 0 is
``u_d(0) − u_d(1)`` and an edge's capacity is ``−w_ij``. The graphs are built by
:mod:`~pmap_sklearn._backend.mincut` (grid fast path on images, one ``add_edges`` call
otherwise).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._parallel import CHUNK_NODES, map_jobs
from .._validation import NonFiniteError
from .capabilities import Capabilities, PairwiseKind, PairwiseTerms
from .mincut import (
    MAX_CAPACITY,
    add_clamp,
    general_graph,
    grid_graph,
    hard_capacity,
    segments,
    terminal_capacities,
)
from .potentials import (
    DENSE_BLOCK,
    GridLayout,
    Potentials,
    Statistics,
    add_sample_differences,
    incidence,
)
from .solver import ClampedSolution, Solver, solved_queries


class GraphCutSolver(Solver):
    """Exact MAP of binary models with attractive pairwise terms by s-t minimum cut.

    Image samples (potentials with a grid layout) go through PyMaxflow's grid fast path, other
    graphs through one ``add_edges`` call. Single-node clamps are solved by dynamic graph cuts:
    the residual graph of the unclamped solve is reused, each clamp is a change of one terminal
    edge (undone before the next) and ``maxflow(reuse_trees=True)`` restarts from the marked
    node (Kohli & Torr 2007). Samples are solved one by one, over ``n_jobs`` processes.
    """

    name = "graph_cut"
    capabilities = Capabilities(
        max_states=2, terms=PairwiseTerms.ATTRACTIVE, map_quality="exact; binary attractive models"
    )

    def _states_message(self, n_states):
        return (
            f"graph cuts need K = 2 labels and attractive pairwise terms; got K = {n_states}. "
            "Use solver='message_passing' (e.g. with EpsilonCRF) for multi-label loopy graphs, "
            "or solver='brute_force' for tiny models"
        )

    # The checks of the pairwise terms and capacities come with their Potts form
    # (_attractive_potts), once per call of map / _incremental_clamped_maps.

    def map(self, potentials, clamp=None, n_jobs=None):
        self._check(potentials, clamp)
        if potentials.n_states == 1 or potentials.n_nodes == 0:  # nothing to choose
            return np.zeros(potentials.n_nodes, dtype=np.intp)
        potts = _attractive_potts(potentials)
        jobs = [
            (
                potts.sample(i),
                None if clamp is None else clamp[potts.node_offsets[i] : potts.node_offsets[i + 1]],
            )
            for i in range(potts.n_samples)
        ]
        solved = map_jobs(_solve, jobs, n_jobs, work=potts.lengths)
        return np.concatenate([labels.ravel() for labels in solved])

    # Each sample's graph is built once for all rounds, its pairwise edges only: a round copies
    # it and adds the terminal edges of its perturbed unary scores (Potts models without
    # clamps; others round by round).
    def perturbed_rounds(self, potentials, perturbations, clamp=None):
        p = potentials
        plain = p.pairwise_kind is PairwiseKind.POTTS and p.n_states == 2 and p.n_nodes
        if clamp is not None or not plain:
            return super().perturbed_rounds(p, perturbations, clamp)
        self._check(p)
        potts = _attractive_potts(p)  # the pairwise terms; capacities below, for each round
        unary = p.unary[None] + perturbations  # what add_unary gives, every round at once
        cost_of_one = unary[..., 0] - unary[..., 1]  # what _build takes from them
        _check_capacities(potts, np.abs(cost_of_one))
        labels = np.empty(perturbations.shape[:2], dtype=np.intp)
        for i in range(p.n_samples):
            nodes = slice(p.node_offsets[i], p.node_offsets[i + 1])
            sample = potts.sample(i)
            if not _every_node_has_an_edge(sample):
                for round_, scores in enumerate(unary[:, nodes]):
                    labels[round_, nodes] = _solve(replace(sample, unary=scores))
                continue
            template, ids = _build(replace(sample, unary=np.zeros_like(sample.unary)))
            for round_, cost in enumerate(cost_of_one[:, nodes]):
                graph = template.copy()
                graph.add_grid_tedges(ids, *terminal_capacities(cost.reshape(ids.shape)))
                graph.maxflow()
                labels[round_, nodes] = segments(graph, ids).ravel()
        return labels

    def _incremental_clamped_maps(self, potentials, nodes, labels, weights, skip, n_jobs):
        """Dynamic graph cuts, sample by sample (over ``n_jobs`` processes)."""
        p = potentials
        potts = _attractive_potts(p)
        bounds = np.searchsorted(p.node_sample[nodes], np.arange(p.n_samples + 1))
        jobs = [
            (
                potts.sample(i),
                p.sample(i),
                nodes[a:b] - p.node_offsets[i],
                labels[a:b],
                weights[a:b],
                skip,
            )
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
        ]
        # A sample's work: its unclamped cut plus one re-solve (and read-out) per query.
        work = p.lengths * (1 + np.diff(bounds))
        results = map_jobs(_dynamic_clamped_maps, jobs, n_jobs, work=work)
        return ClampedSolution(
            np.concatenate([r.map_labels for r in results]),
            np.concatenate([r.solved for r in results]),
            Statistics.concatenate([r.statistics for r in results], p.pairwise_kind),
        )


def _attractive_potts(potentials: Potentials) -> Potentials:
    """The Potts form of binary potentials, or a ValueError if a term is repulsive or the
    capacities are beyond double precision. Weights above 0 by rounding only (the
    reparametrisation of a table on the boundary) become 0."""
    potts, _ = potentials.as_potts()
    _check_capacities(potts, np.abs(potts.unary[:, 1] - potts.unary[:, 0]))
    if potts.pairwise.size:
        tolerance = 1e-12 * (1.0 + np.abs(potentials.pairwise).max())
        if potts.pairwise.max() > tolerance:
            edge = int(np.argmax(potts.pairwise))
            raise ValueError(
                "graph cuts need attractive pairwise terms (Potts weights <= 0, i.e. "
                f"T00 + T11 >= T01 + T10); edge {edge} of sample "
                f"{potentials.edge_sample[edge]} has {potts.pairwise[edge]:.3g}"
            )
        if potts.pairwise.max() > 0:
            potts = replace(potts, pairwise=np.minimum(potts.pairwise, 0.0))
    return potts


def _check_capacities(potts: Potentials, gains) -> None:
    """A NonFiniteError naming the first sample whose capacities — unary ``gains`` (n_nodes,)
    or one row per round (R, n_nodes), and the Potts weights — sum beyond ``MAX_CAPACITY``."""
    gains = np.atleast_2d(gains)
    n_rounds, n_samples = len(gains), potts.n_samples
    with np.errstate(over="ignore", invalid="ignore"):
        bins = np.arange(n_rounds)[:, None] * n_samples + potts.node_sample  # (round, sample)
        total = np.bincount(bins.ravel(), gains.ravel(), minlength=n_rounds * n_samples)
        total = total.reshape(n_rounds, n_samples).max(axis=0)
        total += np.bincount(potts.edge_sample, np.abs(potts.pairwise), minlength=n_samples)
    too_large = ~(total < MAX_CAPACITY)
    if too_large.any():
        sample = int(np.flatnonzero(too_large)[0])
        raise NonFiniteError(
            f"sample {sample}: its scores are too large for exact graph cuts (the capacities sum "
            f"to {total[sample]:.3g}, beyond double precision): scale the features (e.g. with "
            "NodeTransformer(StandardScaler())) or regularise more"
        )


def _every_node_has_an_edge(sample: Potentials) -> bool:
    """Whether PyMaxflow's ``Graph.copy`` can copy the graph of one sample: it moves every
    node's pointer to its first arc to the copy's arcs, a node without any arc included (a
    null pointer made invalid: the copy's max-flow crashes)."""
    return bool(sample.n_edges) and bool(
        np.bincount(sample.edges.ravel(), minlength=sample.n_nodes).all()
    )


def _build(potts: Potentials, clamp=None):
    """The graph of one sample's Potts potentials: grid fast path or general graph."""
    cost_of_one = potts.unary[:, 0] - potts.unary[:, 1]
    grid = potts.layout
    if not isinstance(grid, GridLayout):
        return general_graph(
            cost_of_one, potts.edges[:, 0], potts.edges[:, 1], -potts.pairwise, clamp=clamp
        )
    (height, width), offsets = grid.shapes[0], grid.offsets
    # The capacity of the edge from pixel p in direction k sits at [k, p] of the grid.
    place = grid.directions * (height * width) + potts.edges[:, 0]
    capacities = np.bincount(place, -potts.pairwise, minlength=len(offsets) * height * width)
    return grid_graph(
        cost_of_one.reshape(height, width),
        offsets,
        capacities.reshape(-1, height, width),
        None if clamp is None else clamp.reshape(height, width),
    )


def _solve(potts: Potentials, clamp=None) -> np.ndarray:
    """MAP labelling of one sample (flat)."""
    graph, ids = _build(potts, clamp)
    graph.maxflow()
    return segments(graph, ids).ravel()


def _dynamic_clamped_maps(potts, potentials, nodes, labels, weights, skip_agreeing):
    """:meth:`GraphCutSolver.clamped_maps` of one sample by dynamic graph cuts (``potts``: its
    checked Potts form; the statistics are in the kind of ``potentials``).

    The unclamped problem is solved once; each clamp (node ``nodes[q]`` forced to
    ``labels[q]``) is a change of one terminal edge by ``±big``, applied to the residual graph
    together with the undo of the previous clamp, and re-solved with
    ``maxflow(reuse_trees=True)`` after marking the changed nodes. The clamped labellings are
    folded into the statistics in chunks of at most ``CHUNK_NODES`` labels.
    """
    graph, ids = _build(potts)
    graph.maxflow()
    map_labels = segments(graph, ids).ravel()
    solved = solved_queries(map_labels, nodes, labels, skip_agreeing)
    nodes, labels, weights = nodes[solved], labels[solved], weights[solved]
    statistics = Statistics.zeros(potentials)
    flat_ids = ids.ravel().tolist()
    big = hard_capacity(potts.unary[:, 0] - potts.unary[:, 1], potts.pairwise)
    per_chunk = max(1, CHUNK_NODES // max(len(map_labels), 1))
    block = min(per_chunk, len(nodes)) * (potentials.n_nodes + potentials.n_edges)
    touching = None if block <= DENSE_BLOCK else incidence(potentials.edges, potentials.n_nodes)
    buffer = np.empty((min(per_chunk, len(nodes)), len(map_labels)), dtype=np.intp)
    previous = None
    for start in range(0, len(nodes), per_chunk):
        chunk = slice(start, min(start + per_chunk, len(nodes)))
        for row, (node, label) in enumerate(
            zip(nodes[chunk].tolist(), labels[chunk].tolist(), strict=True)
        ):
            if previous is not None:  # undo the previous clamp
                add_clamp(graph, flat_ids[previous[0]], previous[1], -big)
            add_clamp(graph, flat_ids[node], label, big)
            graph.maxflow(reuse_trees=True)
            buffer[row] = segments(graph, ids).ravel()
            previous = (node, label)
        count = chunk.stop - chunk.start
        add_sample_differences(
            statistics, potentials, map_labels, buffer[:count], weights[chunk], touching
        )
    return ClampedSolution(map_labels, solved, statistics)
