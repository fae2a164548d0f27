"""Exact binary MAP by s-t minimum cut (PyMaxflow).

The score ``f(y) = sum_d u_d(y_d) + sum_(i,j) w_ij [y_i != y_j]`` with ``w_ij <= 0`` (SPEC §1) is
supermodular, so ``argmax f`` is the minimum cut of the energy ``-f``. Label 1 is the sink side:
a node labelled 1 cuts its source edge, so the source capacity is the cost of label 1 relative
to label 0 and the sink capacity the cost of label 0. Graphs are built with the vectorised
PyMaxflow calls (``add_grid_*`` on grids, ``add_edges`` on general graphs), never a Python loop.
"""

from __future__ import annotations

import maxflow
import numpy as np


def _check_supermodular(weights: np.ndarray) -> None:
    if weights.size and weights.max() > 0:
        raise ValueError(
            "graph-cut MAP needs pairwise weights <= 0 (a supermodular score); "
            f"got a weight of {weights.max():.3g}"
        )


def terminal_capacities(unary: np.ndarray, weights: np.ndarray, clamp: np.ndarray | None):
    """Source and sink capacities of the nodes, with clamped nodes made unbreakable.

    Parameters
    ----------
    unary : ndarray of shape (..., 2)
        Node scores of labels 0 and 1.
    weights : ndarray
        Pairwise weights (only their total size matters, to size the clamping capacity).
    clamp : ndarray of shape unary.shape[:-1] or None
        Label a node is forced to, ``-1`` for a free node.
    """
    gain = unary[..., 1] - unary[..., 0]
    source = np.maximum(-gain, 0.0)
    sink = np.maximum(gain, 0.0)
    if clamp is not None:
        big = clamp_capacity(unary, weights)
        source = source + big * (clamp == 0)
        sink = sink + big * (clamp == 1)
    return source, sink


def clamp_capacity(unary: np.ndarray, weights: np.ndarray) -> float:
    """A finite terminal capacity larger than any cut that respects the clamps."""
    return 1.0 + np.abs(unary[..., 1] - unary[..., 0]).sum() + np.abs(weights).sum()


def _build_graph(unary, edges, weights, clamp=None):
    """General graph: nodes and terminal edges in one call each, pairwise edges in one call."""
    _check_supermodular(weights)
    graph = maxflow.Graph[float](unary.shape[0], edges.shape[0])
    nodes = np.asarray(graph.add_nodes(unary.shape[0]))
    source, sink = terminal_capacities(unary, weights, clamp)
    graph.add_grid_tedges(nodes, source, sink)
    if edges.shape[0]:
        capacity = np.ascontiguousarray(-weights, dtype=float)
        ends = edges.astype(np.intc)
        graph.add_edges(ends[:, 0], ends[:, 1], capacity, capacity)
    return graph, nodes


def _offset_structure(offset: tuple[int, int]) -> np.ndarray:
    structure = np.zeros((3, 3))
    structure[1 + offset[0], 1 + offset[1]] = 1.0
    return structure


def _build_grid(unary, offsets, weights, clamp=None):
    """Image grid through PyMaxflow's fast path: one ``add_grid_edges`` call per direction."""
    _check_supermodular(weights)
    height, width = unary.shape[:2]
    graph = maxflow.Graph[float](height * width, len(offsets) * height * width)
    nodes = graph.add_grid_nodes((height, width))
    for offset, weight in zip(offsets, weights, strict=True):
        graph.add_grid_edges(
            nodes, weights=-weight, structure=_offset_structure(offset), symmetric=True
        )
    source, sink = terminal_capacities(unary, weights, clamp)
    graph.add_grid_tedges(nodes, source, sink)
    return graph, nodes


def _segments(graph, nodes) -> np.ndarray:
    return graph.get_grid_segments(nodes).astype(np.intp)


