"""Brute-force references and small models shared by the tests."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from scipy.special import logsumexp

from pmap_sklearn import (
    ChainStructure,
    GraphSample,
    GraphStructure,
    GridStructure,
    Potentials,
    SequenceVectorizer,
    _parallel,
    grid_edges,
)
from pmap_sklearn._backend import brute
from pmap_sklearn._backend.potentials import label_statistics
from pmap_sklearn.datasets import make_chain_data, token_features
from pmap_sklearn.denoisers._haar import grid_groups, tree_groups
from pmap_sklearn.solvers import (
    BruteForceSolver,
    GroupMaxPotentials,
    IshikawaSolver,
)


def scores_of(potentials):
    """Every labelling of a one-sample model and its score (lexicographic order)."""
    parts = list(brute.enumerate_scores(potentials))
    return np.concatenate([y for y, _ in parts]), np.concatenate([s for _, s in parts])


def loop_scores(potentials):
    """Independent reference: a Python loop over the labellings and the edges."""
    p = potentials
    tables = p.edge_tables()
    labellings, scores = [], []
    for y in itertools.product(range(p.n_states), repeat=p.n_nodes):
        score = sum(p.unary[d, k] for d, k in enumerate(y))
        score += sum(tables[e, y[i], y[j]] for e, (i, j) in enumerate(p.edges))
        labellings.append(y)
        scores.append(score)
    return np.array(labellings), np.array(scores)


def exact_distribution(potentials):
    """All labellings of a one-sample model with their probabilities ``P(y)``."""
    labellings, scores = scores_of(potentials)
    prob = np.exp(scores - scores.max())
    return labellings, prob / prob.sum()


def statistics_of(potentials, labels):
    """Sufficient statistics of one labelling of a one-sample model."""
    return label_statistics(labels, potentials.edges, potentials.n_states, potentials.pairwise_kind)


def exact_expected_joint_feature(structure, batch, w, index=0, given=None):
    """``E_P[Ψ(x, y)]`` of sample ``index`` by enumeration; with ``given = (node, label)`` the
    conditional expectation ``E_P[Ψ | y_node = label]``."""
    single = batch.subset([index])
    labellings, prob = exact_distribution(structure.potentials(single, w))
    if given is not None:
        keep = labellings[:, given[0]] == given[1]
        labellings, prob = labellings[keep], prob[keep] / prob[keep].sum()
    return sum(
        p * structure.joint_feature(single, y) for p, y in zip(prob, labellings, strict=True)
    )


def mean_oracle_gradient(oracle, index, w, n_chunks=80, per_chunk=500, seed=0):
    """Mean of a stochastic gradient oracle over many perturbations of the samples ``index``
    (each repeated ``per_chunk`` times per call), with its standard error."""
    rng = np.random.default_rng(seed)
    copies = np.repeat(np.asarray(index), per_chunk)
    means = np.array([oracle(copies, w, rng)[0] / per_chunk for _ in range(n_chunks)])
    return means.mean(0), means.std(0, ddof=1) / np.sqrt(n_chunks)


def grid_exact_marginals(potentials, shape):
    """Exact node marginals and log-partition of one 4-connected H×W grid model by the transfer
    matrix over rows (K^W row states): a forward-backward over the rows in the log domain."""
    height, width = shape
    k = potentials.n_states
    unary = potentials.unary.reshape(height, width, k)
    tables = potentials.edge_tables()
    horizontal, vertical = {}, {}
    for (i, j), table in zip(potentials.edges, tables, strict=True):
        (ri, ci), (rj, cj) = divmod(int(i), width), divmod(int(j), width)
        if ri == rj:
            horizontal[(ri, min(ci, cj))] = table if ci < cj else table.T
        else:
            vertical[(min(ri, rj), ci)] = table if ri < rj else table.T
    states = np.array(list(np.ndindex(*(k,) * width)))  # (K^W, W)
    row_scores = np.zeros((height, len(states)))
    for r in range(height):
        row_scores[r] = unary[r, np.arange(width), states].sum(axis=1)
        for c in range(width - 1):
            if (r, c) in horizontal:
                row_scores[r] += horizontal[(r, c)][states[:, c], states[:, c + 1]]
    between = []
    for r in range(height - 1):
        t = np.zeros((len(states), len(states)))
        for c in range(width):
            if (r, c) in vertical:
                t += vertical[(r, c)][states[:, c][:, None], states[:, c][None, :]]
        between.append(t)
    forward = [row_scores[0]]
    for r in range(1, height):
        forward.append(row_scores[r] + logsumexp(forward[-1][:, None] + between[r - 1], axis=0))
    backward = [np.zeros(len(states))]
    for r in range(height - 2, -1, -1):
        backward.insert(0, logsumexp(between[r] + (row_scores[r + 1] + backward[0])[None], axis=1))
    log_z = logsumexp(forward[-1])
    marginals = np.zeros((height, width, k))
    for r in range(height):
        p = np.exp(forward[r] + backward[r] - log_z)
        for c in range(width):
            marginals[r, c] = np.bincount(states[:, c], p, minlength=k)
    return marginals.reshape(-1, k), log_z


# ---- tiny models checked against brute force -----------------------------------------------------
SETTINGS = settings(max_examples=40, deadline=None)


def _free_or_clamped(rng, n_nodes, n_states, rate=0.3):
    return np.where(rng.random(n_nodes) < rate, rng.integers(0, n_states, n_nodes), -1)


def _assert_optimal(sample, labels, clamp=None):
    """``labels`` reach the best score over the labellings that respect ``clamp`` (scores are
    compared: ties are measure-zero but not impossible)."""
    labellings, scores = scores_of(sample)
    if clamp is not None:
        fixed = clamp >= 0
        scores = np.where((labellings[:, fixed] == clamp[fixed]).all(axis=1), scores, -np.inf)
        np.testing.assert_array_equal(labels[fixed], clamp[fixed])
    np.testing.assert_allclose(sample.score(labels)[0], scores.max(), rtol=1e-10, atol=1e-9)


# ---- token dicts for the chain CRF ---------------------------------------------------------------
def _token_data(rng, n_samples=30):
    """Sentences of five words whose tags mostly follow the word, as crfsuite-style dicts."""
    X, y = [], []
    for _ in range(n_samples):
        words = rng.choice(list("abcde"), rng.integers(2, 6))
        tags = ["X" if w in "ab" else ("Y" if w == "c" else "Z") for w in words]
        y.append([t if rng.random() > 0.2 else "Z" for t in tags])
        X.append([{"w": w, "bias": 1.0} for w in words])
    return X, y


# ---- group-maximum level models ------------------------------------------------------------------
def _group_value(costs, levels, groups, weights, z):
    return costs[np.arange(len(z)), z].sum() + sum(
        d * levels[z[g].max()] for g, d in zip(groups, weights, strict=True)
    )


def _assert_level_maps_are_optimal(costs, n_levels, levels, groups, weights):
    """The solver's minimisers of every model of ``costs`` (B, n, levels) against enumeration."""
    found = IshikawaSolver().map(GroupMaxPotentials(-costs, n_levels, levels, groups, weights))
    assert (found >= 0).all() and (found < n_levels).all()
    for b in range(len(costs)):
        best = min(
            _group_value(costs[b], levels, groups, weights, np.array(z))
            for z in itertools.product(*[range(r) for r in n_levels])
        )
        value = _group_value(costs[b], levels, groups, weights, found[b])
        assert value == pytest.approx(best, abs=1e-9)


