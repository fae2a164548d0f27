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


def _chains(kind, lengths, width=4, seed=0):
    rng = np.random.default_rng(seed)
    dense = [rng.normal(size=(n, width)) for n in lengths]
    return [sparse.csr_matrix(x) for x in dense] if kind == "csr" else dense


@pytest.mark.parametrize("kind", ["csr", "dense"])
def test_chains_checked_at_once_give_the_batch_of_chains_checked_one_by_one(kind):
    """Float64 chains as given (a vectoriser's CSR output, float arrays) are checked on their
    stack; the batch is the one chains that each need converting (float32) give."""
    lengths = [3, 1, 5, 2]
    chains = _chains(kind, lengths)
    structure = ChainStructure(n_states=3).fit(chains)
    converted = [x.astype(np.float32) for x in chains]
    at_once = structure.prepare(chains)
    one_by_one = structure.prepare(converted)
    dense = (lambda f: f.toarray()) if kind == "csr" else np.asarray
    np.testing.assert_allclose(dense(at_once.features), dense(one_by_one.features), rtol=1e-6)
    np.testing.assert_array_equal(at_once.lengths, lengths)
    np.testing.assert_array_equal(at_once.edges, one_by_one.edges)
    assert at_once.features.dtype == np.float64
    part = structure.prepare(chains, slice(1, 3))
    np.testing.assert_array_equal(part.lengths, lengths[1:3])


@pytest.mark.parametrize("kind", ["csr", "dense"])
def test_a_bad_chain_among_many_is_named(kind):
    chains = _chains(kind, [2] * 30)
    structure = ChainStructure(n_states=2).fit(chains)
    bad = [x.copy() for x in chains]
    if kind == "csr":
        bad[17].data[0] = np.nan
    else:
        bad[17][1, 2] = np.inf
    with pytest.raises(ValueError, match="sample 17: node features: non-finite"):
        structure.prepare(bad)
    wide = _chains(kind, [2] * 30)
    wide[21] = _chains(kind, [2], width=5)[0]
    with pytest.raises(ValueError, match="sample 21 has 5 node features, expected 4"):
        structure.prepare(wide)
    empty = list(chains)
    empty[9] = chains[9][:0]
    with pytest.raises(ValueError, match="sample 9: expected a 2-D array"):
        structure.prepare(empty)


def test_labels_checked_at_once_name_the_first_bad_sample():
    """Label codes are checked on their concatenation; a wrong sample is then found and named,
    and integral floats pass as before."""
    chains = _chains("dense", [2, 3, 2, 4])
    structure = ChainStructure(n_states=3).fit(chains)
    batch = structure.prepare(chains)
    labels = [np.array([0, 1]), np.array([2, 2, 0]), np.array([1, 1]), np.array([0, 1, 2, 0])]
    codes = structure.prepare_labels(batch, labels)
    np.testing.assert_array_equal(codes, np.concatenate(labels))
    floats = [x.astype(float) for x in labels]
    np.testing.assert_array_equal(structure.prepare_labels(batch, floats), codes)
    with pytest.raises(ValueError, match=r"sample 2: label 3 out of range 0\.\.2"):
        structure.prepare_labels(batch, [*labels[:2], np.array([0, 3]), np.array([0, 9, 0, 0])])
    with pytest.raises(ValueError, match=r"sample 1: y has shape \(2,\), expected \(3,\)"):
        structure.prepare_labels(batch, [labels[0], labels[1][:2], *labels[2:]])
    with pytest.raises(ValueError, match="sample 3: labels must be integers"):
        structure.prepare_labels(batch, [*labels[:3], np.array([0, 1.5, 2, 0])])
    unknown = [*labels[:3], np.array([0, -1, 2, 0])]
    with pytest.raises(ValueError, match="-1 \\(unknown\\) is not accepted here"):
        structure.prepare_labels(batch, unknown)
    assert structure.prepare_labels(batch, unknown, allow_unknown=True)[8] == -1
