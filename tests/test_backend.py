"""Every oracle (plain, perturbed, clamped) equals brute-force enumeration on tiny models."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pmap_sklearn._backend import brute, chain, cut
from pmap_sklearn.perturbation import gumbel
from pmap_sklearn.structures import ChainStructure, GraphSample, GraphStructure, GridStructure

SETTINGS = settings(max_examples=40, deadline=None)


def _free_or_clamped(rng, n_nodes, n_states, rate=0.3):
    return np.where(rng.random(n_nodes) < rate, rng.integers(0, n_states, n_nodes), -1)


def _assert_optimal(unary, edges, pairwise, labels, best):
    """``labels`` scores ``best`` (compare scores: ties are measure-zero but not impossible)."""
    _, scores = brute.enumerate_scores(unary, edges, pairwise)
    index = np.ravel_multi_index(labels, (unary.shape[1],) * len(labels))
    np.testing.assert_allclose(scores[index], best, rtol=1e-10, atol=1e-9)


def _check_map(structure, batch, w, noise, clamp):
    labels = structure.map(batch, w, noise, clamp)
    for i in range(batch.n_samples):
        unary, edges, pairwise = structure.dense_model(batch, w, i, noise)
        clamp_i = None if clamp is None else clamp[batch.nodes_of(i)]
        expected, best = brute.brute_map(unary, edges, pairwise, clamp_i)
        got = labels[batch.nodes_of(i)]
        _assert_optimal(unary, edges, pairwise, got, best)
        if clamp_i is not None:
            fixed = clamp_i >= 0
            np.testing.assert_array_equal(got[fixed], clamp_i[fixed])


def _random_graph(rng, n_nodes):
    pairs = np.array([(i, j) for i in range(n_nodes) for j in range(i + 1, n_nodes)])
    edges = pairs.reshape(-1, 2)[rng.random(len(pairs)) < 0.5]
    return GraphSample(rng.normal(size=(n_nodes, 2)), edges, rng.random((len(edges), 2)))


def _check_random_binary_model(structure, X, rng, perturb, clamped):
    """Random supermodular weights, optional perturbation and clamps, checked by brute force."""
    batch = structure.prepare(X)
    w = structure.project(3 * rng.normal(size=structure.size_))
    noise = gumbel(rng, (batch.n_nodes, 2)) if perturb else None
    clamp = _free_or_clamped(rng, batch.n_nodes, 2) if clamped else None
    _check_map(structure, batch, w, noise, clamp)


def _random_chain_samples(rng):
    return [rng.normal(size=(d, 2)) for d in rng.integers(1, 6, size=3)]


def _random_chains(rng, n_states):
    """Three short chains with random weights: (structure, batch, w)."""
    X = _random_chain_samples(rng)
    structure = ChainStructure(n_states=n_states).fit(X)
    return structure, structure.prepare(X), 2 * rng.normal(size=structure.size_)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n_states=st.integers(2, 4),
    perturb=st.booleans(),
    clamped=st.booleans(),
)
def test_viterbi_matches_brute_force(seed, n_states, perturb, clamped):
    rng = np.random.default_rng(seed)
    structure, batch, w = _random_chains(rng, n_states)
    noise = gumbel(rng, (batch.n_nodes, n_states)) if perturb else None
    clamp = _free_or_clamped(rng, batch.n_nodes, n_states) if clamped else None
    _check_map(structure, batch, w, noise, clamp)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), perturb=st.booleans(), clamped=st.booleans())
def test_graph_cut_matches_brute_force(seed, perturb, clamped):
    rng = np.random.default_rng(seed)
    X = [_random_graph(rng, n) for n in rng.integers(1, 9, size=3)]
    _check_random_binary_model(GraphStructure().fit(X), X, rng, perturb, clamped)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    connectivity=st.sampled_from([4, 8]),
    contrast=st.booleans(),
    perturb=st.booleans(),
    clamped=st.booleans(),
)
def test_grid_cut_matches_brute_force(seed, connectivity, contrast, perturb, clamped):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(h, w, 2)) for h, w in rng.integers(1, 4, size=(2, 2))]
    structure = GridStructure(connectivity=connectivity, contrast=contrast).fit(X)
    _check_random_binary_model(structure, X, rng, perturb, clamped)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_grid_fast_path_agrees_with_general_graph_cut(seed):
    """The add_grid_edges fast path and the add_edges path solve the same problem."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(12, 9, 3))]
    grid = GridStructure(connectivity=8, contrast=True).fit(X)
    batch = grid.prepare(X)
    w = grid.project(rng.normal(size=grid.size_))
    noise = gumbel(rng, (batch.n_nodes, 2))
    unary = grid.node_scores(batch, w, noise)
    general = cut.graph_cut_map(unary, batch.edges, grid.edge_weights(batch, w))
    np.testing.assert_array_equal(grid.map(batch, w, noise), general)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n_states=st.integers(2, 4),
    clamped=st.booleans(),
    scale=st.sampled_from([1.0, 400.0]),
)
def test_forward_backward_matches_brute_force(seed, n_states, clamped, scale):
    """Both recursions — scaled exp-domain and log-domain — and the dispatcher between them
    are exact; at scale 400 the scores spread over more than 600 nats, where only the
    log-domain one may run."""
    rng = np.random.default_rng(seed)
    structure, batch, w = _random_chains(rng, n_states)
    w = scale * w
    clamp = _free_or_clamped(rng, batch.n_nodes, n_states) if clamped else None
    padded, position = structure._padded_unary(batch, w, None, clamp)
    transition = structure.transition(w)
    scaled = chain._scaled_forward_backward(padded, batch.lengths, transition)
    spread = np.ptp(transition) + max(
        np.ptp(padded[i, d][np.isfinite(padded[i, d])])
        for i, length in enumerate(batch.lengths)
        for d in range(length)
    )
    assert (scaled is None) == (spread >= chain._SCALED_MAX_SPREAD)
    results = [chain._log_forward_backward(padded, batch.lengths, transition)]
    results += [chain.forward_backward(padded, batch.lengths, transition)]
    results += [scaled] if scaled is not None else []
    for log_z, node_padded, pair in results:
        node = node_padded[batch.node_sample, position]
        for i in range(batch.n_samples):
            unary, edges, pairwise = structure.dense_model(batch, w, i)
            if clamp is not None:
                unary = structure._unary(batch, w, None, clamp)[batch.nodes_of(i)]
            log_partition = brute.brute_log_partition(unary, edges, pairwise)
            np.testing.assert_allclose(log_z[i], log_partition, rtol=1e-12)
            np.testing.assert_allclose(
                node[batch.nodes_of(i)], brute.brute_marginals(unary, edges, pairwise), atol=1e-12
            )
            # Expected transition counts by enumeration.
            labellings, scores = brute.enumerate_scores(unary, edges, pairwise)
            prob = np.exp(scores - log_partition)
            expected = np.zeros((n_states, n_states))
            for a, b in edges:
                np.add.at(expected, (labellings[:, a], labellings[:, b]), prob)
            np.testing.assert_allclose(pair[i], expected, atol=1e-12)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n_states=st.integers(2, 4))
