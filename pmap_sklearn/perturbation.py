"""Perturbations for perturb-and-MAP, and the average of perturbed MAPs.

Adding i.i.d. zero-mean Gumbel noise ``z_d(k)`` to the unary scores and taking the MAP is the
only inference the perturb-and-MAP learners need (Papandreou & Yuille 2011; Hazan & Jaakkola
2012). :func:`perturb_and_map` averages many such MAPs: their label frequencies estimate the
marginals, their perturbed maxima estimate the upper bound ``A_G = E_z max_y f(y) + z(y)`` of
the log-partition function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._backend.base import CHUNK_NODES
from ._utils import check_generator, ranges

EULER_GAMMA = float(np.euler_gamma)

PERTURBATIONS = ("gumbel", "logistic")


def gumbel(rng: np.random.Generator, shape) -> np.ndarray:
    """Zero-mean standard Gumbel draws (``loc = -γ_Euler``, ``scale = 1``).

    Added to the unary scores, one per node and label, they make ``argmax_y f(y) + z(y)`` an
    exact sample of ``P(y) ∝ exp f(y)`` when the model is separable (the Gumbel-max trick).
    """
    # -log(-log U) from single-precision uniforms: twice as fast as Generator.gumbel, and
    # 2^-24 resolution is far finer than any score difference that matters to a MAP.
    uniform = rng.random(shape, dtype=np.float32)
    np.maximum(uniform, np.float32(2.0**-25), out=uniform)  # U = 0 would give -inf
    return -np.log(-np.log(uniform), dtype=np.float64) - EULER_GAMMA


def logistic(rng: np.random.Generator, shape) -> np.ndarray:
    """Standard logistic draws: the difference of two independent Gumbel variables.

    For a binary model, adding one logistic draw per node to the score of label 1 gives the
    same perturbed MAP distribution as one zero-mean Gumbel per node and label, and the same
    expected maximum (Shpakova 2019, Eq. 2.4.2) with a smaller variance.
    """
    return rng.logistic(loc=0.0, scale=1.0, size=shape)


def draw(rng: np.random.Generator, n_nodes: int, n_states: int, kind: str = "gumbel"):
    """One perturbation of the unary scores, shape (n_nodes, K).

    ``"gumbel"``: a zero-mean Gumbel per node and label; ``"logistic"`` (K = 2): a logistic per
    node on label 1, zero on label 0.
    """
    if kind == "gumbel":
        return gumbel(rng, (n_nodes, n_states))
    if kind == "logistic":
        if n_states != 2:
            raise ValueError(f"logistic perturbations are for binary models, got K = {n_states}")
        perturbation = np.zeros((n_nodes, 2))
        perturbation[:, 1] = logistic(rng, n_nodes)
        return perturbation
    raise ValueError(f"perturbation must be one of {PERTURBATIONS}, got {kind!r}")


@dataclass
class PerturbedAverage:
    """Averages over the perturbed MAPs of every sample.

    Attributes
    ----------
    marginals : ndarray of shape (n_nodes, K)
        Frequency of each label at each node.
    max_mean : ndarray of shape (n_samples,)
        Mean perturbed maximum ``max_y f(y) + z(y)``: the estimate of ``A_G``.
    max_sem : ndarray of shape (n_samples,)
        Its standard error (NaN with a single perturbation).
    """

    marginals: np.ndarray
    max_mean: np.ndarray
    max_sem: np.ndarray


def perturb_and_map(
    solver,
    potentials,
    n_perturbations: int,
    random_state,
    kind: str = "gumbel",
    clamp=None,
    n_jobs=None,
    max_nodes: int = CHUNK_NODES,
) -> PerturbedAverage:
    """Solve ``n_perturbations`` perturbed MAPs of every sample and average them.

    Sample n's perturbations come from its own stream, seeded from ``random_state``: results do
    not depend on ``n_jobs`` nor on the chunking. Copies of the samples are solved together in
    chunks of at most ``max_nodes`` nodes (one copy at least), so the memory is bounded by
    ``max_nodes`` × K floats whatever the number of samples and perturbations.

    Parameters
    ----------
    solver : Solver
    potentials : Potentials
    n_perturbations : int
    random_state : int, Generator, RandomState or None
    kind : {"gumbel", "logistic"}, default="gumbel"
        See :func:`draw`.
    clamp : ndarray of shape (n_nodes,), optional
        Labels of clamped nodes (``-1`` = free): the marginals are then conditional on them.
    n_jobs : int, optional
        Passed to the solver.
    max_nodes : int

    Returns
    -------
    PerturbedAverage
    """
    p = potentials
    n_perturbations = int(n_perturbations)
    seeds = check_generator(random_state).integers(2**63, size=p.n_samples)
    streams = [np.random.default_rng(seed) for seed in seeds]
    counts = np.zeros(p.n_nodes * p.n_states)
    total, squares = np.zeros(p.n_samples), np.zeros(p.n_samples)
    for copies in _copy_chunks(p.lengths, n_perturbations, max_nodes):
        replicated = p.replicate(copies)
        perturbation = np.concatenate(
            [draw(streams[i], p.lengths[i], p.n_states, kind) for i in copies]
        )
        nodes = ranges(p.node_offsets, copies)
        fixed = None if clamp is None else clamp[nodes]
        perturbed = replicated.add_unary(perturbation)
        labels = solver.map(perturbed, fixed, n_jobs=n_jobs)
        counts += np.bincount(nodes * p.n_states + labels, minlength=counts.size)
        maxima = perturbed.score(labels)
        total += np.bincount(copies, maxima, minlength=p.n_samples)
        squares += np.bincount(copies, maxima**2, minlength=p.n_samples)
    mean = total / n_perturbations
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.maximum(squares - n_perturbations * mean**2, 0.0) / (n_perturbations - 1)
        sem = np.sqrt(variance / n_perturbations)
    return PerturbedAverage(counts.reshape(p.n_nodes, p.n_states) / n_perturbations, mean, sem)


def _copy_chunks(lengths: np.ndarray, n_perturbations: int, max_nodes: int):
    """Yield arrays of sample indices — each sample ``n_perturbations`` times overall, its
    copies consecutive — whose copies hold at most ``max_nodes`` nodes (or a single copy)."""
    pending, size = [], 0
    for i, length in enumerate(lengths):
        length, left = max(int(length), 1), n_perturbations
        while left:
            room = (max_nodes - size) // length
            if room <= 0 and pending:
                yield np.concatenate(pending)
                pending, size = [], 0
                continue
            take = min(left, max(room, 1))
            pending.append(np.full(take, i, dtype=np.intp))
            size, left = size + take * length, left - take
    if pending:
        yield np.concatenate(pending)
