"""Baselines from the same literature, on the same structures and oracles."""

from .ssvm import StructuredSVM

__all__ = ["StructuredSVM"]
