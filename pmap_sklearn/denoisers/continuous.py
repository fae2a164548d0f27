r"""Continuous log-supermodular priors for grey-level denoising (Shpakova 2019, chapter 4).

A signal :math:`x = D \alpha + \varepsilon` (``D`` orthonormal: the identity or a 2-D Haar
transform, :math:`\varepsilon ~ N(0, \sigma^2 I)`) with the prior :math:`p(\alpha ) \propto \exp
(-f(|\alpha |))`, ``f(w) = Σ_A d_A max_{a∈A} w_a`` (§4.3.1, §4.5.2): the signs of :math:`\alpha` are
independent and uniform, its magnitudes :math:`\beta = |\alpha |` have the log-supermodular density
:math:`\exp (-f(\beta )) / Z` on the box ``[0, U]``. Learning maximises the likelihood with ``log
Z`` replaced by the perturb-and-MAP upper bound of its discretisation on levels :math:`0, \Delta ,
2\Delta , \ldots` with trapezoid weights (§4.4.1); every MAP is one Ishikawa cut. Decoding: the
exact continuous MAP (divide and conquer on cuts), the MAP on the levels, or the perturb-and-MAP
estimate of the posterior mean (MMSE, §4.4.2) with the signs marginalised.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_array, check_is_fitted

from .._optim import defaults
from .._optim import sgd as _sgd
from .._parallel import N_JOBS_CONSTRAINT, single_blas_thread
from .._utils import store_parameters, user_stacklevel
from .._validation import NumberInterval, check_generator
from . import _patches as patches
from ._decoding import LevelDecoding
from ._haar import _haar_matrix, _haar_side, grid_groups, tree_groups
from ._sure import best_scale, sure_scale


class ContinuousLogSupermodularDenoiser(LevelDecoding, BaseEstimator):
    r"""Denoising with a learned continuous log-supermodular prior (Shpakova 2019, chapter 4).

    The prior on the coefficients :math:`\alpha = D^\top x` of a clean signal (``D`` the identity or
    the orthonormal 2-D Haar transform) is ``p(α) ∝ exp(−Σ_A d_A max_{a∈A} |α_a|)`` on the box
    :math:`|\alpha_i| \le U_i` (``U_i`` from the training data). Signs are uniform and independent;
    the magnitudes are log-supermodular. ``fit(X_clean)`` learns ``d_A >= 0`` by projected
    stochastic gradient (AdaGrad steps, averaged iterates) on the negative log-likelihood with ``log
    Z`` replaced by its perturb-and-MAP upper bound on the levels :math:`0, \Delta , 2\Delta ,
    \ldots` (thesis §4.4.1): each step draws ``batch_perturbations`` Gumbel perturbations of the
    discretised prior and solves their MAPs by Ishikawa cuts. ``predict(X_noisy)`` decodes under
    Gaussian noise of standard deviation ``noise_std``.

    Parameters
    ----------
    groups : {"auto", "unary", "grid", "tree"} or list of int sequences, default="auto"
        The groups ``A``: one per coefficient ("unary"), those and the 4-neighbour pairs of the
        patch ("grid"), those and the parent–child pairs of the Haar quad-tree ("tree",
        ``basis="haar"`` only), or any list of coefficient indices. "auto": "tree" on Haar
        image patches, "grid" on other image patches, "unary" on signals.
    basis : {"auto", "identity", "haar"}, default="auto"
        ``D``: pixels themselves, or orthonormal Haar wavelets (square patches of side 2^L).
        "auto": "haar" with ``patch_size`` a power of 2 and ``groups`` "auto" or "tree" (the
        setting of the user guide's whole photos), "identity" otherwise.
        (Not called ``transform``: scikit-learn takes an estimator with a ``transform``
        attribute for a transformer.)
    patch_size : int, (int, int) or None, default=None
        With a patch size, ``fit`` takes whole images (one 2-D array, a 3-D stack or a list of
        2-D arrays of any sizes) and learns the prior of their patches; ``predict`` and
        ``score`` take images and denoise every overlapping patch, averaging the estimates of
        each pixel (cycle spinning, Coifman & Donoho 1995). Without, the samples are the
        signals (rows of ``X``).
    patch_stride : int, default=1
        Step between the patches of an image (the last row and column of patches are always
        included), at most the patch's side so that every pixel is covered. 1 is best; 2 is
        about four times faster and loses about 0.5 dB.
    max_patches : int, None or "auto", default="auto"
        With ``patch_size``: fit on at most this many patches drawn at random (over all the
        training images' patches on the stride grid); "auto": 40,000 (None: all).
    grid_step : float or "auto", default="auto"
        Δ, the step of the levels (used by ``fit`` and by the discrete decodings; may be
        changed after fitting). "auto": the largest coefficient's domain over 128, and at most
        ``noise_std / 2`` when decoding, but never more than 1024 levels.
    noise_std : float or None, default=None
        σ of the noise to remove; needed by :meth:`predict` and :meth:`score`.
    decoding : {"auto", "map", "mmse", "continuous_map"}, default="auto"
        Default of :meth:`predict`: the MAP on the levels (one level MAP per signal), the
        perturb-and-MAP posterior mean (``n_perturbations`` level MAPs per signal), or the
        exact MAP of the continuous posterior. "auto": "continuous_map" with ``patch_size``
        (the most accurate and among the fastest on photos), "map" on signals (the thesis's
        tables). A level MAP is one Ishikawa cut, or for
        forest-shaped groups (``"unary"``, ``"tree"``) exact dynamic programming, about ten
        times faster.
    n_perturbations : int, default=100
        M, the Gumbel perturbations of the MMSE estimate and of :meth:`score_samples`.
    prior_scale : float, "sure" or "auto", default="auto"
        Factor applied to the learned ``d_A`` when decoding. A prior learned on some photos
        shrinks too much or too little for others (a smooth photo wants more, a textured one
        or strong noise less). "auto": "sure" with ``patch_size`` (whole photos, where the
        user guide's benchmark gains 0.65 dB on average for about twice the decoding time),
        1.0 on signals (the thesis's tables, test signals drawn like the training ones).
        "sure": for every image (or every call's signals), the factor
        among 1/4 … 4 that minimises Stein's unbiased estimate of the mean squared error
        (Stein 1981). For the continuous and level MAPs, the continuous MAP's risk, its
        divergence estimated with one random probe (Ramani, Blu & Unser 2008), on the patches
        at stride 4 (at most 16384 signals drawn at random without ``patch_size``); costs
        about 14 decodings at stride 4. For the MMSE, its own risk, the divergence being the
        posterior variance over σ² (Tweedie's formula) estimated from the perturbed MAPs, on
        at most 2048 non-overlapping patches (or signals) drawn at random; costs about 7 MMSE
        decodings of those.
    center : bool, default=False
        Model each signal minus its own mean (the mean of a noisy signal is kept as it is,
        its noise being ``σ / √n_features``). The thesis models raw pixels; on pixel patches
        centring turns the prior into a shrinkage towards the patch mean.
    domain_margin : float, default=0.1
        ``U_i = (1 + domain_margin) max_n |α_ni|``, rounded up to the grid.
    max_iter : int, default=100
        Stochastic gradient steps.
    batch_perturbations : int, default=10
        Perturbed MAPs per step.
    eta0 : float, default=0.5
        AdaGrad step, in units of ``1 / mean_n max_{a∈A} |α_na|`` for each group.
    random_state : int, Generator, RandomState or None, default=None
    n_jobs : int or None, default=None
        Processes for the cuts, threads for the dynamic programmes of forest-shaped groups
        (results do not depend on it).
    verbose : int, default=0

    Attributes
    ----------
    group_weights_ : ndarray of shape (n_groups,)
        The learned ``d_A >= 0``.
    basis_ : {"identity", "haar"}
        The basis used (``basis`` with "auto" resolved).
    group_kind_ : str or list
        ``groups`` with "auto" resolved.
    groups_ : list of ndarray
        The groups, as coefficient indices.
    domain_ : ndarray of shape (n_coefficients,)
        ``U_i``.
    patch_shape_ : tuple
        Shape of one signal (one patch).
    grid_step_ : float
        Δ used by ``fit``.
    n_features_in_ : int
    loss_curve_ : list of float
        Stochastic estimate of the negative log-likelihood bound (per signal) at each step.
    n_iter_ : int

    See Also
    --------
    LogSupermodularDenoiser : the binary log-supermodular model (thesis chapter 2).

    References
    ----------
    .. [1] T. Shpakova. On parameter learning for perturb-and-MAP models. PhD thesis, École
       normale supérieure, 2019, chapter 4.
    .. [2] H. Ishikawa. Exact optimization for Markov random fields with convex priors. IEEE
       TPAMI 25(10), 2003.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import ContinuousLogSupermodularDenoiser
    >>> rng = np.random.default_rng(0)
    >>> clean = rng.laplace(scale=2.0, size=(500, 4))
    >>> model = ContinuousLogSupermodularDenoiser(groups="unary", grid_step=0.25,
    ...                                          noise_std=1.0, random_state=0).fit(clean)
    >>> np.round(model.group_weights_, 1)  # the true d is 1 / 2
    array([0.5, 0.5, 0.5, 0.5])
    >>> noisy = clean + rng.normal(scale=1.0, size=clean.shape)
    >>> denoised = model.predict(noisy, decoding="continuous_map")
    >>> bool(((denoised - clean) ** 2).mean() < ((noisy - clean) ** 2).mean())
    True
    """

    _parameter_constraints: dict = {
        "groups": [StrOptions({"auto", "unary", "grid", "tree"}), list],
        "basis": [StrOptions({"auto", "identity", "haar"})],
        "patch_size": [None, NumberInterval(Integral, 1, None, closed="left"), tuple],
        "patch_stride": [NumberInterval(Integral, 1, None, closed="left")],
        "max_patches": [
            None,
            NumberInterval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "grid_step": [StrOptions({"auto"}), NumberInterval(Real, 0, None, closed="neither")],
        "noise_std": [None, NumberInterval(Real, 0, None, closed="neither")],
        "decoding": [StrOptions({"auto", "map", "mmse", "continuous_map"})],
        "n_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
        "prior_scale": [
            StrOptions({"sure", "auto"}),
            NumberInterval(Real, 0, None, closed="neither"),
        ],
        "center": ["boolean"],
        "domain_margin": [NumberInterval(Real, 0, None, closed="left")],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
        "batch_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
        "eta0": [NumberInterval(Real, 0, None, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS_CONSTRAINT,
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        groups="auto",
        basis="auto",
        patch_size=None,
        patch_stride=1,
        max_patches="auto",
        grid_step="auto",
        noise_std=None,
        decoding="auto",
        n_perturbations=100,
        prior_scale="auto",
        center=False,
        domain_margin=0.1,
        max_iter=100,
        batch_perturbations=10,
        eta0=0.5,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        store_parameters(self, locals())

    # ---- input --------------------------------------------------------------------------
    def _signals(self, X, fitting: bool) -> np.ndarray:
        """Signals as (n, …) float arrays of the patch shape (checked)."""
        # near float64's limit the finiteness check's sum overflows (it then checks each value)
        with np.errstate(over="ignore", invalid="ignore"):
            X = check_array(X, allow_nd=True, dtype=float, ensure_min_features=1)
        if X.ndim > 3:
            raise ValueError(
                f"X must have shape (n_samples, n_features) or (n_samples, height, width), "
                f"got {X.shape}"
            )
        if fitting:
            return X
        n_features = X[0].size
        if n_features != self.n_features_in_:
            raise ValueError(
                f"X has {n_features} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        return X.reshape((len(X),) + self.patch_shape_)

    def _size_of_patches(self) -> tuple:
        size = self.patch_size
        if isinstance(size, Integral):
            return (int(size), int(size))
        if len(size) != 2 or not all(isinstance(v, Integral) and v >= 1 for v in size):
            raise ValueError(f"patch_size must be an int or a pair of positive ints, got {size!r}")
        return tuple(int(v) for v in size)

    def _training_signals(self, X, rng) -> np.ndarray:
        """The training signals: the rows of X, or the patches of the images X."""
        if self.patch_size is None:
            return self._signals(X, fitting=True)
        shape = self._size_of_patches()
        stride = self._covering_stride(shape)
        images, _ = patches.check_images(X, shape)
        grids = [
            (
                patches.patch_starts(image.shape[0], shape[0], stride),
                patches.patch_starts(image.shape[1], shape[1], stride),
            )
            for image in images
        ]
        counts = np.array([len(top) * len(left) for top, left in grids])
        total = int(counts.sum())
        max_patches = (
            defaults.CONTINUOUS_MAX_PATCHES if self.max_patches == "auto" else self.max_patches
        )
        if max_patches is None or max_patches >= total:
            chosen = np.arange(total)
        else:
            chosen = np.sort(rng.choice(total, max_patches, replace=False))
        image_of = np.searchsorted(np.cumsum(counts), chosen, side="right")
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        signals = []
        for i, (image, (top, left)) in enumerate(zip(images, grids, strict=True)):
            local = chosen[image_of == i] - offsets[i]
            r, c = np.divmod(local, len(left))
            windows = np.lib.stride_tricks.sliding_window_view(image, shape)
            signals.append(windows[top[r], left[c]])
        return np.concatenate(signals)

    def _covering_stride(self, shape) -> int:
        """``patch_stride``, checked to leave no pixel between two patches uncovered."""
        if self.patch_stride > min(shape):
            raise ValueError(
                f"patch_stride={self.patch_stride} is larger than the {shape[0]}×{shape[1]} "
                f"patches: the pixels between two patches would be denoised by none; use a "
                f"patch_stride of at most {min(shape)}"
            )
        return self.patch_stride

    def _resolve_auto(self, X) -> None:
        """``basis_`` and ``group_kind_``: ``"auto"`` resolved from the signals ``X`` (after
        the patches are cut). Image patches (``patch_size``) take the setting of the user
        guide's whole photos: Haar wavelets with the quad-tree prior on square patches of side
        2^L, pixels with the 4-neighbour prior otherwise; signals (no ``patch_size``) take
        pixels with one group per coefficient."""
        patches_given = self.patch_size is not None
        basis = self.basis
        if basis == "auto":
            wants_haar = isinstance(self.groups, str) and self.groups in ("auto", "tree")
            fits_haar = X.ndim == 3 and _haar_side(X.shape[1:])
            basis = "haar" if patches_given and fits_haar and wants_haar else "identity"
        groups = self.groups
        if isinstance(groups, str) and groups == "auto":
            groups = ("tree" if basis == "haar" else "grid") if patches_given else "unary"
        self.basis_, self.group_kind_ = basis, groups

    def _patch_shape(self, X) -> tuple:
        kind = self.group_kind_
        needs_square = self.basis_ == "haar" or (isinstance(kind, str) and kind in ("grid", "tree"))
        if X.ndim == 3:
            shape = X.shape[1:]
        else:
            side = int(round(np.sqrt(X.shape[1])))
            shape = (side, side) if needs_square and side * side == X.shape[1] else X.shape[1:]
        if needs_square and len(shape) != 2:
            raise ValueError(
                f"groups={kind!r} / basis={self.basis_!r} need image patches: "
                f"X of shape (n, height, width) or (n, side**2), got {X.shape}"
            )
        if self.basis_ == "haar":
            if not _haar_side(shape):
                raise ValueError(
                    f"the Haar transform needs square patches of side 2^L, got {shape}"
                )
        return tuple(int(s) for s in shape)

    def _make_groups(self, n: int) -> list:
        kind = self.group_kind_
        if isinstance(kind, str):
            if kind == "unary":
                return [np.array([i]) for i in range(n)]
            if kind == "grid":
                return grid_groups(self.patch_shape_)
            if self.basis_ != "haar":
                raise ValueError("groups='tree' is the Haar quad-tree: set basis='haar'")
            return tree_groups(self.patch_shape_[0])
        groups = []
        for g, members in enumerate(kind):
            try:
                members = np.asarray(members)
            except ValueError:  # ragged nesting
                members = np.empty((0, 0))
            if members.ndim != 1 or members.size == 0 or members.dtype.kind not in "iu":
                raise ValueError(f"group {g} must be a non-empty sequence of int indices")
            if members.min() < 0 or members.max() >= n:
                raise ValueError(f"group {g} has indices outside [0, {n}): {members.tolist()}")
            groups.append(np.unique(members))
        if not groups:
            raise ValueError("groups is an empty list")
        return groups

    def _means(self, X: np.ndarray) -> np.ndarray:
        """The mean of every signal (zeros without centring), broadcastable to X."""
        axes = tuple(range(1, X.ndim))
        return (
            X.mean(axis=axes, keepdims=True)
            if self.center
            else np.zeros((len(X),) + (1,) * len(axes))
        )

    def _coefficients(self, X: np.ndarray) -> np.ndarray:
        r""":math:`\alpha = D^\top (x - \operatorname{mean} )` as (n, k)."""
        X = (X - self._means(X)).reshape(len(X), -1)
        if self.basis_ == "haar":
            return X @ _haar_matrix(self.patch_shape_[0])
        return X

    def _signals_from(self, alpha: np.ndarray) -> np.ndarray:
        if self.basis_ == "haar":
            alpha = alpha @ _haar_matrix(self.patch_shape_[0]).T
        return alpha.reshape((len(alpha),) + self.patch_shape_)

    # ---- learning ---------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the group weights ``d_A`` from clean signals.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, height, width)
            Clean signals (patches).
        y : None
            Ignored.

        Returns
        -------
        self : ContinuousLogSupermodularDenoiser
        """
        saved = dict(vars(self))
        try:
            return self._fit(X)
        except BaseException:  # a failed fit leaves the model as it was
            vars(self).clear()
            vars(self).update(saved)
            raise

    def _fit(self, X):
        rng = check_generator(self.random_state)
        X = self._training_signals(X, rng)
        self._resolve_auto(X)
        self.patch_shape_ = self._patch_shape(X)
        self.n_features_in_ = int(np.prod(self.patch_shape_))
        with np.errstate(over="ignore", invalid="ignore"):  # reported just below
            magnitudes = np.abs(self._coefficients(X))
            self.groups_ = self._make_groups(magnitudes.shape[1])
            reach = (1.0 + self.domain_margin) * magnitudes.max(axis=0)
            observed = self._group_max(magnitudes).mean(axis=0)  # ∂/∂d of the mean f(|α_n|)
        if not (np.isfinite(magnitudes).all() and np.isfinite(reach).all()):
            raise ValueError(
                "X is too large: its coefficients (or their domain) overflow float64; rescale "
                "the signals (and noise_std) towards 1, the model is the same in any unit"
            )
        if not np.isfinite(observed).all():
            raise ValueError(
                "X is too large: the mean of its coefficients' group maxima overflows float64; "
                "rescale the signals (and noise_std) towards 1, the model is the same in any unit"
            )
        step = self.grid_step_ = self._step(float(reach.max()), self.noise_std)
        self._check_step(step, float(reach.max()))
        self.domain_ = step * np.maximum(np.ceil(reach / step - 1e-9), 1.0)
        levels = self._levels(self.noise_std)
        constant = magnitudes.shape[1] * np.log(2.0)

        def make_oracle(order):
            def oracle(part, weights, rng):
                """Ascent on minus the bound: thesis §4.4.1, N E[max u_{z*}] − Σ max|α|."""
                z, maxima = self._perturbed_prior(rng, self.batch_perturbations, weights, levels)
                expected = self._group_max(levels.values[z]).mean(axis=0)
                # in units of Δ (AdaGrad's steps do not depend on the gradient's scale, its sum
                # of squares would overflow on data around 1e200)
                gradient = (expected - observed) / step
                return gradient, -float(observed @ weights + maxima.mean() + constant)

            return oracle

        state = _sgd.SGDState(coef=np.zeros(len(self.groups_)), rng=rng)
        # near float64's limit an overflow is refused by run_sgd with the remedy, not warned
        with np.errstate(over="ignore", invalid="ignore"):
            _sgd.run_sgd(
                make_oracle,
                state,
                1,  # one "sample": the mean over the signals is exact, the prior is perturbed
                rng=rng,
                alpha=0.0,
                batch_size=1,
                steps=_sgd.AdaGrad(self.eta0 / (observed + step)),
                average=self.max_iter // 2,  # the second half of the iterates
                max_iter=self.max_iter,
                tol=None,
                n_iter_no_change=1,
                project=lambda weights: np.maximum(weights, 0.0, out=weights),  # d_A >= 0
                verbose=self.verbose,
                shuffle=False,
                name=type(self).__name__,
                remedy=(
                    f"the signals (largest |coefficient| {float(np.max(self.domain_)):.3g}) "
                    "leave float64 no room: rescale them (and noise_std) towards 1 (the model is "
                    "the same in any unit), or lower eta0"
                ),
            )
        self.loss_curve_ = list(state.loss_curve)
        self.group_weights_ = state.estimate
        self.n_iter_ = state.n_iter
        if not self.group_weights_.any():
            # the weights are in units of 1 / Δ: far from unit scale they can underflow to 0
            extreme = not 1e-100 < step < 1e100
            warnings.warn(
                "the learned prior is all zero (uniform on the box |α| <= U), so it does not "
                "denoise: "
                + (
                    f"the signals' scale (level step {step:.3g}) puts the weights, in units of "
                    "1 / step, beyond double precision; scale the signals (and noise_std) to "
                    "about unit size"
                    if extreme
                    else "every group needs many training signals. With one image, set "
                    "patch_size to learn from its patches"
                ),
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        return self

    # ---- the likelihood ----------------------------------------------------------------------
    def score_samples(self, X):
        r"""The perturb-and-MAP lower bound of :math:`\log p(\alpha )` of every signal.

        :math:`-f(|\alpha |) - \hat{A}_G - k \log 2` with :math:`\hat{A}_G \ge \log Z` estimated
        with ``n_perturbations`` perturbed MAPs (``random_state`` seeds them); ``-inf`` outside the
        box :math:`|\alpha | \le U`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, height, width)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        alpha = self._coefficients(self._signals(X, fitting=False))
        rng = check_generator(self.random_state)
        _, maxima = self._perturbed_prior(
            rng, self.n_perturbations, self.group_weights_, self._levels(self.noise_std)
        )
        log_p = -self._group_max(np.abs(alpha)) @ self.group_weights_ - maxima.mean()
        log_p -= alpha.shape[1] * np.log(2.0)
        return np.where((np.abs(alpha) <= self.domain_ + 1e-12).all(axis=1), log_p, -np.inf)

    # ---- decoding ----------------------------------------------------------------------------
    def predict(self, X, decoding=None):
        """Denoise signals, or whole images when ``patch_size`` is set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, height, width)
            Noisy signals; with ``patch_size``, one 2-D image, a 3-D stack of images or a
            list of 2-D images of any sizes.
        decoding : {"map", "mmse", "continuous_map"}, optional
            Overrides the estimator's ``decoding``.

        Returns
        -------
        ndarray of the shape of X, or a list of images for a list
        """
        check_is_fitted(self)
        decoding, sigma2 = self._decoding(decoding)
        rng = check_generator(self.random_state)
        if self.patch_size is not None:
            self._covering_stride(self.patch_shape_)
            images, kind = patches.check_images(X, self.patch_shape_)
            denoised = []
            for image in images:
                weights = self._prior_weights(image, decoding, sigma2, rng)
                denoised.append(self._denoise_image(image, decoding, sigma2, weights))
            return patches.pack(denoised, kind)
        shape = np.shape(X)
        signals = self._signals(X, fitting=False)
        weights = self._prior_weights(signals, decoding, sigma2, rng)
        return self._denoise_signals(signals, decoding, sigma2, weights).reshape(shape)

    def _prior_weights(self, noisy, decoding, sigma2, rng):
        """``prior_scale · d_A`` for decoding ``noisy`` (an image, or signals)."""
        scale = self.prior_scale
        if scale == "auto":
            scale = "sure" if self.patch_size is not None else 1.0
        if scale != "sure":
            return float(scale) * self.group_weights_
        if decoding == "mmse":
            return self._mmse_sure_scale(noisy, sigma2, rng) * self.group_weights_
        if self.patch_size is not None:
            # sparser patches make the risk cheaper, as long as they still cover the image
            stride = max(self.patch_stride, min(defaults.SURE_STRIDE, *self.patch_shape_))

            def denoise(y, weights):
                return self._denoise_image(y, "continuous_map", sigma2, weights, stride)

        else:
            if len(noisy) > defaults.SURE_SIGNALS:
                keep = rng.choice(len(noisy), defaults.SURE_SIGNALS, replace=False)
                noisy = noisy[np.sort(keep)]

            def denoise(y, weights):
                return self._denoise_signals(y, "continuous_map", sigma2, weights)

        threads = min(effective_n_jobs(self.n_jobs), 2)

        def denoise_both(inputs, weights):  # the prox is numpy sorting: threads run in parallel
            if threads == 1:
                return [denoise(y, weights) for y in inputs]
            with single_blas_thread():
                return Parallel(threads, prefer="threads")(
                    delayed(denoise)(y, weights) for y in inputs
                )

        scale = sure_scale(denoise_both, noisy, sigma2, self.group_weights_, rng)
        return scale * self.group_weights_

    def _mmse_sure_scale(self, noisy, sigma2, rng) -> float:
        r"""The prior's factor minimising Stein's risk estimate of the MMSE, on at most
        ``SURE_MMSE_SIGNALS`` (:mod:`pmap_sklearn._optim.defaults`) patches (non-overlapping
        ones of an image) or signals.

        The posterior mean's divergence is :math:`\operatorname{tr} \operatorname{Cov} [\alpha | y]
        / \sigma^2` (Tweedie's formula; Efron 2011), the variance estimated from the perturbed MAPs
        themselves, so no probe is needed (the perturbed MAPs are piecewise constant in y: a probe's
        small step misses what
        moves them)."""
        if self.patch_size is not None:
            shape = self.patch_shape_
            noisy = patches.image_patches(noisy, shape, min(shape)).reshape((-1,) + shape)
        if len(noisy) > defaults.SURE_MMSE_SIGNALS:
            keep = rng.choice(len(noisy), defaults.SURE_MMSE_SIGNALS, replace=False)
            noisy = noisy[np.sort(keep)]
        # in the orthonormal basis, ‖f(y) − y‖ is the coefficients' (centring keeps the mean;
        # the mean's own direction, the same for every factor, is left out of the divergence)
        y = self._coefficients(noisy)

        def risk(scale):
            alpha, variance = self._decode(y, "mmse", sigma2, scale * self.group_weights_)
            return float(((alpha - y) ** 2).sum() + 2.0 * variance.sum())

        return best_scale(risk)

    def score(self, X, y):
        """Signal-to-noise ratio of the denoised signals, in dB.

        ``20 log10(‖y‖ / ‖predict(X) − y‖)`` over all samples (or all images) together.

        Parameters
        ----------
        X : array-like
            Noisy signals, or images with ``patch_size``.
        y : array-like or list of the same shapes
            Clean signals, or images.

        Returns
        -------
        float
        """
        denoised = self.predict(X)
        if self.patch_size is None:
            clean = np.asarray(y, dtype=float)
        else:  # one SNR over all the pixels of all the images
            clean, _ = patches.check_images(y, self.patch_shape_, name="y")
            denoised, _ = patches.check_images(denoised, self.patch_shape_)
            if [c.shape for c in clean] != [d.shape for d in denoised]:
                raise ValueError(
                    f"y's images have shapes {[c.shape for c in clean]}, X's images have "
                    f"shapes {[d.shape for d in denoised]}"
                )
            clean = np.concatenate([c.ravel() for c in clean])
            denoised = np.concatenate([d.ravel() for d in denoised])
        if clean.shape != denoised.shape:
            raise ValueError(f"y has shape {clean.shape}, X has shape {denoised.shape}")
        return snr(clean, denoised)


def snr(clean, estimate) -> float:
    """``20 log10(‖clean‖ / ‖estimate − clean‖)`` in dB."""
    clean, estimate = np.asarray(clean, float), np.asarray(estimate, float)
    return float(20.0 * np.log10(np.linalg.norm(clean) / np.linalg.norm(estimate - clean)))