def test_max_marginals_match_brute_force(seed, n_states):
    rng = np.random.default_rng(seed)
    structure, batch, w = _random_chains(rng, n_states)
    padded, _ = structure.padded(batch, structure.node_scores(batch, w))
    mm = chain.max_marginals(padded, batch.lengths, structure.transition(w))
    for i in range(batch.n_samples):
        unary, edges, pairwise = structure.dense_model(batch, w, i)
        for d in range(batch.lengths[i]):
            for k in range(n_states):
                clamp = np.full(batch.lengths[i], -1)
                clamp[d] = k
                best = brute.brute_map(unary, edges, pairwise, clamp)[1]
                np.testing.assert_allclose(mm[i, d, k], best)


def _check_clamped_maps(structure, X, rng, dynamic, skip_agreeing):
    """Every single-node clamped maximiser (and y*_A) equals brute force."""
    batch = structure.prepare(X)
    w = structure.project(2 * rng.normal(size=structure.size_))
    noise = gumbel(rng, (batch.n_nodes, structure.n_states_))
    nodes = np.sort(rng.choice(batch.n_nodes, size=min(batch.n_nodes, 7), replace=False))
    labels = rng.integers(0, structure.n_states_, size=len(nodes))
    map_labels, solved, copies, clamped = structure.clamped_maps(
        batch, w, noise, nodes, labels, dynamic, skip_agreeing
    )
    np.testing.assert_array_equal(map_labels, structure.map(batch, w, noise))
    expected_solved = map_labels[nodes] != labels if skip_agreeing else np.ones(len(nodes), bool)
    np.testing.assert_array_equal(solved, expected_solved)
    replicated = batch.subset(copies)
    for q, (node, label) in enumerate(zip(nodes[solved], labels[solved], strict=True)):
        i = copies[q]
        unary, edges, pairwise = structure.dense_model(batch, w, i, noise)
        clamp = np.full(batch.lengths[i], -1)
        clamp[node - batch.node_offsets[i]] = label
        _, best = brute.brute_map(unary, edges, pairwise, clamp)
        got = clamped[replicated.nodes_of(q)]
        _assert_optimal(unary, edges, pairwise, got, best)
        assert got[node - batch.node_offsets[i]] == label


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n_states=st.integers(2, 4),
    dynamic=st.booleans(),
    skip=st.booleans(),
)
def test_chain_clamped_maximizers_match_brute_force(seed, n_states, dynamic, skip):
    rng = np.random.default_rng(seed)
    X = _random_chain_samples(rng)
    _check_clamped_maps(ChainStructure(n_states=n_states).fit(X), X, rng, dynamic, skip)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1), dynamic=st.booleans(), grid=st.booleans(), skip=st.booleans()
)
def test_cut_clamped_maximizers_match_brute_force(seed, dynamic, grid, skip):
    """Dynamic cuts (residual graph re-use with undo) and fresh cuts are both exact."""
    rng = np.random.default_rng(seed)
    if grid:
        X = [rng.normal(size=(h, w, 2)) for h, w in rng.integers(1, 4, size=(3, 2))]
        structure = GridStructure(connectivity=8)
    else:
        X = [_random_graph(rng, n) for n in rng.integers(1, 8, size=3)]
        structure = GraphStructure()
    _check_clamped_maps(structure.fit(X), X, rng, dynamic, skip)


def test_cut_refuses_non_supermodular_weights():
    import pytest

    with pytest.raises(ValueError, match="supermodular"):
        cut.graph_cut_map(np.zeros((2, 2)), np.array([[0, 1]]), np.array([0.5]))
