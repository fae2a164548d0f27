"""Active learning on CoNLL-2002 Spanish: which sentences to label, chosen by the model's own
uncertainty, against sentences chosen at random.

Pool-based active learning (Settles & Craven 2008): the training sentences of ``esp.train``
are the pool; a random 5 % is labelled to start; then, in rounds, a default
:class:`~pmap_sklearn.PerturbMAPCRF` is fitted on the labelled sentences, scores every
unlabelled one by an uncertainty only a probabilistic model of whole tag sequences gives, and
the most uncertain 2.5 % of the pool are labelled next, until 25 % is. The random baseline labels
the same starting 5 % and then random sentences of the same permutation (seeds 0, 1, 2: each
seed's permutation and ``random_state``). Scored at each budget by the entity F1 of conlleval
(:func:`~pmap_sklearn.metrics.entity_f1_score`) on ``esp.testa`` and ``esp.testb``.

Uncertainties (of a sentence under the model fitted so far):

- ``1 - P(predicted sequence)``: the probability that the predicted tags are not the
  sentence's (:func:`~pmap_sklearn.inspection.sequence_probabilities` with
  ``method="exact"``, by forward-backward: the least-confidence strategy of Culotta &
  McCallum 2005);
- ``expected token errors``: :math:`\\sum_d (1 - \\max_k q_d(k))`, the expected number of
  tags the MAP-marginal decoding gets wrong (the exact marginals of ``predict_proba``);
- ``expected token errors per token``: the same over the sentence's length;
- ``least confident decision``: the largest probability that one decision of the sentence is
  wrong: :math:`1 - p_e` for each predicted entity e
  (:func:`~pmap_sklearn.inspection.entity_probabilities` with ``method="exact"``: the exact
  probability of the entity with its tags, in one pass, where the default's 1,000 perturbed MAPs
  per pool sentence would cost minutes a round), :math:`1 - q_d(O)` for each token predicted
  outside every entity.

The strategy reported is the one with the best mean testa F1 at 25 % (testb never chooses);
every strategy's rows are in the json. Sentences are the cost unit; the share of the pool's
tokens they hold is reported too (uncertain sentences are longer than average).

The features: the tutorial's token features (``token_features`` on ``(word, pos)`` pairs),
vectorised once on the whole pool — the text of the pool is known in pool-based active
learning, and a feature never seen in a labelled sentence keeps a zero weight, as it would be
left out by a vectoriser fitted on the labelled sentences alone.

Run: ``python benchmarks/active_learning.py [--quick]`` (about 15 minutes on 2 cores; needs
``../shared/data/conll2002``); writes ``docs/results/active_learning.{md,json}``
(``--quick``: a pool of the first 2,000 training sentences, 500 of testa and testb, seed 0;
written to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from _tagging import first
from sklearn.exceptions import ConvergenceWarning

SEEDS = (0, 1, 2)
#: ``--quick``: the first sentences of the pool and of each test split, and the seeds.
QUICK = dict(pool=2000, tests=500, seeds=(0,))
START, STEP, STOP = 0.05, 0.025, 0.25
#: Budgets (shares of the pool's sentences) reported in the table.
REPORTED = (0.05, 0.10, 0.15, 0.20, 0.25)
#: The random baseline's extra budgets: the target to beat (40 %) and the whole pool.
RANDOM_ONLY = (0.40, 1.0)


def expected_token_errors(model, X):
    """Per sentence, :math:`\\sum_d (1 - \\max_k q_d(k))`."""
    return np.array([np.sum(1 - m.max(axis=1)) for m in model.predict_marginals(X)])


def expected_token_errors_per_token(model, X):
    """Per sentence, the mean of :math:`1 - \\max_k q_d(k)` over its tokens."""
    return np.array([np.mean(1 - m.max(axis=1)) for m in model.predict_marginals(X)])


def least_confident_decision(model, X):
    """Per sentence, the largest of ``1 - p`` over its predicted entities (their exact
    probabilities) and of ``1 - q_d(O)`` over its tokens predicted outside every entity."""
    from pmap_sklearn.inspection import entity_probabilities

    outside = int(np.searchsorted(model.classes_, "O"))
    marginals = model.predict_marginals(X)
    predicted = model.predict(X)
    uncertainty = np.empty(len(X))
    for i, (entities, tags, marginal) in enumerate(
        zip(entity_probabilities(model, X, method="exact"), predicted, marginals, strict=True)
    ):
        wrong = [1 - p for *_, p in entities]
        outside_tokens = np.asarray(tags) == "O"
        wrong += (1 - marginal[outside_tokens, outside]).tolist()
        uncertainty[i] = max(wrong)
    return uncertainty


def sequence_uncertainty(model, X):
    """Per sentence, ``1 - P(y* | x)``: the probability that the predicted tag sequence is not
    the one (:func:`~pmap_sklearn.inspection.sequence_probabilities`, exact on chains with
    ``method="exact"``: most sequences are rarer than one of the default's perturbed MAPs)."""
    from pmap_sklearn.inspection import sequence_probabilities

    return 1 - sequence_probabilities(model, X, method="exact")


STRATEGIES = {
    "1 - P(predicted sequence)": sequence_uncertainty,
    "expected token errors": expected_token_errors,
    "expected token errors per token": expected_token_errors_per_token,
    "least confident decision": least_confident_decision,
}


def fit(X, y, labelled, seed):
    from pmap_sklearn import PerturbMAPCRF

    return PerturbMAPCRF(random_state=seed).fit([X[i] for i in labelled], [y[i] for i in labelled])


def scored(model, splits) -> dict:
    from pmap_sklearn.metrics import entity_f1_score

    return {name: entity_f1_score(y, model.predict(X)) for name, (X, y) in splits.items()}


def learning_curve(strategy, X, y, lengths, splits, seed) -> list:
    """One seed's curve: the scores at every round (``strategy`` None: random)."""
    n = len(X)
    order = np.random.default_rng(seed).permutation(n)
    labelled = list(order[: round(START * n)])
    budgets = np.arange(START, STOP + STEP / 2, STEP)
    if strategy is None:
        budgets = np.concatenate([budgets, RANDOM_ONLY])
    curve = []
    for budget in budgets:
        size = round(budget * n)
        if strategy is None:
            labelled = list(order[:size])
        model, fit_seconds = timed(fit, X, y, labelled, seed)
        querying = strategy is not None and budget < STOP - STEP / 2

        def score_and_query(
            model=model, size=size, budget=budget, querying=querying, labelled=labelled
        ):
            scores = scored(model, splits)
            if not querying:
                return scores, None
            pool = np.setdiff1d(np.arange(n), labelled)
            uncertainty = STRATEGIES[strategy](model, [X[i] for i in pool])
            # the most uncertain first; ties (e.g. sure sentences) in the permutation's order
            rank = np.argsort(-uncertainty, kind="stable")
            return scores, pool[rank[: round((budget + STEP) * n) - size]].tolist()

        # the query's seconds: from the end of the fit, the scoring of the test splits included
        (scores, chosen), seconds = timed(score_and_query)
        point = dict(
            budget=float(budget),
            sentences=len(labelled),
            token_share=float(lengths[labelled].sum() / lengths.sum()),
            fit_seconds=fit_seconds,
            **scores,
        )
        if querying:
            labelled += chosen
            point["query_seconds"] = seconds
        curve.append(point)
        print(strategy or "random", seed, {k: round(v, 4) for k, v in point.items()}, flush=True)
    return curve


def mean_at(curves, budget, key):
    values = [p[key] for curve in curves for p in curve if abs(p["budget"] - budget) < 1e-9]
    return float(np.mean(values)), float(np.std(values))


def main():
    from pmap_sklearn import SequenceVectorizer
    from pmap_sklearn.datasets import load_conll2002, token_features

    quick = "a pool of the first 2,000 training sentences, 500 of testa and testb, seed 0"
    args = parser(__doc__, quick).parse_args()
    seeds = QUICK["seeds"] if args.quick else SEEDS
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, args.quick)
    train = load_conll2002("esp", "train")
    if args.quick:
        train = first(train, QUICK["pool"])
    vectorizer = SequenceVectorizer(token_features).fit(train.tokens)
    X = vectorizer.transform(train.tokens)
    y = list(train.tags)
    lengths = np.array([len(s) for s in y])
    splits = {}
    for split in ("testa", "testb"):
        data = load_conll2002("esp", split)
        if args.quick:
            data = first(data, QUICK["tests"])
        splits[split] = (vectorizer.transform(data.tokens), data.tags)

    curves = {"random": [learning_curve(None, X, y, lengths, splits, seed) for seed in seeds]}
    for strategy in STRATEGIES:
        curves[strategy] = [learning_curve(strategy, X, y, lengths, splits, seed) for seed in seeds]
    chosen = max(STRATEGIES, key=lambda s: mean_at(curves[s], STOP, "testa")[0])
    notes = run.notes()

    def cells(name, budget):
        a, _ = mean_at(curves[name], budget, "testa")
        b, sd = mean_at(curves[name], budget, "testb")
        share, _ = mean_at(curves[name], budget, "token_share")
        return f"{a:.4f} | {b:.4f} ± {sd:.4f} | {share:.1%}"

    rows = [
        (f"{name}{' (chosen on testa)' if name == chosen else ''}", name, budget)
        for name in ("random", *STRATEGIES)
        for budget in (*REPORTED, *(RANDOM_ONLY if name == "random" else ()))
    ]
    best_b = mean_at(curves[chosen], STOP, "testb")[0]
    random_b = mean_at(curves["random"], 0.40, "testb")[0]
    lines = [
        "# Active learning: CoNLL-2002 Spanish",
        "",
        f"A default PerturbMAPCRF fitted on a share of esp.train's "
        f"{len(y):,} sentences: a random {START:.0%} to start, then rounds that label the "
        f"{STEP:.1%} of the pool the model is least sure of, against random sentences; entity "
        f"F1 (conlleval) on testa and testb, mean of seeds {', '.join(map(str, seeds))} "
        "(± their standard deviation); the strategy with the best testa F1 at "
        f"{STOP:.0%} is the chosen one. Tokens: the share of the pool's tokens labelled.",
        "",
        f"At {STOP:.0%} of the sentences chosen by {chosen}: testb entity F1 {best_b:.4f}, "
        f"against {random_b:.4f} with {RANDOM_ONLY[0]:.0%} chosen at random.",
        "",
        "| sentences chosen by | labelled | testa F1 | testb F1 | tokens |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {label} | {budget:.0%} | {cells(name, budget)} |" for label, name, budget in rows]
    fit_seconds = mean_at(curves[chosen], STOP, "fit_seconds")[0]
    query = [p["query_seconds"] for c in curves[chosen] for p in c if "query_seconds" in p]
    lines += [
        "",
        f"Time per round ({chosen}): fit at {STOP:.0%} {fit_seconds:.1f} s, scoring the pool "
        f"{np.mean(query):.1f} s on average.",
        "",
        rerun(notes),
    ]
    run.publish(
        "active_learning",
        lines,
        dict(load=run.load, minutes=notes["minutes"], run=notes, chosen=chosen, curves=curves),
    )


if __name__ == "__main__":
    main()
