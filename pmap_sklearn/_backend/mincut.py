"""Every PyMaxflow graph of the library: binary submodular energies by s-t minimum cut.

The energy is ``E(x) = Σ_v c_v x_v + Σ_e cap_e [x_tail = 0][x_head = 1] + rev_e [x_tail = 1]
[x_head = 0]`` over ``x ∈ {0, 1}^n`` with ``cap, rev >= 0``; ``x_v = 1`` is the sink side, so
``c_v > 0`` is a source capacity and ``c_v < 0`` a sink capacity. Graph cuts (binary MAP), the
Ishikawa construction, the group-maximum levels and the prox of group maxima all build their
graphs here — general graphs in one ``add_edges`` call, pixel grids by ``add_grid_edges`` per
direction — and share one rule for the capacity of a hard constraint (:func:`hard_capacity`).
"""

from __future__ import annotations

import maxflow
import numpy as np

#: Largest sum of capacities of one graph: beyond it a hard constraint (± that sum) overflows
#: double precision, and max-flow on such numbers can loop without end.
MAX_CAPACITY = 1e290


def hard_capacity(linear, *capacities) -> float:
    """A finite capacity larger than every cut made of the given terms: an edge of that
    capacity is never cut by a minimum cut (a hard constraint, or a clamp).

    Parameters
    ----------
    linear : ndarray
        The unary coefficients ``c_v``.
    *capacities : ndarray
        Finite pairwise capacities (``np.inf`` entries are left out).

    Returns
    -------
    float
        ``1 + Σ |c_v| + Σ |finite capacities|``.
    """
    total = 1.0 + np.abs(linear).sum()
    for values in capacities:
        values = np.abs(values)
        total += values[np.isfinite(values)].sum()
    return float(total)


def terminal_capacities(cost_of_one: np.ndarray, clamp=None, big: float | None = None):
    """Source and sink capacities of unary coefficients, clamped nodes made unbreakable.

    Parameters
    ----------
    cost_of_one : ndarray
        ``c_v``, the cost of ``x_v = 1`` relative to ``x_v = 0``.
    clamp : ndarray shaped like ``cost_of_one``, optional
        The value a node is forced to, ``-1`` for a free node.
    big : float, optional
        The clamping capacity (:func:`hard_capacity`); needed with ``clamp``.

    Returns
    -------
    source, sink : ndarray
    """
    source = np.maximum(cost_of_one, 0.0)
    sink = np.maximum(-cost_of_one, 0.0)
    if clamp is not None:
        source = source + big * (clamp == 0)
        sink = sink + big * (clamp == 1)
    return source, sink


def general_graph(cost_of_one, tails, heads, capacities, reverse=None, clamp=None):
    """A graph on any edges: nodes, terminal edges and pairwise edges in one call each.

    Parameters
    ----------
    cost_of_one : ndarray of shape (n,)
    tails, heads : ndarray of shape (E,)
    capacities : ndarray of shape (E,)
        ``cap_e >= 0`` (finite: an infinite constraint is given ``hard_capacity`` first).
    reverse : ndarray of shape (E,), optional
        ``rev_e >= 0``; ``capacities`` when None (symmetric edges).
    clamp : ndarray of shape (n,), optional
        Values forced on nodes (``-1``: free).

    Returns
    -------
    graph : maxflow.Graph
    nodes : ndarray of shape (n,)
    """
    cost_of_one = np.asarray(cost_of_one, dtype=float)
    graph = maxflow.Graph[float](len(cost_of_one), len(tails))
    nodes = np.asarray(graph.add_nodes(len(cost_of_one)))
    capacities = np.ascontiguousarray(capacities, dtype=float)
    reverse = capacities if reverse is None else np.ascontiguousarray(reverse, dtype=float)
    big = None if clamp is None else hard_capacity(cost_of_one, capacities, reverse)
    graph.add_grid_tedges(nodes, *terminal_capacities(cost_of_one, clamp, big))
    if len(tails):
        graph.add_edges(
            np.asarray(tails, dtype=np.intc), np.asarray(heads, dtype=np.intc), capacities, reverse
        )
    return graph, nodes


def _offset_structure(offset: tuple[int, int]) -> np.ndarray:
    structure = np.zeros((3, 3))
    structure[1 + offset[0], 1 + offset[1]] = 1.0
    return structure


def grid_graph(cost_of_one, offsets, capacities, clamp=None):
    """A pixel grid through PyMaxflow's fast path: one ``add_grid_edges`` call per direction.

    Parameters
    ----------
    cost_of_one : ndarray of shape (H, W)
    offsets : sequence of (dr, dc)
        The neighbour directions.
    capacities : ndarray of shape (len(offsets), H, W)
        Symmetric capacity of the edge from each pixel in each direction (0 past the border).
    clamp : ndarray of shape (H, W), optional

    Returns
    -------
    graph : maxflow.Graph
    nodes : ndarray of shape (H, W)
    """
    height, width = cost_of_one.shape
    graph = maxflow.Graph[float](height * width, len(offsets) * height * width)
    nodes = graph.add_grid_nodes((height, width))
    for offset, capacity in zip(offsets, capacities, strict=True):
        graph.add_grid_edges(
            nodes, weights=capacity, structure=_offset_structure(offset), symmetric=True
        )
    big = None if clamp is None else hard_capacity(cost_of_one, capacities)
    graph.add_grid_tedges(nodes, *terminal_capacities(cost_of_one, clamp, big))
    return graph, nodes


def segments(graph, nodes) -> np.ndarray:
    """The minimiser after ``graph.maxflow()``: ``x = 1`` on the sink side, shaped like
    ``nodes``."""
    return graph.get_grid_segments(nodes).astype(np.intp)


def add_clamp(graph, node_id: int, value: int, amount: float) -> None:
    """Force (``amount > 0``) or release (``amount < 0``) ``x = value`` at a node of a solved
    graph, and mark the node for ``maxflow(reuse_trees=True)`` (Kohli & Torr 2007)."""
    if value == 1:  # sink side: a big sink capacity makes x = 0 costly
        graph.add_tedge(node_id, 0.0, amount)
    else:
        graph.add_tedge(node_id, amount, 0.0)
    graph.mark_node(node_id)


def min_cut(n_nodes, linear, tails, heads, capacities, reverse=None) -> np.ndarray:
    """Minimise ``Σ_v linear_v x_v + Σ_e cap_e [x_tail = 0][x_head = 1]
    + rev_e [x_tail = 1][x_head = 0]`` over ``x ∈ {0, 1}^n``.

    Parameters
    ----------
    n_nodes : int
    linear : ndarray of shape (n_nodes,)
    tails, heads : ndarray of shape (E,)
    capacities : ndarray of shape (E,)
        ``>= 0`` (the energy is then submodular); ``np.inf`` marks a hard constraint.
    reverse : ndarray of shape (E,), optional
        ``>= 0``; zero when None.

    Returns
    -------
    ndarray of shape (n_nodes,) of bool
        The minimiser (``x = 1`` on the sink side).
    """
    linear = np.asarray(linear, dtype=float).reshape(n_nodes)
    capacities = np.asarray(capacities, dtype=float)
    reverse = np.zeros_like(capacities) if reverse is None else np.asarray(reverse, float)
    finite = np.isfinite(capacities)
    if not finite.all():
        capacities = np.where(finite, capacities, hard_capacity(linear, capacities, reverse))
    graph, nodes = general_graph(linear, tails, heads, capacities, reverse)
    graph.maxflow()
    return segments(graph, nodes).astype(bool)
