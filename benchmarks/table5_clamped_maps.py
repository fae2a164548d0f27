"""Paper Table 5 (Shpakova et al. 2018): time to compute all clamped maximisers y*_B, basic / DC /
GR / DC+GR.

Superpixel graphs of the 50 labelled Weizmann horse photos (``horse_split``), weights of a
weighted-marginal perturb-and-MAP model fitted on them. Iteration h takes image h mod 50 and a
fresh Gumbel perturbation; each of the four variants solves y*_A and the clamped problems of
every node (clamped to its true label) on the same perturbation and weights, and only that
call is timed: the potentials and ``solver.clamped_maps``, which folds each maximiser into the
statistics of the gradient as it is found (the solver never returns the labellings). The
variants' gradients are checked to agree. One run of H_max iterations gives
the cumulative times at H = 10^2, 10^3, ...

Run: ``python benchmarks/table5_clamped_maps.py [--iterations 10000]``; writes
``docs/results/table5.json`` and ``docs/results/table5.md`` (``--quick``: 100 iterations,
written to a temporary folder).
"""

import numpy as np
from _common import Run, parser, rerun, timed
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import MarginalPerturbMAPCRF, NodeTransformer
from pmap_sklearn.datasets import horse_split, load_weizmann_horses
from pmap_sklearn.perturbation import gumbel

VARIANTS = {  # name: (dynamic, gumbel_reduction)
    "basic": (False, False),
    "DC": (True, False),
    "GR": (False, True),
    "DC+GR": (True, True),
}
PAPER = {
    "basic": [0.9, 9.2, 89.5],
    "DC": [0.7, 6.9, 69.0],
    "GR": [0.3, 2.1, 15.5],
    "DC+GR": [0.2, 1.5, 10.9],
}


def clamped_maps(structure, image, w, perturbation, queries, **variant):
    """The call a variant is timed on: the perturbed potentials of ``image`` and the solver's
    ``clamped_maps`` of every node of ``queries`` (nodes, truth, weights)."""
    potentials = structure.potentials(image, w, perturbation)
    return structure.solver_.clamped_maps(potentials, *queries, **variant)


def main():
    cli = parser(__doc__, "100 iterations", data="folder with rgb/ and figure_ground/")
    cli.add_argument("--iterations", type=int, default=10_000)
    args = cli.parse_args()
    run = Run(__file__, args.quick)
    if args.quick:
        args.iterations = 100
    horses = load_weizmann_horses(args.data, n_jobs=2)
    labeled = horse_split().labeled
    scaler = NodeTransformer(StandardScaler()).fit([horses.data[i] for i in labeled])
    X = scaler.transform([horses.data[i] for i in labeled])
    y = [horses.target[i] for i in labeled]
    model = MarginalPerturbMAPCRF("graph", class_weight="balanced", random_state=0).fit(X, y)
    structure, w = model.structure_, model.coef_
    batch = structure.prepare(X)
    labels = structure.prepare_labels(batch, y)
    images = [batch.subset([i]) for i in range(batch.n_samples)]
    queries = [(np.arange(s.n_nodes), labels[batch.nodes_of(i)]) for i, s in enumerate(images)]
    weights = [np.ones(s.n_nodes) for s in images]
    checkpoints = [h for h in (10**k for k in range(2, 8)) if h <= args.iterations]
    elapsed = dict.fromkeys(VARIANTS, 0.0)
    table = {name: [] for name in VARIANTS}
    solved = dict.fromkeys(VARIANTS, 0)
    rng = np.random.default_rng(0)
    for h in range(1, args.iterations + 1):
        i = (h - 1) % len(images)
        image, (nodes, truth) = images[i], queries[i]
        perturbation = gumbel(rng, (image.n_nodes, 2))
        gradients = {}
        for name, (dynamic, reduction) in VARIANTS.items():
            solution, seconds = timed(
                clamped_maps,
                structure,
                image,
                w,
                perturbation,
                (nodes, truth, weights[i]),
                skip_agreeing=reduction,
                dynamic=dynamic,
            )
            elapsed[name] += seconds
            solved[name] += int(solution.solved.sum())
            if h % 100 == 1:  # the four variants must give the same gradient
                gradients[name] = structure.joint_feature_of(image, solution.statistics)
        if gradients:
            for name, gradient in gradients.items():
                np.testing.assert_allclose(
                    gradient,
                    gradients["basic"],
                    atol=1e-9,
                    err_msg=f"{name} differs at iteration {h}",
                )
        if h in checkpoints:
            for name in VARIANTS:
                table[name].append(elapsed[name])
            print(f"H = {h}: " + ", ".join(f"{n} {elapsed[n]:.2f} s" for n in VARIANTS), flush=True)
    header = (
        "| variant | "
        + " | ".join(f"H = {h}" for h in checkpoints)
        + " | ms / iteration | speed-up vs basic | clamped problems solved / iteration"
        + " | paper (10^2, 10^3, 10^4) |"
    )
    lines = [header, "|" + "---|" * (len(checkpoints) + 5)]
    for name in VARIANTS:
        per_iteration = 1e3 * table[name][-1] / checkpoints[-1]
        speedup = table["basic"][-1] / table[name][-1]
        lines.append(
            f"| {name} | "
            + " | ".join(f"{t:.2f}" for t in table[name])
            + f" | {per_iteration:.3f} | {speedup:.1f}x | {solved[name] / args.iterations:.1f} | "
            + ", ".join(str(p) for p in PAPER[name])
            + " |"
        )
    text = "\n".join(lines)
    mean_nodes = np.mean([s.n_nodes for s in images])
    print(
        f"\nSeconds to compute y*_A and all y*_B, folded into the gradient statistics "
        f"({mean_nodes:.0f} superpixels per image)\n{text}"
    )
    notes = run.notes(f"--iterations {args.iterations}")
    run.write_json(
        "table5.json",
        dict(
            command=notes["command"],
            run=notes,
            checkpoints=checkpoints,
            seconds=table,
            solved_per_iteration={n: solved[n] / args.iterations for n in VARIANTS},
            mean_superpixels=mean_nodes,
        ),
        indent=2,
    )
    run.write(
        "table5.md",
        f"# Table 5 — clamped maximisers on superpixel graphs\n\n"
        f"{mean_nodes:.0f} superpixels per image on average; seconds, cumulative, to compute "
        f"y*_A and every y*_B and fold them into the gradient statistics.\n\n{text}\n\n"
        f"{rerun(notes)}\n",
    )


if __name__ == "__main__":
    main()
