"""Iterated conditional modes (Besag 1986): coordinate ascent on the score, vectorised over the
whole batch.

Each node in turn takes the label that maximises the score with every other node's label held
fixed, ``y_i ← argmax_k [θ_i(k) + Σ_j θ_ij(k, y_j)]``. The nodes of one colour class of a proper
colouring share no edge, so the class moves at once — over every sample of the batch — as one
vectorised gather and one sparse product; a label changes only when its node's score rises, so
the score never decreases and the sweeps stop at a labelling that no change of a single node
improves (a local optimum; exact on graphs without edges, and on forests from a good start only
by luck). The sweeps are cheap — ``O(E K)`` each — and need no messages, which suits many small
dense graphs (a full label graph of a multi-label CRF), where message passing spends many passes
per sample. Several starts (the unary argmax, every node at one label, a given labelling) are
searched and the best labelling of each sample kept.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .capabilities import Capabilities
from .messages import sample_colours
from .potentials import Potentials
from .solver import Solver, check_count, check_labels

#: The starts of :class:`LocalSearchSolver`.
STARTS = ("unary", "uniform")


class _Sweeps:
    """The colour classes of a batch and, per class, the edges into its nodes: what one ICM
    update of the class reads (the other end's label, the table's row or column)."""

    def __init__(self, potentials: Potentials, free: np.ndarray):
        p = potentials
        self.unary = p.unary
        self.tables = p.edge_tables()
        colours = sample_colours(p) if p.n_edges else np.zeros(p.n_nodes, dtype=np.intp)
        colours = np.where(free, colours, -1)  # clamped nodes never move
        edges = p.edges
        self.classes = []
        order = np.argsort(colours, kind="stable")
        bounds = np.searchsorted(colours[order], np.arange(colours.max(initial=-1) + 2))
        local = np.full(p.n_nodes, -1, dtype=np.intp)
        ends = np.concatenate([edges[:, 0], edges[:, 1]]) if p.n_edges else np.zeros(0, int)
        end_colour = colours[ends] if p.n_edges else ends
        end_order = np.argsort(end_colour, kind="stable")
        end_bounds = np.searchsorted(end_colour[end_order], np.arange(len(bounds)))
        for c in range(len(bounds) - 1):
            nodes = order[bounds[c] : bounds[c + 1]]
            local[nodes] = np.arange(len(nodes))
            slots = end_order[end_bounds[c] : end_bounds[c + 1]]
            edge = slots % max(p.n_edges, 1)
            side = slots >= p.n_edges  # the class node is the edge's second end
            other = np.where(side, edges[edge, 0], edges[edge, 1])
            gather = sparse.csr_matrix(
                (
                    np.ones(len(slots)),
                    (local[np.where(side, edges[edge, 1], edges[edge, 0])], np.arange(len(slots))),
                ),
                shape=(len(nodes), len(slots)),
            )
            self.classes.append((nodes, edge, side, other, gather))

    def field(self, labels: np.ndarray, nodes, edge, side, other, gather) -> np.ndarray:
        """``θ_i(k) + Σ_j θ_ij(k, y_j)`` of the class's nodes, (m, K)."""
        at = labels[other]
        rows = np.where(
            side[:, None], self.tables[edge, at, :], self.tables[edge, :, at]
        )  # side 0: T[e, k, y_other]; side 1: T[e, y_other, k]
        return self.unary[nodes] + gather @ rows

    def ascend(self, labels: np.ndarray, max_sweeps: int) -> int:
        """ICM sweeps from ``labels`` (changed in place) until no node moves; the sweeps run."""
        for sweep in range(max_sweeps):
            moved = False
            for nodes, edge, side, other, gather in self.classes:
                if not len(nodes):
                    continue
                field = self.field(labels, nodes, edge, side, other, gather)
                best = field.argmax(axis=1)
                current = field[np.arange(len(nodes)), labels[nodes]]
                better = field[np.arange(len(nodes)), best] > current + 1e-12 * (
                    1.0 + np.abs(current)
                )
                if better.any():
                    labels[nodes[better]] = best[better]
                    moved = True
            if not moved:
                return sweep + 1
        return max_sweeps


class LocalSearchSolver(Solver):
    """Iterated conditional modes from a few starts, vectorised over the batch: an
    approximate MAP (a labelling no single-node change improves) for any K, any pairwise terms
    and any graph, fast on many small dense graphs.

    Parameters
    ----------
    starts : tuple of {"unary", "uniform"}, default=("unary", "uniform")
        Where the searches start: ``"unary"``, every node at its best label alone;
        ``"uniform"``, every node at label k, one start per label (in a multi-label CRF: no
        label, every label). The best labelling of each sample over the starts is kept, and a
        labelling passed as ``init`` to :meth:`map` is one more start.
    max_sweeps : int, default=50
        Sweeps over the colour classes per start at most (each sweep that moves a node raises
        the score; the searches stop when none moves).
    """

    name = "local_search"
    capabilities = Capabilities(
        warm_start=True,
        map_quality="approximate: iterated conditional modes from a few starts (a labelling no "
        "single-node change improves); exact without edges",
    )

    def __init__(self, starts=STARTS, max_sweeps: int = 50):
        if isinstance(starts, str):
            starts = (starts,)
        starts = tuple(starts)
        if not starts or any(s not in STARTS for s in starts):
            raise ValueError(f"starts must be a non-empty tuple of {STARTS}, got {starts!r}")
        self.starts = starts
        self.max_sweeps = check_count(max_sweeps, "max_sweeps")

    def __repr__(self) -> str:
        return f"LocalSearchSolver(starts={self.starts!r}, max_sweeps={self.max_sweeps})"

    def map(self, potentials: Potentials, clamp=None, n_jobs=None, init=None) -> np.ndarray:
        """A labelling of every sample that no single-node change improves (clamped nodes keep
        their label): the best of the searches from the starts.

        Parameters
        ----------
        potentials : Potentials
        clamp : ndarray of shape (n_nodes,), optional
            Label each node is forced to, ``-1`` for a free node.
        n_jobs : int, optional
            Unused: every sweep is vectorised over the whole batch.
        init : ndarray of shape (n_nodes,), optional
            One more start (clamps override it): the result scores at least as much.

        Returns
        -------
        ndarray of shape (n_nodes,)
        """
        self._check(potentials, clamp)
        p = potentials
        if p.n_nodes == 0:
            return np.zeros(0, dtype=np.intp)
        free = np.ones(p.n_nodes, dtype=bool)
        if clamp is not None:
            clamp = np.asarray(clamp, dtype=np.intp)
            free = clamp < 0
        if init is not None:
            init = check_labels(init, p, "init", free=False)
        sweeps = _Sweeps(p, free)
        starts = []
        if "unary" in self.starts:
            starts.append(p.unary.argmax(axis=1))
        if "uniform" in self.starts:
            starts.extend(np.full(p.n_nodes, k, dtype=np.intp) for k in range(p.n_states))
        if init is not None:
            starts.append(np.asarray(init, dtype=np.intp).copy())
        best, best_score = None, None
        for labels in starts:
            labels = np.asarray(labels, dtype=np.intp)
            if clamp is not None:
                labels = np.where(free, labels, clamp)
            sweeps.ascend(labels, self.max_sweeps)
            score = p.score(labels)
            if best is None:
                best, best_score = labels, score
                continue
            better = (score > best_score)[p.node_sample]
            best = np.where(better, labels, best)
            best_score = np.maximum(score, best_score)
        return best