SHAPES = ["haar tree", "chain", "random forest", "grid (loopy)"]


def _groups_of_shape(rng, shape):
    if shape == "haar tree":
        return tree_groups(8)
    if shape == "chain":
        return [np.array([i]) for i in range(9)] + [np.array([i + 1, i]) for i in range(8)]
    if shape == "random forest":  # some nodes alone, some without a unary group
        parent = [-1 if rng.random() < 0.2 else int(rng.integers(i)) for i in range(1, 15)]
        groups = [np.array([i]) for i in range(15) if rng.random() < 0.6]
        return groups + [np.array([i + 1, p]) for i, p in enumerate(parent) if p >= 0]
    return grid_groups((3, 4))


# ---- binary images -------------------------------------------------------------------------------
def blobs(rng, n_images, shape=(16, 16)):
    """Binary images of one random axis-aligned ellipse each."""
    rows, cols = np.mgrid[: shape[0], : shape[1]]
    images = []
    for _ in range(n_images):
        centre = rng.uniform(0.3, 0.7, size=2) * shape
        radii = rng.uniform(0.2, 0.35, size=2) * shape
        inside = ((rows - centre[0]) / radii[0]) ** 2 + ((cols - centre[1]) / radii[1]) ** 2 < 1
        images.append(inside.astype(np.int8))
    return np.stack(images)


