"""Stein's unbiased risk estimate of a denoiser, to choose the scale of a prior
(``prior_scale="sure"``)."""

from __future__ import annotations

import numpy as np

from .._optim import defaults


def sure_scale(denoise, noisy, sigma2, weights, rng) -> float:
    r"""The factor ``s`` of the prior minimising Stein's unbiased risk estimate of ``denoise``.

    :math:`\operatorname{SURE}(s) = \|f(y) - y\|^2 - N \sigma^2 + 2 \sigma^2 \operatorname{div}
    f(y)` is an unbiased estimate of :math:`\|f(y) - x\|^2` for :math:`y = x + N(0, \sigma^2 I)` and
    a weakly differentiable ``f`` (Stein 1981); the divergence is estimated by one finite difference
    along a Gaussian probe ``b``, :math:`b^\top (f(y + \varepsilon b) - f(y)) / \varepsilon`
    (Ramani, Blu & Unser 2008, Monte-Carlo SURE). The factors tried are those of :func:`best_scale`.

    Parameters
    ----------
    denoise : callable
        ``([noisy, probed], weights) -> [estimate, probed estimate]``, each of the shape of
        ``noisy``.
    noisy : ndarray
    sigma2 : float
        The noise's variance.
    weights : ndarray
        The prior's ``d_A`` (factor 1).
    rng : numpy.random.Generator
        Draws the probe.

    Returns
    -------
    float
    """
    # a child stream: a probe equal to the user's noise (same seed) would bias the estimate
    probe = np.random.default_rng(rng.integers(2**63)).standard_normal(np.shape(noisy))
    epsilon = 1e-2 * np.sqrt(sigma2)

    def risk(scale):
        estimate, moved = denoise([noisy, noisy + epsilon * probe], scale * weights)
        divergence = float((probe * (moved - estimate)).sum()) / epsilon
        return float(((estimate - noisy) ** 2).sum()) + 2.0 * sigma2 * divergence

    return best_scale(risk)


def best_scale(risk) -> float:
    """The factor minimising ``risk(factor)`` among ``SURE_SCALES``
    (:mod:`pmap_sklearn._optim.defaults`), then the two neighbours of the best one at half the
    spacing (on a log scale)."""
    risks = {float(scale): risk(scale) for scale in defaults.SURE_SCALES}
    best = min(risks, key=risks.get)
    for scale in (best / np.sqrt(2.0), best * np.sqrt(2.0)):
        risks[float(scale)] = risk(scale)
    return min(risks, key=risks.get)
