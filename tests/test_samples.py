"""pmap_sklearn.samples: subsets of a batch of samples."""

import numpy as np
import pytest

from .helpers import _samples


def test_subset_matches_preparing_the_subset(rng):
    structure, X = _samples("graph", rng)
    X = X + [X[0]]
    structure.fit(X)
    batch = structure.prepare(X)
    sub = batch.subset([2, 1])
    direct = structure.prepare([X[2], X[1]])
    for name in (
        "features",
        "node_offsets",
        "edges",
        "edge_offsets",
        "edge_features",
        "node_sizes",
    ):
        np.testing.assert_array_equal(getattr(sub, name), getattr(direct, name))


@pytest.mark.parametrize("kind", ["chain", "grid", "graph"])
def test_slice_subset_is_the_indexed_subset_without_copies(kind, rng):
    structure, X = _samples(kind, rng)
    X = X + X[:2]
    structure.fit(X)
    batch = structure.prepare(X)
    for part in (slice(1, 3), slice(0, len(X)), slice(2, 2)):
        by_slice = batch.subset(part)
        by_index = batch.subset(np.arange(len(X))[part])
        for name in ("features", "node_offsets", "edges", "edge_offsets", "edge_features"):
            np.testing.assert_array_equal(getattr(by_slice, name), getattr(by_index, name))
        assert by_slice.label_shapes == by_index.label_shapes
        assert np.shares_memory(by_slice.features, batch.features) or by_slice.n_nodes == 0
        nodes = np.arange(batch.n_nodes)
        np.testing.assert_array_equal(
            nodes[batch.node_index(part)], batch.node_index(np.arange(len(X))[part])
        )
    with pytest.raises(ValueError, match="step 1"):
        batch.subset(slice(0, 3, 2))


@pytest.mark.parametrize("rows_per_sample", [3, 80])
def test_block_copies_equal_the_gathered_rows(rows_per_sample, rng):
    """Long samples are copied by slices, short ones gathered: both give the indexed rows."""
    from pmap_sklearn.samples import _RowTaker

    lengths = rng.integers(0, 2 * rows_per_sample, size=9)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    array = rng.normal(size=(offsets[-1], 3))
    index = np.array([4, 0, 4, 8, 2], dtype=np.intp)
    rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in index]).astype(np.intp)
    take = _RowTaker(offsets, index)
    assert take.by_blocks == (rows_per_sample > 64)
    np.testing.assert_array_equal(take(array), array[rows])
    shift = np.array([10, -1, 3, 0, 7])
    shifted = array[rows] + np.repeat(shift, lengths[index])[:, None]
    np.testing.assert_array_equal(take(array, shift=shift), shifted)
    assert _RowTaker(offsets, index[:0])(array).shape == (0, 3)


def test_grid_subset_by_blocks_matches_preparing_the_subset(rng):
    from pmap_sklearn import GridStructure

    X = [rng.normal(size=(9 + i, 10, 2)) for i in range(4)]
    structure = GridStructure().fit(X)
    sub = structure.prepare(X).subset([3, 1, 1])
    direct = structure.prepare([X[3], X[1], X[1]])
    for name in ("features", "node_offsets", "edges", "edge_offsets", "edge_features"):
        np.testing.assert_array_equal(getattr(sub, name), getattr(direct, name))
