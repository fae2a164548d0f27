"""Transition constraints of chains: the tagging schemes' rules, exactness of every query
against enumeration of the allowed labellings, training under constraints, and the errors."""

import itertools
import pickle

import numpy as np
import pytest

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    Potentials,
)
from pmap_sklearn._backend import ChainLayout, ChainSolver
from pmap_sklearn.inspection import sequence_probabilities
from pmap_sklearn.structures._constraints import resolve_constraints

ENTITY_LABELS = ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]


def _rule(scheme, a, b):
    """Whether label a may be followed by b, written from the schemes' definitions."""
    pa, _, ta = a.partition("-")
    pb, _, tb = b.partition("-")
    if scheme == "BIO":
        return pb != "I" or (pa in ("B", "I") and ta == tb)
    if scheme == "IOB1":
        return pb != "B" or (pa in ("B", "I") and ta == tb)
    opened = pa in ("B", "I")  # BIOES
    return (pb in ("I", "E") and ta == tb) if opened else pb not in ("I", "E")


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_the_schemes_allow_what_their_definitions_allow(scheme):
    labels = ENTITY_LABELS + (["E-PER", "S-PER", "E-LOC", "S-LOC"] if scheme == "BIOES" else [])
    resolved = resolve_constraints(scheme, np.array(labels))
    expected = [[_rule(scheme, a, b) for b in labels] for a in labels]
    np.testing.assert_array_equal(resolved.transitions, expected)
    first = {"BIO": "I", "IOB1": "B", "BIOES": "IE"}[scheme]
    np.testing.assert_array_equal(resolved.start, [label[0] not in first for label in labels])
    last = "BI" if scheme == "BIOES" else ""
    np.testing.assert_array_equal(resolved.end, [label[0] not in last for label in labels])
    if scheme == "BIOES":  # BILOU: the same rules under other prefixes
        bilou = [label.replace("E-", "L-").replace("S-", "U-") for label in labels]
        np.testing.assert_array_equal(
            resolve_constraints("BILOU", np.array(bilou)).transitions, resolved.transitions
        )


def _enumerate(unary, transition, constraints, clamp=None):
    """Every labelling of one chain, its score (``-inf`` if forbidden) and probability."""
    n, k = unary.shape
    labellings = np.array(list(itertools.product(range(k), repeat=n)))
    scores = []
    for y in labellings:
        allowed = constraints.start[y[0]] and constraints.end[y[-1]]
        allowed &= all(constraints.transitions[a, b] for a, b in zip(y[:-1], y[1:], strict=True))
        if clamp is not None:
            allowed &= all(c < 0 or c == label for c, label in zip(clamp, y, strict=True))
        score = unary[np.arange(n), y].sum() + sum(
            transition[a, b] for a, b in zip(y[:-1], y[1:], strict=True)
        )
        scores.append(score if allowed else -np.inf)
    scores = np.array(scores)
    log_z = np.logaddexp.reduce(scores)
    return labellings, scores, np.exp(scores - log_z), log_z


