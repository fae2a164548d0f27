r"""Log-supermodular binary image denoising (Shpakova & Bach 2016; Shpakova 2019, chapter 2).

Prior on clean binary images ``x`` (4-connected grid)::

    p(x) ∝ exp(-α_h cut_h(x) - α_v cut_v(x) + t·x),      α >= 0,

and a channel that flips each pixel with probability π, :math:`u = \log (\pi / (1 - \pi ))`. The
posterior ``p(x | z) ∝ exp(-α·cuts(x) + (t + u (1 - 2z))·x)`` is again log-supermodular, so its MAP
is one graph cut. The model is a :class:`~pmap_sklearn.GridStructure` whose node feature is the sign
``s = 1 - 2z`` of the noisy pixel (0 for the prior) and whose weights are :math:`w = [t, u,
-\alpha_h, -\alpha_v]`; every log-partition function ``A`` is replaced by its logistic
perturb-and-MAP bound ``A_logistic = E_ε max_y f(y) + ε·y`` (thesis Eq. 2.4.2) and ``w`` is learned
by the shared projected SGD engine, one graph cut per image and step (two in the unsupervised case).
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._backend import Potentials
from .._labels import as_samples
from .._optim import sgd as _sgd
from .._parallel import N_JOBS_CONSTRAINT, in_chunks, one_blas_thread, prediction_chunks
from .._utils import like_input, store_parameters
from .._validation import NumberInterval, check_binary_images, check_generator
from ..learners.perturb_map import perturb_and_map_oracle
from ..perturbation import draw, perturb_and_map
from ..structures.flip_channel import FlipChannelGrid


def _signs(noisy: list[np.ndarray]) -> list[np.ndarray]:
    """The node feature ``s = 1 - 2z`` of every pixel, as (H, W, 1) images."""
    return [(1.0 - 2.0 * z)[:, :, None] for z in noisy]


class LogSupermodularDenoiser(BaseEstimator):
    r"""Binary image denoising with a log-supermodular prior learned by perturb-and-MAP.

    ``fit(X_noisy, y=X_clean)`` maximises the conditional likelihood ``p(x | z)`` (thesis §2.5.3);
    ``fit(X_noisy)`` maximises the marginal likelihood of the noisy images ``p(z)`` (thesis §2.5.4,
    a difference of two log-partition functions). Both replace ``A`` by its logistic perturb-and-MAP
    bound and run projected SGD with steps :math:`C/\sqrt{h}` on the perturbations (the engine's
    ``learning_rate="invscaling"``, ``power_t=0.5``): per step and image one graph cut of the
    posterior (and, without clean images, one of the prior). The estimate is the weighted average of
    the iterates (weights ∝ h), which is what the :math:`1/\sqrt{h}` rate is proved for.

    The objective (minimised) is, with ``D`` pixels per image and ``N`` images,
    ``(1/N) Σ_n NLL_n / D_n + (alpha_field/2) mean(t²) + (alpha_cut/2) ‖α‖²``.

    Parameters
    ----------
    field : {"auto", "pixel", "shared"}, default="auto"
        One field value ``t_d`` per pixel (a shape prior learned from many images of one
        shape, as in the thesis's experiments) or one value shared by all pixels (images of
        any shape). "auto": "pixel" when ``fit`` gets several images of one shape, "shared"
        for a single image (where a per-pixel field learns each pixel's noisy value back: on
        one noisy photo it keeps a third of the flips, where a shared field removes nearly
        all) or images of different shapes.
    noise_level : float in (0, 0.5) or "learn", default="learn"
        Flip probability π of the channel, or learn it (through :math:`u = \log (\pi /(1-\pi )) \le
        0`).
    noise_init : float in (0, 0.5), default=0.1
        Starting π when it is learned.
    alpha_field, alpha_cut : float, default=1e-3
        The regularisation strengths (the learners' ``alpha``): squared ℓ2 penalties of the
        field ``t`` and of the cut weights :math:`\alpha`.
    eta0 : float, default=5.0
        ``C`` of the steps :math:`C/\sqrt{h}`. The step of a per-pixel ``t_d`` is multiplied by
        ``D`` (each ``t_d`` is informed by one pixel per image, :math:`\alpha` and ``u`` by all of
        them), so one ``C`` suits every block.
    max_iter : int, default=30
        Passes over the images.
    batch_size : int, default=10
        Images per step.
    n_perturbations : int, default=100
        Logistic perturbations ``M`` behind :meth:`predict_marginals` and marginal decoding.
    random_state : int, Generator, RandomState or None, default=None
    n_jobs : int or None, default=None
        Processes for the graph cuts of :meth:`predict` and :meth:`predict_marginals` (results
        do not depend on it).
    verbose : int, default=0

    Attributes
    ----------
    coef_ : ndarray
        The weights :math:`[t, u, -\alpha_h, -\alpha_v]` of :class:`FlipChannelGrid`.
    structure_ : FlipChannelGrid
    field_ : ndarray of shape (H, W) or float
        Learned field ``t``.
    cut_weights_ : ndarray of shape (2,)
        Learned :math:`(\alpha_h, \alpha_v) \ge 0`.
    noise_level_ : float
        π, learned or given.
    loss_curve_ : list of float
        Stochastic estimate of the objective over each pass.
    image_shape_ : tuple or None
        Shape every image must have (``field="pixel"``), else None.
    n_iter_ : int

    See Also
    --------
    PerturbMAPCRF : the general perturb-and-MAP CRF (e.g. on ``GridStructure``).
    pmap_sklearn.bounds.log_partition_perturb : the logistic bound on one model.

    References
    ----------
    .. [1] T. Shpakova and F. Bach. Parameter learning for log-supermodular distributions.
       NIPS 2016 (thesis chapter 2).

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
        "field": [StrOptions({"auto", "pixel", "shared"})],
        "noise_level": [NumberInterval(Real, 0, 0.5, closed="neither"), StrOptions({"learn"})],
        "noise_init": [NumberInterval(Real, 0, 0.5, closed="neither")],
        "alpha_field": [NumberInterval(Real, 0, None, closed="left")],
        "alpha_cut": [NumberInterval(Real, 0, None, closed="left")],
        "eta0": [NumberInterval(Real, 0, None, closed="neither")],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
        "batch_size": [NumberInterval(Integral, 1, None, closed="left")],
        "n_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": N_JOBS_CONSTRAINT,
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        field="auto",
        noise_level="learn",
        noise_init=0.1,
        alpha_field=1e-3,
        alpha_cut=1e-3,
        eta0=5.0,
        max_iter=30,
        batch_size=10,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        verbose=0,
    ):
        store_parameters(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True  # (n_images, H, W)
        return tags

    # ---- fitting ---------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    @one_blas_thread
    def fit(self, X, y=None):
        r"""Learn ``t``, :math:`\alpha` (and π if asked) from noisy images, with or without clean
        ones.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images ``z``.
        y : same as X, or None
            Clean images ``x`` (supervised, conditional likelihood), or None (unsupervised,
            marginal likelihood of ``z``).

        Returns
        -------
        self : object
            The fitted denoiser.
        """
        noisy = check_binary_images(X, "X")
        clean = None
        if y is not None:
            clean = check_binary_images(y, "y")
            if len(clean) != len(noisy):
                raise ValueError(f"X has {len(noisy)} images but y has {len(clean)}")
            for i, (z, x) in enumerate(zip(noisy, clean, strict=True)):
                if z.shape != x.shape:
                    raise ValueError(f"image {i}: X has shape {z.shape} but y has {x.shape}")
        image_shape = None
        shapes = {z.shape for z in noisy}
        if self.field == "pixel" or (self.field == "auto" and len(noisy) > 1 and len(shapes) == 1):
            if len(shapes) > 1:
                raise ValueError(
                    f"field='pixel' learns one value per pixel, so every image needs the same "
                    f"shape; got shapes {sorted(shapes)}. Resize the images or use field='shared'"
                )
            image_shape = noisy[0].shape
        structure = FlipChannelGrid(image_shape).fit(_signs(noisy[:1]))
        batch = structure.prepare(_signs(noisy))
        rng = check_generator(self.random_state)
        learn_noise = self.noise_level == "learn"
        state = _sgd.SGDState(coef=np.zeros(structure.size_), rng=rng)
        field, log_odds = slice(0, structure.n_field), structure.n_field
        start = self.noise_init if learn_noise else self.noise_level
        state.coef[log_odds] = np.log(start / (1.0 - start))
        # Per-coordinate penalty of (alpha_field/2) mean(t²) + (alpha_cut/2)‖α‖², and step scale:
        # a per-pixel t_d sees one pixel per image, so its step is D times larger.
        alpha = np.full(structure.size_, float(self.alpha_cut))
        alpha[field], alpha[log_odds] = self.alpha_field / structure.n_field, 0.0
        scale = np.ones(structure.size_)
        scale[field], scale[log_odds] = structure.n_field, float(learn_noise)

        def project(w):
            structure.project(w)  # α >= 0 keeps the prior log-supermodular
            if learn_noise:  # u <= 0 (π <= 1/2) fixes the label symmetry of the channel
                w[log_odds] = min(w[log_odds], 0.0)
            return w

        per_pixel = 1.0 / batch.lengths  # each image's objective is per pixel
        if clean is not None:
            labels = np.concatenate([x.ravel() for x in clean]).astype(np.intp)

            def make_oracle(order):
                return perturb_and_map_oracle(
                    structure,
                    batch.subset(order),
                    labels[batch.node_index(order)],
                    kind="logistic",
                    sample_weight=per_pixel[order],
                )

        else:
            noisy_flat = np.concatenate([z.ravel() for z in noisy]).astype(float)

            def make_oracle(order):
                return _marginal_oracle(
                    structure,
                    batch.subset(order),
                    noisy_flat[batch.node_index(order)],
                    per_pixel[order],
                )

        _sgd.run_sgd(
            make_oracle,
            state,
            batch.n_samples,
            rng=rng,
            alpha=alpha,
            batch_size=min(self.batch_size, batch.n_samples),
            steps=_sgd.Schedule("invscaling", self.eta0, 0.5, scale=scale),
            average=True,
            max_iter=self.max_iter,
            tol=None,
            n_iter_no_change=1,
            project=project,
            verbose=self.verbose,
            average_weights="linear",
            name=type(self).__name__,
        )
        self.structure_ = structure
        self.coef_ = state.estimate.copy()
        self.image_shape_ = image_shape
        self.loss_curve_ = list(state.loss_curve)
        self.n_iter_ = state.n_iter
        return self

    # ---- fitted parameters -----------------------------------------------------------------
    @property
    def field_(self):
        """The learned field ``t``: (H, W) per pixel, or a float when shared."""
        field = self.coef_[: self.structure_.n_field]
        return field.reshape(self.image_shape_) if self.image_shape_ else float(field[0])

    @property
    def cut_weights_(self) -> np.ndarray:
        r"""The learned :math:`(\alpha_h, \alpha_v) \ge 0`."""
        return 0.0 - self.coef_[self.structure_.n_field + 1 :]

    @property
    def noise_level_(self) -> float:
        """The flip probability π (learned or given)."""
        return float(1.0 / (1.0 + np.exp(-self.coef_[self.structure_.n_field])))

    # ---- prediction ------------------------------------------------------------------------
    def _checked(self, X) -> list[np.ndarray]:
        check_is_fitted(self, "coef_")
        noisy = check_binary_images(X, "X")
        if self.image_shape_ is not None:
            for i, z in enumerate(noisy):
                if z.shape != self.image_shape_:
                    raise ValueError(
                        f"X[{i}] has shape {z.shape}, but the per-pixel field was learned on "
                        f"images of shape {self.image_shape_}"
                    )
        return noisy

    def _batch(self, X):
        return self.structure_.prepare(_signs(self._checked(X)))

    def _in_chunks(self, predict, X, random_state=None):
        """``predict(batch, random_state)`` (a list of per-image arrays) over the images of
        ``X`` in the predictions' chunks of bounded memory
        (:func:`~pmap_sklearn._parallel.in_chunks`), returned like ``X``."""
        noisy = self._checked(X)
        chunks = prediction_chunks([z.size for z in noisy], self.n_jobs)

        def run(index, _, random_state):
            part = noisy if index is None else noisy[index]
            return as_samples(predict(self.structure_.prepare(_signs(part)), random_state))

        return like_input(list(in_chunks(run, chunks, None, random_state)), X)

    def potentials(self, X) -> Potentials:
        """The posterior potentials of noisy images (see
        :meth:`~pmap_sklearn.PerturbMAPCRF.potentials`).

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays

        Returns
        -------
        Potentials
        """
        return self.structure_.potentials(self._batch(X), self.coef_)

    @one_blas_thread
    def predict_marginals(
        self,
        X,
        method=None,
        n_perturbations=None,
        known_labels=None,
        *,
        n_sweeps=None,
        as_dicts: bool = False,
    ):
        """Posterior marginals of every pixel: the label frequencies over ``n_perturbations``
        logistic-perturbed posterior MAPs.

        The signature of every estimator's ``predict_marginals``; the options this model has
        not are refused by name.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images.
        method : {"perturb"}, optional
            The only method: the frequencies over perturbed posterior MAPs.
        n_perturbations : int, optional
            Defaults to the estimator's ``n_perturbations``.
        known_labels, n_sweeps : None
            Clamped pixels and Gibbs chains, which this model has not: refused when given.
        as_dicts : bool, default=False
            Refused (sklearn-crfsuite's dicts are for tag sequences).

        Returns
        -------
        marginals : same container as X, of shape (…, H, W, 2)
            ``[..., k]`` is the probability of label k; the last axis sums to 1.
        """
        check_is_fitted(self, "coef_")
        if method not in (None, "perturb"):
            raise ValueError(f"method must be 'perturb', got {method!r}")
        for name, value in (
            ("known_labels", known_labels),
            ("n_sweeps", n_sweeps),
            ("as_dicts", as_dicts or None),
        ):
            if value is not None:
                raise ValueError(
                    f"LogSupermodularDenoiser.predict_marginals does not take {name}: its "
                    "marginals are perturbed posterior MAPs of whole images"
                )
        if n_perturbations is None:
            n_perturbations = self.n_perturbations
        elif (
            isinstance(n_perturbations, bool)
            or not isinstance(n_perturbations, Integral)
            or (n_perturbations < 1)
        ):
            raise ValueError(f"n_perturbations must be an int >= 1, got {n_perturbations!r}")

        def marginals(batch, random_state):
            average = perturb_and_map(
                self.structure_.solver_,
                self.structure_.potentials(batch, self.coef_),
                n_perturbations,
                random_state,
                "logistic",
                n_jobs=self.n_jobs,
                maxima=False,
            )
            return batch.split(average.marginals)

        return self._in_chunks(marginals, X, self.random_state)

    @one_blas_thread
    def predict(self, X, decoding="map"):
        """Denoised images.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images.
        decoding : {"map", "marginal"}, default="map"
            "map": the posterior MAP by one graph cut ("max-marginal" in the thesis);
            "marginal": the per-pixel argmax of :meth:`predict_marginals` ("mean-marginal": the
            mean of the perturbed MAPs thresholded at 1/2).

        Returns
        -------
        images : same container as X, of int
        """
        check_is_fitted(self, "coef_")
        if decoding == "marginal":
            marginals = self.predict_marginals(X)
            return like_input([m.argmax(axis=-1) for m in marginals], X)
        if decoding != "map":
            raise ValueError(f"decoding must be 'map' or 'marginal', got {decoding!r}")

        def decode(batch, _):
            potentials = self.structure_.potentials(batch, self.coef_)
            return batch.split(self.structure_.solver_.map(potentials, n_jobs=self.n_jobs))

        return self._in_chunks(decode, X)

    @one_blas_thread
    def score_samples(self, X) -> np.ndarray:
        """Log-likelihood of each noisy image per pixel, ``log p(z) / D``, with every
        log-partition function replaced by its logistic perturb-and-MAP bound (``n_perturbations``
        perturbations; thesis §2.5.4): ``(A(posterior) − A(prior) + u Σ z − D log(1 + e^u)) / D``.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images.

        Returns
        -------
        ndarray of shape (n_images,)
        """
        batch = self._batch(X)
        structure, solver = self.structure_, self.structure_.solver_
        prior = replace(batch, features=np.zeros_like(batch.features))
        bounds = [
            perturb_and_map(
                solver,
                structure.potentials(sub, self.coef_),
                self.n_perturbations,
                self.random_state,
                "logistic",
                n_jobs=self.n_jobs,
            ).max_mean
            for sub in (batch, prior)
        ]
        flips = np.bincount(batch.node_sample, (1.0 - batch.features[:, 0]) / 2.0)
        u = self.coef_[structure.n_field]
        likelihood = bounds[0] - bounds[1] + u * flips - batch.lengths * np.logaddexp(0.0, u)
        return likelihood / batch.lengths

    def score(self, X, y=None) -> float:
        """With clean images ``y``: the mean fraction of correctly denoised pixels (1 − pixel
        error). Without: the mean log-likelihood per pixel of the noisy images
        (:meth:`score_samples`), so that model selection works without clean images, as
        ``GaussianMixture.score`` does.

        Parameters
        ----------
        X : array of shape (n_images, H, W) or sequence of 2-D arrays
            Noisy binary images.
        y : same as X, or None
            Clean images.

        Returns
        -------
        float
        """
        if y is None:
            return float(np.mean(self.score_samples(X)))
        clean = check_binary_images(y, "y")
        predicted = self.predict(X)
        if len(clean) != len(predicted):
            raise ValueError(f"X has {len(predicted)} images but y has {len(clean)}")
        return float(np.mean([np.mean(p == c) for p, c in zip(predicted, clean, strict=True)]))


def _marginal_oracle(structure, batch, noisy, weight):
    """Stochastic gradient of the logistic-bound marginal likelihood of noisy images (thesis
    §2.5.4): ``log p(z) ≈ A(posterior) − A(prior) + u Σ z − D log(1 + e^u)``, both ``A`` by
    one logistic-perturbed MAP each; images weighted by ``weight`` (one over their pixels)."""
    solver = structure.solver_
    log_odds = structure.n_field

    def oracle(part, w, rng):
        post = batch.subset(part)
        prior = replace(post, features=np.zeros_like(post.features))  # s = 0: the prior
        c = weight[part]
        # Σ_n c_n [max_y f_post + ε·y] − [max_y f_prior + ε'·y]: w · Σ c Ψ plus the ε terms.
        gradient, objective = np.zeros(structure.size_), 0.0
        for sub, sign in ((post, 1.0), (prior, -1.0)):
            perturbation = draw(rng, sub.n_nodes, 2, "logistic")
            labels = solver.map(structure.potentials(sub, w, perturbation))
            psi = structure.joint_feature(sub, labels, c)
            gradient += sign * psi
            objective += sign * (w @ psi + c[sub.node_sample] @ (perturbation[:, 1] * labels))
        flips = np.bincount(post.node_sample, noisy[batch.node_index(part)], post.n_samples)
        u = w[log_odds]
        noise = 1.0 / (1.0 + np.exp(-u))
        gradient[log_odds] += c @ (flips - post.lengths * noise)
        objective += c @ (u * flips - post.lengths * np.logaddexp(0.0, u))
        return gradient, float(objective)

    return oracle
