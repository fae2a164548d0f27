"""Joint samples: are the draws of ``sample`` what they claim, and what do they cost?

1. Exact draws against enumeration: on tiny models whose every labelling can be listed (chains
   of 5 nodes and 3 labels; a 4-label tree and full graph of binary labels), 20,000 draws of
   each solver's exact sampler (forward filtering / backward sampling on chains, the chain rule
   over exact marginals on forests and with enumeration), their chi-square goodness of fit
   against the exact probabilities (p-value) and the total variation distance.
2. Draws against the marginals: the label frequencies of 10,000 draws of each fitted estimator
   (defaults, ``sample``'s default method) against its ``predict_marginals`` (same method),
   as the largest deviation in Monte-Carlo standard deviations (the binomial one, floored at
   one draw's worth; about 3 for a hundred independent entries, 4 for thousands; perturbed
   draws equal their marginals exactly by construction).
3. Cost: seconds per 100 draws of every sample on the generated chains (16 samples) and grids
   (4 binary 20×20 images), beside ``predict_marginals`` with 100 perturbations.

Run: ``python benchmarks/sampling.py [--quick]`` (about a minute); writes
``docs/results/sampling.{md,json}`` (``--quick``: a tenth of the draws, written to a temporary
folder).
"""

import itertools

import numpy as np
from _common import Run, parser, rerun, timed
from scipy.stats import chisquare
from sklearn.datasets import make_multilabel_classification

from pmap_sklearn import (
    ChainCRF,
    GridStructure,
    MeanFieldCRF,
    MultiLabelStructure,
    PerturbMAPCRF,
)
from pmap_sklearn._backend import Potentials, sample_labellings
from pmap_sklearn.datasets import make_chain_data, make_grid_data
from pmap_sklearn.solvers import check_solver

N_EXACT, N_FREQUENCY = 20_000, 10_000


def joint(unary, edges, tables):
    """Every labelling of a small model and its probability."""
    n, k = unary.shape
    labellings = np.array(list(itertools.product(range(k), repeat=n)))
    scores = unary[np.arange(n), labellings].sum(axis=1)
    for (a, b), table in zip(edges, tables, strict=True):
        scores = scores + table[labellings[:, a], labellings[:, b]]
    probability = np.exp(scores - scores.max())
    return labellings, probability / probability.sum()


def exact_rows(n_exact=N_EXACT):
    rng = np.random.default_rng(0)
    chain_edges = np.array([[d, d + 1] for d in range(4)])
    transition = rng.normal(size=(3, 3))
    models = {
        "chain, 5 nodes, K = 3 (viterbi: forward filtering, backward sampling)": (
            "viterbi",
            rng.normal(size=(5, 3)),
            chain_edges,
            transition,
            [transition] * 4,
        ),
        "tree, 4 binary nodes (forest: chain rule)": (
            "forest",
            rng.normal(size=(4, 2)),
            np.array([[0, 1], [0, 2], [2, 3]]),
            None,
            None,
        ),
        "full graph, 4 binary nodes (brute_force: chain rule)": (
            "brute_force",
            rng.normal(size=(4, 2)),
            np.array([[a, b] for a, b in itertools.combinations(range(4), 2)]),
            None,
            None,
        ),
    }
    rows = []
    for name, (solver, unary, edges, pairwise, tables) in models.items():
        if tables is None:
            tables = rng.normal(scale=1.5, size=(len(edges), 2, 2))
            pairwise = tables
        potentials = Potentials(unary, edges, pairwise)
        draws, seconds = timed(sample_labellings, check_solver(solver), potentials, n_exact, 1)
        labellings, probability = joint(unary, edges, tables)
        index = {tuple(y): i for i, y in enumerate(labellings)}
        counts = np.bincount([index[tuple(y)] for y in draws], minlength=len(labellings))
        rows.append(
            dict(
                model=name,
                labellings=len(labellings),
                p_value=float(chisquare(counts, probability * n_exact).pvalue),
                total_variation=float(0.5 * np.abs(counts / n_exact - probability).sum()),
                seconds=seconds,
            )
        )
        print(rows[-1], flush=True)
    return rows


def frequency_deviation(model, X, method=None, n_draws=N_FREQUENCY):
    """Largest |frequency − marginal| over the entries, in Monte-Carlo standard deviations."""
    draws = model.sample(X, n_draws=n_draws, method=method, random_state=0)
    if isinstance(draws, np.ndarray) and draws.dtype != object:  # multi-label
        proba = model.predict_proba(X)
        frequency = draws.mean(axis=1)
        variance = np.maximum(proba * (1 - proba), 1 / n_draws) / n_draws
        worst = np.abs(frequency - proba) / np.sqrt(variance)
        return float(worst.max()), int(proba.size)
    marginals = model.predict_marginals(X, method=method, n_perturbations=n_draws)
    worst, entries = 0.0, 0
    for sample, marginal in zip(draws, marginals, strict=True):
        frequency = np.stack([(sample == c).mean(axis=0) for c in model.classes_], axis=-1)
        # the binomial sd, floored at one draw's worth (a label of probability 1e-6 drawn once
        # is 1/N away from it, not a hundred sd)
        sd = np.sqrt(np.maximum(marginal * (1 - marginal), 1 / n_draws) / n_draws)
        ratio = np.abs(frequency - marginal) / sd
        worst, entries = max(worst, float(ratio.max())), entries + marginal.size
    return worst, entries


