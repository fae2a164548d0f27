"""Hidden states that count: the exact latent CRF against the latent structured SVM.

Chains of 30 nodes whose label 1 comes in runs of exactly three (the gaps of label 0: 1 to 6
nodes), seen through Gaussian noise of standard deviation 1.5 on the one-hot labels
(:func:`pmap_sklearn.datasets._latent_toys.make_runs`). A transition table on the two labels
cannot count a run; two states per label can tell the start of a run from the rest, three
can count its nodes. Each learner is fitted with its defaults, with one, two and three states
per label (``ChainStructure(n_states_per_label=...)``), on 100 chains, and scored on 200 others
(held out, nothing tuned on them); three seeds (a new draw of the data and of the learner
each). The table gives the accuracy (1 − Hamming loss), mean ± std over the seeds, the lift of
the hidden states over one state, the mean fit seconds, and the latent S-SVM's rounds
(``latent_objectives_``: never rising). Run: ``python benchmarks/latent_ssvm.py [--quick]``; writes
``docs/results/latent_ssvm.{md,json}`` (``--quick``: one seed, to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed

from pmap_sklearn import ChainCRF, ChainStructure, StructuredSVM
from pmap_sklearn.datasets._latent_toys import make_runs

LEARNERS = {
    "ChainCRF (exact latent CRF)": lambda s, seed: ChainCRF(s),
    "StructuredSVM (latent SVM)": lambda s, seed: StructuredSVM(s, random_state=seed),
}
NOISE = 1.5
STATES = (1, 2, 3)


def every_learner(seeds):
    rows = []
    for learner, build in LEARNERS.items():
        for states in STATES:
            scores, seconds, rounds = [], [], []
            for seed in seeds:
                train = make_runs(100, noise=NOISE, random_state=2 * seed)
                test = make_runs(200, noise=NOISE, random_state=2 * seed + 1)
                model = build(ChainStructure(n_states_per_label=states), seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    seconds.append(timed(model.fit, train.data, train.target)[1])
                scores.append(model.score(test.data, test.target))
                rounds.append([float(o) for o in getattr(model, "latent_objectives_", [])])
            row = dict(
                learner=learner,
                states=states,
                accuracy=float(np.mean(scores)),
                std=float(np.std(scores)),
                scores=[float(s) for s in scores],
                fit_s=float(np.mean(seconds)),
                latent_objectives=rounds,
            )
            rows.append(row)
            print(
                f"{learner:28s} {states} state(s)  {row['accuracy']:.4f} ± {row['std']:.4f}  "
                f"{row['fit_s']:6.1f} s  rounds {[len(r) for r in rounds]}"
            )
    return rows


def write(run, rows, seeds):
    notes = run.notes()
    lines = [
        "# Hidden states that count: latent CRF and latent S-SVM",
        "",
        "Accuracy (1 − Hamming loss) on 200 held-out chains whose label 1 comes in runs of "
        f"three (noise {NOISE}), mean ± std over seeds {list(seeds)} (a new draw of the data "
        "and of the learner each), fitted on 100 chains with each learner's defaults; "
        "'lift': over one state per label. Rounds: the latent S-SVM's CCCP rounds "
        "recorded per seed (``latent_objectives_``, never rising).",
        "",
        "| learner | states per label | accuracy | lift | fit s | rounds |",
        "|---|---|---|---|---|---|",
    ]
    for learner in LEARNERS:
        mine = {r["states"]: r for r in rows if r["learner"] == learner}
        for states, row in mine.items():
            lift = "" if states == 1 else f"{row['accuracy'] - mine[1]['accuracy']:+.4f}"
            counts = (
                ", ".join(str(len(r)) for r in row["latent_objectives"])
                if "SVM" in learner and states > 1
                else ""
            )
            lines.append(
                f"| {learner} | {states} | {row['accuracy']:.4f} ± {row['std']:.4f} | {lift} | "
                f"{row['fit_s']:.1f} | {counts} |"
            )
    lines += ["", rerun(notes)]
    run.save("latent_ssvm", "\n".join(lines) + "\n", dict(seeds=list(seeds), rows=rows, run=notes))
    print("\n".join(lines))


def main():
    args = parser(__doc__, "one seed").parse_args()
    seeds = (0,) if args.quick else (0, 1, 2)
    run = Run(__file__, args.quick)
    write(run, every_learner(seeds), seeds)


if __name__ == "__main__":
    main()
