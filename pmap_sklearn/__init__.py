"""pmap_sklearn: perturb-and-MAP structured prediction with a scikit-learn API."""

from ._backend import Potentials
from .baselines import ChainCRF, StructuredSVM, crfsuite_penalty
from .continuous import ContinuousLogSupermodularDenoiser
from .denoising import LogSupermodularDenoiser
from .epsilon import EpsilonCRF
from .marginal import MarginalPerturbMAPCRF
from .mean_field import MeanFieldCRF
from .metrics import (
    hamming_scorer,
    mean_hamming_loss,
    weighted_hamming_loss,
    weighted_hamming_scorer,
)
from .multilabel import MultiLabelStructure
from .part_clamp import (
    ContrastiveDivergenceCRF,
    PartClampCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
)
from .perturb_map import PerturbMAPCRF
from .preprocessing import NodeTransformer, SequenceVectorizer
from .samples import GraphSample, grid_edges
from .structures import ChainStructure, GraphStructure, GridStructure
from .two_stage import TwoStageCRF

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
    "mean_hamming_loss",
    "weighted_hamming_loss",
    "hamming_scorer",
    "weighted_hamming_scorer",
    "TwoStageCRF",
    "PiecewiseCRF",
    "MeanFieldCRF",
]
