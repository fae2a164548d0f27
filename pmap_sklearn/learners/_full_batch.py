"""The shared contract of the full-batch surrogate-likelihood learners (pseudo-likelihood,
piecewise, contrastive divergence, Part & Clamp): grids and graphs of any K, L-BFGS-B within the
attractive box where graph cuts need it, MAP by the structure's solver, marginals by
perturb-and-MAP."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._backend import PairwiseKind, Statistics, pairwise_statistics
from .._optim.lbfgs import minimise
from .._state import FitState
from .._validation import NumberInterval
from ..structures import BaseStructure
from ._estimator import (
    PARALLEL_CONSTRAINTS,
    RANDOMISED_CONSTRAINTS,
    SHARED_CONSTRAINTS,
    BaseStructuredEstimator,
)

#: The full-batch surrogate-likelihood learners: grid and graph structures, perturb-and-MAP
#: marginals (random, parallel).
FULL_BATCH_CONSTRAINTS: dict = {
    **SHARED_CONSTRAINTS,
    **RANDOMISED_CONSTRAINTS,
    **PARALLEL_CONSTRAINTS,
    "structure": [StrOptions({"grid", "graph", "chain"}), BaseStructure],
    "n_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
}


class FullBatchCRF(BaseStructuredEstimator):
    """Shared contract of the full-batch surrogate-likelihood learners: grid and graph
    structures of any K (the pairwise weights kept attractive where the solver needs it),
    MAP prediction by the structure's solver, marginals by perturb-and-MAP (or by Gibbs
    chains started from perturbed MAPs: the weights define a Gibbs distribution)."""

    _marginal_methods = ("perturb", "gibbs")

    def _check_structure(self, structure, has_unknown):
        super()._check_structure(structure, has_unknown)
        if structure.solver_.needs_attractive and structure.pairwise_kind is not PairwiseKind.POTTS:
            raise ValueError(
                f"{type(self).__name__} keeps attractive weights as box constraints, which needs "
                "Potts pairwise terms with the graph-cut solver: use pairwise='potts', or "
                "solver='message_passing' for tables"
            )

    def _box(self):
        """L-BFGS-B bounds: Potts weights <= 0 where graph cuts need attractive terms."""
        structure = self.structure_
        if not structure.solver_.needs_attractive:
            return None
        n_unary = structure.n_unary_weights_
        return [(None, None)] * n_unary + [(None, 0.0)] * (structure.size_ - n_unary)

    def _new_state(self, rng):
        return FitState(coef=np.zeros(self.structure_.size_), rng=rng)

    def _minimise(self, objective, w0):
        """``objective(w) -> (value, gradient)`` minimised by L-BFGS-B from ``w0``, within
        :meth:`_box`: ``(w, n_iter, value)`` (on one BLAS thread, see
        :func:`~pmap_sklearn._optim.lbfgs.minimise`)."""
        return minimise(
            objective,
            w0,
            name=type(self).__name__,
            max_iter=self.max_iter,
            tol=self.tol,
            verbose=self.verbose,
            bounds=self._box(),
        )

    def _joint(self, batch, node, pair):
        statistics = Statistics(node, pairwise_statistics(pair, self.structure_.pairwise_kind))
        return self.structure_.joint_feature_of(batch, statistics)


class LbfgsSurrogateCRF(FullBatchCRF):
    """A full-batch learner whose surrogate objective is smooth and deterministic
    (``_objective(batch, labels, w) -> (value, gradient)``): minimised by L-BFGS-B, the
    attractive weights kept by box constraints."""

    def _optimise(self, batch, labels, state, rng, validation_score):
        w, n_iter, value = self._minimise(self._objective_of(batch, labels), state.coef)
        state.coef, state.n_iter = w, state.n_iter + n_iter
        self.objective_ = value

    def _objective_of(self, batch, labels):
        """``w -> (value, gradient)`` of the surrogate on these samples."""
        return lambda w: self._objective(batch, labels, w)
