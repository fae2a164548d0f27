"""``fit(X, y, sample_weight=...)`` on every learner: what a weight means, checked where it can
be checked exactly, and how scikit-learn's metadata routing hands the weights on.

What holds, and is tested:

- weight 0 is the sample removed, for every learner and bit for bit (with a fixed
  ``random_state``): the structure drops it before anything reads the data (the structure's
  fit, the logistic start, the early-stopping split, the semi-supervised stages);
- equal weights are no weights (bit for bit for the stochastic learners, whose weights are
  rescaled to mean 1; to rounding for the full-batch ones);
- the objective is the weighted mean of the samples' terms, so an integer weight is that many
  copies of the sample: the full-batch learners (``ChainCRF``, ``EpsilonCRF``, the surrogate
  likelihoods, Part & Clamp) fit the weighted data and the repeated data to the same optimum
  (within 1e-4 relative; measured ~1e-11), ``StructuredSVM`` (BCFW) too once converged;
- the stochastic learners follow the repeated data in expectation, not draw by draw (a run
  visits each sample once an epoch, not each copy): their stochastic gradient of the weighted
  samples is an unbiased estimate of the repeated data's (exactly equal where the oracle is
  deterministic: mean field, the structured hinge);
- weights move the fit towards the samples they weigh up;
- ``Pipeline``, ``GridSearchCV`` and ``cross_validate`` route the weights to ``fit`` and to a
  scorer that requests them, as a manual loop over the folds does.
"""

import copy
import pickle

import numpy as np
import pytest
import sklearn
from scipy import sparse
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import (
    ChainCRF,
    ChainStructure,
    ContrastiveDivergenceCRF,
    EpsilonCRF,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    MultiLabelStructure,
    NodeTransformer,
    PartClampCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
    TwoStageCRF,
    crfsuite_penalty,
    hamming_scorer,
    mean_hamming_loss,
    weighted_hamming_scorer,
)
from pmap_sklearn._backend import BruteForceSolver, ChainSolver, weighted_marginals
from pmap_sklearn.datasets import make_chain_data, make_grid_data
from pmap_sklearn.metrics import global_accuracy_scorer, mean_iou_scorer

#: Every learner, quick, with the kind of data it is given ("chain" or "grid").
LEARNERS = {
    "PerturbMAPCRF": (lambda: PerturbMAPCRF(max_iter=3, random_state=0), "chain"),
    "MarginalPerturbMAPCRF": (lambda: MarginalPerturbMAPCRF(max_iter=3, random_state=0), "chain"),
    "MeanFieldCRF": (lambda: MeanFieldCRF("chain", max_iter=2, random_state=0), "chain"),
    "EpsilonCRF": (lambda: EpsilonCRF(max_iter=5), "chain"),
    "ChainCRF": (lambda: ChainCRF(max_iter=30), "chain"),
    "StructuredSVM": (lambda: StructuredSVM(max_iter=3, random_state=0), "chain"),
    "StructuredSVM-subgradient": (
        lambda: StructuredSVM(algorithm="subgradient", max_iter=3, random_state=0),
        "chain",
    ),
    "PseudoLikelihoodCRF": (lambda: PseudoLikelihoodCRF(max_iter=20, random_state=0), "grid"),
    "PiecewiseCRF": (lambda: PiecewiseCRF(max_iter=20, random_state=0), "grid"),
    "ContrastiveDivergenceCRF": (
        lambda: ContrastiveDivergenceCRF(max_iter=5, random_state=0),
        "grid",
    ),
    "PartClampCRF": (lambda: PartClampCRF(max_iter=5, n_rounds=2, random_state=0), "grid"),
    "TwoStageCRF": (
        lambda: TwoStageCRF(crf=PerturbMAPCRF(max_iter=3, random_state=0), cv=2, random_state=0),
        "chain",
    ),
}
#: The learners whose weights are rescaled to mean 1 (stochastic steps, BCFW's blocks).
RESCALED = {
    "PerturbMAPCRF",
    "MarginalPerturbMAPCRF",
    "MeanFieldCRF",
    "StructuredSVM",
    "StructuredSVM-subgradient",
    "ContrastiveDivergenceCRF",
}


