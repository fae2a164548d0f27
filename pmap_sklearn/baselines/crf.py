"""Exact conditional random field on chains: maximum likelihood by L-BFGS."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy.optimize import minimize
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval

from .._base import BaseStructuredEstimator
from ..structures import ChainStructure, check_structure


class ChainCRF(BaseStructuredEstimator):
    """Linear-chain CRF trained by exact maximum conditional likelihood.

    Maximises ``(1/N) Σ_n log P(y_n | x_n) − (α/2)‖w‖²`` with L-BFGS; the log-partition, the
    node marginals and the expected transition counts come from log-domain forward-backward
    (SPEC §3), so the gradient ``mean(Ψ(x, y) − E[Ψ(x, y)]) − α w`` is exact. Unknown labels
    (``-1``) are marginalised exactly: their sample contributes
    ``log Σ_{y agreeing with the known labels} exp f(y) − A(x)``.

    Parameters
    ----------
    structure : ChainStructure, optional
        Defaults to ``ChainStructure()``.
    alpha : float, default=1e-4
        L2 regularisation strength.
    max_iter : int, default=300
        L-BFGS iterations.
    tol : float, default=1e-6
        L-BFGS tolerance on the projected gradient.
    warm_start : bool, default=False
        Start from the previous ``coef_``.
    verbose : int, default=0

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : ChainStructure
    classes_, n_features_in_, n_iter_
    objective_ : float
        Final regularised mean log-likelihood.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn.baselines import ChainCRF
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=n) for n in rng.integers(3, 8, size=40)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(len(yi), 3)) for yi in y]
    >>> crf = ChainCRF().fit(X, y)
    >>> crf.score(X, y) > 0.8
    True
    """

    _parameter_constraints: dict = {
        "structure": [None, ChainStructure],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }
    n_jobs = None  # chains are solved in one vectorised call

    def __init__(
        self, structure=None, *, alpha=1e-4, max_iter=300, tol=1e-6, warm_start=False, verbose=0
    ):
        self.structure = structure
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.verbose = verbose

    def log_likelihood(self, batch, labels, w, observed_feature=None):
        """Mean log-likelihood of the labelled batch and its gradient (unregularised).

        Nodes labelled -1 are summed over (exact marginal likelihood of the known labels):
        ``log P(y_known | x) = A(x | y_known) − A(x)``, with gradient
        ``E[Ψ | y_known] − E[Ψ]``. When every label is known the clamped terms are simply
        ``f(y)`` and ``Ψ(y)``; pass ``observed_feature = Σ_n Ψ(x_n, y_n)`` to skip the second
        forward-backward pass.
        """
        structure = self.structure_
        node, pair, log_z = structure.marginals(batch, w)
        expected = structure.expected_joint_feature(batch, node, pair)
        if observed_feature is not None:  # Σ_n f(y_n | x_n) = w · Σ_n Ψ(x_n, y_n)
            clamped, clamped_log_z = observed_feature, w @ observed_feature
        else:
            node_y, pair_y, log_z_y = structure.marginals(batch, w, clamp=labels)
            clamped = structure.expected_joint_feature(batch, node_y, pair_y)
            clamped_log_z = log_z_y.sum()
        n = batch.n_samples
        return float(clamped_log_z - log_z.sum()) / n, (clamped - expected) / n

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit by L-BFGS on the exact regularised conditional log-likelihood.

        Parameters
        ----------
        X : sequence of (D, F) arrays
        y : sequence of int arrays (``-1`` = unknown, summed over)

        Returns
        -------
        self
        """
        warm = self.warm_start and hasattr(self, "coef_")
        if not warm:
            structure = ChainStructure() if self.structure is None else self.structure
            self.structure_ = check_structure(structure).fit(X, y)
        batch = self.structure_.prepare(X)
        labels = self.structure_.prepare_labels(batch, y, allow_unknown=True)
        start = self.coef_ if warm else np.zeros(self.structure_.size_)
        observed = None
        if (labels >= 0).all():  # Ψ(x_n, y_n) does not depend on w: compute it once
            observed = self.structure_.joint_feature(batch, labels)

        def negative_objective(w):
            value, gradient = self.log_likelihood(batch, labels, w, observed)
            return -(value - 0.5 * self.alpha * w @ w), -(gradient - self.alpha * w)

        result = minimize(
            negative_objective,
            start,
            jac=True,
            method="L-BFGS-B",
            options=dict(maxiter=self.max_iter, gtol=self.tol),
        )
        if self.verbose:
            print(
                f"L-BFGS: {result.nit} iterations, objective {-result.fun:.6g}, {result.message}",
                flush=True,
            )
        self.coef_ = result.x
        self.n_iter_ = int(result.nit)
        self.objective_ = float(-result.fun)
        self.classes_ = np.arange(self.structure_.n_states_)
        self.n_features_in_ = self.structure_.n_features_in_
        return self

    def predict_marginals(self, X, method: str = "exact"):
        """Exact node marginals (forward-backward), a (D, K) array per sample."""
        if method != "exact":
            raise ValueError(f"ChainCRF computes exact marginals only, got method={method!r}")
        batch = self._prepare_fitted(X)
        node, _, _ = self.structure_.marginals(batch, self.coef_)
        return batch.split(node)
