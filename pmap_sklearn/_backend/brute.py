"""Brute-force enumeration of all labellings: the reference every exact solver is tested on.

Only for tiny models (``K ** D`` labellings per sample, enumerated in chunks so that memory stays
small). Any number of labels and any pairwise kind.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .base import Marginals, Solver, check_count
from .capabilities import Capabilities, PairwiseKind
from .potentials import Potentials, Statistics, clamp_scores, pair_statistics

#: Labellings enumerated at once.
CHUNK = 1 << 16


def labellings(n_nodes: int, n_states: int, start: int = 0, stop: int | None = None):
    """Labellings number ``start..stop-1`` in lexicographic order (node 0 most significant, as
    ``itertools.product`` and ``numpy.ravel_multi_index`` count), shape (stop - start, D)."""
    stop = n_states**n_nodes if stop is None else stop
    codes = np.arange(start, stop, dtype=np.int64)
    powers = n_states ** np.arange(n_nodes - 1, -1, -1, dtype=np.int64)
    return (codes[:, None] // powers) % n_states


def enumerate_scores(potentials: Potentials, chunk: int = CHUNK):
    """Yield ``(labellings, scores)`` chunks over every labelling of a one-sample model (``-inf``
    unary scores forbid labels)."""
    p = potentials
    n_nodes, k = p.unary.shape
    tables = p.edge_tables()
    edge_index = np.arange(p.n_edges)
    for start in range(0, k**n_nodes, chunk):
        y = labellings(n_nodes, k, start, min(start + chunk, k**n_nodes))
        scores = p.unary[np.arange(n_nodes), y].sum(axis=1)
        if p.n_edges:
            scores = scores + tables[edge_index, y[:, p.edges[:, 0]], y[:, p.edges[:, 1]]].sum(1)
        yield y, scores


class BruteForceSolver(Solver):
    """Exact MAP and marginals of tiny models by enumerating every labelling.

    Parameters
    ----------
    max_labellings : int, default=2**24
        Largest ``K ** D`` of one sample it agrees to enumerate.
    """

    name = "brute_force"
    capabilities = Capabilities(marginals=True, map_quality="exact; tiny models only")

    def __init__(self, max_labellings: int = 1 << 24):
        self.max_labellings = check_count(max_labellings, "max_labellings")

    def _samples(self, potentials: Potentials, clamp):
        self._check(potentials, clamp)
        k = potentials.n_states
        unary = potentials.unary if clamp is None else clamp_scores(potentials.unary, clamp)
        clamped = replace(potentials, unary=unary)
        for i in range(potentials.n_samples):
            size = k ** int(potentials.lengths[i])
            if size > self.max_labellings:
                raise ValueError(
                    f"sample {i}: {k}^{potentials.lengths[i]} labellings are too many to "
                    f"enumerate (at most {self.max_labellings})"
                )
            yield clamped.sample(i)

    def map(self, potentials, clamp=None, n_jobs=None):
        out = []
        for sample in self._samples(potentials, clamp):
            best, best_score = None, -np.inf
            for y, scores in enumerate_scores(sample):
                top = int(np.argmax(scores))
                if best is None or scores[top] > best_score:
                    best, best_score = y[top], scores[top]
            out.append(best)
        return np.concatenate(out).astype(np.intp)

    def log_partition(self, potentials, clamp=None) -> np.ndarray:
        """The log-partition function of every sample by enumeration (cheaper than marginals).

        Parameters
        ----------
        potentials : Potentials
            Tiny models (K^D labellings are enumerated per sample).
        clamp : ndarray of shape (n_nodes,), optional
            A label ``>= 0`` fixes the node's label; ``-1`` leaves it free.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``log Σ_y exp f_n(y)`` over the labellings that respect the clamps.
        """
        out = []
        for sample in self._samples(potentials, clamp):
            parts = [np.logaddexp.reduce(scores) for _, scores in enumerate_scores(sample)]
            out.append(np.logaddexp.reduce(parts))
        return np.array(out)

    def marginals(self, potentials, clamp=None):
        kind, k = potentials.pairwise_kind, potentials.n_states
        nodes, pairs, log_z = [], [], []
        for sample in self._samples(potentials, clamp):
            # Streaming log-sum-exp: sums are kept relative to the largest score seen so far.
            shift, total = -np.inf, 0.0
            node = np.zeros(sample.unary.shape)
            pair = np.zeros(sample.pairwise.shape)
            for y, scores in enumerate_scores(sample):
                top = scores.max()
                if not np.isfinite(top):
                    continue
                if top > shift:
                    rescale = np.exp(shift - top)
                    total, node, pair, shift = total * rescale, node * rescale, pair * rescale, top
                weight = np.exp(scores - shift)
                total += weight.sum()
                node += np.stack([weight @ (y == label) for label in range(k)], axis=1)
                first, second = y[:, sample.edges[:, 0]], y[:, sample.edges[:, 1]]
                pair += pair_statistics(
                    first.ravel(),
                    second.ravel(),
                    np.tile(np.arange(sample.n_edges), len(y)),
                    np.repeat(weight, sample.n_edges),
                    kind,
                    k,
                    sample.n_edges,
                )
            nodes.append(node / total)
            pairs.append(pair / total)
            log_z.append(shift + np.log(total))
        pairwise = sum(pairs) if kind is PairwiseKind.SHARED else np.concatenate(pairs)
        return Marginals(Statistics(np.concatenate(nodes), pairwise), np.array(log_z))