def graph_cut_map(
    unary: np.ndarray,
    edges: np.ndarray,
    weights: np.ndarray,
    clamp: np.ndarray | None = None,
) -> np.ndarray:
    """MAP labelling of a binary pairwise model on a general graph.

    Parameters
    ----------
    unary : ndarray of shape (D, 2)
        Node scores.
    edges : ndarray of shape (E, 2)
        Node index pairs.
    weights : ndarray of shape (E,)
        Score ``w_ij <= 0`` added when the two ends disagree.
    clamp : ndarray of shape (D,), optional
        Forced labels, ``-1`` for free nodes.

    Returns
    -------
    labels : ndarray of shape (D,)
    """
    graph, nodes = _build_graph(unary, edges, weights, clamp)
    graph.maxflow()
    return _segments(graph, nodes)


def grid_cut_map(
    unary: np.ndarray,
    offsets: list[tuple[int, int]],
    weights: np.ndarray,
    clamp: np.ndarray | None = None,
) -> np.ndarray:
    """MAP labelling on an image grid through PyMaxflow's grid fast path.

    Parameters
    ----------
    unary : ndarray of shape (H, W, 2)
        Pixel scores.
    offsets : list of (dr, dc)
        Neighbour directions, e.g. ``[(0, 1), (1, 0)]`` for 4-connectivity.
    weights : ndarray of shape (n_offsets, H, W)
        ``weights[k, r, c] <= 0`` is the score of the edge from ``(r, c)`` to
        ``(r + dr_k, c + dc_k)`` when the labels differ (ignored where the neighbour is outside).
    clamp : ndarray of shape (H, W), optional
        Forced labels, ``-1`` for free pixels.

    Returns
    -------
    labels : ndarray of shape (H, W)
    """
    graph, nodes = _build_grid(unary, offsets, weights, clamp)
    graph.maxflow()
    return _segments(graph, nodes)


def dynamic_clamped_maps(
    kind: str, problem: tuple, nodes: np.ndarray, labels: np.ndarray, skip_agreeing: bool = False
):
    """MAP labelling and single-node clamped MAP labellings by dynamic graph cuts.

    The unclamped problem is solved once; each clamp (node ``nodes[q]`` forced to
    ``labels[q]``) is then a change of one terminal edge by ``±big``, applied to the residual
    graph together with the undo of the previous clamp, and re-solved with
    ``maxflow(reuse_trees=True)`` after marking the changed nodes (Kohli & Torr 2007; SPEC §2).

    Parameters
    ----------
    kind : {"graph", "grid"}
    problem : tuple
        Arguments of :func:`graph_cut_map` / :func:`grid_cut_map` without ``clamp``.
    nodes, labels : ndarray of shape (Q,)
        Flat node indices (row-major on grids) and the labels they are clamped to.
    skip_agreeing : bool, default=False
        Leave out the clamps that agree with the MAP (Gumbel reduction).

    Returns
    -------
    map_labels : ndarray of shape (D,)
    solved : ndarray of shape (Q,) of bool
    clamped : ndarray of shape (n_solved, D)
    """
    build = _build_grid if kind == "grid" else _build_graph
    graph, ids = build(*problem)
    graph.maxflow()
    map_labels = _segments(graph, ids).ravel()
    solved = np.ones(len(nodes), dtype=bool)
    if skip_agreeing:
        solved = map_labels[nodes] != labels
        nodes, labels = nodes[solved], labels[solved]
    flat_ids = ids.ravel()
    big = clamp_capacity(problem[0], problem[2])
    clamped = np.empty((len(nodes), len(map_labels)), dtype=np.intp)
    previous = None
    for q, (node, label) in enumerate(zip(nodes, labels, strict=True)):
        if previous is not None:  # undo the previous clamp
            _add_clamp(graph, flat_ids[previous[0]], previous[1], -big)
        _add_clamp(graph, flat_ids[node], label, big)
        graph.maxflow(reuse_trees=True)
        clamped[q] = _segments(graph, ids).ravel()
        previous = (node, label)
    return map_labels, solved, clamped


def _add_clamp(graph, node_id: int, label: int, amount: float) -> None:
    """Add ``amount`` to the terminal edge that makes the other label expensive, and mark it."""
    if label == 1:  # label 1 = sink side: a big sink capacity makes label 0 costly
        graph.add_tedge(int(node_id), 0.0, amount)
    else:
        graph.add_tedge(int(node_id), amount, 0.0)
    graph.mark_node(int(node_id))
