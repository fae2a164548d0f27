"""Multi-label MAP and learning on grids: α-expansion against gco-wrapper and message passing.

(a) MAP: random Potts grids (unaries N(0, 1), every edge weight ``coupling``), sizes 64²–256²
(512² with ``--full``), K ∈ {3, 5, 8}, weak (0.5) and strong (1.5) coupling. For each, the
energy and seconds of ``AlphaExpansionSolver`` (pure Python on PyMaxflow), of gco-wrapper's
α-expansion (C++, when installed: ``pip install ".[benchmarks]"``) and of convex message
passing (``MessagePassingSolver``, at most 128² unless ``--full``: a minute per 256² image).
The energy gap to gco is reported in % of the number of edges |E|.

(b) Learning on multi-class grids: blocky ground truths (random rectangles of K = 4 classes)
observed through one-hot features plus Gaussian noise; PerturbMAPCRF, MarginalPerturbMAPCRF and
StructuredSVM on ``GridStructure()`` (α-expansion by default for K > 2) against EpsilonCRF
(message passing), MeanFieldCRF (unrolled mean field) and per-pixel logistic regression: test
Hamming error and fit seconds. All
take their defaults, except the marginal learner's 15 epochs (its test error stops falling
after about 10; the default 100 epochs are run too, for the record).

Run: ``python benchmarks/multilabel.py [--full]``; writes ``docs/results/multilabel.{md,json}``.
``--quick``: MAP on 64² grids with K = 3, learning on 10 training and 10 test images, written to
a temporary folder.
"""

import json

import numpy as np
from _common import RESULTS, Run, parser, rerun_line, timed
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

from pmap_sklearn import (
    EpsilonCRF,
    GridStructure,
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    PerturbMAPCRF,
    StructuredSVM,
    grid_edges,
)
from pmap_sklearn.solvers import AlphaExpansionSolver, GridLayout, MessagePassingSolver, Potentials


def potts_grid(rng, size, k, coupling):
    """A random Potts model on a ``size × size`` grid, with the grid layout of the structures."""
    edges, directions = grid_edges((size, size), return_directions=True)
    layout = GridLayout(((size, size),), ((0, 1), (1, 0)), directions)
    unary = rng.normal(size=(size * size, k))
    return Potentials(unary, edges, np.full(len(edges), -coupling), layout=layout)


def energy(p, labels):
    return float(-p.score(np.asarray(labels, dtype=np.intp).ravel())[0])


def map_rows(sizes, states, couplings, mp_limit):
    try:
        import gco
    except ImportError:
        gco = None
        print("gco-wrapper not installed: its columns stay empty")
    rng = np.random.default_rng(0)
    rows = []
    for size in sizes:
        for k in states:
            for coupling in couplings:
                p = potts_grid(rng, size, k, coupling)
                row = dict(size=size, K=k, coupling=coupling, edges=p.n_edges)
                labels, row["ours_s"] = timed(lambda p=p: AlphaExpansionSolver().map(p))
                row["ours_energy"] = energy(p, labels)
                if gco is not None:
                    cost = -p.unary.reshape(size, size, k)
                    labels, row["gco_s"] = timed(
                        lambda cost=cost, k=k, c=coupling: gco.cut_grid_graph_simple(
                            cost, c * (1.0 - np.eye(k)), algorithm="expansion"
                        )
                    )
                    row["gco_energy"] = energy(p, labels)
                if size <= mp_limit:
                    labels, row["mp_s"] = timed(lambda p=p: MessagePassingSolver().map(p))
                    row["mp_energy"] = energy(p, labels)
                rows.append(row)
                print(format_map_row(row), flush=True)
    return rows


def format_map_row(row):
    def cell(name):
        if f"{name}_s" not in row:
            return "—", "—"
        return f"{row[f'{name}_energy']:.1f}", f"{row[f'{name}_s']:.2f}"

    ours, gco, mp = cell("ours"), cell("gco"), cell("mp")
    gap = ratio = "—"
    if "gco_s" in row:
        gap = f"{100 * (row['ours_energy'] - row['gco_energy']) / row['edges']:+.3f}"
        ratio = f"{row['ours_s'] / row['gco_s']:.2f}"
    return (
        f"| {row['size']}² | {row['K']} | {row['coupling']} | {ours[0]} | {ours[1]} | {gco[0]} "
        f"| {gco[1]} | {gap} | {ratio} | {mp[0]} | {mp[1]} |"
    )


