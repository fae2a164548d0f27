"""ChainStructure: sparse chains as scipy stacks them, and a chain passed without a list."""

import numpy as np
import pytest
from scipy import sparse

from pmap_sklearn import PerturbMAPCRF
from pmap_sklearn._utils import append_ones_column, stack_rows
from pmap_sklearn.structures import ChainStructure


def test_a_single_chain_passed_without_a_list_gets_a_hint():
    chain = np.zeros((5, 3))
    with pytest.raises(ValueError, match=r"got shape \(3,\); X is a list of samples.*\[chain\]"):
        PerturbMAPCRF("chain").fit(chain, [np.arange(5) % 2] * 5)


def test_sparse_chains_are_stacked_like_scipy_stacks_them():
    """The one-pass CSR stacking and bias column give scipy's ``vstack`` / ``hstack``, and the
    chain edges join consecutive nodes of each chain (chains of 1 to 600 nodes)."""
    lengths = [1, 3, 600, 1, 7, 300]
    blocks = [
        sparse.random(n, 9, density=0.3, format="csr", random_state=i)
        for i, n in enumerate(lengths)
    ]
    # a block whose arrays hold more than its non-zeros (the constructor prunes them, assigning
    # them does not): the rest is not read
    blocks[1].data, blocks[1].indices = np.r_[blocks[1].data, 7.0], np.r_[blocks[1].indices, 3]
    assert len(blocks[1].data) > blocks[1].indptr[-1]
    stacked = stack_rows(blocks)
    np.testing.assert_array_equal(stacked.toarray(), np.vstack([b.toarray() for b in blocks]))
    with_bias = append_ones_column(stacked)
    expected = sparse.hstack([stacked, np.ones((stacked.shape[0], 1))], "csr")
    assert with_bias.shape == expected.shape and (with_bias != expected).nnz == 0
    batch = ChainStructure(n_states=3).fit(blocks).prepare(blocks)
    np.testing.assert_array_equal(batch.features.toarray(), with_bias.toarray())
    node_offsets = np.concatenate([[0], np.cumsum(lengths)])
    first = np.concatenate(
        [np.arange(a, b - 1) for a, b in zip(node_offsets[:-1], node_offsets[1:], strict=True)]
    )
    np.testing.assert_array_equal(batch.edges, np.column_stack([first, first + 1]))
