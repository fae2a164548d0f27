"""Baselines from the same literature, on the same structures and oracles."""

from .crf import ChainCRF, crfsuite_penalty
from .ssvm import StructuredSVM

__all__ = ["ChainCRF", "StructuredSVM", "crfsuite_penalty"]