MAP_HEADER = (
    "| grid | K | coupling | α-exp. energy | α-exp. s | gco energy | gco s "
    "| gap (% of \\|E\\|) | time / gco | message passing energy | message passing s |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def blocky_images(rng, n, size, k, noise):
    """Ground truths of random rectangles of K classes; features one-hot + N(0, noise²)."""
    images, labels = [], []
    for _ in range(n):
        truth = rng.integers(k) * np.ones((size, size), dtype=np.intp)
        for _ in range(6):
            r, c = rng.integers(0, size - 4, 2)
            h, w = rng.integers(4, size // 2, 2)
            truth[r : r + h, c : c + w] = rng.integers(k)
        images.append(np.eye(k)[truth] + noise * rng.normal(size=(size, size, k)))
        labels.append(truth)
    return images, labels


def error(truths, predictions):
    wrong = [(t != p).ravel() for t, p in zip(truths, predictions, strict=True)]
    return 100 * float(np.mean(np.concatenate(wrong)))


def learning_rows(n_train, n_test, size, k, noise):
    rng = np.random.default_rng(1)
    X, y = blocky_images(rng, n_train, size, k, noise)
    X_test, y_test = blocky_images(rng, n_test, size, k, noise)
    learners = {
        "PerturbMAPCRF": PerturbMAPCRF(GridStructure(), random_state=0),
        "MarginalPerturbMAPCRF (15 epochs)": MarginalPerturbMAPCRF(
            GridStructure(), max_iter=15, random_state=0
        ),
        "MarginalPerturbMAPCRF (100 epochs, the default)": MarginalPerturbMAPCRF(
            GridStructure(), random_state=0
        ),
        "StructuredSVM": StructuredSVM(GridStructure(), random_state=0),
        "EpsilonCRF": EpsilonCRF(GridStructure(solver="message_passing")),
        "MeanFieldCRF (defaults: 10 mean-field iterations unrolled)": MeanFieldCRF(
            GridStructure(), random_state=0
        ),
    }
    rows = []
    for name, model in learners.items():
        # the faster of two fits (the same result: the fits are seeded), as a run can be
        # slowed by the machine's other work
        _, seconds = timed(model.fit, X, y, repeat=2)
        rows.append(dict(method=name, error=error(y_test, model.predict(X_test)), seconds=seconds))
        print(f"{name:<22} {rows[-1]['error']:5.2f} %  {seconds:7.1f} s", flush=True)
    # The step rule as a user would pick it: 3-fold cross-validation on the training images
    # (the fit time is the refit's; the selection's total is in the name).
    search = GridSearchCV(
        PerturbMAPCRF(GridStructure(), random_state=0),
        {"learning_rate": ["optimal", "adagrad"]},
        cv=3,
    )
    seconds, refit = np.inf, np.inf
    for _ in range(2):  # the faster of two, as above
        seconds = min(seconds, timed(lambda: search.fit(X, y))[1])
        refit = min(refit, search.refit_time_)
    name = (
        f"PerturbMAPCRF, learning_rate={search.best_params_['learning_rate']!r} by 3-fold CV "
        f"over 'optimal' / 'adagrad' (selection and refit {seconds:.1f} s)"
    )
    error_cv = error(y_test, search.predict(X_test))
    rows.insert(1, dict(method=name, error=error_cv, seconds=refit))
    print(f"{name} {error_cv:5.2f} %  {refit:7.1f} s", flush=True)
    pixels = LogisticRegression(max_iter=1000)
    _, seconds = timed(
        lambda: pixels.fit(np.concatenate([x.reshape(-1, k) for x in X]), np.concatenate(y).ravel())
    )
    predictions = [pixels.predict(x.reshape(-1, k)).reshape(size, size) for x in X_test]
    rows.append(
        dict(
            method="per-pixel logistic regression",
            error=error(y_test, predictions),
            seconds=seconds,
        )
    )
    print(f"{'per-pixel logistic':<22} {rows[-1]['error']:5.2f} %  {seconds:7.1f} s", flush=True)
    return rows


def main():
    cli = parser(__doc__, "MAP on 64² grids with K = 3, learning on 10 + 10 images")
    cli.add_argument("--full", action="store_true", help="512² grids, message passing at 256²")
    cli.add_argument(
        "--learning-only", action="store_true", help="keep the MAP rows of the last run"
    )
    args = cli.parse_args()
    run = Run(__file__, args.quick)
    sizes = (64, 128, 256, 512) if args.full else (64, 128, 256)
    states = (3, 5, 8)
    if args.quick:
        sizes, states = (64,), (3,)
    if args.learning_only:
        maps = json.loads((RESULTS / "multilabel.json").read_text())["map"]
    else:
        print(MAP_HEADER)
        maps = map_rows(sizes, states, (0.5, 1.5), 256 if args.full else 128)
    n = 10 if args.quick else 20
    setting = dict(n_train=n, n_test=n, size=24, k=4, noise=1.0)
    print(f"\nLearning: {setting}")
    learning = learning_rows(**setting)
    full = ["--full"] * args.full
    notes = run.notes(
        *full,
        *["--learning-only"] * args.learning_only,
        **({"map_rows": "kept from the previous run"} if args.learning_only else {}),
    )
    minutes, command = notes["minutes"], notes["command"]
    if args.learning_only:
        command += " (MAP rows from the previous run)"
    # the page's command reruns all of it; its length is known from a whole run only
    again = rerun_line(
        run.command(*full),
        None if args.learning_only else minutes,
        None if args.learning_only else notes["cores"],
    )
    run.write_json(
        "multilabel.json",
        dict(
            command=command,
            minutes=minutes,
            run=notes,
            map=maps,
            learning=learning,
            setting=setting,
        ),
        indent=2,
    )
    learning_table = "\n".join(
        ["| learner | test error (%) | fit (s) |", "|---|---|---|"]
        + [f"| {r['method']} | {r['error']:.2f} | {r['seconds']:.1f} |" for r in learning]
    )
    run.write(
        "multilabel.md",
        f"# Multi-label MAP and learning on grids\n\n"
        f"## MAP on random Potts grids\n\n{MAP_HEADER}\n"
        + "\n".join(format_map_row(r) for r in maps)
        + f"\n\n## Learning on blocky {setting['k']}-class grids\n\n"
        f"{setting['n_train']} training and {setting['n_test']} test images of "
        f"{setting['size']}², one-hot features plus N(0, {setting['noise']}²) noise.\n\n"
        f"{learning_table}\n\n{again}\n",
    )


if __name__ == "__main__":
    main()
