"""MAP oracles hidden behind the structures: Viterbi and friends on chains, graph cuts on
binary loopy graphs, and brute-force enumeration for the tests."""

from .chain import forward_backward, max_marginals, viterbi, viterbi_with_clamps
from .cut import graph_cut_map, grid_cut_map

__all__ = [
    "viterbi",
    "forward_backward",
    "max_marginals",
    "viterbi_with_clamps",
    "graph_cut_map",
    "grid_cut_map",
]
