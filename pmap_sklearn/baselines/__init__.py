"""Baselines from the same literature, on the same structures and oracles."""

from .crf import ChainCRF
from .ssvm import StructuredSVM

__all__ = ["ChainCRF", "StructuredSVM"]
