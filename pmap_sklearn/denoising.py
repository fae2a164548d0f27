"""Log-supermodular binary image denoising (thesis Ch. 2; SPEC §2 "Log-supermodular denoising").

Prior on clean binary images ``x`` (4-connected grid)::

    p(x) ∝ exp(-α_h cut_h(x) - α_v cut_v(x) + t·x),      α >= 0,

and a channel that flips each pixel with probability π, ``u = log(π / (1 - π))``. The
posterior ``p(x | z) ∝ exp(-α·cuts(x) + (t + u (1 - 2z))·x)`` is again log-supermodular, so its
MAP is one graph cut. Every log-partition function ``A`` is replaced by its logistic
perturb-and-MAP bound ``A_logistic(θ, α) = E_ε max_y (θ + ε)·y - α·cuts(y)`` (thesis Eq. 2.4.2)
and the parameters are learned by projected stochastic gradient on the perturbations ε, one
graph cut per image and step (two in the unsupervised case).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._backend.cut import grid_cut_map
from ._base import check_generator
from ._parallel import map_jobs
from .perturbation import logistic

#: Neighbour directions of the 4-connected grid: horizontal, vertical.
OFFSETS = [(0, 1), (1, 0)]


def cut_counts(image: np.ndarray) -> np.ndarray:
    """Numbers of horizontal and vertical neighbour pairs with different labels.

    Parameters
    ----------
    image : ndarray of shape (H, W)

    Returns
    -------
    cuts : ndarray of shape (2,)
    """
    return np.array(
        [
            np.count_nonzero(image[:, 1:] != image[:, :-1]),
            np.count_nonzero(image[1:, :] != image[:-1, :]),
        ],
        dtype=float,
    )


def binary_grid_map(gain: np.ndarray, cut_weights: np.ndarray) -> np.ndarray:
    """``argmax_y gain·y - α_h cut_h(y) - α_v cut_v(y)`` over binary images (one graph cut).

    Parameters
    ----------
    gain : ndarray of shape (H, W)
        Score of label 1 relative to label 0, per pixel.
    cut_weights : ndarray of shape (2,)
        Penalties ``α >= 0`` of a horizontal and of a vertical disagreement.
    """
    unary = np.stack([np.zeros_like(gain), gain], axis=-1)
    weights = np.broadcast_to(-np.asarray(cut_weights, float)[:, None, None], (2, *gain.shape))
    return grid_cut_map(unary, OFFSETS, weights)


def _perturbed_mean(gain, cut_weights, n_perturbations, seed):
    """Mean of ``n_perturbations`` logistic-perturbed MAPs of one image."""
    rng = np.random.default_rng(seed)
    total = np.zeros(gain.shape)
    for _ in range(n_perturbations):
        total += binary_grid_map(gain + logistic(rng, gain.shape), cut_weights)
    return total / n_perturbations


def _check_binary_images(images, what: str) -> list[np.ndarray]:
    """A list of 2-D {0, 1} integer arrays, or a clear error naming the bad image."""
    if isinstance(images, np.ndarray) and images.ndim == 2:
        raise ValueError(f"{what} must be a sequence of images (n_images, H, W), got one image")
    try:
        n_images = len(images)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of 2-D binary images") from None
    if n_images == 0:
        raise ValueError(f"{what} is empty")
    checked = []
    for i, image in enumerate(images):
        array = np.asarray(image)
        if array.ndim != 2 or 0 in array.shape:
            raise ValueError(f"{what}[{i}]: expected a 2-D image (H, W), got shape {array.shape}")
        if array.dtype == bool:
            array = array.astype(np.int8)
        elif not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"{what}[{i}]: expected numbers, got dtype {array.dtype}")
        else:
            bad = (array != 0) & (array != 1)
            if bad.any():
                raise ValueError(
                    f"{what}[{i}] must be binary (0/1); found the value {array[bad][0]!r}"
                )
            array = array.astype(np.int8)
        checked.append(array)
    return checked


def _like_input(images: list[np.ndarray], original):
    """Stack the outputs into an array when the input was an array, else return a list."""
    if isinstance(original, np.ndarray):
        return np.stack(images)
    return images


class LogSupermodularDenoiser(BaseEstimator):
    """Binary image denoising with a log-supermodular prior learned by perturb-and-MAP.

    ``fit(X_noisy, y=X_clean)`` maximises the conditional likelihood ``p(x | z)`` (thesis
    §2.5.3); ``fit(X_noisy)`` maximises the marginal likelihood of the noisy images ``p(z)``
    (thesis §2.5.4, a difference of two log-partition functions). Both replace ``A`` by its
    logistic perturb-and-MAP bound and run projected SGD with steps ``C/√h`` on the
    perturbations (SPEC §2): per step and image one graph cut of the posterior (and, without
    clean images, one of the prior). The estimate is the weighted average of the iterates
    (weights ∝ h), which is what the ``1/√h`` rate is proved for.

    The objective (minimised) is, with ``D`` pixels per image and ``N`` images,
    ``(1/(N D)) Σ_n NLL_n + (reg_field/2) mean(t²) + (reg_cut/2) ‖α‖²``.

    Parameters
    ----------
    field : {"pixel", "shared"}, default="pixel"
        One field value ``t_d`` per pixel (a shape prior; every image must then have the same
        shape) or one value shared by all pixels (images of any shape).
    noise_level : float in (0, 0.5) or "learn", default="learn"
        Flip probability π of the channel, or learn it (through ``u = log(π/(1-π)) <= 0``).
    noise_init : float in (0, 0.5), default=0.1
        Starting π when it is learned.
    reg_field, reg_cut : float, default=1e-3
        Squared ℓ2 penalties of the field ``t`` and of the cut weights ``α``.
    step_size : float, default=5.0
        ``C`` of the steps ``C/√h``. Each block of the gradient is normalised by the pixels that
        inform it (a per-pixel ``t_d`` sees one pixel per image, ``α`` and ``u`` see all), so
        one ``C`` suits every block.
    max_iter : int, default=30
        Passes over the images.
    batch_size : int, default=10
        Images per step.
    n_perturbations : int, default=100
        Logistic perturbations ``M`` behind :meth:`predict_marginals` and "mean" decoding.
    decoding : {"map", "mean"}, default="map"
        Default of :meth:`predict`: the posterior MAP ("max-marginal", one cut per image) or the
        mean-marginal thresholded at 1/2.
    random_state : int, Generator, RandomState or None, default=None
    n_jobs : int or None, default=None
        Processes for the graph cuts of :meth:`predict` and :meth:`predict_marginals` (results
        do not depend on it).
    verbose : int, default=0

    Attributes
    ----------
    field_ : ndarray of shape (H, W) or float
        Learned field ``t``.
    cut_weights_ : ndarray of shape (2,)
        Learned ``(α_h, α_v) >= 0``.
    noise_level_ : float
        π, learned or given.
    loss_curve_ : list of float
        Mean stochastic estimate of the per-pixel objective over each pass.
    image_shape_ : tuple or None
        Shape every image must have (``field="pixel"``), else None.
    n_iter_ : int

    References
    ----------
    .. [1] T. Shpakova and F. Bach. Parameter learning for log-supermodular distributions.
       NIPS 2016 (thesis Ch. 2).

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import LogSupermodularDenoiser
    >>> from pmap_sklearn.datasets import add_flip_noise
    >>> clean = np.zeros((20, 12, 12), dtype=int)
    >>> clean[:, 3:9, 2:10] = 1
    >>> noisy = add_flip_noise(clean, 0.1, random_state=0)
    >>> model = LogSupermodularDenoiser(random_state=0).fit(noisy, clean)
    >>> bool(np.mean(model.predict(noisy) != clean) < np.mean(noisy != clean))
    True
    """

    _parameter_constraints: dict = {
        "field": [StrOptions({"pixel", "shared"})],
        "noise_level": [Interval(Real, 0, 0.5, closed="neither"), StrOptions({"learn"})],
        "noise_init": [Interval(Real, 0, 0.5, closed="neither")],
        "reg_field": [Interval(Real, 0, None, closed="left")],
        "reg_cut": [Interval(Real, 0, None, closed="left")],
        "step_size": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "n_perturbations": [Interval(Integral, 1, None, closed="left")],
        "decoding": [StrOptions({"map", "mean"})],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        field="pixel",
        noise_level="learn",
        noise_init=0.1,
        reg_field=1e-3,
        reg_cut=1e-3,
        step_size=5.0,
        max_iter=30,
        batch_size=10,
        n_perturbations=100,
        decoding="map",
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        self.field = field
        self.noise_level = noise_level
        self.noise_init = noise_init
        self.reg_field = reg_field
        self.reg_cut = reg_cut
        self.step_size = step_size
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.n_perturbations = n_perturbations
        self.decoding = decoding
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags

    # ---- fitting ---------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn ``t``, ``α`` (and π if asked) from noisy images, with or without clean ones.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images ``z``.
        y : same as X, or None
            Clean images ``x`` (supervised, conditional likelihood), or None (unsupervised,
            marginal likelihood of ``z``).

        Returns
        -------
        self
        """
        noisy = _check_binary_images(X, "X")
        clean = None
        if y is not None:
            clean = _check_binary_images(y, "y")
            if len(clean) != len(noisy):
                raise ValueError(f"X has {len(noisy)} images but y has {len(clean)}")
            for i, (z, x) in enumerate(zip(noisy, clean, strict=True)):
                if z.shape != x.shape:
                    raise ValueError(f"image {i}: X has shape {z.shape} but y has {x.shape}")
        self.image_shape_ = None
        if self.field == "pixel":
            shapes = {z.shape for z in noisy}
            if len(shapes) > 1:
                raise ValueError(
                    f"field='pixel' learns one value per pixel, so every image needs the same "
                    f"shape; got shapes {sorted(shapes)}. Resize the images or use field='shared'"
                )
            self.image_shape_ = noisy[0].shape
        rng = check_generator(self.random_state)
        params = _Parameters.initial(
            self.image_shape_, self.noise_level if self.noise_level != "learn" else self.noise_init
        )
        average = params.copy()
        self.loss_curve_ = []
        step = 0
        for epoch in range(self.max_iter):
            losses = []
            order = rng.permutation(len(noisy))
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                gradient, loss = self._stochastic_gradient(params, noisy, clean, batch, rng)
                step += 1
                params.move(gradient, -self.step_size / np.sqrt(step))  # θ ← θ - (C/√h) g
                params.project(learn_noise=self.noise_level == "learn")
                average.blend(params, 2.0 / (step + 1))  # weights ∝ h
                losses.append(loss)
            self.loss_curve_.append(float(np.mean(losses)) + self._penalty(params))
            if self.verbose:
                print(f"epoch {epoch + 1}: objective {self.loss_curve_[-1]:.5f}")
        self.n_iter_ = self.max_iter
        self.field_ = average.field if average.field.ndim else float(average.field)
        self.cut_weights_ = average.cut_weights
        self.noise_level_ = float(1.0 / (1.0 + np.exp(-average.log_odds)))
        return self

    def _penalty(self, params) -> float:
        return 0.5 * (
            self.reg_field * float(np.mean(params.field**2))
            + self.reg_cut * float(params.cut_weights @ params.cut_weights)
        )

    def _stochastic_gradient(self, params, noisy, clean, batch, rng):
        """One-perturbation gradient of the per-pixel objective on a mini-batch.

        Supervised (thesis §2.5.3), per image: ``NLL = α·cuts(x) - θ·x + A_logistic(θ, α)``
        with ``θ = t + u s`` and ``s = 1 - 2z``; so ``∂t = y* - x``, ``∂α = cuts(x) - cuts(y*)``,
        ``∂u = s·(y* - x)`` with ``y*`` the perturbed posterior MAP.
        Unsupervised (thesis §2.5.4): ``NLL = -A_logistic(θ, α) + A_logistic(t, α) - z·u
        + D log(1 + e^u)``; so ``∂t = y*_prior - y*_post``, ``∂α = cuts(y*_post) -
        cuts(y*_prior)``, ``∂u = -s·y*_post - Σz + D π``.

        Returns the gradient of the per-pixel objective with its penalty (a
        :class:`_Parameters`; the per-pixel field block multiplied by ``D``, see
        :meth:`_Parameters.add`), and the batch's mean objective estimate per pixel
        (without the penalty).
        """
        gradient = params.zeros_like()
        loss = 0.0
        for n in batch:
            z = noisy[n]
            sign = 1.0 - 2.0 * z
            field = np.broadcast_to(params.field, z.shape)
            gain = field + params.log_odds * sign
            eps = logistic(rng, z.shape)
            y_post = binary_grid_map(gain + eps, params.cut_weights)
            cuts_post = cut_counts(y_post)
            value_post = float(np.sum((gain + eps) * y_post)) - params.cut_weights @ cuts_post
            if clean is not None:
                x = clean[n]
                cuts_clean = cut_counts(x)
                gradient.add(y_post - x, cuts_clean - cuts_post, np.sum(sign * (y_post - x)))
                nll = params.cut_weights @ cuts_clean - float(np.sum(gain * x)) + value_post
            else:
                eps = logistic(rng, z.shape)
                y_prior = binary_grid_map(field + eps, params.cut_weights)
                cuts_prior = cut_counts(y_prior)
                value_prior = float(np.sum((field + eps) * y_prior)) - (
                    params.cut_weights @ cuts_prior
                )
                noise = 1.0 / (1.0 + np.exp(-params.log_odds))
                gradient.add(
                    y_prior - y_post,
                    cuts_post - cuts_prior,
                    -float(np.sum(sign * y_post)) - float(z.sum()) + z.size * noise,
                )
                nll = (
                    -value_post
                    + value_prior
                    - params.log_odds * float(z.sum())
                    + z.size * np.logaddexp(0.0, params.log_odds)
                )
            loss += nll / z.size
        gradient.scale(1.0 / len(batch))
        # (reg_field/2) mean(t²) has derivative reg_field t_d / D: times D, as the field block.
        gradient.field = gradient.field + self.reg_field * params.field
        gradient.cut_weights = gradient.cut_weights + self.reg_cut * params.cut_weights
        if self.noise_level != "learn":
            gradient.log_odds = 0.0
        return gradient, loss / len(batch)

    # ---- prediction ------------------------------------------------------------------------
    def _gains(self, X) -> list[np.ndarray]:
        check_is_fitted(self, "cut_weights_")
        noisy = _check_binary_images(X, "X")
        if self.image_shape_ is not None:
            for i, z in enumerate(noisy):
                if z.shape != self.image_shape_:
                    raise ValueError(
                        f"X[{i}] has shape {z.shape}, but the per-pixel field was learned on "
                        f"images of shape {self.image_shape_}"
                    )
        u = np.log(self.noise_level_ / (1.0 - self.noise_level_))
        return [self.field_ + u * (1.0 - 2.0 * z) for z in noisy]

    def predict_marginals(self, X):
        """Posterior probability of every pixel being 1: the mean of ``n_perturbations``
        logistic-perturbed posterior MAPs (SPEC §1).

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images.

        Returns
        -------
        marginals : same container as X, of floats in [0, 1]
        """
        gains = self._gains(X)
        seeds = check_generator(self.random_state).integers(2**63, size=len(gains))
        jobs = [
            (gain, self.cut_weights_, self.n_perturbations, seed)
            for gain, seed in zip(gains, seeds, strict=True)
        ]
        return _like_input(map_jobs(_perturbed_mean, jobs, self.n_jobs), X)

    def predict(self, X, decoding=None):
        """Denoised images.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images.
        decoding : {"map", "mean"} or None, default=None
            "map": the posterior MAP by one graph cut; "mean": the mean-marginal thresholded
            at 1/2. None uses the estimator's ``decoding``.

        Returns
        -------
        images : same container as X, of int
        """
        decoding = self.decoding if decoding is None else decoding
        if decoding == "mean":
            marginals = self.predict_marginals(X)
            return _like_input([(m > 0.5).astype(np.intp) for m in marginals], X)
        if decoding != "map":
            raise ValueError(f"decoding must be 'map' or 'mean', got {decoding!r}")
        jobs = [(gain, self.cut_weights_) for gain in self._gains(X)]
        return _like_input(map_jobs(binary_grid_map, jobs, self.n_jobs), X)

    def score(self, X, y):
        """Mean over images of the fraction of correctly denoised pixels (1 - pixel error)."""
        clean = _check_binary_images(y, "y")
        predicted = self.predict(X)
        if len(clean) != len(predicted):
            raise ValueError(f"X has {len(predicted)} images but y has {len(clean)}")
        return float(np.mean([np.mean(p == c) for p, c in zip(predicted, clean, strict=True)]))


