"""Pletscher & Ong, Table 1 and Figs. 2–3: Part & Clamp against PL, CL and CD.

Protocol: 64×64 Weizmann horse masks (Kumar & Hebert's images are not available) seen through
``add_kumar_hebert_noise`` (Gaussian "unimodal" and bimodal noise); 10 training and 150 test
images (positions 100–109 and 0–149 of the fixed split); a 4-connected grid as a
GraphStructure with node features [x_i] plus a bias and edge features [1, |x_i − x_j|] (Potts
weights kept <= 0, so MAP is an exact graph cut); α = 1 as in the paper. Learners:
pseudo-likelihood, composite likelihood (Part & Clamp with the truth alone), contrastive
divergence (5 Gibbs sweeps), Part & Clamp batch (5 rounds, MAX-TIGHTEN) and online (budgets 2
and 3), and this library's PerturbMAPCRF, MarginalPerturbMAPCRF and StructuredSVM (BCFW, no
marginals). Prediction by MAP (graph cuts) and MPM (argmax of perturb-and-MAP marginals, 50
perturbations). Test error % (mean ± std over the 150 images).

Figures: the bound of Part & Clamp batch at its fitted weights with the first 1, 2, … clamped
states of every Y_F, found by MAX-TIGHTEN or by MAP tightening (Fig. 2), and the training error
against 1–5 decompositions, arithmetic and geometric means, 5 states (Fig. 3, bimodal noise).

Run: ``python benchmarks/part_clamp_table.py [--quick]``; writes
``docs/results/part_clamp_table.{md,json}`` and ``docs/results/part_clamp_figures.png``
(``--quick``: 30 test images, fewer rounds, written to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, pyplot, rerun, save_figure, timed
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import (
    ContrastiveDivergenceCRF,
    GraphSample,
    MarginalPerturbMAPCRF,
    PartClampCRF,
    PerturbMAPCRF,
    PseudoLikelihoodCRF,
    StructuredSVM,
    grid_edges,
)
from pmap_sklearn.datasets import add_kumar_hebert_noise, horse_split, load_weizmann_horse_masks

PAPER = {  # Table 1, MAP / MPM test error %
    "bimodal": {
        "PL": (15.58, 11.86),
        "CL": (12.02, 9.33),
        "CD": (7.01, 6.72),
        "P&C batch": (6.14, 5.32),
        "P&C online": (5.16, 5.20),
    },
    "gaussian": {
        "PL": (5.28, 4.13),
        "CL": (4.43, 3.66),
        "CD": (2.39, 2.37),
        "P&C batch": (2.40, 2.40),
        "P&C online": (2.40, 2.42),
    },
}


def grid_graph(x):
    """A 4-connected grid with node feature x and edge features [1, |x_i − x_j|]."""
    edges = grid_edges(x.shape)
    f = x.ravel()
    contrast = np.abs(f[edges[:, 0]] - f[edges[:, 1]])
    return GraphSample(f[:, None], edges, np.column_stack([np.ones(len(edges)), contrast]))


def learners(quick):
    rounds = 3 if quick else 5
    return {
        "PL": PseudoLikelihoodCRF("graph", random_state=0),
        "CL": PartClampCRF("graph", n_rounds=1, random_state=0),
        "CD": ContrastiveDivergenceCRF("graph", max_iter=100 if quick else 200, random_state=0),
        "P&C batch": PartClampCRF("graph", n_rounds=rounds, random_state=0),
        "P&C online": PartClampCRF(
            "graph", schedule="online", n_rounds=rounds, budget=2, random_state=0
        ),
        "P&C online, budget 3": PartClampCRF(
            "graph", schedule="online", n_rounds=rounds, budget=3, random_state=0
        ),
        "PerturbMAPCRF": PerturbMAPCRF("graph", alpha=1e-3, max_iter=50, tol=None, random_state=0),
        "MarginalPerturbMAPCRF": MarginalPerturbMAPCRF(
            "graph", alpha=1e-3, max_iter=20 if quick else 50, random_state=0
        ),
        "StructuredSVM": StructuredSVM("graph", random_state=0),
    }


def errors(predicted, truth):
    return 100.0 * np.array([np.mean(p != t) for p, t in zip(predicted, truth, strict=True)])


def fit_and_score(name, model, X, y, X_test, y_test, n_perturbations):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, seconds = timed(model.fit, X, y)
    map_error = errors(model.predict(X_test), y_test)
    mpm_error = np.array([np.nan])
    if "n_perturbations" in model.get_params():  # the S-SVM has no marginals
        model.set_params(n_perturbations=n_perturbations)
        mpm_error = errors(model.predict(X_test, decoding="marginal"), y_test)
    return name, dict(
        map=[map_error.mean(), map_error.std()],
        mpm=[mpm_error.mean(), mpm_error.std()],
        seconds=seconds,
        bounds=list(getattr(model, "lower_bound_history_", [])),
        by_states=list(getattr(model, "lower_bound_by_states_", [])),
    )


def decompositions(X, y, combine, m, rounds):
    model = PartClampCRF(
        "graph", n_decompositions=m, combine=combine, n_rounds=rounds, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return combine, m, float(errors(model.predict(X), y).mean())


def main():
    args = parser(__doc__, "30 test images, fewer rounds").parse_args()
    run = Run(__file__, args.quick)
    split = horse_split()
    n_test = 30 if args.quick else 150
    indices = list(split.perm[100:110]) + list(split.perm[:n_test])
    masks = load_weizmann_horse_masks(size=(64, 64), indices=indices).images
    y_all = [m.ravel() for m in masks]
    results = {"quick": args.quick}
    for noise in ("bimodal", "gaussian"):
        noisy = add_kumar_hebert_noise(masks, noise, random_state=0)
        X_all = [grid_graph(x) for x in noisy]
        X, y, X_test, y_test = X_all[:10], y_all[:10], X_all[10:], y_all[10:]
        jobs = learners(args.quick)
        jobs["P&C batch, MAP tightening"] = PartClampCRF(
            "graph", n_rounds=3 if args.quick else 5, tighten="map", random_state=0
        )
        done = Parallel(n_jobs=2)(
            delayed(fit_and_score)(name, model, X, y, X_test, y_test, 50)
            for name, model in jobs.items()
        )
        results[noise] = dict(done)
        if noise == "bimodal":
            grid = [(c, m) for c in ("arithmetic", "geometric") for m in range(1, 6)]
            rounds = 3 if args.quick else 5
            figure3 = Parallel(n_jobs=2)(
                delayed(decompositions)(X, y, c, m, rounds) for c, m in grid
            )
            results["decompositions"] = [dict(combine=c, m=m, train_error=e) for c, m, e in figure3]
    results["run"] = run.notes()
    results["minutes"] = results["run"]["minutes"]
    write(run, results)


def write(run, results):
    lines = ["# Part & Clamp, Pletscher & Ong Table 1 protocol", ""]
    lines += [
        "Test error % (mean ± std over the test images); the paper's values in brackets.",
        "",
    ]
    for noise in ("bimodal", "gaussian"):
        lines += [f"## {noise}", "", "| learner | MAP | MPM | fit s |", "|---|---|---|---|"]
        for name, row in results[noise].items():
            paper = PAPER[noise].get(name)
            cite = [f" [{v:.2f}]" for v in paper] if paper else ["", ""]
            mpm = "—"  # no marginals
            if not np.isnan(row["mpm"][0]):
                mpm = f"{row['mpm'][0]:.2f} ± {row['mpm'][1]:.2f}{cite[1]}"
            lines.append(
                f"| {name} | {row['map'][0]:.2f} ± {row['map'][1]:.2f}{cite[0]} | {mpm} | "
                f"{row['seconds']:.1f} |"
            )
        lines.append("")
    lines += [
        "## Training error against decompositions (bimodal, 5 states)",
        "",
        "| combine | M = 1 | 2 | 3 | 4 | 5 |",
        "|---|---|---|---|---|---|",
    ]
    for combine in ("arithmetic", "geometric"):
        cells = [
            f"{r['train_error']:.2f}" for r in results["decompositions"] if r["combine"] == combine
        ]
        lines.append(f"| {combine} | " + " | ".join(cells) + " |")
    lines += ["", rerun(results["run"])]
    text = "\n".join(lines) + "\n"
    print(text)
    run.save("part_clamp_table", text, results)
    plot(run, results)


def plot(run, results):
    plt = pyplot()

    figure, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for axis, noise in zip(axes[:2], ("bimodal", "gaussian"), strict=True):
        for name, style in (("P&C batch", "-o"), ("P&C batch, MAP tightening", "--s")):
            bounds = results[noise][name]["by_states"]
            axis.plot(range(1, len(bounds) + 1), bounds, style, label=name)
        axis.set_xlabel("|Y_F| (states clamped per image)")
        axis.set_ylabel("mean lower bound of log Z at the fitted w")
        axis.set_title(f"{noise} noise", fontsize=10)
        axis.legend(fontsize=8)
    for combine, style in (("arithmetic", "--o"), ("geometric", "-s")):
        rows = [r for r in results["decompositions"] if r["combine"] == combine]
        axes[2].plot([r["m"] for r in rows], [r["train_error"] for r in rows], style, label=combine)
    axes[2].set_xlabel("decompositions M")
    axes[2].set_ylabel("training error %")
    axes[2].set_title("bimodal, 5 states, MAX-TIGHTEN", fontsize=10)
    axes[2].legend(fontsize=8)
    save_figure(figure, run.path("part_clamp_figures.png"), 90)


if __name__ == "__main__":
    main()
