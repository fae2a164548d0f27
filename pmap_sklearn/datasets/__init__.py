"""Data sets: loaders for the shared experiment data and generators for demos and tests."""

from ._camvid import load_camvid
from ._conll2002 import load_conll2002
from ._horses import (
    horse_split,
    load_weizmann_horse_masks,
    load_weizmann_horses,
    paint,
    superpixel_graph,
)
from ._latent_toys import make_boxes, make_crosses
from ._mulan import load_multilabel
from ._ocr import load_ocr
from ._synthetic import (
    add_flip_noise,
    add_kumar_hebert_noise,
    make_chain_data,
    make_grid_data,
    make_snake_data,
)
from ._tables import sentences_from_table
from ._treebank import load_ud_treebank, token_features

__all__ = [
    "load_ocr",
    "load_ud_treebank",
    "load_conll2002",
    "load_camvid",
    "load_multilabel",
    "token_features",
    "sentences_from_table",
    "load_weizmann_horses",
    "load_weizmann_horse_masks",
    "horse_split",
    "paint",
    "superpixel_graph",
    "make_chain_data",
    "make_grid_data",
    "make_snake_data",
    "make_crosses",
    "make_boxes",
    "add_flip_noise",
    "add_kumar_hebert_noise",
]
