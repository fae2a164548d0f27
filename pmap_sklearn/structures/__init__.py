"""Structures: how samples become a validated problem, and weights become potentials.

One structure per module — :class:`ChainStructure` (sequences), :class:`GridStructure`
(images), :class:`GraphStructure` (superpixel graphs), :class:`MultiLabelStructure` (the labels
of a row of ``X``) — over :class:`BaseStructure`, whose hidden states and joint feature map Ψ are
mixins of their own. A new structure subclasses :class:`BaseStructure` (or
:class:`EdgeFeatureStructure` for pairwise terms linear in edge features) and is passed as an
estimator's ``structure``.
"""

from sklearn.base import clone

from ._base import BaseStructure, Problem
from ._edge_features import EdgeFeatureStructure
from .chain import ChainStructure
from .graph import GraphStructure
from .grid import GridStructure
from .multilabel import MultiLabelStructure, chow_liu_tree, label_mutual_information

__all__ = [
    "BaseStructure",
    "EdgeFeatureStructure",
    "ChainStructure",
    "GridStructure",
    "GraphStructure",
    "MultiLabelStructure",
    "Problem",
    "check_structure",
    "chow_liu_tree",
    "label_mutual_information",
]

#: The structures an estimator's ``structure`` names.
STRUCTURES = {"chain": ChainStructure, "grid": GridStructure, "graph": GraphStructure}


def check_structure(structure) -> BaseStructure:
    """A fresh structure from ``"chain" | "grid" | "graph"`` or a structure instance (cloned).

    Parameters
    ----------
    structure : str or BaseStructure

    Returns
    -------
    BaseStructure
    """
    if isinstance(structure, str):
        if structure not in STRUCTURES:
            raise ValueError(
                f"structure must be one of {sorted(STRUCTURES)} or a structure instance, "
                f"got {structure!r}"
            )
        return STRUCTURES[structure]()
    if isinstance(structure, BaseStructure):
        return clone(structure)
    raise ValueError(
        f"structure must be one of {sorted(STRUCTURES)} or a structure instance, "
        f"got {type(structure).__name__}"
    )
