"""Chromatic Gibbs sampling: the sampler of the solver protocol.

The nodes of one colour of a proper colouring share no edge, so given the others they are
independent: a whole colour class is resampled at once from its conditional scores
``s_i(k) = θ_i(k) + Σ_{e ∋ i} T_e(k, y_other)`` by the Gumbel-max trick. A
:class:`GibbsSampler` opens a session on a graph (the colouring is computed once) that samples
under any scores on that graph — what contrastive divergence needs at every weight step
(Hinton 2002).
"""

from __future__ import annotations

import numpy as np

from .base import check_count
from .messages import colour_nodes
from .potentials import Potentials


def conditional_scores(potentials: Potentials, labels: np.ndarray) -> np.ndarray:
    """The scores of each node's labels given its neighbours' labels.

    Parameters
    ----------
    potentials : Potentials
    labels : ndarray of shape (n_nodes,)

    Returns
    -------
    ndarray of shape (n_nodes, K)
        ``s_i(k) = θ_i(k) + Σ_{e ∋ i} T_e(k, y_other)``.
    """
    tables = potentials.edge_tables()
    first, second = potentials.edges[:, 0], potentials.edges[:, 1]
    columns = np.arange(potentials.n_edges)
    at_first, at_second = potentials.edge_ends
    to_first = tables[columns, :, labels[second]]  # (E, K) over the first end's label
    to_second = tables[columns, labels[first], :]
    return potentials.unary + at_first @ to_first + at_second @ to_second


class GibbsSampler:
    """Chromatic Gibbs sampling of pairwise models (any K, any graph, any sign).

    Parameters
    ----------
    n_sweeps : int, default=1
        Passes over every colour class per call of :meth:`GibbsSession.sample`.
    """

    name = "gibbs"

    def __init__(self, n_sweeps: int = 1):
        self.n_sweeps = check_count(n_sweeps, "n_sweeps")

    def __repr__(self) -> str:
        return f"GibbsSampler(n_sweeps={self.n_sweeps})"

    def session(self, potentials: Potentials) -> GibbsSession:
        """A session on the graph of ``potentials`` (coloured once), for many scores.

        Parameters
        ----------
        potentials : Potentials
            Any potentials on the graph (only the nodes and edges are read).

        Returns
        -------
        GibbsSession
        """
        return GibbsSession(potentials, self.n_sweeps)


class GibbsSession:
    """Gibbs sweeps on one graph, under scores that may change between calls.

    Parameters
    ----------
    potentials : Potentials
        Fix the graph.
    n_sweeps : int
        Passes over every colour class per call.
    """

    def __init__(self, potentials: Potentials, n_sweeps: int):
        colour = colour_nodes(potentials.n_nodes, potentials.edges)
        n_colours = colour.max() + 1 if len(colour) else 0
        self.colours = [np.flatnonzero(colour == c) for c in range(n_colours)]
        self.n_nodes = potentials.n_nodes
        self.n_sweeps = n_sweeps

    def sample(self, potentials: Potentials, start: np.ndarray, rng) -> np.ndarray:
        """Run the sweeps from ``start`` under ``potentials``.

        Parameters
        ----------
        potentials : Potentials
            Scores on the session's graph.
        start : ndarray of shape (n_nodes,)
            The chain's starting labels (e.g. the truth, for contrastive divergence).
        rng : numpy.random.Generator
            The draws.

        Returns
        -------
        ndarray of shape (n_nodes,)
            The labels after the sweeps.
        """
        if potentials.n_nodes != self.n_nodes:
            raise ValueError(
                f"the session's graph has {self.n_nodes} nodes, the potentials {potentials.n_nodes}"
            )
        sample = np.array(start, dtype=np.intp, copy=True)
        for _ in range(self.n_sweeps):
            for nodes in self.colours:
                scores = conditional_scores(potentials, sample)[nodes]
                gumbel = -np.log(-np.log(rng.random(scores.shape)))
                sample[nodes] = np.argmax(scores + gumbel, axis=1)  # Gumbel-max draw
        return sample
