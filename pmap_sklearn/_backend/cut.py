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
        # Any finite capacity larger than every cut that respects the clamps forbids the others.
        big = 1.0 + np.abs(gain).sum() + np.abs(weights).sum()
        source = source + big * (clamp == 0)
        sink = sink + big * (clamp == 1)
    return source, sink


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
    _check_supermodular(weights)
    graph = maxflow.Graph[float](unary.shape[0], edges.shape[0])
    nodes = graph.add_nodes(unary.shape[0])
    source, sink = terminal_capacities(unary, weights, clamp)
    graph.add_grid_tedges(np.asarray(nodes), source, sink)
    if edges.shape[0]:
        capacity = np.ascontiguousarray(-weights, dtype=float)
        ends = edges.astype(np.intc)
        graph.add_edges(ends[:, 0], ends[:, 1], capacity, capacity)
    graph.maxflow()
    return graph.get_grid_segments(np.asarray(nodes)).astype(np.intp)


def _offset_structure(offset: tuple[int, int]) -> np.ndarray:
    structure = np.zeros((3, 3))
    structure[1 + offset[0], 1 + offset[1]] = 1.0
    return structure


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
    graph.maxflow()
    return graph.get_grid_segments(nodes).astype(np.intp)