class _Parameters:
    """``(t, α, u)`` of the denoiser, or a (normalised) gradient with the same blocks."""

    def __init__(self, field: np.ndarray, cut_weights: np.ndarray, log_odds: float):
        self.field = field
        self.cut_weights = cut_weights
        self.log_odds = log_odds

    @classmethod
    def initial(cls, image_shape, noise_level: float) -> _Parameters:
        field = np.zeros(image_shape) if image_shape is not None else np.zeros(())
        return cls(field, np.zeros(2), float(np.log(noise_level / (1.0 - noise_level))))

    def copy(self) -> _Parameters:
        return _Parameters(self.field.copy(), self.cut_weights.copy(), self.log_odds)

    def zeros_like(self) -> _Parameters:
        return _Parameters(np.zeros_like(self.field), np.zeros(2), 0.0)

    def add(self, field_gradient, cut_gradient, log_odds_gradient) -> None:
        """Accumulate one image's derivatives of ``NLL / D`` (its ``D`` pixels), with the
        per-pixel field block multiplied by ``D`` (each ``t_d`` is informed by one pixel per
        image): every block is then O(1) and one step size ``C`` suits all. A shared field
        averages its pixels' derivatives."""
        n_pixels = field_gradient.size
        self.field = self.field + (
            field_gradient if self.field.ndim else float(np.sum(field_gradient)) / n_pixels
        )
        self.cut_weights = self.cut_weights + cut_gradient / n_pixels
        self.log_odds += float(log_odds_gradient) / n_pixels

    def scale(self, factor: float) -> None:
        self.field = self.field * factor
        self.cut_weights = self.cut_weights * factor
        self.log_odds *= factor

    def move(self, direction: _Parameters, rate: float) -> None:
        """``self ← self + rate direction``."""
        self.field = self.field + rate * direction.field
        self.cut_weights = self.cut_weights + rate * direction.cut_weights
        self.log_odds += rate * direction.log_odds

    def blend(self, other: _Parameters, weight: float) -> None:
        """``self ← (1 - weight) self + weight other``."""
        self.field = (1 - weight) * self.field + weight * other.field
        self.cut_weights = (1 - weight) * self.cut_weights + weight * other.cut_weights
        self.log_odds = (1 - weight) * self.log_odds + weight * other.log_odds

    def project(self, learn_noise: bool) -> None:
        """``α >= 0`` keeps the prior log-supermodular; ``u <= 0`` (π <= 1/2) fixes the label
        symmetry of the channel."""
        self.cut_weights = np.maximum(self.cut_weights, 0.0)
        if learn_noise:
            self.log_odds = min(self.log_odds, 0.0)