def _chains(rng, lengths, constraints):
    """Potentials of chains of the given lengths under ``constraints``."""
    k = len(constraints.start)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    heads = np.concatenate(
        [np.arange(a, b - 1) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    )
    return Potentials(
        rng.normal(size=(offsets[-1], k)) * 2,
        np.stack([heads, heads + 1], axis=1).astype(np.intp),
        rng.normal(size=(k, k)) * 2,
        offsets,
        np.concatenate([[0], np.cumsum(np.asarray(lengths) - 1)]),
        ChainLayout(constraints),
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("clamped", [False, True])
@pytest.mark.parametrize("constrained", [True, False])
def test_every_chain_query_is_exact_over_the_allowed_labellings(seed, clamped, constrained):
    """MAP, node, transition and per-edge marginals, log Z and draws of the viterbi solver
    equal those of enumerating the labellings the BIO scheme allows (and the clamp keeps);
    without constraints, of enumerating every labelling."""
    rng = np.random.default_rng(seed)
    constraints = resolve_constraints("BIO", np.array(ENTITY_LABELS))
    if not constrained:  # everything allowed
        constraints = resolve_constraints(
            {"transitions": list(itertools.product(ENTITY_LABELS, repeat=2))},
            np.array(ENTITY_LABELS),
        )
    lengths = [1, 2, 4, 3]
    p = _chains(rng, lengths, constraints)
    clamp = None
    if clamped:  # a clamp the scheme allows: "B-PER" in the middle of the 4-node chain
        clamp = np.full(p.n_nodes, -1)
        clamp[p.node_offsets[2] + 1] = ENTITY_LABELS.index("B-PER")
    solver = ChainSolver()
    labels = solver.map(p, clamp)
    marginals = solver.marginals(p, clamp)
    draws = solver.sample(p, 4000, np.random.default_rng(seed), clamp)
    edges = solver.edge_marginals(p, clamp)
    pair = np.zeros((5, 5))
    for i, (a, b) in enumerate(zip(p.node_offsets[:-1], p.node_offsets[1:], strict=True)):
        local_clamp = None if clamp is None else clamp[a:b]
        ys, scores, prob, log_z = _enumerate(p.unary[a:b], p.pairwise, constraints, local_clamp)
        np.testing.assert_array_equal(labels[a:b], ys[scores.argmax()])
        np.testing.assert_allclose(marginals.log_partition[i], log_z, rtol=1e-10)
        node = np.stack(
            [(prob[:, None] * (ys[:, [d]] == np.arange(5))).sum(0) for d in range(b - a)]
        )
        np.testing.assert_allclose(marginals.node[a:b], node, atol=1e-10)
        for d in range(b - a - 1):
            np.add.at(pair, (ys[:, d], ys[:, d + 1]), prob)
            edge = np.zeros((5, 5))
            np.add.at(edge, (ys[:, d], ys[:, d + 1]), prob)
            np.testing.assert_allclose(edges[p.edge_offsets[i] + d], edge, atol=1e-10)
        # draws: only allowed labellings, at their probabilities
        codes = np.ravel_multi_index(draws[:, a:b].T, (5,) * (b - a))
        assert np.all(np.isfinite(scores[codes]))
        frequency = np.bincount(codes, minlength=len(ys)) / len(codes)
        assert np.abs(frequency - prob).max() < 0.03
    np.testing.assert_allclose(marginals.statistics.pairwise, pair, atol=1e-10)
    forbidden = ~constraints.transitions
    assert np.all(marginals.statistics.pairwise[forbidden] == 0)


@pytest.mark.parametrize("clamped", [False, True])
def test_stacked_perturbed_rounds_are_the_maps_of_each_round(clamped):
    """The viterbi solver's rounds as one stacked pass: each round's labelling is the MAP of
    that round's perturbed model, constraints and clamps kept; a chain with no allowed
    labelling is named."""
    from pmap_sklearn._backend.solver import Solver
    from pmap_sklearn.perturbation import draw

    rng = np.random.default_rng(0)
    constraints = resolve_constraints("BIO", np.array(ENTITY_LABELS))
    p = _chains(rng, [1, 5, 3, 8, 2], constraints)
    clamp = None
    if clamped:
        clamp = np.full(p.n_nodes, -1)
        clamp[[2, 7]] = ENTITY_LABELS.index("B-PER"), ENTITY_LABELS.index("O")
    block = np.stack([draw(rng, p.n_nodes, p.n_states) for _ in range(6)])
    solver = ChainSolver()
    stacked = solver.perturbed_rounds(p, block, clamp)
    np.testing.assert_array_equal(stacked, Solver.perturbed_rounds(solver, p, block, clamp))
    for labels, perturbation in zip(stacked, block, strict=True):
        assert np.isfinite(p.add_unary(perturbation).score(labels)).all()
        np.testing.assert_array_equal(labels, solver.map(p.add_unary(perturbation), clamp))
    assert solver.perturbed_rounds(p.take(np.arange(0)), block[:, :0]).shape == (6, 0)
    clamp = np.full(p.n_nodes, -1)
    clamp[6] = ENTITY_LABELS.index("I-PER")  # sample 2 starts at node 6: I-PER cannot open it
    with pytest.raises(ValueError, match="sample 2: no labelling obeys"):
        solver.perturbed_rounds(p, block, clamp)


def test_scores_of_forbidden_labellings_are_minus_infinity():
    constraints = resolve_constraints("BIO", np.array(ENTITY_LABELS))
    p = _chains(np.random.default_rng(0), [3], constraints)
    o, b_per, i_per, i_loc = (ENTITY_LABELS.index(x) for x in ("O", "B-PER", "I-PER", "I-LOC"))
    assert np.isfinite(p.score(np.array([b_per, i_per, o])))[0]
    assert p.score(np.array([o, i_per, o]))[0] == -np.inf  # I-PER after O
    assert p.score(np.array([i_per, o, o]))[0] == -np.inf  # I-PER at the start
    assert p.score(np.array([b_per, i_loc, o]))[0] == -np.inf  # I-LOC after B-PER


def test_solvers_without_the_capability_refuse_constraints():
    from pmap_sklearn._backend import BruteForceSolver

    constraints = resolve_constraints("BIO", np.array(ENTITY_LABELS))
    p = _chains(np.random.default_rng(0), [3], constraints)
    with pytest.raises(ValueError, match="brute_force solver honours no transition constraints"):
        BruteForceSolver().map(p)


# ---- the estimators ---------------------------------------------------------------------------


def _bio_corpus(seed, n=60):
    """Random sentences whose tags follow BIO, with features that tell the tags apart."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for length in rng.integers(1, 7, n):
        tags, previous = [], "O"
        for _ in range(length):
            tag = rng.choice(ENTITY_LABELS)
            if tag.startswith("I-") and previous[2:] != tag[2:]:
                tag = "B-" + tag[2:]
            tags.append(tag)
            previous = tag
        codes = np.array([ENTITY_LABELS.index(t) for t in tags])
        X.append(np.eye(5)[codes] + rng.normal(scale=0.5, size=(length, 5)))
        y.append(np.array(tags))
    return X, y


def _breaks_bio(tags):
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            return True
        previous = tag
    return False


@pytest.mark.parametrize(
    "make",
    [
        lambda s: ChainCRF(s, alpha=0.1),
        lambda s: PerturbMAPCRF(s, random_state=0, max_iter=10),
        lambda s: MarginalPerturbMAPCRF(s, random_state=0, max_iter=10),
    ],
    ids=["ChainCRF", "PerturbMAPCRF", "MarginalPerturbMAPCRF"],
)
def test_learners_never_predict_nor_draw_a_labelling_the_scheme_forbids(make):
    X, y = _bio_corpus(0)
    model = make(ChainStructure(constraints="BIO")).fit(X, y)
    forbidden = ~model.structure_.constraints_.transitions
    assert np.all(model.structure_.transition(model.coef_)[forbidden] == 0)
    X_test, _ = _bio_corpus(1)
    assert not any(_breaks_bio(tags) for tags in model.predict(X_test))
    draws = model.sample(X_test[:10], n_draws=20, random_state=0)
    assert not any(_breaks_bio(tags) for sample in draws for tags in sample)
    marginals = model.predict_marginals(X_test[:10])
    first = [m[0] for m in marginals]  # no sentence starts inside an entity
    inside = [list(model.classes_).index(t) for t in ("I-LOC", "I-PER")]
    np.testing.assert_allclose(np.array(first)[:, inside], 0.0, atol=1e-12)


def test_unconstrained_model_breaks_the_scheme_where_the_constrained_one_cannot():
    """The constraints change what the model says: on sentences whose features point to an
    "I-" tag at the start, the unconstrained chain predicts it."""
    X, y = _bio_corpus(0)
    confusing = [np.eye(5)[[ENTITY_LABELS.index("I-PER")] * 2] * 6.0]
    free = ChainCRF(alpha=0.1).fit(X, y)
    assert _breaks_bio(free.predict(confusing)[0])
    bound = ChainCRF(ChainStructure(constraints="BIO"), alpha=0.1).fit(X, y)
    assert bound.predict(confusing)[0].tolist() == ["B-PER", "I-PER"]


def test_sequence_probabilities_are_exact_and_zero_off_the_scheme():
    X, y = _bio_corpus(0)
    model = ChainCRF(ChainStructure(constraints="BIO"), alpha=0.1).fit(X, y)
    x = X[3][:3]
    labellings = [np.array(t) for t in itertools.product(model.classes_, repeat=len(x))]
    probabilities = sequence_probabilities(model, [x] * len(labellings), labellings)
    allowed = np.array([not _breaks_bio(t) for t in labellings])
    assert np.all(probabilities[~allowed] == 0)
    assert probabilities[allowed].sum() == pytest.approx(1.0, abs=1e-9)
    # the MAP labelling is the most probable one
    best = labellings[int(np.argmax(probabilities))]
    assert best.tolist() == model.predict([x])[0].tolist()


def test_constraints_given_as_allowed_pairs_and_ends():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 2)) for n in (5, 2, 4)]
    y = [np.array(["a", "b", "c", "a", "b"][: len(x)]) for x in X]
    constraints = {
        "transitions": [("a", "b"), ("b", "c"), ("c", "a"), ("b", "a")],
        "start": ["a"],
        "end": ["a", "b"],
    }
    model = ChainCRF(ChainStructure(constraints=constraints), alpha=1.0).fit(X, y)
    for tags in model.predict([rng.normal(size=(n, 2)) for n in range(1, 7)]):
        assert tags[0] == "a" and tags[-1] in "ab"
        assert all(
            (a, b) in constraints["transitions"] for a, b in zip(tags[:-1], tags[1:], strict=True)
        )


def test_hidden_states_share_their_labels_constraints():
    X, y = _bio_corpus(0)
    structure = ChainStructure(n_states_per_label=2, constraints="BIO")
    model = ChainCRF(structure, alpha=0.1, max_iter=30).fit(X, y)
    assert model.structure_.constraints_.transitions.shape == (10, 10)
    assert not any(_breaks_bio(tags) for tags in model.predict(X))


def test_a_fitted_constrained_model_pickles():
    X, y = _bio_corpus(0)
    model = ChainCRF(ChainStructure(constraints="BIO"), alpha=0.1).fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    for a, b in zip(again.predict(X), model.predict(X), strict=True):
        np.testing.assert_array_equal(a, b)


# ---- errors -----------------------------------------------------------------------------------


def test_bad_constraints_get_errors_that_name_the_problem():
    X, y = _bio_corpus(0)
    with pytest.raises(ValueError, match="'BOI' is not a tagging scheme"):
        ChainCRF(ChainStructure(constraints="BOI")).fit(X, y)
    with pytest.raises(ValueError, match="label 'X-PER' does not fit the BIO scheme"):
        ChainCRF(ChainStructure(constraints="BIO")).fit([X[0][:1]] * 2, [["X-PER"], ["O"]])
    with pytest.raises(ValueError, match="label 'Z', not among the labels"):
        ChainCRF(ChainStructure(constraints={"transitions": [("O", "Z")]})).fit(X, y)
    with pytest.raises(ValueError, match="takes 'transitions'"):
        ChainCRF(ChainStructure(constraints={"allowed": []})).fit(X, y)
    with pytest.raises(ValueError, match="honours no transition constraints"):
        ChainCRF(ChainStructure(constraints="BIO", solver="brute_force")).fit(X, y)


def test_training_labels_that_break_the_scheme_are_named():
    X, y = _bio_corpus(0)
    y = [tags.copy() for tags in y]
    y[2] = np.array(["O"] * (len(y[2]) - 1) + ["I-PER"]) if len(y[2]) > 1 else y[2]
    with pytest.raises(
        ValueError, match=r"sample 2: the training labels break constraints=.BIO. at node"
    ):
        ChainCRF(ChainStructure(constraints="BIO")).fit(X, y)


def test_known_labels_the_constraints_cannot_complete_are_refused():
    X, y = _bio_corpus(0)
    model = ChainCRF(ChainStructure(constraints="BIO"), alpha=0.1).fit(X, y)
    x = X[0][:1] if len(X[0]) else X[0]
    with pytest.raises(ValueError, match="break constraints='BIO' at node 0"):
        model.predict([np.vstack([x, x])], known_labels=[["I-PER", -1]])
    # a chain must start with "a" and end with "b": no labelling of one node obeys
    constraints = {"transitions": [("a", "a"), ("a", "b"), ("b", "b")], "start": ["a"]}
    constraints["end"] = ["b"]
    rng = np.random.default_rng(0)
    tiny = ChainCRF(ChainStructure(constraints=constraints), alpha=1.0)
    tiny.fit([rng.normal(size=(2, 2)), rng.normal(size=(3, 2))], [["a", "b"], ["a", "a", "b"]])
    assert tiny.predict([rng.normal(size=(4, 2))])[0].tolist()[::3] == ["a", "b"]
    with pytest.raises(ValueError, match="sample 1: no labelling obeys"):
        tiny.predict([rng.normal(size=(2, 2)), rng.normal(size=(1, 2))])
    with pytest.raises(ValueError, match="sample 0: no labelling obeys"):
        tiny.predict_marginals([rng.normal(size=(1, 2))])


def test_feasibility_at_every_length_is_known_from_the_constraints():
    for scheme, labels in (("BIO", ENTITY_LABELS), ("BIOES", ["B-X", "E-X", "I-X", "O", "S-X"])):
        assert resolve_constraints(scheme, np.array(labels)).every_length
    ends = {"transitions": [("a", "a"), ("a", "b"), ("b", "b")], "start": ["a"], "end": ["b"]}
    assert not resolve_constraints(ends, np.array(["a", "b"])).every_length  # one node: none
    # only even lengths: a -> b -> a ..., starting at a and ending at b
    parity = {"transitions": [("a", "b"), ("b", "a")], "start": ["a"], "end": ["b"]}
    assert not resolve_constraints(parity, np.array(["a", "b"])).every_length


def test_the_estimator_contract_holds_with_constraints():
    """Warm start after switching the constraints on, a refit that fails on broken labels
    leaving the fitted model as it was, clone, and n_jobs 1 and 2 alike."""
    from sklearn.base import clone

    X, y = _bio_corpus(0)
    model = PerturbMAPCRF(ChainStructure(), random_state=0, max_iter=5, warm_start=True)
    model.fit(X, y)
    model.set_params(structure__constraints="BIO").fit(X, y)
    forbidden = ~model.structure_.constraints_.transitions
    assert np.all(model.structure_.transition(model.coef_)[forbidden] == 0)
    before = [tags.copy() for tags in model.predict(X)]
    broken = [tags.copy() for tags in y]
    broken[0] = np.array(["I-PER"] * len(broken[0]))
    with pytest.raises(ValueError, match="break constraints='BIO'"):
        model.fit(X, broken)
    for a, b in zip(model.predict(X), before, strict=True):
        np.testing.assert_array_equal(a, b)
    assert clone(model).structure.constraints == "BIO"
    one, two = (
        PerturbMAPCRF(ChainStructure(constraints="BIO"), random_state=0, max_iter=3, n_jobs=n)
        .fit(X, y)
        .predict(X)
        for n in (1, 2)
    )
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
