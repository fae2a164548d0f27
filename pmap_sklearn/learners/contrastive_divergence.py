"""Contrastive divergence (Hinton 2002): the likelihood's gradient with the model's expectation
replaced by a few chromatic Gibbs sweeps from the data."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from .._backend import (
    GibbsSampler,
)
from .._docstrings import shared_docstring
from .._optim import sgd as _sgd
from .._utils import store_parameters
from .._validation import NumberInterval
from ._full_batch import FULL_BATCH_CONSTRAINTS, FullBatchCRF


@shared_docstring
class ContrastiveDivergenceCRF(FullBatchCRF):
    r"""CRF trained by contrastive divergence (Hinton 2002).

    Each step runs ``n_sweeps`` sweeps of Gibbs sampling started at the true labels of every
    training sample — chromatic Gibbs: the nodes of one colour of a proper colouring are
    conditionally independent, so a colour class is sampled at once — and moves the weights along
    :math:`(1/N) \sum_n [\Psi (x_n, y_n) - \Psi (x_n, \tilde{y}_n)] - \alpha w`, all samples in one
    step as in Pletscher & Ong's Table 1. Steps are normalised, :math:`\eta_0 / \sqrt{t}` in weight
    space, since CD has no objective to search a step on.

    Parameters
    ----------
    structure : {"grid", "graph"} or structure instance, default="grid"
        Graph structure; the pairwise weights stay attractive with the graph-cut solver.
    n_sweeps : int, default=5
        Gibbs sweeps per step.
    alpha : float, default=1.0
        L2 regularisation.
    max_iter : int, default=200
        Steps.
    eta0 : float, default=1.0
        Length of the first step in weight space.
    n_perturbations : int, default=100
        Perturbations of :meth:`predict_marginals`.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the Gibbs samples and the perturbations.
    n_jobs : int or None, default=None
        Processes for the graph cuts of prediction.
    warm_start : bool, default=False
        Continue from the previous ``coef_`` and step count on the same data (``X`` and ``y``) and
        parameters, when the previous fit was made with ``warm_start=True``; after a change of the
        data or of ``structure``, ``alpha``, ``class_weight``, ``unknown_label`` or
        ``ignore_label``, a warm start fits afresh (as ``warm_start=False`` does): the state belongs
        to the last fit's objective.
    verbose : int, default=0
        Progress per step.
    unknown_label : int, float, str or None, default=-1
        Marks unknown labels.
    {{ignore_label}}

    Attributes
    ----------
    coef_ : ndarray of shape (n_weights,)
        The average of the iterates of the second half of the steps.
    structure_ : structure instance
    classes_ : ndarray of shape (K,)
    n_features_in_ : int
    n_iter_ : int

    See Also
    --------
    PartClampCRF : the tightened lower bound Pletscher & Ong compare it with.
    """

    _parameter_constraints: dict = {
        **FULL_BATCH_CONSTRAINTS,
        "n_sweeps": [NumberInterval(Integral, 1, None, closed="left")],
        "eta0": [NumberInterval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        structure="grid",
        *,
        n_sweeps=5,
        alpha=1.0,
        max_iter=200,
        eta0=1.0,
        n_perturbations=100,
        random_state=None,
        n_jobs=None,
        warm_start=False,
        verbose=0,
        unknown_label=-1,
        ignore_label=None,
    ):
        store_parameters(self, locals())

    def _new_state(self, rng):
        return _sgd.SGDState(coef=np.zeros(self.structure_.size_), rng=rng)

    def _optimise(self, batch, labels, state, rng, validation_score):
        batch = batch.with_unit_mean_weight()  # the engine's sum / n: the weighted mean
        structure, n = self.structure_, batch.n_samples
        chains = GibbsSampler(self.n_sweeps).session(structure.potentials(batch, state.coef))
        weights = batch.sample_weight
        observed = structure.joint_feature(batch, labels, weights)

        def make_oracle(order):  # full batch: the samples in their order
            def oracle(part, w, rng):
                sample = chains.sample(structure.potentials(batch, w), labels, rng)
                # CD's ascent direction Σ_n c_n [Ψ(truth) − Ψ(Gibbs sample)]; no objective
                return observed - structure.joint_feature(batch, sample, weights), 0.0

            return oracle

        _sgd.run_sgd(
            make_oracle,
            state,
            n,
            rng=rng,
            alpha=self.alpha,
            batch_size=n,
            steps=_sgd.Normalised(self.eta0),
            average=state.n_seen + n * (self.max_iter // 2),  # the second half of the steps
            max_iter=self.max_iter,
            tol=None,
            n_iter_no_change=1,
            project=structure.project,  # attractive weights for graph cuts
            verbose=self.verbose,
            shuffle=False,
            name=type(self).__name__,
        )
