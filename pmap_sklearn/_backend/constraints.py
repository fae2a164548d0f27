"""The labellings a chain model forbids (:class:`TransitionConstraints`), as the chain layout
hands them to the solvers that honour them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class TransitionConstraints:
    """The labellings a chain model forbids: transitions and first / last labels.

    A labelling that uses a forbidden transition ``(a, b)``, starts with a forbidden first
    label or ends with a forbidden last label has probability zero (its score is ``-inf``):
    MAP, marginals, draws and event probabilities never visit it.

    Parameters
    ----------
    transitions : ndarray of shape (K, K) of bool
        ``[a, b]``: label ``a`` may be followed by ``b``.
    start, end : ndarray of shape (K,) of bool
        The labels a chain may start / end with.

    Attributes
    ----------
    every_length : bool
        Whether a chain of any length has an allowed labelling (true of the tagging
        schemes): solvers then need no feasibility check without clamps.
    """

    transitions: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "every_length", self._every_length())

    def _every_length(self) -> bool:
        """Whether a chain of every length has an allowed labelling (no clamp): the sets of
        labels reachable at positions 1, 2, ... repeat within 2^K steps, so follow them until
        one repeats and ask that each meets ``end``."""
        reachable, seen = self.start.copy(), set()
        while reachable.tobytes() not in seen:
            if not (reachable & self.end).any():
                return False
            seen.add(reachable.tobytes())
            reachable = self.transitions[reachable].any(axis=0)
        return True

    def transition_scores(self, table: np.ndarray) -> np.ndarray:
        """The transition scores with ``-inf`` at the forbidden transitions.

        Parameters
        ----------
        table : ndarray of shape (K, K)

        Returns
        -------
        ndarray of shape (K, K)
        """
        return np.where(self.transitions, table, -np.inf)

    def node_scores(self, unary: np.ndarray, node_offsets: np.ndarray) -> np.ndarray:
        """The node scores with ``-inf`` at the forbidden labels of each chain's first and last
        node.

        Parameters
        ----------
        unary : ndarray of shape (n_nodes, K)
        node_offsets : ndarray of shape (n_chains + 1,)
            Where each chain starts, then the end.

        Returns
        -------
        ndarray of shape (n_nodes, K)
            A copy of ``unary``.
        """
        starts, ends = node_offsets[:-1], node_offsets[1:]
        present = ends > starts
        scores = np.array(unary, dtype=float)
        scores[starts[present]] = np.where(self.start, scores[starts[present]], -np.inf)
        scores[ends[present] - 1] = np.where(self.end, scores[ends[present] - 1], -np.inf)
        return scores

    def allows(self, labels: np.ndarray, node_offsets: np.ndarray) -> np.ndarray:
        """Whether each chain's labelling obeys the constraints (unknown ``-1`` labels pass).

        Parameters
        ----------
        labels : ndarray of shape (n_nodes,)
        node_offsets : ndarray of shape (n_chains + 1,)

        Returns
        -------
        ndarray of shape (n_nodes,) of bool
            False at a node whose label breaks a constraint: a forbidden first or last label,
            or a forbidden transition from the node before.
        """
        labels = np.asarray(labels)
        ok = np.ones(len(labels), dtype=bool)
        known = labels >= 0
        starts, ends = node_offsets[:-1], node_offsets[1:]
        present = ends > starts
        for nodes, allowed in ((starts[present], self.start), (ends[present] - 1, self.end)):
            ok[nodes] &= ~known[nodes] | allowed[np.maximum(labels[nodes], 0)]
        following = np.ones(len(labels), dtype=bool)
        following[starts[present]] = False  # a chain's first node follows nothing
        nodes = np.flatnonzero(following)
        both = known[nodes] & known[nodes - 1]
        step = self.transitions[np.maximum(labels[nodes - 1], 0), np.maximum(labels[nodes], 0)]
        ok[nodes] &= ~both | step
        return ok
