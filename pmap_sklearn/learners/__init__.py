"""The learners: one per module, each an optimiser of a structure's weights.

The perturb-and-MAP learners (:mod:`.perturb_map`, :mod:`.marginal`) and mean field unrolled
(:mod:`.mean_field_crf`) share the double-SGD layer (:mod:`._sgd_learner`); the ε-family
(:mod:`.epsilon`), the surrogate likelihoods (:mod:`.surrogates`), contrastive divergence
(:mod:`.contrastive_divergence`) and Part & Clamp (:mod:`.part_clamp`) are the approximate
likelihoods of the literature; the exact chain CRF (:mod:`.chain_crf`) and the structured SVM
(:mod:`.ssvm`) are the baselines; :mod:`.two_stage` puts a classifier in front of any of them.
All share the fit contract (:mod:`._estimator`) and the queries of a fitted model
(:mod:`._queries`).
"""

from .chain_crf import ChainCRF, crfsuite_penalty
from .contrastive_divergence import ContrastiveDivergenceCRF
from .epsilon import EpsilonCRF
from .marginal import MarginalPerturbMAPCRF
from .mean_field_crf import MeanFieldCRF
from .part_clamp import PartClampCRF
from .perturb_map import PerturbMAPCRF
from .ssvm import StructuredSVM
from .surrogates import PiecewiseCRF, PseudoLikelihoodCRF
from .two_stage import TwoStageCRF

__all__ = [
    "PerturbMAPCRF",
    "MarginalPerturbMAPCRF",
    "MeanFieldCRF",
    "EpsilonCRF",
    "PseudoLikelihoodCRF",
    "PiecewiseCRF",
    "ContrastiveDivergenceCRF",
    "PartClampCRF",
    "ChainCRF",
    "crfsuite_penalty",
    "StructuredSVM",
    "TwoStageCRF",
]
