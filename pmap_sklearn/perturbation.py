"""Perturbations for perturb-and-MAP, and the average of perturbed MAPs.

Adding i.i.d. zero-mean Gumbel noise ``z_d(k)`` to the unary scores and taking the MAP is the
only inference the perturb-and-MAP learners need (Papandreou & Yuille 2011; Hazan & Jaakkola
2012). :func:`perturb_and_map` averages many such MAPs: their label frequencies estimate the
marginals, their perturbed maxima estimate the upper bound ``A_G = E_z max_y f(y) + z(y)`` of
the log-partition function. With ``n_sweeps`` each perturbed MAP starts a Gibbs chain of the
model instead, for the marginals of the Gibbs distribution (see :ref:`loopy-marginals`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._backend import GibbsChains
from ._parallel import CHUNK_NODES, job_kind, map_samples, sample_seeds

EULER_GAMMA = float(np.euler_gamma)

PERTURBATIONS = ("gumbel", "logistic")


def gumbel(rng: np.random.Generator, shape) -> np.ndarray:
    r"""Zero-mean standard Gumbel draws (``loc = -γ_Euler``, ``scale = 1``).

    Added to the unary scores, one per node and label, they make ``argmax_y f(y) + z(y)`` an exact
    sample of :math:`P(y) \propto \exp f(y)` when the model is separable (the Gumbel-max trick).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the uniforms.
    shape : int or tuple of int
        Shape of the draw.

    Returns
    -------
    ndarray of float64
        Draws of the requested shape.
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

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the draws.
    shape : int or tuple of int
        Shape of the draw.

    Returns
    -------
    ndarray of float64
        Draws of the requested shape.
    """
    return rng.logistic(loc=0.0, scale=1.0, size=shape)


def draw(rng: np.random.Generator, n_nodes: int, n_states: int, kind: str = "gumbel"):
    """One perturbation of the unary scores.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the draws.
    n_nodes : int
        Number of nodes.
    n_states : int
        K, the number of labels.
    kind : {"gumbel", "logistic"}, default="gumbel"
        ``"gumbel"``: a zero-mean Gumbel per node and label; ``"logistic"`` (K = 2): a
        logistic per node on label 1, zero on label 0.

    Returns
    -------
    ndarray of shape (n_nodes, K)
        The perturbation, to add to the unary scores.
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

    Parameters
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
    maxima: bool = True,
    n_sweeps: int = 0,
) -> PerturbedAverage:
    r"""Solve ``n_perturbations`` perturbed MAPs of every sample and average them.

    Sample n's perturbations come from its own stream, seeded from ``random_state``: results do
    not depend on ``n_jobs`` nor on the chunking. Consecutive samples holding at most
    ``max_nodes`` nodes (or a single larger sample) are solved together, one perturbation round
    after the other, so the memory of a chunk is about ``max_nodes`` × K floats whatever the
    number of samples and perturbations. With ``n_jobs`` the chunks go to joblib workers once
    per call, each solving all the rounds of its chunks.

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
        Processes over the chunks of samples.
    max_nodes : int
    maxima : bool, default=True
        Also average the perturbed maxima (``max_mean``, ``max_sem``; NaN otherwise).
    n_sweeps : int, default=0
        With ``n_sweeps > 0``, each perturbed MAP starts a chain of chromatic Gibbs sampling
        of the model (clamped nodes stay fixed) run for ``n_sweeps`` sweeps, and
        ``marginals`` are the mean, over the chains and their last ``n_sweeps - n_sweeps // 2``
        sweeps, of each node's label probabilities given its neighbours (Rao-Blackwellised
        Gibbs estimates of the marginals of :math:`P(y) \propto \exp f(y)`, started from the
        perturb-and-MAP distribution). The maxima stay those of the perturbed MAPs.

    Returns
    -------
    PerturbedAverage
    """
    n_perturbations = int(n_perturbations)
    results = _perturbed_chunks(
        solver,
        potentials,
        n_perturbations,
        random_state,
        kind,
        clamp,
        n_jobs,
        max_nodes,
        maxima,
        n_sweeps=n_sweeps,
    )
    counts = np.concatenate([r[0] for r in results]) / n_perturbations
    total = np.concatenate([r[1] for r in results])
    squares = np.concatenate([r[2] for r in results])
    mean = total / n_perturbations if maxima else np.full(potentials.n_samples, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.maximum(squares - n_perturbations * mean**2, 0.0) / (n_perturbations - 1)
        sem = np.sqrt(variance / n_perturbations)
    return PerturbedAverage(counts, mean, sem)


def perturbed_maps(
    solver,
    potentials,
    n_draws: int,
    random_state,
    kind: str = "gumbel",
    clamp=None,
    n_jobs=None,
    max_nodes: int = CHUNK_NODES,
    n_sweeps: int = 0,
) -> np.ndarray:
    """The perturbed MAP labellings themselves: ``n_draws`` joint draws of every sample from
    the perturb-and-MAP distribution (Papandreou & Yuille 2011).

    The same perturbations as :func:`perturb_and_map` with the same arguments, so the label
    frequencies of the draws are its marginals exactly (with ``n_sweeps = 0``).

    Parameters
    ----------
    solver : Solver
    potentials : Potentials
    n_draws : int
    random_state : int, Generator, RandomState or None
    kind : {"gumbel", "logistic"}, default="gumbel"
    clamp : ndarray of shape (n_nodes,), optional
        Labels of clamped nodes (``-1`` = free): the draws are conditional on them.
    n_jobs : int, optional
    max_nodes : int
    n_sweeps : int, default=0
        With ``n_sweeps > 0``, the states of the Gibbs chains of :func:`perturb_and_map`
        after their ``n_sweeps`` sweeps, one chain per perturbed MAP.

    Returns
    -------
    ndarray of shape (n_draws, n_nodes)
    """
    results = _perturbed_chunks(
        solver,
        potentials,
        int(n_draws),
        random_state,
        kind,
        clamp,
        n_jobs,
        max_nodes,
        False,
        True,
        n_sweeps,
    )
    if not results:
        return np.zeros((int(n_draws), 0), dtype=np.intp)
    return np.concatenate([r[3] for r in results], axis=1)


def _perturbed_chunks(
    solver,
    p,
    n_perturbations,
    random_state,
    kind,
    clamp,
    n_jobs,
    max_nodes,
    maxima,
    keep=False,
    n_sweeps=0,
) -> list:
    """:func:`_perturb_chunk` on every chunk of samples (in processes with ``n_jobs``), each
    sample's perturbations from its own stream seeded from ``random_state``."""
    seeds = sample_seeds(random_state, p.n_samples)

    def job(chunk):
        nodes = slice(p.node_offsets[chunk.start], p.node_offsets[chunk.stop])
        fixed = None if clamp is None else clamp[nodes]
        args = (n_perturbations, seeds[chunk], kind, fixed, maxima, max_nodes, keep, n_sweeps)
        return (solver, p.take(chunk), *args)

    # each chunk pays each round's fixed costs once: one chunk per worker, or per max_nodes
    cost = f"{job_kind(_perturb_chunk)}:{solver.name}"  # seconds per node and round
    if n_sweeps:
        cost += f":gibbs{n_sweeps}"
    sizes = n_perturbations * p.lengths
    limit = n_perturbations * max_nodes
    return map_samples(_perturb_chunk, job, sizes, n_jobs, limit, cost, chunks_per_worker=1)


def _perturb_chunk(
    solver, part, n_perturbations, seeds, kind, clamp, maxima, max_nodes, keep=False, n_sweeps=0
):
    """Label counts (n_nodes, K) and the sums of the maxima and of their squares over
    ``n_perturbations`` perturbed MAPs of the samples of ``part`` (one stream per sample), and
    with ``keep`` the labellings themselves (n_perturbations, n_nodes); with ``n_sweeps`` the
    sums of the chains' marginal estimates and their final states (``GibbsChains``).

    The perturbations of a block of rounds are drawn with one call per sample (the same values
    as one call per round), the block holding at most ``max_nodes`` nodes × K draws (and as
    many for each sweep)."""
    streams = [np.random.default_rng(seed) for seed in seeds]
    k, offsets, lengths = part.n_states, part.node_offsets, part.lengths.tolist()
    counts = np.zeros(part.n_nodes * k)
    flat = np.arange(part.n_nodes) * k
    total, squares = np.zeros(part.n_samples), np.zeros(part.n_samples)
    kept = np.empty((n_perturbations, part.n_nodes), dtype=np.intp) if keep else None
    chains = GibbsChains(part, seeds, clamp, n_sweeps, gumbel) if n_sweeps else None
    per_block = max(1, max_nodes // max(part.n_nodes * max(n_sweeps, 1), 1))
    for start in range(0, n_perturbations, per_block):
        rounds = min(per_block, n_perturbations - start)
        block = np.empty((rounds, part.n_nodes, k))
        for i, (stream, n) in enumerate(zip(streams, lengths, strict=True)):
            block[:, offsets[i] : offsets[i + 1]] = draw(stream, rounds * n, k, kind).reshape(
                rounds, n, k
            )
        labels = solver.perturbed_rounds(part, block, clamp)
        if maxima:
            for round_, perturbation in enumerate(block):
                values = part.add_unary(perturbation).score(labels[round_])
                total += values
                squares += values**2
        if chains is None:
            counts += np.bincount((flat + labels).ravel(), minlength=counts.size)
        else:
            labels, marginals = chains.run(labels)
            counts += marginals.ravel()
        if keep:
            kept[start : start + rounds] = labels
    return counts.reshape(part.n_nodes, k), total, squares, kept
