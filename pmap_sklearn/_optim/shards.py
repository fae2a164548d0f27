"""Data-parallel SGD by iterative parameter mixing (McDonald, Hall & Mann 2010; Zinkevich,
Weimer, Smola & Li 2010).

The training set is split once into shards of about equal work (nodes); every epoch each shard
runs one pass of the SGD engine (:func:`~pmap_sklearn._optim.sgd.run_epoch`, the very pass of a
fit) from the mixed state, as one task on joblib's backend, and the shards' states are mixed:
the weights, the average of the iterates, AdaGrad's sums of squares and the L1 penalties by
their mean weighted by the shards' shares of the samples (McDonald et al.'s mixing weights
``μ_s``). Each shard draws from its own stream, seeded from the fit's for each epoch, so a run
depends on the number of shards and the fit's random stream, never on where the tasks ran.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._parallel import SharedArrays, run_on_workers, single_blas_thread
from .sgd import SGDState, StepRule, _cumulative_l1, run_epoch

__all__ = ["Shards", "split_by_size"]

#: The mixed fields of a state's arrays, besides the weights and their average.
_MIXED = ("squares", "l1_total", "l1_applied")


def split_by_size(sizes, n_shards: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Split samples of ``sizes`` (nodes) into ``n_shards`` shards of about equal total size:
    in a random order (from ``rng``), each sample goes to the shard with the fewest nodes so far
    (ties: the first), so shards differ by at most one sample's size. Returns each shard's
    sample indices, sorted."""
    sizes = np.asarray(sizes)
    loads = np.zeros(n_shards)
    owner = np.empty(len(sizes), dtype=np.intp)
    for i in rng.permutation(len(sizes)):
        shard = int(np.argmin(loads))
        owner[i] = shard
        loads[shard] += sizes[i]
    return [np.flatnonzero(owner == shard) for shard in range(n_shards)]


@dataclass
class Shards:
    """The shards of a data-parallel run of :func:`~pmap_sklearn._optim.sgd.run_sgd`.

    Parameters
    ----------
    factories : list of callable ``(order, rng) -> oracle``
        Each shard's oracle factory: the oracle over its samples ``order`` (a permutation of
        ``range(size)``), ``rng`` the shard's stream (for any reordering it makes). Each is
        pickled to a worker with the tasks.
    sizes : list of int
        Samples of each shard.
    weights : ndarray of shape (n_shards,)
        The mixing weights (summing to 1): each shard's share of the (weighted) samples.
    n_jobs : int or None
        Workers (joblib's ``n_jobs``; None: the ``joblib.parallel_config`` in force).
    """

    factories: list[Callable]
    sizes: list[int]
    weights: np.ndarray
    n_jobs: int | None = None
    shared: SharedArrays = field(default_factory=SharedArrays, repr=False)

    def __post_init__(self):
        # a local pool's workers read their shard's samples from shared files, written once
        self.shared.keep(self.factories)

    def close(self) -> None:
        """Remove the shared files of the run."""
        self.shared.close()

    def epoch(self, state: SGDState, steps: StepRule, rng, epoch: int, l1: float, pass_args):
        """One mixed epoch from ``state`` (updated in place): each shard's pass from a copy of
        it, then their mix. Returns the summed ``Σ ℓ`` of the passes and the mean last rate."""
        seeds = rng.integers(np.iinfo(np.int64).max, size=len(self.sizes))
        jobs = [
            (factory, size, int(seed), *_copy(state, steps), epoch, l1, pass_args)
            for factory, size, seed in zip(self.factories, self.sizes, seeds, strict=True)
        ]
        results = run_on_workers(
            _shard_pass, jobs, self.n_jobs, share_with_caller=True, shared=self.shared
        )
        _mix(state, [result[0] for result in results], self.weights)
        objective = float(sum(result[1] for result in results))
        return objective, float(np.mean([np.mean(result[2]) for result in results]))


def _copy(state: SGDState, steps: StepRule) -> tuple[SGDState, StepRule]:
    """A shard's own copy of the state and step rule (AdaGrad's sums shared between the two as
    in the fit's), without the histories the shard does not need."""
    histories = state.loss_curve, state.validation_scores, state.rng
    state.loss_curve, state.validation_scores, state.rng = [], [], None
    try:
        return copy.deepcopy((state, steps))
    finally:
        state.loss_curve, state.validation_scores, state.rng = histories


def _shard_pass(factory, size, seed, state, steps, epoch, l1, pass_args):
    """A shard's pass (one task): its state after :func:`~pmap_sklearn._optim.sgd.run_epoch`,
    ``Σ ℓ`` over its samples and its last rate."""
    rng = np.random.default_rng(seed)
    with single_blas_thread():  # the same products, bit for bit, in any worker
        oracle = factory(rng.permutation(size), rng)
        penalty = _cumulative_l1(l1, state, steps)
        objective, eta = run_epoch(oracle, state, size, rng, steps, penalty, epoch, **pass_args)
    return state, objective, eta


def _mix(state: SGDState, shards: list[SGDState], weights: np.ndarray) -> None:
    """Set ``state`` (in place) to the mix of the shards' states: arrays by their weighted mean
    (the average of a shard not averaging yet is its weights), the step count and the number of
    averaged iterates of the longest shard's pass (the schedule's position along a path), the
    samples seen summed."""

    def mean(arrays, out=None):  # Σ_s μ_s array_s, into ``out`` (no array of a shard's)
        out = np.multiply(arrays[0], weights[0], out=out)
        scratch = np.empty_like(out)
        for weight, array in zip(weights[1:], arrays[1:], strict=True):
            out += np.multiply(array, weight, out=scratch)
        return out

    mean([shard.coef for shard in shards], out=state.coef)
    if any(shard.n_averaged for shard in shards):
        state.average = mean([s.average if s.n_averaged else s.coef for s in shards])
        state.n_averaged = max(shard.n_averaged for shard in shards)
    for name in _MIXED:
        arrays = [getattr(shard, name) for shard in shards]
        current = getattr(state, name)
        if arrays[0] is None:
            setattr(state, name, None)
        elif current is not None and current.shape == arrays[0].shape:
            mean(arrays, out=current)  # in place: the step rule holds it
        else:
            setattr(state, name, mean(arrays))
    seen = state.n_seen
    state.n_seen = seen + sum(shard.n_seen - seen for shard in shards)
    state.t = max(shard.t for shard in shards)
