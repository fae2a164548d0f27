r"""The continuous priors on their levels (Shpakova 2019, §4.4): the discretisation of the
coefficients' magnitudes on levels :math:`0, \Delta, 2\Delta, \ldots` with trapezoid weights,
their MAPs by Ishikawa cuts, and the decodings of noisy signals — the exact continuous MAP, the
MAP on the levels and the perturb-and-MAP estimate of the posterior mean (§4.4.2)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from .._backend import (
    GroupMaxPotentials,
    IshikawaSolver,
    forest_shaped,
    packed_layout,
    prox_group_max,
)
from .._parallel import single_blas_thread
from .._validation import check_generator
from ..perturbation import gumbel
from . import _patches as patches

#: Level costs solved per call of the cut (models × coordinates × levels).
CHUNK_COSTS = 1 << 22
#: Most levels a coefficient may have (``grid_step`` too small for the data otherwise).
MAX_LEVELS = 4096
#: Patches of an image decoded together (bounds the memory of whole-photo decoding).
PATCHES_PER_BLOCK = 1 << 14


class Levels(NamedTuple):
    r"""The levels :math:`0, \Delta , 2\Delta , \ldots` of the coefficients' magnitudes (thesis
    §4.4.1)."""

    #: (n_coefficients,) number of levels of each coefficient (its domain over Δ, plus 1)
    n_levels: np.ndarray
    #: (max levels,) the level values
    values: np.ndarray
    #: (n_coefficients, max levels) log trapezoid weights of the levels
    log_weights: np.ndarray

    def packed(self):
        """``(owner, level)`` of every coefficient's levels one after the other (the packed
        layout of :class:`~pmap_sklearn.solvers.GroupMaxPotentials`), each of shape
        (Σ n_levels,)."""
        return packed_layout(self.n_levels)[1:]


class LevelDecoding:
    """The levels of a fitted prior and the decodings of noisy signals under it (a mixin of
    :class:`~pmap_sklearn.ContinuousLogSupermodularDenoiser`, which provides the fitted
    ``groups_``, ``domain_``, ``patch_shape_`` and the transforms)."""

    def _step(self, top: float, noise_std=None) -> float:
        """Δ: ``grid_step``, or for "auto" ``top / 128`` (and at most ``noise_std / 2``), never
        finer than ``top / 1024``, where ``top`` is the largest coefficient's domain."""
        if self.grid_step != "auto":
            return float(self.grid_step)
        if not top > 0:
            return 1.0
        step = top / 128 if noise_std is None else min(top / 128, noise_std / 2)
        return max(step, top / 1024)

    def _check_step(self, step: float, top: float) -> None:
        """Refuse a level step coarser than the largest coefficient's domain ``top``: its only
        levels would be 0 and the step, and every coefficient would decode to 0."""
        if step > top:
            raise ValueError(
                f"grid_step={self.grid_step!r} is larger than the largest coefficient's domain "
                f"({top:.3g}): the levels would be 0 and {step:.3g} only, and every coefficient "
                f"would be decoded as 0; use a grid_step below {top:.3g} (about 1/128 of it) "
                f"or grid_step='auto'"
            )

    def _levels(self, noise_std=None) -> Levels:
        """The discretisation of every coefficient's magnitude."""
        step = self._step(float(self.domain_.max()), noise_std)
        self._check_step(step, float(self.domain_.max()))
        top = float(self.domain_.max()) / step
        if not top + 1 <= MAX_LEVELS:
            raise ValueError(
                f"grid_step={self.grid_step!r} gives the largest coefficient (its domain is "
                f"{self.domain_.max():.3g}) {top + 1:.3g} levels, more than {MAX_LEVELS}: use "
                f"a larger grid_step or grid_step='auto'"
            )
        n_levels = np.ceil(self.domain_ / step - 1e-9).astype(np.intp) + 1
        top = int(n_levels.max())
        values = step * np.arange(top)
        log_weights = np.full((len(n_levels), top), np.log(step))
        log_weights[:, 0] = np.log(step / 2)
        log_weights[np.arange(len(n_levels)), n_levels - 1] = np.log(step / 2)
        return Levels(n_levels, values, log_weights)

    def _group_max(self, values: np.ndarray) -> np.ndarray:
        """``max_{a∈A} values[..., a]`` for every group, shape (..., n_groups)."""
        return np.stack([values[..., g].max(axis=-1) for g in self.groups_], axis=-1)

    def _level_map(self, scores, weights, levels):
        """``argmax_z Σ_i scores_i(z_i) − Σ_A d_A u_{max_A z}`` of every model (scores padded
        (B, n, R) or packed (B, Σ n_levels)): Ishikawa cuts, or dynamic programming when the
        groups form a forest (the Haar tree)."""
        model = GroupMaxPotentials(scores, levels.n_levels, levels.values, self.groups_, weights)
        return IshikawaSolver().map(model, n_jobs=self.n_jobs)

    def _perturbed_prior(self, rng, n_draws, weights, levels):
        """MAPs of ``n_draws`` Gumbel perturbations of the discretised prior, and their maxima
        ``max_z −f(u_z) + Σ_i h_{i,z_i} + log π_{z_i}``."""
        scores = gumbel(rng, (n_draws,) + levels.log_weights.shape) + levels.log_weights
        z = self._level_map(scores, weights, levels)
        picked = np.take_along_axis(scores, z[..., None], axis=-1)[..., 0].sum(axis=1)
        maxima = picked - self._group_max(levels.values[z]) @ weights
        return z, maxima

    # ---- decoding ---------------------------------------------------------------------------
    def _decoding(self, decoding):
        """The decoding asked for, and σ² (checked)."""
        self._validate_params()  # set_params after fit (noise_std, prior_scale, …)
        if self.noise_std is None:
            raise ValueError("set noise_std (the noise's standard deviation) to denoise")
        decoding = self.decoding if decoding is None else decoding
        if decoding == "auto":  # the user guide's setting for photos, the thesis's for signals
            decoding = "continuous_map" if self.patch_size is not None else "map"
        if decoding not in ("map", "mmse", "continuous_map"):
            raise ValueError(f"unknown decoding {decoding!r}")
        with np.errstate(over="ignore"):  # an overflow is refused just below
            sigma2 = float(np.float64(self.noise_std) ** 2)
        if not (np.isfinite(sigma2) and sigma2 > np.finfo(float).tiny):
            raise ValueError(
                f"noise_std={self.noise_std!r} is out of float64's range (its square is "
                f"{sigma2}): rescale the signals and noise_std together"
            )
        return decoding, sigma2

    def _denoise_signals(self, signals, decoding, sigma2, weights):
        """Denoised signals (n, *patch_shape_) of noisy ones, under the prior ``weights``."""
        y = self._coefficients(signals)
        if decoding == "continuous_map":
            # signs follow the data; magnitudes: prox of σ² f, clipped to [0, U] (§4.4.2)
            beta = prox_group_max(np.abs(y), self.groups_, sigma2 * weights)
            alpha = np.sign(y) * np.clip(beta, 0.0, self.domain_)
        else:
            alpha, _ = self._decode(y, decoding, sigma2, weights)
        if not np.isfinite(alpha).all():
            raise ValueError(
                f"decoding={decoding!r} is not finite with noise_std={self.noise_std!r} on "
                f"signals of this scale: rescale the signals and noise_std together"
            )
        return self._signals_from(alpha) + self._means(signals)

    def _denoise_image(self, image, decoding, sigma2, weights, stride=None):
        """Average of the denoised overlapping patches of one image (cycle spinning)."""
        shape = self.patch_shape_
        stride = self.patch_stride if stride is None else stride

        def denoise_rows(rows):
            noisy = patches.image_patches(image, shape, stride, rows)
            clean = self._denoise_signals(noisy.reshape((-1,) + shape), decoding, sigma2, weights)
            return rows, clean.reshape(noisy.shape)

        blocks = list(patches.row_blocks(image.shape, shape, stride, PATCHES_PER_BLOCK))
        # the continuous MAP is numpy sorting (threads run in parallel); the level decodings
        # spread their cuts over processes themselves
        threads = effective_n_jobs(self.n_jobs) if decoding == "continuous_map" else 1
        total, count = np.zeros(image.shape), np.zeros(image.shape)
        if threads > 1 and len(blocks) > 1:
            # one BLAS thread each (the Haar products): BLAS's own threads would compete
            with single_blas_thread():
                results = Parallel(threads, prefer="threads", return_as="generator")(
                    delayed(denoise_rows)(rows) for rows in blocks
                )
                for rows, estimates in results:
                    patches.add_patches(total, count, estimates, image.shape, shape, stride, rows)
        else:
            for rows in blocks:
                _, estimates = denoise_rows(rows)
                patches.add_patches(total, count, estimates, image.shape, shape, stride, rows)
        return total / count

    def _chunks(self, y, decoding):
        width = int(self._levels(self.noise_std).n_levels.sum())
        copies = self.n_perturbations if decoding == "mmse" else 1
        per_chunk = max(1, CHUNK_COSTS // (width * copies))
        return [y[i : i + per_chunk] for i in range(0, len(y), per_chunk)]

    def _decode(self, y, decoding, sigma2, weights):
        """The level decoding of coefficient rows ``y`` (n, k), chunk by chunk: the estimate,
        and for "mmse" the posterior variance of every coefficient (None for "map")."""
        chunks = self._chunks(y, decoding)
        # one stream per chunk: the same draws whatever runs them
        streams = check_generator(self.random_state).spawn(len(chunks))
        # forest-shaped priors are decoded by numpy dynamic programming (threads run in
        # parallel); cuts spread themselves over processes
        forest = forest_shaped(y.shape[1], self.groups_, weights)
        threads = effective_n_jobs(self.n_jobs) if forest and len(chunks) > 1 else 1
        parts = Parallel(threads, prefer="threads")(
            delayed(self._decode_levels)(part, decoding, sigma2, weights, rng)
            for part, rng in zip(chunks, streams, strict=True)
        )
        alpha = np.concatenate([estimate for estimate, _ in parts])
        if decoding == "map":
            return alpha, None
        return alpha, np.concatenate([variance for _, variance in parts])

    def _decode_levels(self, y, decoding, sigma2, weights, rng):
        levels = self._levels(self.noise_std)
        values = levels.values
        # scores of every coefficient's own levels only (packed), not padded to the longest
        owner, level = levels.packed()
        u, y_own = values[level], y[:, owner]
        if decoding == "map":  # joint MAP of signs and magnitudes: signs follow y
            # −(u − |y|)² without its constant d² beyond the domain (|y| = v + d, v ≤ U):
            # −(u − v)(u − v − 2d) keeps the levels apart where |y| ≫ U (at 1e20 the squares'
            # differences are below float64's resolution and every level would tie at 0)
            inside = np.minimum(np.abs(y_own), self.domain_[owner])
            beyond = np.abs(y_own) - inside
            scores = -(u - inside) * (u - inside - 2.0 * beyond) / (2.0 * sigma2)
            return np.sign(y) * values[self._level_map(scores, weights, levels)], None
        # posterior of the magnitudes with the signs summed out, perturbed M times
        coupling = u * y_own / sigma2
        log_posterior = -(u**2) / (2.0 * sigma2) + np.logaddexp(coupling, -coupling)
        log_posterior += levels.log_weights[owner, level]
        m = self.n_perturbations
        scores = np.repeat(log_posterior, m, axis=0)
        scores += gumbel(rng, scores.shape)
        z = self._level_map(scores, weights, levels).reshape(len(y), m, -1)
        beta = values[z]
        # E[α | β, y] = β tanh(β y / σ²), averaged over the perturbed MAPs of β; and
        # Var[α | y] = E[β² | y] − E[α | y]² (E[α² | β] = β²)
        alpha = (beta * np.tanh(beta * y[:, None, :] / sigma2)).mean(axis=1)
        return alpha, np.maximum((beta**2).mean(axis=1) - alpha**2, 0.0)
