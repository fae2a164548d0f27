"""pmap_sklearn: perturb-and-MAP structured prediction with a scikit-learn API."""

from importlib import import_module
from sys import modules

from ._backend import Potentials
from ._clusters import TokenClusters
from .denoisers import ContinuousLogSupermodularDenoiser, LogSupermodularDenoiser
from .embeddings import SequenceUnion, TokenEmbeddings
from .learners.chain_crf import ChainCRF, crfsuite_penalty
from .learners.contrastive_divergence import ContrastiveDivergenceCRF
from .learners.epsilon import EpsilonCRF
from .learners.marginal import MarginalPerturbMAPCRF
from .learners.mean_field_crf import MeanFieldCRF
from .learners.part_clamp import PartClampCRF
from .learners.perturb_map import PerturbMAPCRF
from .learners.ssvm import StructuredSVM
from .learners.surrogates import PiecewiseCRF, PseudoLikelihoodCRF
from .learners.two_stage import TwoStageCRF
from .metrics import (
    hamming_scorer,
    mean_hamming_loss,
    weighted_hamming_loss,
    weighted_hamming_scorer,
)
from .preprocessing import NodeTransformer, SequenceVectorizer
from .samples import GraphSample, grid_edges
from .structures import ChainStructure, GraphStructure, GridStructure, MultiLabelStructure
from .superpixels import SuperpixelGraphs

#: Modules of earlier releases and where they went: ``pmap_sklearn.multilabel``,
#: ``pmap_sklearn.part_clamp`` and the others still import (and old pickles still load).
_MOVED_MODULES = {
    "baselines": "learners",
    "continuous": "denoisers.continuous",
    "denoising": "denoisers.binary",
    "epsilon": "learners.epsilon",
    "marginal": "learners.marginal",
    "mean_field": "learners.mean_field_crf",
    "multilabel": "structures.multilabel",
    "part_clamp": "learners.part_clamp",
    "perturb_map": "learners.perturb_map",
    "two_stage": "learners.two_stage",
}
for _old, _new in _MOVED_MODULES.items():
    modules[f"{__name__}.{_old}"] = import_module(f".{_new}", __name__)

__version__ = "0.1.0"

__all__ = [
    "PerturbMAPCRF",
    "MarginalPerturbMAPCRF",
    "StructuredSVM",
    "ChainCRF",
    "crfsuite_penalty",
    "EpsilonCRF",
    "PartClampCRF",
    "PseudoLikelihoodCRF",
    "ContrastiveDivergenceCRF",
    "LogSupermodularDenoiser",
    "ContinuousLogSupermodularDenoiser",
    "ChainStructure",
    "GridStructure",
    "GraphStructure",
    "MultiLabelStructure",
    "GraphSample",
    "grid_edges",
    "Potentials",
    "NodeTransformer",
    "SequenceVectorizer",
    "SequenceUnion",
    "TokenEmbeddings",
    "TokenClusters",
    "SuperpixelGraphs",
    "mean_hamming_loss",
    "weighted_hamming_loss",
    "hamming_scorer",
    "weighted_hamming_scorer",
    "TwoStageCRF",
    "PiecewiseCRF",
    "MeanFieldCRF",
]
