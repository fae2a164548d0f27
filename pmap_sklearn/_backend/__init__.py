"""MAP oracles hidden behind the structures: Viterbi and friends on chains, graph cuts on
binary loopy graphs, and brute-force enumeration for the tests."""

from .chain import clamped_maximizers, forward_backward, max_marginals, viterbi
from .cut import graph_cut_map, grid_cut_map

__all__ = [
    "viterbi",
    "forward_backward",
    "max_marginals",
    "clamped_maximizers",
    "graph_cut_map",
    "grid_cut_map",
]