# ---- grid models with table potentials -----------------------------------------------------------
def _grid_potentials(rng, shape, coupling, k=2):
    structure = GridStructure(n_states=k, pairwise="table", solver="message_passing")
    image = rng.normal(size=shape + (1,))
    structure.fit([image])
    batch = structure.prepare([image])
    w = rng.normal(size=structure.size_)
    w[structure.n_unary_weights_ :] *= coupling
    return structure.potentials(batch, w)


# ---- Potts and metric models ---------------------------------------------------------------------
def _random_potts(rng, shape=(2, 3), k=3, coupling=1.5, n_samples=1):
    edges = grid_edges(shape)
    n = int(np.prod(shape))
    unary = rng.normal(size=(n * n_samples, k))
    all_edges = np.concatenate([edges + s * n for s in range(n_samples)])
    weights = -coupling * rng.random(len(all_edges))
    offsets = np.arange(n_samples + 1)
    return Potentials(unary, all_edges, weights, offsets * n, offsets * len(edges))


def _metric_tables(rng, n_edges, k):
    """Truncated-linear costs (a metric) with a random scale per edge, as score tables."""
    a, b = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    scale = rng.random(n_edges)[:, None, None]
    return -scale * np.minimum(np.abs(a - b), 2)


# ---- chains, with and without hidden states ------------------------------------------------------
def _random_chains(rng, n_chains=3, length=4, k=4):
    unary = rng.normal(size=(n_chains * length, k))
    heads = np.concatenate([np.arange(length - 1) + c * length for c in range(n_chains)])
    offsets = np.arange(n_chains + 1)
    return Potentials(
        unary,
        np.stack([heads, heads + 1], axis=1),
        rng.normal(size=(k, k)),
        offsets * length,
        offsets * (length - 1),
    )


def _chains(n_samples=12, random_state=0):
    data = make_chain_data(n_samples=n_samples, n_states=2, n_features=3, random_state=random_state)
    return data.data, data.target


# ---- Potts grids ---------------------------------------------------------------------------------
def _potts_grid(rng, shape, k, coupling):
    edges = grid_edges(shape)
    unary = rng.normal(size=(shape[0] * shape[1], k))
    return Potentials(unary, edges, np.full(len(edges), -coupling))


# ---- correlated labels ---------------------------------------------------------------------------
def _correlated(n=200, random_state=0):
    """Labels that share a latent cause: label 1 follows label 0, label 3 is 0 AND 2."""
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n, 5))
    cause = X[:, 0] + 0.5 * rng.normal(size=n)
    Y = np.column_stack([cause > 0, cause > 0.5, X[:, 1] > 0, (cause > 0) & (X[:, 1] > 0)])
    return X, Y.astype(int)


