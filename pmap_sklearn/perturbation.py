"""Perturbations for perturb-and-MAP (SPEC §1)."""

from __future__ import annotations

import numpy as np

EULER_GAMMA = float(np.euler_gamma)


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
    expected maximum (thesis Eq. 2.4.2) with a smaller variance.
    """
    return rng.logistic(loc=0.0, scale=1.0, size=shape)
