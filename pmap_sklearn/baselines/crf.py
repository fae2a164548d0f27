"""Exact conditional random field: maximum likelihood by L-BFGS (Lafferty et al. 2001)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._base import SHARED_CONSTRAINTS, TOL_CONSTRAINTS, BaseStructuredEstimator
from .._lbfgs import minimise
from .._state import FitState
from .._utils import NumberInterval


class ChainCRF(BaseStructuredEstimator):
    r"""Conditional random field trained by exact maximum conditional likelihood.

    Maximises :math:`(1/N) \sum_n \log P(y_n | x_n) - (\alpha /2)\|w\|^2` with L-BFGS. The
    log-partition, the node marginals and the expected transition counts come from the structure's
    solver — on chains, forward-backward in the exp domain with one normaliser per position, falling
    back to the log domain where scores spread over more than ~600 nats — so the gradient
    :math:`\operatorname{mean} (\Psi (x, y) - E[\Psi (x, y)]) - \alpha w` is exact. Unknown labels
    (``-1``) are marginalised exactly: their sample contributes ``log Σ_{y agreeing with the known
    labels} exp f(y) − A(x)``.

    Any structure whose solver computes exact marginals works (a chain, or a tiny grid / graph
    with ``solver="brute_force"``). The fit is deterministic and vectorised over the samples:
    it has no ``random_state`` and no ``n_jobs``.

    Parameters
    ----------
    structure : {"chain", "grid", "graph"} or structure instance, default="chain"
    alpha : float or "auto", default="auto"
        L2 regularisation strength. "auto": ``0.2 / n_samples`` with sparse node features
        (crfsuite's ``c2 = 0.1`` on the summed likelihood, the objective sklearn-crfsuite's
        tutorial fits), 1e-4 otherwise.
    max_iter : int, default=300
        L-BFGS iterations.
    tol : float, default=1e-6
        L-BFGS tolerance on the projected gradient.
    warm_start : bool, default=False
        Start from the previous ``coef_``.
    verbose : int, default=0
    unknown_label : int, float, str or None, default=-1
        The label that marks an unknown node in ``y`` (use e.g. ``"?"`` with string labels;
        None: every label is known).
    ignore_label : int, float, str or None, default=None
        The label that marks a node to ignore (e.g. void pixels): ignored nodes are removed
        from the samples for the fit — they neither count in the loss nor get filled in, unlike
        ``unknown_label`` — and are not counted by :meth:`score`. Chains are cut at them;
        grids cannot lose nodes (give GraphSample objects instead).

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int
        L-BFGS iterations of the last fit.
    alpha_ : float
        The regularisation strength of the last fit (``alpha`` with "auto" resolved).
    objective_ : float
        Final regularised mean log-likelihood.

    See Also
    --------
    PerturbMAPCRF : the perturb-and-MAP likelihood, for models without exact marginals.

    References
    ----------
    .. [1] J. Lafferty, A. McCallum and F. Pereira. Conditional random fields: probabilistic
       models for segmenting and labeling sequence data. ICML 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from pmap_sklearn import ChainCRF
    >>> rng = np.random.default_rng(0)
    >>> y = [rng.integers(0, 3, size=n) for n in rng.integers(3, 8, size=40)]
    >>> X = [np.eye(3)[yi] + 0.5 * rng.normal(size=(len(yi), 3)) for yi in y]
    >>> crf = ChainCRF().fit(X, y)
    >>> crf.score(X, y) > 0.8
    True
    """

    _parameter_constraints: dict = {
        **SHARED_CONSTRAINTS,
        **TOL_CONSTRAINTS,
        "alpha": [NumberInterval(Real, 0, None, closed="left"), StrOptions({"auto"})],
    }
    _marginal_methods = ("exact",)
    _dense_alpha = 1e-4

    def __init__(
        self,
        structure="chain",
        *,
        alpha="auto",
        max_iter=300,
        tol=1e-6,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        self.structure = structure
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.verbose = verbose
        self.unknown_label = unknown_label
        self.ignore_label = ignore_label

    def _solver_needs(self, has_unknown):
        return {"marginals": True, "clamps": has_unknown}

    def _new_state(self, rng):
        return FitState(coef=np.zeros(self.structure_.size_))

    def _set_fitted_attributes(self, state) -> None:
        self.objective_ = state.recorded("objective")[-1]

    def _log_likelihood(self, batch, labels, w, observed_feature=None):
        r"""Mean log-likelihood of the labelled batch and its gradient (unregularised).

        Nodes labelled -1 are summed over (exact marginal likelihood of the known labels): ``log
        P(y_known | x) = A(x | y_known) − A(x)``, with gradient ``E[Ψ | y_known] − E[Ψ]``. When
        every label is known the clamped terms are simply ``f(y)`` and :math:`\Psi (y)`; pass
        ``observed_feature = Σ_n Ψ(x_n, y_n)`` to skip the second forward-backward pass.
        """
        structure = self.structure_
        potentials = structure.potentials(batch, w)
        marginals = structure.solver_.marginals(potentials)
        expected = structure.joint_feature_of(batch, marginals.statistics)
        if observed_feature is not None:  # Σ_n f(y_n | x_n) = w · Σ_n Ψ(x_n, y_n)
            clamped, clamped_log_z = observed_feature, w @ observed_feature
        else:
            given = structure.solver_.marginals(potentials, clamp=labels)
            clamped = structure.joint_feature_of(batch, given.statistics)
            clamped_log_z = given.log_partition.sum()
        n = batch.n_samples
        return float(clamped_log_z - marginals.log_partition.sum()) / n, (clamped - expected) / n

    def _fit_batch(self, batch, labels, state, rng):
        """L-BFGS on the exact regularised conditional log-likelihood, from ``state.coef``."""
        self.alpha_ = alpha = self._resolved_alpha(batch)
        observed = None
        if (labels >= 0).all():  # Ψ(x_n, y_n) does not depend on w: compute it once
            observed = self.structure_.joint_feature(batch, labels)

        def negative_objective(w):
            value, gradient = self._log_likelihood(batch, labels, w, observed)
            return -(value - 0.5 * alpha * w @ w), -(gradient - alpha * w)

        w, n_iter, value = minimise(
            negative_objective,
            state.coef,
            name=type(self).__name__,
            max_iter=self.max_iter,
            tol=self.tol,
            verbose=self.verbose,
        )
        state = FitState(coef=w, n_iter=n_iter)
        state.record(objective=-value)
        return state