@pytest.fixture(scope="module")
def data():
    chains = make_chain_data(n_samples=24, n_states=3, n_features=4, random_state=0)
    grids = make_grid_data(n_samples=6, shape=(5, 5), noise=0.5, random_state=0)
    return {
        "chain": (list(chains.data), list(chains.target)),
        "grid": (list(grids.data), list(grids.target)),
    }


def _weights(n, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, n)


def _coefficients(model):
    """What a fit learned: the weights (both stages' of a two-stage model)."""
    if isinstance(model, TwoStageCRF):
        return np.concatenate([model.crf_.coef_, model.classifier_.coef_.ravel()])
    return model.coef_


def _relative(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _repeated(X, y, counts):
    """Each sample ``counts[i]`` times."""
    return (
        [x for x, c in zip(X, counts, strict=True) for _ in range(c)],
        [t for t, c in zip(y, counts, strict=True) for _ in range(c)],
    )


# ---- what a weight means ----------------------------------------------------------------------
@pytest.mark.parametrize("name", list(LEARNERS))
def test_weight_zero_is_the_sample_removed(name, data):
    """Bit for bit, with the same random_state: the samples of weight 0 are not in the fit."""
    make, kind = LEARNERS[name]
    X, y = data[kind]
    weights = _weights(len(X))
    weights[[0, 3]] = 0.0
    kept = [i for i in range(len(X)) if weights[i] > 0]
    weighted = make().fit(X, y, sample_weight=weights)
    removed = make().fit([X[i] for i in kept], [y[i] for i in kept], sample_weight=weights[kept])
    np.testing.assert_array_equal(_coefficients(weighted), _coefficients(removed))
    # and the weights do change the fit
    assert not np.allclose(_coefficients(weighted), _coefficients(make().fit(X, y)))


@pytest.mark.parametrize("name", [name for name in LEARNERS if name != "TwoStageCRF"])
def test_equal_weights_are_no_weights(name, data):
    """At a fixed alpha only the ratios of the weights matter (the objective is their weighted
    mean): the stochastic learners, whose weights are rescaled to mean 1, bit for bit."""
    make, kind = LEARNERS[name]
    X, y = data[kind]
    plain = _coefficients(make().fit(X, y))
    equal = _coefficients(make().fit(X, y, sample_weight=np.full(len(X), 3.0)))
    if name in RESCALED:
        np.testing.assert_array_equal(equal, plain)
    else:
        np.testing.assert_allclose(equal, plain, rtol=1e-7, atol=1e-10)
    # a number is every sample's weight, as scikit-learn takes it
    np.testing.assert_array_equal(_coefficients(make().fit(X, y, sample_weight=3.0)), equal)


def test_two_stage_passes_the_weights_to_both_stages(data):
    """Stage one's classifier gets each node with its sample's weight (as scikit-learn counts
    them: copies, against its C), stage two each sample."""
    X, y = data["chain"]
    weights = _weights(len(X))
    model = LEARNERS["TwoStageCRF"][0]().fit(X, y, sample_weight=weights)
    features = np.vstack(X)
    node_weight = np.repeat(weights, [len(t) for t in y])
    final = LogisticRegression(max_iter=1000).fit(features, np.concatenate(y), node_weight)
    np.testing.assert_allclose(model.classifier_.coef_, final.coef_)
    with pytest.raises(ValueError, match="KNeighborsClassifier.fit takes no sample_weight"):
        TwoStageCRF(KNeighborsClassifier(), cv=2).fit(X, y, sample_weight=weights)
    TwoStageCRF(KNeighborsClassifier(), cv=2, unary="matrix", pairwise_scale=1).fit(X[:6], y[:6])


@pytest.mark.parametrize(
    "make",
    [
        lambda: ChainCRF(alpha=1e-2, tol=1e-10, max_iter=2000),
        lambda: EpsilonCRF(max_iter=300, tol=1e-12),
        lambda: PseudoLikelihoodCRF(max_iter=500, tol=1e-10, random_state=0),
        lambda: PiecewiseCRF(max_iter=500, tol=1e-10, random_state=0),
        lambda: PseudoLikelihoodCRF(class_weight="balanced", max_iter=500, tol=1e-10),
        lambda: PartClampCRF(max_iter=200, tol=1e-10, n_rounds=2, random_state=0),
    ],
    ids=["ChainCRF", "EpsilonCRF", "PseudoLikelihood", "Piecewise", "balanced", "PartClamp"],
)
def test_an_integer_weight_is_that_many_copies_for_the_full_batch_learners(make, data):
    """The weighted mean of the samples' terms is the mean over the repeated data: the same
    objective, the same optimum (coefficients within 1e-4 of the largest, at a fixed alpha;
    L-BFGS stops at its tolerance, measured ~1e-11)."""
    model = make()
    X, y = data["grid" if model.get_params()["structure"] == "grid" else "chain"]
    if isinstance(model, EpsilonCRF):
        X, y = X[:10], y[:10]
    counts = np.random.default_rng(0).integers(1, 4, len(X))
    weighted = make().fit(X, y, sample_weight=counts)
    repeated = make().fit(*_repeated(X, y, counts))
    assert _relative(weighted.coef_, repeated.coef_) < 1e-4
    doubled = make().fit(X, y, sample_weight=np.full(len(X), 2.0))
    assert _relative(doubled.coef_, make().fit(X + X, y + y).coef_) < 1e-4


def test_chain_crf_weight_two_is_the_data_duplicated(data):
    """The acceptance check: weight 2 on every sample is the data twice — ChainCRF maximises
    the mean log-likelihood minus ``alpha`` times the penalty, so at a fixed alpha both are the
    original fit; with the defaults on sparse features (crfsuite's penalty, per sample) the
    summed weight counts the samples, so that too is the data twice."""
    X, y = data["chain"]
    weighted = ChainCRF(alpha=1e-2).fit(X, y, sample_weight=np.full(len(X), 2.0))
    duplicated = ChainCRF(alpha=1e-2).fit(X + X, y + y)
    assert _relative(weighted.coef_, duplicated.coef_) < 1e-4
    sparse_X = [sparse.csr_matrix(x) for x in X]
    weighted = ChainCRF().fit(sparse_X, y, sample_weight=np.full(len(X), 2.0))
    duplicated = ChainCRF().fit(sparse_X + sparse_X, y + y)
    expected = crfsuite_penalty(0.1, 0.1, 2 * len(X))[0]
    assert weighted.alpha_ == pytest.approx(duplicated.alpha_) == pytest.approx(expected)
    assert _relative(weighted.coef_, duplicated.coef_) < 1e-4
    counts = np.random.default_rng(1).integers(1, 4, len(X))
    assert ChainCRF().fit(sparse_X, y, sample_weight=counts).alpha_ == pytest.approx(
        crfsuite_penalty(0.1, 0.1, counts.sum())[0]
    )


def test_balanced_class_weights_count_the_weighted_nodes(data):
    X, y = data["chain"]
    counts = np.random.default_rng(5).integers(1, 4, len(X))
    model = PerturbMAPCRF(class_weight="balanced", max_iter=1, random_state=0)
    weighted = clone(model).fit(X, y, sample_weight=counts)._label_weights
    np.testing.assert_allclose(weighted, clone(model).fit(*_repeated(X, y, counts))._label_weights)


def test_marginal_auto_alpha_counts_weighted_nodes(data):
    X, y = data["chain"]
    sparse_X = [sparse.csr_matrix(x) for x in X]
    counts = np.random.default_rng(1).integers(1, 4, len(X))
    model = MarginalPerturbMAPCRF(max_iter=1, random_state=0)
    model.fit(sparse_X, y, sample_weight=counts)
    nodes = counts @ np.array([len(t) for t in y])
    assert model.sgd_settings_["alpha"] == pytest.approx(0.2 / nodes)


def test_weights_follow_the_runs_of_a_chain_cut_at_ignored_nodes(data):
    """A chain cut at its ``ignore_label`` nodes gives each run its weight."""
    X, y = data["chain"]
    y = [np.where(np.arange(len(t)) == 2, 9, t) for t in y]
    counts = np.random.default_rng(2).integers(1, 4, len(X))
    model = ChainCRF(alpha=1e-2, ignore_label=9)
    weighted = clone(model).fit(X, y, sample_weight=counts)
    repeated = clone(model).fit(*_repeated(X, y, counts))
    assert _relative(weighted.coef_, repeated.coef_) < 1e-4


def test_chain_crf_with_hidden_states_weighs_the_clamped_likelihood_too(data):
    """With hidden states the likelihood sums over them (a second, clamped forward-backward
    pass, weighted as the first) and is not concave, so fits may find other optima: the
    objective and its gradient at any weights are the repeated data's."""
    X, y = data["chain"]
    counts = np.random.default_rng(3).integers(1, 4, len(X))
    model = ChainCRF(ChainStructure(n_states_per_label=2), max_iter=5).fit(X, y)
    w = np.random.default_rng(4).normal(size=model.coef_.shape)

    def likelihood(X, y, weights):
        problem = model.structure_.fit_problem(X, y, sample_weight=weights, classes=model.classes_)
        return model._log_likelihood(problem.batch, problem.labels, w)

    value, gradient = likelihood(X, y, counts.astype(float))
    repeated_value, repeated_gradient = likelihood(*_repeated(X, y, counts), None)
    assert value == pytest.approx(repeated_value, rel=1e-12)
    np.testing.assert_allclose(gradient, repeated_gradient, rtol=1e-10, atol=1e-12)
    assert not np.isclose(value, likelihood(X, y, None)[0])


def test_bcfw_converges_to_the_repeated_data_optimum():
    """BCFW visits a block in proportion to its weight, as it would visit the copies: at a
    large alpha it converges in a few hundred passes, to the optimum of the repeated data (at
    the rate of the repeated data's run)."""
    data = make_chain_data(n_samples=8, n_states=3, n_features=4, random_state=0)
    X, y = list(data.data), list(data.target)
    counts = np.random.default_rng(0).integers(1, 4, len(X))
    model = StructuredSVM(alpha=1.0, max_iter=400, tol=1e-6, random_state=0)
    weighted = clone(model).fit(X, y, sample_weight=counts)
    repeated = clone(model).fit(*_repeated(X, y, counts))
    # both within a duality gap of 1e-2 (3e-3 and 2e-3 measured), the coefficients 2e-2 apart
    assert max(weighted.duality_gaps_[-1], repeated.duality_gaps_[-1]) < 1e-2
    assert _relative(weighted.coef_, repeated.coef_) < 5e-2


def _oracle_gradients(model, X, y, weights, draws):
    """Full-batch stochastic gradients (over n) of a fitted SGD learner's oracle at its
    ``coef_``, on ``X, y`` weighted by ``weights``: one array per draw."""
    problem = model.structure_.fit_problem(X, y, sample_weight=weights, classes=model.classes_)
    batch = problem.batch.with_unit_mean_weight()
    if isinstance(model, StructuredSVM):
        oracle = model._hinge_oracle(batch, *model._targets(batch, problem.labels, None, None))
    else:
        oracle = model._make_oracle(batch, model._targets(batch, problem.labels, None, None))
    rng = np.random.default_rng(1)
    gradients = []
    for _ in range(draws):
        gradient, _ = oracle(slice(None), model.coef_, rng)
        gradient = gradient.toarray() if hasattr(gradient, "toarray") else gradient
        gradients.append(gradient / batch.n_samples)
    return np.array(gradients)


@pytest.mark.parametrize(
    "make",
    [
        lambda: MeanFieldCRF("chain", max_iter=2, random_state=0),
        lambda: StructuredSVM(algorithm="subgradient", max_iter=2, random_state=0),
    ],
    ids=["MeanFieldCRF", "StructuredSVM-subgradient"],
)
def test_a_deterministic_oracle_of_weighted_samples_is_the_repeated_datas(make, data):
    """The gradient an SGD step takes on a mini-batch is its weighted sum over its size, the
    weights of mean 1 over the samples fitted: over all of them, the repeated data's mean."""
    X, y = data["chain"]
    counts = np.random.default_rng(0).integers(1, 4, len(X))
    model = make().fit(X, y)
    weighted = _oracle_gradients(model, X, y, counts.astype(float), 1)[0]
    repeated = _oracle_gradients(model, *_repeated(X, y, counts), None, 1)[0]
    np.testing.assert_allclose(weighted, repeated, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cls", [PerturbMAPCRF, MarginalPerturbMAPCRF])
def test_the_perturbed_gradient_of_weighted_samples_is_unbiased(cls, data):
    """Perturb-and-MAP gradients are random: over 200 draws the weighted samples' mean
    gradient is the repeated data's within Monte-Carlo error, the unweighted one's is not."""
    X, y = data["chain"]
    counts = np.random.default_rng(0).integers(1, 4, len(X))
    model = cls(max_iter=2, random_state=0).fit(X, y)
    draws = 200

    def mean_and_error(*args):
        gradients = _oracle_gradients(model, *args, draws)
        return gradients.mean(axis=0), gradients.std(axis=0) / np.sqrt(draws)

    weighted, weighted_error = mean_and_error(X, y, counts.astype(float))
    repeated, repeated_error = mean_and_error(*_repeated(X, y, counts), None)
    plain, plain_error = mean_and_error(X, y, None)
    z = np.abs(weighted - repeated) / np.sqrt(weighted_error**2 + repeated_error**2 + 1e-30)
    z_plain = np.abs(plain - repeated) / np.sqrt(plain_error**2 + repeated_error**2 + 1e-30)
    assert z.max() < 4 and z.mean() < 1.2  # |N(0, 1)| has mean 0.8
    assert z_plain.max() > 6


@pytest.mark.parametrize("name", list(LEARNERS))
def test_weights_pull_the_fit_towards_the_samples_they_weigh_up(name):
    """Every sample twice, once under each of two rules that disagree on every node: the fit
    follows the rule whose copies weigh 10, whichever it is."""
    make, kind = LEARNERS[name]
    rng = np.random.default_rng(0)
    if kind == "chain":
        first = [rng.integers(0, 3, size=rng.integers(4, 8)) for _ in range(24)]
        X = [2.0 * np.eye(3)[t] + 0.5 * rng.normal(size=(len(t), 3)) for t in first]
        second = [(t + 1) % 3 for t in first]
    else:
        grids = make_grid_data(n_samples=6, shape=(5, 5), noise=0.5, random_state=0)
        X, first = list(grids.data), list(grids.target)
        second = [1 - t for t in first]
    n = len(X)
    for first_is_heavy in (True, False):
        heavy, light = (first, second) if first_is_heavy else (second, first)
        weights = (
            np.r_[np.full(n, 10.0), np.ones(n)]
            if first_is_heavy
            else np.r_[np.ones(n), np.full(n, 10.0)]
        )
        model = make().fit(X + X, first + second, sample_weight=weights)
        assert model.score(X, heavy) > 0.7 > 0.3 > model.score(X, light)


def test_upweighting_a_class_raises_its_recall():
    """Chains of one class each, the classes overlapping: weighing up class 0's chains makes
    the model call more nodes 0 (its recall rises, as scikit-learn's classifiers' does)."""
    rng = np.random.default_rng(0)
    classes = rng.integers(0, 3, size=60)
    y = [np.full(rng.integers(3, 7), k) for k in classes]
    X = [np.eye(3)[t] + 1.2 * rng.normal(size=(len(t), 3)) for t in y]

    def recall(model):
        predicted = np.concatenate(model.predict(X))
        truth = np.concatenate(y)
        return np.mean(predicted[truth == 0] == 0)

    for model in (
        ChainCRF(alpha=1e-2),
        PerturbMAPCRF(random_state=0),
        StructuredSVM(random_state=0),
    ):
        plain = recall(clone(model).fit(X, y))
        weighted = recall(clone(model).fit(X, y, sample_weight=np.where(classes == 0, 5.0, 1.0)))
        assert weighted > plain + 0.05


@pytest.mark.parametrize(
    "make",
    [
        lambda: PerturbMAPCRF(max_iter=3, random_state=0, early_stopping=True),
        lambda: MarginalPerturbMAPCRF(max_iter=3, random_state=0),
        lambda: StructuredSVM(max_iter=3, random_state=0),
        lambda: PerturbMAPCRF(max_iter=3, random_state=0, init="logistic"),
    ],
    ids=["early-stopping", "marginal", "ssvm", "logistic-start"],
)
def test_weight_zero_leaves_semi_supervised_and_held_out_samples_alone(make, data):
    """With unknown labels (two stages), a held-out split or a logistic start, a sample of
    weight 0 is still the sample removed."""
    X, y = data["chain"]
    y = [np.where(np.arange(len(t)) == 1, -1, t) if i % 3 == 0 else t for i, t in enumerate(y)]
    weights = _weights(len(X))
    weights[[1, 2, 6]] = 0.0
    kept = np.flatnonzero(weights)
    weighted = make().fit(X, y, sample_weight=weights)
    removed = make().fit([X[i] for i in kept], [y[i] for i in kept], sample_weight=weights[kept])
    np.testing.assert_array_equal(weighted.coef_, removed.coef_)
    np.testing.assert_array_equal(weighted.supervised_coef_, removed.supervised_coef_)


def test_multi_label_samples_take_weights():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    Y = np.column_stack([X[:, 0] > 0, X[:, 1] > 0, X[:, 0] + X[:, 1] > 0]).astype(int)
    weights = rng.uniform(0.5, 2.0, 60)
    weights[:10] = 0.0
    model = PerturbMAPCRF(MultiLabelStructure("tree"), max_iter=3, random_state=0)
    weighted = clone(model).fit(X, Y, sample_weight=weights)
    removed = clone(model).fit(X[10:], Y[10:], sample_weight=weights[10:])
    np.testing.assert_array_equal(weighted.coef_, removed.coef_)
    np.testing.assert_array_equal(weighted.structure_.edges_, removed.structure_.edges_)
    sparse_fit = clone(model).fit(sparse.csr_matrix(X), Y, sample_weight=weights)
    assert sparse_fit.coef_.shape == weighted.coef_.shape


# ---- bad weights: named errors, and the fitted model untouched --------------------------------
BAD_WEIGHTS = [
    (np.ones(5), "sample_weight has 5 weights but X has 24 samples"),
    (np.ones((24, 1)), "sample_weight must be 1-D"),
    (np.r_[np.ones(23), np.nan], r"sample_weight\[23\] is nan: every weight must be finite"),
    (np.r_[np.inf, np.ones(23)], r"sample_weight\[0\] is inf"),
    (np.r_[np.ones(3), -1.0, np.ones(20)], r"sample_weight\[3\] is -1: weights must be >= 0"),
    (np.zeros(24), "sample_weight is 0 for every sample"),
    (["a"] * 24, "sample_weight must hold numbers"),
    (np.full(24, 1e308), "sums to more than a float can hold"),
]


@pytest.mark.parametrize("name", list(LEARNERS))
def test_bad_weights_are_named_and_leave_the_fit_untouched(name, data):
    make, kind = LEARNERS[name]
    X, y = data[kind]
    X, y = (X * 4, y * 4) if kind == "grid" else (X, y)  # 24 samples
    model = make()
    if "warm_start" in model.get_params():  # the fit state too
        model.set_params(warm_start=True)
    model.fit(X, y)
    before = pickle.dumps(model)
    for weights, message in BAD_WEIGHTS:
        with pytest.raises(ValueError, match=message):
            model.fit(X, y, sample_weight=weights)
        assert pickle.dumps(model) == before


def test_a_fit_that_fails_after_the_weights_keeps_the_model(data):
    """Weights that leave one class (the other samples weigh 0) fail as its removal would."""
    X, y = data["chain"]
    model = ChainCRF(max_iter=10).fit(X, y)
    coef = model.coef_.copy()
    single = [np.zeros_like(t) if i == 0 else t for i, t in enumerate(y)]
    weights = np.zeros(len(X))
    weights[0] = 1.0
    with pytest.raises(ValueError, match="at least two are needed"):
        model.fit(X, single, sample_weight=weights)
    with pytest.raises(ValueError, match="at least two are needed"):
        ChainCRF().fit(X[:1], single[:1])
    np.testing.assert_array_equal(model.coef_, coef)


# ---- warm starts: the weights are part of what the state was fitted on -----------------------
def test_a_change_of_weights_makes_a_warm_start_fit_afresh(data):
    X, y = data["chain"]
    weights, other = _weights(len(X)), _weights(len(X), seed=1)
    model = PerturbMAPCRF(max_iter=2, random_state=0, warm_start=True)
    model.fit(X, y, sample_weight=weights)
    first = model.t_
    model.fit(X, y, sample_weight=weights.copy())  # the same weights: it continues
    assert model.t_ == 2 * first
    model.fit(X, y, sample_weight=other)  # other weights: afresh, as a new fit
    fresh = PerturbMAPCRF(max_iter=2, random_state=0).fit(X, y, sample_weight=other)
    assert model.t_ == fresh.t_
    np.testing.assert_array_equal(model.coef_, fresh.coef_)
    # weights of 1 are no weights
    model.fit(X, y)
    model.fit(X, y, sample_weight=np.ones(len(X)))
    assert model.t_ == 2 * fresh.t_


def test_a_bcfw_warm_start_continues_only_on_the_same_weights(data):
    X, y = data["chain"]
    weights = _weights(len(X))
    model = StructuredSVM(max_iter=2, random_state=0, warm_start=True)
    model.fit(X, y, sample_weight=weights)
    model.fit(X, y, sample_weight=weights)
    assert len(model.duality_gaps_) == 4  # two more passes of the same dual
    model.fit(X, y)
    assert len(model.duality_gaps_) == 2


# ---- scores and scorers ------------------------------------------------------------------------
def test_scores_and_scorers_take_sample_weights(data):
    X, y = data["chain"]
    model = ChainCRF(max_iter=20).fit(X[:12], y[:12])
    counts = np.random.default_rng(0).integers(0, 4, len(X))
    repeated = _repeated(X, y, counts)
    assert model.score(X, y, sample_weight=counts) == pytest.approx(model.score(*repeated))
    for scorer in (
        hamming_scorer,
        weighted_hamming_scorer,
        global_accuracy_scorer,
        mean_iou_scorer,
    ):
        assert scorer(model, X, y, sample_weight=counts) == pytest.approx(scorer(model, *repeated))
        assert scorer(model, X, y) == scorer(model, X, y, sample_weight=None)
    per_sample = [1 - mean_hamming_loss([t], [p]) for t, p in zip(y, model.predict(X), strict=True)]
    assert hamming_scorer(model, X, y, sample_weight=counts) == pytest.approx(
        np.average(per_sample, weights=counts)
    )
    with pytest.raises(ValueError, match="sample_weight has 3 weights but y_true has 24"):
        hamming_scorer(model, X, y, sample_weight=[1, 2, 3])
    # scorer objects pickle with their request, and print as their name
    assert repr(hamming_scorer) == "pmap_sklearn.metrics.hamming_scorer"
    assert pickle.loads(pickle.dumps(mean_iou_scorer))(model, X, y) == mean_iou_scorer(model, X, y)


# ---- metadata routing ---------------------------------------------------------------------------
@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


def _manual_search(estimator, X, y, weights, folds, alphas, scorer):
    """Mean test scores of ``alphas`` by a loop over the folds, fit and scorer weighted."""
    means = []
    for alpha in alphas:
        scores = []
        for train, test in folds:
            model = clone(estimator).set_params(alpha=alpha)
            model.fit([X[i] for i in train], [y[i] for i in train], sample_weight=weights[train])
            test_X, test_y = [X[i] for i in test], [y[i] for i in test]
            scores.append(scorer(model, test_X, test_y, sample_weight=weights[test]))
        means.append(np.mean(scores))
    return np.array(means)


def test_set_fit_request_comes_with_fit(routing):
    for make, _ in LEARNERS.values():
        model = make().set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        routed = model.get_metadata_routing()
        assert routed.consumes("fit", ["sample_weight"]) == {"sample_weight"}
        assert routed.consumes("score", ["sample_weight"]) == {"sample_weight"}


def test_grid_search_routes_weights_to_fit_and_scorer(routing, data):
    X, y = data["chain"]
    weights = _weights(len(X))
    crf = ChainCRF(max_iter=30).set_fit_request(sample_weight=True)
    scorer = copy.deepcopy(hamming_scorer).set_score_request(sample_weight=True)
    folds = list(KFold(3).split(np.arange(len(X))))
    alphas = [1e-3, 1e-1]
    search = GridSearchCV(crf, {"alpha": alphas}, cv=folds, scoring=scorer, refit=True)
    search.fit(X, y, sample_weight=weights)
    expected = _manual_search(crf, X, y, weights, folds, alphas, hamming_scorer)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected)
    best = clone(crf).set_params(**search.best_params_).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(search.best_estimator_.coef_, best.coef_)
    # the estimator's own score, requested, is the weighted one too
    own = GridSearchCV(
        clone(crf).set_score_request(sample_weight=True), {"alpha": alphas}, cv=folds
    )
    own.fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(own.cv_results_["mean_test_score"], expected)


def test_cross_validate_and_pipeline_route_weights(routing, data):
    X, y = data["chain"]
    weights = _weights(len(X))
    folds = list(KFold(3).split(np.arange(len(X))))
    crf = ChainCRF(alpha=1e-2, max_iter=30).set_fit_request(sample_weight=True)
    pipe = make_pipeline(NodeTransformer(StandardScaler()), crf)
    scorer = copy.deepcopy(global_accuracy_scorer).set_score_request(sample_weight=True)
    result = cross_validate(
        pipe, X, y, cv=folds, scoring={"acc": scorer}, params={"sample_weight": weights}
    )
    expected = []
    for train, test in folds:
        fitted = clone(pipe).fit(
            [X[i] for i in train], [y[i] for i in train], sample_weight=weights[train]
        )
        test_X, test_y = [X[i] for i in test], [y[i] for i in test]
        expected.append(global_accuracy_scorer(fitted, test_X, test_y, sample_weight=weights[test]))
    np.testing.assert_allclose(result["test_acc"], expected)
    # the pipeline hands the weights to the CRF on the transformed samples
    fitted = clone(pipe).fit(X, y, sample_weight=weights)
    direct = ChainCRF(alpha=1e-2, max_iter=30).fit(fitted[0].transform(X), y, sample_weight=weights)
    np.testing.assert_array_equal(fitted[-1].coef_, direct.coef_)


def test_an_unrequested_weight_is_refused_under_routing(routing, data):
    X, y = data["chain"]
    with pytest.raises(ValueError, match="sample_weight"):
        cross_validate(ChainCRF(max_iter=5), X, y, cv=2, params={"sample_weight": _weights(len(X))})


def test_without_routing_weights_reach_fit_by_their_step_name(data):
    """scikit-learn's way without routing: ``Pipeline.fit(..., crf__sample_weight=w)``, and
    ``GridSearchCV.fit(..., sample_weight=w)`` passes them to fit (cut to each fold) and to a
    scorer that takes them (scikit-learn's scorers, ours)."""
    X, y = data["chain"]
    weights = _weights(len(X))
    pipe = Pipeline(
        [("scale", NodeTransformer(StandardScaler())), ("crf", ChainCRF(alpha=1e-2, max_iter=30))]
    )
    fitted = clone(pipe).fit(X, y, crf__sample_weight=weights)
    direct = ChainCRF(alpha=1e-2, max_iter=30).fit(fitted[0].transform(X), y, sample_weight=weights)
    np.testing.assert_array_equal(fitted[-1].coef_, direct.coef_)
    folds = list(KFold(3).split(np.arange(len(X))))
    alphas = [1e-3, 1e-1]
    crf = ChainCRF(max_iter=30)
    search = GridSearchCV(crf, {"alpha": alphas}, cv=folds, scoring=hamming_scorer)
    search.fit(X, y, sample_weight=weights)
    expected = _manual_search(crf, X, y, weights, folds, alphas, hamming_scorer)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected)


