"""Perturbations for perturb-and-MAP (SPEC §1)."""

from __future__ import annotations

import numpy as np

EULER_GAMMA = float(np.euler_gamma)


def gumbel(rng: np.random.Generator, shape) -> np.ndarray:
    """Zero-mean standard Gumbel draws (``loc = -γ_Euler``, ``scale = 1``).

    Added to the unary scores, one per node and label, they make ``argmax_y f(y) + z(y)`` an
    exact sample of ``P(y) ∝ exp f(y)`` when the model is separable (the Gumbel-max trick).
    """
    return rng.gumbel(loc=-EULER_GAMMA, scale=1.0, size=shape)