# ---- a small named-entity task -------------------------------------------------------------------
NAMES = ["Ana", "Luis", "Madrid", "Lima", "Sony", "Acme"]
KINDS = {"Ana": "PER", "Luis": "PER", "Madrid": "LOC", "Lima": "LOC", "Sony": "ORG", "Acme": "ORG"}


def _ner_corpus(n, seed=0):
    """Sentences with one- and two-word entities among lower-case filler words."""
    rng = np.random.default_rng(seed)
    sentences, tags = [], []
    for _ in range(n):
        words, labels = [], []
        for _ in range(rng.integers(2, 5)):
            if rng.random() < 0.5:
                name = str(rng.choice(NAMES))
                words.append(name)
                labels.append("B-" + KINDS[name])
                if rng.random() < 0.4:
                    words.append(name + "s")
                    labels.append("I-" + KINDS[name])
            words.append(str(rng.choice(["en", "de", "vive", "con", "la"])))
            labels.append("O")
        sentences.append(words)
        tags.append(labels)
    return sentences, tags


# ---- noisy block images as graphs ----------------------------------------------------------------
def _grid_graphs(rng, n_samples=6, shape=(4, 5), noise=0.8):
    from pmap_sklearn import GraphSample

    edges = grid_edges(shape)
    X, y = [], []
    for _ in range(n_samples):
        coarse = (rng.random(((shape[0] + 1) // 2, (shape[1] + 1) // 2)) < 0.5).astype(int)
        labels = np.kron(coarse, np.ones((2, 2), dtype=int))[: shape[0], : shape[1]]  # blocks
        x = labels + noise * rng.normal(size=shape)
        f = x.ravel()
        features = np.column_stack([np.ones(len(edges)), np.abs(f[edges[:, 0]] - f[edges[:, 1]])])
        X.append(GraphSample(f[:, None], edges, features))
        y.append(labels.ravel())
    return X, y


def _brute_log_z(potentials, clamp=None):
    return BruteForceSolver().log_partition(potentials, clamp=clamp)[0]


# ---- predictions in chunks -----------------------------------------------------------------------
#: node budgets of a chunk: every sample alone, boundaries inside and between samples, one chunk
LIMITS = [1, 3, 7, 16, 40, 10**9]


def _same(a, b, exact=True):
    """Two predictions (object arrays of arrays, or 2-D arrays) are equal bit for bit, or with
    ``exact=False`` to rounding (sums computed by BLAS over blocks of other sizes)."""
    assert type(a) is type(b) and len(a) == len(b)
    check = (
        np.testing.assert_array_equal
        if exact
        else lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)
    )
    if isinstance(a, np.ndarray) and a.dtype != object:
        check(a, b)
        return
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        check(x, y)


def _predictions(model, X, calls, limit, monkeypatch):
    monkeypatch.setattr(_parallel, "PREDICT_NODES", limit)
    return [call(model, X) for call in calls]


def _assert_chunking_invariant(model, X, calls, monkeypatch, rounded=()):
    """Every call gives the same output for every chunk size (the calls numbered in
    ``rounded``, exact marginals and beliefs, to rounding)."""
    whole = _predictions(model, X, calls, 10**9, monkeypatch)
    for limit in LIMITS:
        got = _predictions(model, X, calls, limit, monkeypatch)
        for i, (a, b) in enumerate(zip(got, whole, strict=True)):
            _same(a, b, exact=i not in rounded)


# ---- hypothesis settings -------------------------------------------------------------------------
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- a small tagging corpus ----------------------------------------------------------------------
WORDS = {"DET": ["the", "a", "this"], "NOUN": ["dog", "cat", "idea"], "VERB": ["runs", "sees"]}


def _corpus(n, seed=0):
    """Sentences DET NOUN VERB (DET NOUN) with ambiguous words, as crfsuite-style dicts."""
    rng = np.random.default_rng(seed)
    sentences, tags = [], []
    for _ in range(n):
        pattern = ["DET", "NOUN", "VERB"] + (["DET", "NOUN"] if rng.random() < 0.5 else [])
        words = [str(rng.choice(WORDS[t])) for t in pattern]
        if rng.random() < 0.3:  # "runs" as a noun after a determiner
            words[1] = "runs"
        sentences.append(words)
        tags.append(pattern)
    return sentences, tags


def _sparse_and_dense(n=40, seed=0):
    sentences, tags = _corpus(n, seed)
    chains = SequenceVectorizer(token_features).fit_transform(sentences)
    return chains, [c.toarray() for c in chains], tags


# ---- samples of every structure ------------------------------------------------------------------
def _samples(kind, rng):
    if kind == "chain":
        return ChainStructure(n_states=3), [rng.normal(size=(d, 2)) for d in (1, 3, 4)]
    if kind == "grid":
        return GridStructure(connectivity=8, contrast=True), [rng.normal(size=(2, 3, 2))] * 2
    if kind in ("grid_table", "grid_untied"):
        structure = GridStructure(
            contrast=True,
            n_states=3,
            pairwise="table",
            untied=kind == "grid_untied",
            solver="brute_force",
        )
        return structure, [rng.normal(size=(2, 3, 2)) for _ in range(2)]
    if kind == "chain_scaled":  # one score per label, one weight scaling them, biases
        return ChainStructure(n_states=3, unary="scaled"), [rng.normal(size=(d, 3)) for d in (1, 4)]
    if kind == "grid_scaled":
        return GridStructure(unary="scaled", bias=False), [rng.normal(size=(2, 3, 2))] * 2
    if kind == "graph_scaled":
        edges = np.array([[0, 1], [1, 2], [2, 0]])
        sample = GraphSample(rng.normal(size=(3, 3)), edges, rng.random((3, 2)))
        return GraphStructure(n_states=3, unary="scaled"), [sample] * 2
    if kind == "graph_table":
        edges = np.array([[0, 1], [1, 2], [2, 0]])
        sample = GraphSample(rng.normal(size=(3, 2)), edges, rng.normal(size=(3, 2)))
        return GraphStructure(n_states=3, pairwise="table", solver="brute_force"), [sample] * 2
    if kind == "graph_tied":  # symmetric and antisymmetric tables, and a free one
        edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3]])
        sample = GraphSample(rng.normal(size=(4, 2)), edges, rng.normal(size=(4, 3)))
        structure = GraphStructure(
            n_states=3,
            pairwise="table",
            solver="brute_force",
            symmetric_edge_features=[0],
            antisymmetric_edge_features=[2],
        )
        return structure, [sample, sample]
    if kind == "grid_untied_tied":
        structure = GridStructure(
            contrast=True,
            n_states=3,
            pairwise="table",
            untied=True,
            solver="brute_force",
            symmetric_edge_features=[1, 2],
            antisymmetric_edge_features=[0],
        )
        return structure, [rng.normal(size=(2, 3, 2)) for _ in range(2)]
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3]])
    sample = GraphSample(rng.normal(size=(4, 2)), edges, rng.random((4, 3)), rng.random(4) + 1)
    return GraphStructure(), [
        sample,
        GraphSample(rng.normal(size=(2, 2)), [[0, 1]], rng.random((1, 3))),
    ]


def _hidden_graph_data(n_samples=20, seed=0):
    """Three visible nodes on a path and one hidden node joined to all of them."""
    rng = np.random.default_rng(seed)
    edges = np.array([[0, 1], [1, 2], [3, 0], [3, 1], [3, 2]])
    X, y = [], []
    for _ in range(n_samples):
        labels = np.full(3, rng.integers(0, 2))
        labels[rng.integers(0, 3)] = rng.integers(0, 2)
        features = np.eye(2)[labels] + rng.normal(0, 0.8, (3, 2))
        X.append(GraphSample(features, edges, n_hidden_nodes=1))
        y.append(labels)
    return X, y
