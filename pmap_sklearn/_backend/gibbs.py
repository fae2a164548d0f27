"""Chromatic Gibbs sampling: the sampler of the solver protocol.

The nodes of one colour of a proper colouring share no edge, so given the others they are
independent: a whole colour class is resampled at once from its conditional scores
``s_i(k) = θ_i(k) + Σ_{e ∋ i} T_e(k, y_other)`` by the Gumbel-max trick. A
:class:`GibbsSampler` opens a session on a graph (the colouring is computed once) that samples
under any scores on that graph — what contrastive divergence needs at every weight step
(Hinton 2002).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.special import softmax

from .capabilities import PairwiseKind
from .messages import colour_nodes, sample_colours
from .potentials import Potentials, forbid_states
from .solver import check_count


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
    first, second = potentials.edges[:, 0], potentials.edges[:, 1]
    at_first, at_second = potentials.edge_ends
    if potentials.pairwise_kind is PairwiseKind.POTTS:
        # w [k != l] = w - w [k == l]: the node's total weight, less that of its neighbours
        # labelled k (O(E K) instead of the tables' O(E K²))
        w, k = potentials.pairwise, potentials.n_states
        total = at_first @ w + at_second @ w
        same = at_first @ _weighted_onehot(labels[second], w, k)
        same += at_second @ _weighted_onehot(labels[first], w, k)
        return potentials.unary + total[:, None] - same
    tables = potentials.edge_tables()
    columns = np.arange(potentials.n_edges)
    to_first = tables[columns, :, labels[second]]  # (E, K) over the first end's label
    to_second = tables[columns, labels[first], :]
    return potentials.unary + at_first @ to_first + at_second @ to_second


def _weighted_onehot(labels: np.ndarray, weights: np.ndarray, n_states: int) -> np.ndarray:
    """Rows (len(labels), K) holding ``weights[e]`` at column ``labels[e]``, zero elsewhere."""
    rows = np.zeros((len(labels), n_states))
    rows[np.arange(len(labels)), labels] = weights
    return rows


def conditional_probabilities(potentials: Potentials, labels: np.ndarray) -> np.ndarray:
    """Each node's label distribution given its neighbours' labels.

    Averaged over the states of a Gibbs chain they estimate the marginals with a smaller
    variance than the label frequencies (Rao-Blackwellisation; Gelfand & Smith 1990).

    Parameters
    ----------
    potentials : Potentials
    labels : ndarray of shape (n_nodes,)

    Returns
    -------
    ndarray of shape (n_nodes, K)
        ``softmax_k s_i(k)`` of :func:`conditional_scores`; rows sum to 1.
    """
    return softmax(conditional_scores(potentials, labels), axis=1)


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
    colour : ndarray of shape (n_nodes,), optional
        A proper colouring of the graph (e.g.
        :func:`~pmap_sklearn._backend.messages.sample_colours`); by default one of the whole
        graph.
    """

    def __init__(self, potentials: Potentials, n_sweeps: int, colour=None):
        if colour is None:
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
            uniform = rng.random((self.n_nodes, potentials.n_states))
            self.sweep(potentials, sample, -np.log(-np.log(uniform)))
        return sample

    def sweep(self, potentials: Potentials, labels: np.ndarray, gumbel: np.ndarray) -> None:
        """One pass over the colour classes with given noise, updating ``labels`` in place.

        Each node of a class takes :math:`\\arg\\max_k s_i(k) + g_i(k)` — with standard
        Gumbel noise ``g`` (any shift), a draw from its conditional distribution (the
        Gumbel-max trick).

        Parameters
        ----------
        potentials : Potentials
            Scores on the session's graph.
        labels : ndarray of shape (n_nodes,)
            The chain's state, overwritten.
        gumbel : ndarray of shape (n_nodes, K)
            The noise of this pass.
        """
        for nodes in self.colours:
            scores = conditional_scores(potentials, labels)[nodes]
            labels[nodes] = np.argmax(scores + gumbel[nodes], axis=1)


#: Gibbs sweeps of each chain started at a perturbed MAP for ``method="gibbs"`` (the estimators'
#: ``predict_marginals`` and ``sample``): a fifth of perturb-and-MAP's error on coupled grids at
#: the cost of a few MAPs (docs/results/defaults.md, GIBBS_SWEEPS).
GIBBS_SWEEPS = 20


class GibbsChains:
    """Chromatic Gibbs chains of the (unperturbed) models of ``part``, one per perturbed MAP.

    Each sample is coloured on its own and its chains' noise comes from its own stream (seeded
    from its perturbations' seed), chain after chain: a chain depends neither on the other
    samples of the chunk nor on how many chains run at once, so the results do not depend on
    ``n_jobs``. Clamped nodes keep their labels (their other labels are forbidden). ``gumbel(rng,
    shape)`` draws the chains' Gumbel noise (:func:`pmap_sklearn.perturbation.gumbel`).
    """

    def __init__(self, part, seeds, clamp, n_sweeps: int, gumbel):
        if clamp is not None and (clamp >= 0).any():
            others = (clamp[:, None] >= 0) & (np.arange(part.n_states) != clamp[:, None])
            unary = forbid_states(part.unary, others, part.pairwise, part.n_edges)
            part = replace(part, unary=unary)
        self.part, self.n_sweeps, self.gumbel = part, int(n_sweeps), gumbel
        self.colour = sample_colours(part)
        self.streams = [np.random.default_rng([seed, 1]) for seed in seeds]

    def run(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run a chain from each row of ``starts`` (rounds, n_nodes): the final states (same
        shape) and the sum over the chains of their mean conditional label probabilities over
        the last half of the sweeps (n_nodes, K)."""
        part, n_sweeps, k = self.part, self.n_sweeps, self.part.n_states
        rounds, offsets = len(starts), part.node_offsets
        copies = part.take(np.tile(np.arange(part.n_samples), rounds))  # chain-major nodes
        session = GibbsSession(copies, n_sweeps, np.tile(self.colour, rounds))
        noise = np.empty((rounds, n_sweeps, part.n_nodes, k))
        for i, stream in enumerate(self.streams):
            n = offsets[i + 1] - offsets[i]
            noise[:, :, offsets[i] : offsets[i + 1]] = self.gumbel(stream, (rounds, n_sweeps, n, k))
        labels = starts.ravel().copy()
        first = n_sweeps // 2
        marginals = np.zeros((part.n_nodes, k))
        for sweep in range(n_sweeps):
            session.sweep(copies, labels, noise[:, sweep].reshape(-1, k))
            if sweep >= first:
                probabilities = conditional_probabilities(copies, labels)
                marginals += probabilities.reshape(rounds, part.n_nodes, k).sum(axis=0)
        return labels.reshape(rounds, part.n_nodes), marginals / (n_sweeps - first)