def frequency_rows(n_draws=N_FREQUENCY):
    chains = make_chain_data(n_samples=40, random_state=0)
    grids = make_grid_data(n_samples=8, shape=(12, 12), random_state=0)
    X, Y = make_multilabel_classification(n_samples=200, n_features=8, n_classes=4, random_state=0)
    fits = {
        "PerturbMAPCRF, chains (exact draws)": (
            PerturbMAPCRF(random_state=0).fit(chains.data, chains.target),
            chains.data[:4],
            None,
        ),
        "PerturbMAPCRF, chains (perturbed MAPs)": (None, chains.data[:4], "perturb"),
        "ChainCRF, chains": (ChainCRF().fit(chains.data, chains.target), chains.data[:4], None),
        "MeanFieldCRF, chains (mean-field draws)": (
            MeanFieldCRF("chain").fit(chains.data, chains.target),
            chains.data[:4],
            None,
        ),
        "PerturbMAPCRF, grids (perturbed MAPs)": (
            PerturbMAPCRF(GridStructure(), random_state=0).fit(grids.data, grids.target),
            grids.data[:2],
            None,
        ),
        "PerturbMAPCRF, multi-label tree (forest: chain rule)": (
            PerturbMAPCRF(MultiLabelStructure("tree"), random_state=0).fit(X, Y),
            X[:10],
            None,
        ),
        "PerturbMAPCRF, multi-label full graph (brute force: chain rule)": (
            PerturbMAPCRF(MultiLabelStructure("full"), random_state=0).fit(X, Y),
            X[:10],
            None,
        ),
    }
    rows, previous = [], None
    for name, (model, data, method) in fits.items():
        model = previous if model is None else model
        previous = model
        (worst, entries), seconds = timed(frequency_deviation, model, data, method, n_draws)
        rows.append(dict(model=name, entries=entries, worst_sd=worst, seconds=seconds))
        print(rows[-1], flush=True)
    return rows


def cost_rows():
    chains = make_chain_data(n_samples=16, random_state=0)
    grids = make_grid_data(n_samples=4, shape=(20, 20), random_state=0)
    chain_model = PerturbMAPCRF(random_state=0).fit(chains.data, chains.target)
    grid_model = PerturbMAPCRF(GridStructure(), random_state=0).fit(grids.data, grids.target)
    cases = {
        "chains: sample, exact (forward filtering, backward sampling)": lambda: chain_model.sample(
            chains.data, 100, method="exact"
        ),
        "chains: sample, perturbed MAPs": lambda: chain_model.sample(
            chains.data, 100, method="perturb"
        ),
        "chains: predict_marginals, exact": lambda: chain_model.predict_marginals(
            chains.data, method="exact"
        ),
        "grids: sample, perturbed MAPs": lambda: grid_model.sample(grids.data, 100),
        "grids: predict_marginals, 100 perturbations": lambda: grid_model.predict_marginals(
            grids.data, n_perturbations=100
        ),
    }
    rows = []
    for name, call in cases.items():
        call()  # warm-up
        rows.append(dict(case=name, seconds=timed(call)[1]))
        print(rows[-1], flush=True)
    return rows


def main():
    args = parser(__doc__, "a tenth of the draws").parse_args()
    n_exact, n_frequency = (
        (N_EXACT // 10, N_FREQUENCY // 10) if args.quick else (N_EXACT, N_FREQUENCY)
    )
    run = Run(__file__, args.quick)
    results = dict(
        exact=exact_rows(n_exact), frequency=frequency_rows(n_frequency), cost=cost_rows()
    )
    notes = run.notes()
    results.update(load=run.load, minutes=notes["minutes"], run=notes)
    lines = [
        "# Joint samples",
        "",
        f"**Exact draws against enumeration** ({n_exact:,} draws; chi-square p-value of the "
        "labelling counts, total variation distance to the exact distribution):",
        "",
        "| model | labellings | p-value | total variation | s |",
        "|---|---|---|---|---|",
    ]
    for r in results["exact"]:
        lines.append(
            f"| {r['model']} | {r['labellings']} | {r['p_value']:.3f} | "
            f"{r['total_variation']:.4f} | {r['seconds']:.2f} |"
        )
    lines += [
        "",
        f"**Draws against the marginals** (label frequencies of {n_frequency:,} draws against "
        "`predict_marginals` by the same method; the largest deviation over the entries in "
        "Monte-Carlo standard deviations):",
        "",
        "| estimator | entries | largest deviation (sd) | s |",
        "|---|---|---|---|",
    ]
    for r in results["frequency"]:
        lines.append(
            f"| {r['model']} | {r['entries']} | {r['worst_sd']:.2f} | {r['seconds']:.1f} |"
        )
    lines += ["", "**Cost** (100 draws of every sample):", "", "| call | s |", "|---|---|"]
    for r in results["cost"]:
        lines.append(f"| {r['case']} | {r['seconds']:.3f} |")
    lines += ["", rerun(notes)]
    run.publish("sampling", lines, results)


if __name__ == "__main__":
    main()
