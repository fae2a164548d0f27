"""Generated data sets for demos, tests and benchmarks (no download needed)."""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch

from .._utils import check_binary_images, check_generator, like_input


def make_chain_data(
    n_samples: int = 200,
    n_states: int = 5,
    n_features: int = 10,
    length: tuple[int, int] = (4, 12),
    noise: float = 1.5,
    stickiness: float = 0.7,
    random_state=None,
) -> Bunch:
    """Sequences from a Markov chain with noisy per-label feature prototypes.

    The labels follow a chain that stays in its state with probability ``stickiness``, so a model
    with transition weights beats independent per-node classification.

    Parameters
    ----------
    n_samples : int, default=200
        Number of sequences.
    n_states : int, default=5
        Number of labels.
    n_features : int, default=10
        Node features: the label's prototype plus Gaussian noise.
    length : (int, int), default=(4, 12)
        Smallest and largest sequence length (uniform).
    noise : float, default=1.5
        Standard deviation of the feature noise.
    stickiness : float, default=0.7
        Probability of keeping the previous label.
    random_state : int, Generator, RandomState or None, default=None
        Seed of the draws.

    Returns
    -------
    data : Bunch
        ``data``: list of (D, n_features) arrays; ``target``: list of (D,) int arrays.
    """
    rng = np.random.default_rng(random_state)
    prototypes = rng.normal(size=(n_states, n_features))
    transition = np.full((n_states, n_states), (1 - stickiness) / (n_states - 1))
    np.fill_diagonal(transition, stickiness)
    cumulative = transition.cumsum(axis=1)
    X, y = [], []
    for n_nodes in rng.integers(length[0], length[1] + 1, size=n_samples):
        labels = np.empty(n_nodes, dtype=np.intp)
        labels[0] = rng.integers(n_states)
        draws = rng.random(n_nodes)
        for d in range(1, n_nodes):
            labels[d] = min(np.searchsorted(cumulative[labels[d - 1]], draws[d]), n_states - 1)
        X.append(prototypes[labels] + noise * rng.normal(size=(n_nodes, n_features)))
        y.append(labels)
    return Bunch(data=X, target=y)


def make_grid_data(
    n_samples: int = 20,
    shape: tuple[int, int] = (32, 32),
    noise: float = 1.0,
    random_state=None,
) -> Bunch:
    """Binary images of random ellipses observed through Gaussian noise.

    Parameters
    ----------
    n_samples : int, default=20
        Number of images.
    shape : (int, int), default=(32, 32)
        Image shape.
    noise : float, default=1.0
        Standard deviation of the Gaussian noise added to the 0/1 mask.
    random_state : int, Generator, RandomState or None, default=None
        Seed of the draws.

    Returns
    -------
    data : Bunch
        ``data``: list of (H, W, 1) noisy intensities; ``target``: list of (H, W) int masks.
    """
    rng = np.random.default_rng(random_state)
    rows, cols = np.mgrid[: shape[0], : shape[1]]
    X, y = [], []
    for _ in range(n_samples):
        mask = np.zeros(shape, dtype=np.intp)
        for _ in range(rng.integers(1, 4)):
            centre = rng.uniform(0.2, 0.8, size=2) * shape
            radii = rng.uniform(0.1, 0.3, size=2) * shape
            inside = ((rows - centre[0]) / radii[0]) ** 2 + ((cols - centre[1]) / radii[1]) ** 2
            mask[inside <= 1] = 1
        X.append((mask + noise * rng.normal(size=shape))[:, :, None])
        y.append(mask)
    return Bunch(data=X, target=y)


def add_flip_noise(images, p: float, random_state=None):
    """Flip every pixel of binary images independently with probability ``p``.

    Parameters
    ----------
    images : array of shape (n_images, H, W) or sequence of 2-D {0, 1} arrays
    p : float in [0, 1]
    random_state : int, Generator, RandomState or None

    Returns
    -------
    noisy : same container as ``images``, int8
    """
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"the flip probability p must lie in [0, 1], got {p}")
    rng = check_generator(random_state)
    clean = check_binary_images(images, "images")
    noisy = [(x ^ (rng.random(x.shape) < p)).astype(np.int8) for x in clean]
    return like_input(noisy, images)


#: Kumar & Hebert's bimodal noise (as in Hazan & Urtasun 2010, §6): per class, an equal mixture
#: of two Gaussians (mean, standard deviation)
_BIMODAL = {0: ((0.08, 0.03), (0.46, 0.03)), 1: ((0.55, 0.02), (0.42, 0.10))}


def add_kumar_hebert_noise(images, kind: str = "gaussian", random_state=None):
    r"""Observe binary images through Kumar & Hebert's noise models.

    ``"gaussian"``: :math:`x = y + N(0, 0.3^2)`; ``"bimodal"``: each pixel of class 0 is drawn from
    :math:`\tfrac{1}{2} N(0.08, 0.03^2) + \tfrac{1}{2} N(0.46, 0.03^2)` and each of class 1 from
    :math:`\tfrac{1}{2} N(0.55, 0.02^2) + \tfrac{1}{2} N(0.42, 0.10^2)` (Kumar & Hebert 2003; Hazan
    & Urtasun 2010, §6). The bimodal classes overlap around 0.45, so single pixels are ambiguous.

    Parameters
    ----------
    images : array of shape (n_images, H, W) or sequence of 2-D {0, 1} arrays
        Clean binary images.
    kind : {"gaussian", "bimodal"}, default="gaussian"
        The noise model.
    random_state : int, Generator, RandomState or None, default=None
        Seed of the draws.

    Returns
    -------
    noisy : same container as ``images``, float
        The observed intensities.
    """
    if kind not in ("gaussian", "bimodal"):
        raise ValueError(f"kind must be 'gaussian' or 'bimodal', got {kind!r}")
    rng = check_generator(random_state)
    clean = check_binary_images(images, "images")
    noisy = []
    for y in clean:
        if kind == "gaussian":
            noisy.append(y + 0.3 * rng.normal(size=y.shape))
            continue
        component = rng.random(y.shape) < 0.5
        mean, std = np.empty(y.shape), np.empty(y.shape)
        for label, (first, second) in _BIMODAL.items():
            here = y == label
            mean[here] = np.where(component[here], first[0], second[0])
            std[here] = np.where(component[here], first[1], second[1])
        noisy.append(mean + std * rng.normal(size=y.shape))
    return like_input(noisy, images)