# ---- the weighted marginals of a shared transition table ----------------------------------------
def test_weighted_marginals_of_any_solver_are_the_chain_solvers():
    """A shared K×K table's expected counts come summed over the chains: the chain solver
    weighs them in its passes, any other solver is called once per distinct weight."""
    data = make_chain_data(n_samples=6, n_states=3, random_state=1)
    structure = ChainStructure().fit(list(data.data), list(data.target))
    batch = structure.prepare(list(data.data))
    w = np.random.default_rng(0).normal(size=structure.size_)
    potentials = structure.potentials(batch, w)
    weights = np.array([1.0, 2.0, 0.5, 2.0, 1.0, 3.0])
    chain = weighted_marginals(ChainSolver(), potentials, weights)
    brute = weighted_marginals(BruteForceSolver(), potentials, weights)
    plain = ChainSolver().marginals(potentials)
    np.testing.assert_allclose(chain.statistics.unary, brute.statistics.unary, atol=1e-10)
    np.testing.assert_allclose(chain.statistics.pairwise, brute.statistics.pairwise, atol=1e-10)
    np.testing.assert_allclose(chain.log_partition, plain.log_partition)
    np.testing.assert_allclose(
        chain.statistics.unary, plain.statistics.unary * weights[batch.node_sample][:, None]
    )
