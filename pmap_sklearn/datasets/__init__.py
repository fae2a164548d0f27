"""Data sets: loaders for the shared experiment data and generators for demos and tests."""

from ._ocr import load_ocr
from ._synthetic import make_chain_data, make_grid_data

__all__ = ["load_ocr", "make_chain_data", "make_grid_data"]
