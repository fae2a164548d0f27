"""Scaling: time and peak memory against the size of a sample, and n_jobs = 1 vs 2.

Part 1 — one epoch of every estimator on one sample of growing size, each run in a fresh
process so that its peak resident memory (``VmHWM``) is its own:

- binary grid images of side 32 … 512 (``make_grid_data``): PerturbMAPCRF, MarginalPerturbMAPCRF
  (Hamming loss, Gumbel reduction, dynamic cuts), StructuredSVM (one BCFW pass) and
  LogSupermodularDenoiser (one supervised pass), and ``predict_marginals`` of the image with
  M = 100 perturbations;
- chains of D = 100 … 10^4 nodes (``make_chain_data``, K = 5): the same learners and ChainCRF
  (one L-BFGS iteration).

Steps are fixed (``learning_rate="constant"``) so that no step-size calibration is timed. For
the marginal learner the number of clamped problems solved is counted: its time should grow
like nodes × solved queries, its memory like the nodes. Slopes are least-squares fits in
log-log scale.

Part 2 — n_jobs = 1 against 2 in one process, for every kind of call that uses workers, from
10 ms to tens of seconds of work (results checked identical): small fits on the 50 labelled
Weizmann-horse superpixel graphs (5 epochs / passes), fits and epochs on 4-class grids
(α-expansion) and on 128×128 binary grids (dynamic cuts), a default fit of 8 binary 256×256
grids, the MAP of 5 and 20 4-class grids, ``predict_marginals`` of 2 to all test horse graphs
(M = 100), of 4 binary 128×128 grids and of 4-class grids, and the
denoiser's marginal decoding of 2, 10 and 100 50×50 horse masks. Each call is timed several
times, n_jobs = 1 and 2 interleaved (the median is reported, and the first n_jobs = 2 call,
which may measure the cost of a kind of job, beside it). The worker processes are started and
import the library before timing (joblib keeps them for the next calls).

Run: ``python benchmarks/scaling.py [--part sizes|n_jobs|all] [--max-side 512]
[--max-length 10000]``; writes ``docs/results/scaling.{md,json,png}`` (part 1) and
``docs/results/n_jobs.{md,json}`` (part 2). ``--quick``: sides up to 64 and chains up to 316
nodes, the three horse fits of part 2; written to a temporary folder.
"""

import importlib
import warnings

import numpy as np
from _common import (
    Run,
    child,
    loads,
    parser,
    peak_mb,
    print_result,
    pyplot,
    rerun,
    resident_mb,
    run_child,
    save_figure,
    timed,
)
from sklearn.exceptions import ConvergenceWarning

GRID_ESTIMATORS = ["PerturbMAPCRF", "MarginalPerturbMAPCRF", "StructuredSVM", "denoiser"]
CHAIN_ESTIMATORS = ["PerturbMAPCRF", "MarginalPerturbMAPCRF", "StructuredSVM", "ChainCRF"]


#: ``--quick``: the largest side and chain, and the cases of part 2 (the horse fits).
QUICK = dict(max_side=64, max_length=316, n_jobs_cases=3)


def run_one(kind: str, name: str, size: int) -> dict:
    """One timed run (in its own process): fit one epoch, or predict marginals."""
    from pmap_sklearn import (
        ChainCRF,
        LogSupermodularDenoiser,
        MarginalPerturbMAPCRF,
        PerturbMAPCRF,
        StructuredSVM,
    )
    from pmap_sklearn.datasets import make_chain_data, make_grid_data
    from pmap_sklearn.solvers import ChainSolver, GraphCutSolver

    if kind == "grid":
        data = make_grid_data(n_samples=1, shape=(size, size), noise=1.0, random_state=0)
        X, y, structure = data.data, data.target, "grid"
    else:
        data = make_chain_data(
            n_samples=1, n_states=5, n_features=10, length=(size, size), random_state=0
        )
        X, y, structure = data.data, data.target, "chain"
    solved = [0]
    for solver in (GraphCutSolver, ChainSolver):  # count the clamped problems solved
        original = solver.clamped_maps

        def counting(self, *args, _original=original, **kwargs):
            solution = _original(self, *args, **kwargs)
            solved[0] += int(solution.solved.sum())
            return solution

        solver.clamped_maps = counting
    sgd = dict(max_iter=1, learning_rate="constant", eta0=0.01, tol=None, random_state=0)
    models = {
        "PerturbMAPCRF": lambda: PerturbMAPCRF(structure, **sgd),
        "MarginalPerturbMAPCRF": lambda: MarginalPerturbMAPCRF(structure, **sgd),
        "StructuredSVM": lambda: StructuredSVM(structure, max_iter=1, random_state=0),
        "ChainCRF": lambda: ChainCRF(structure, max_iter=1),
        "predict_marginals": lambda: PerturbMAPCRF(structure, **sgd),
    }
    before = resident_mb()
    if name == "denoiser":
        clean = y[0]
        noisy = np.where(np.random.default_rng(0).random(clean.shape) < 0.1, 1 - clean, clean)
        denoiser = LogSupermodularDenoiser(max_iter=1, noise_level=0.1, random_state=0)
        _, seconds = timed(denoiser.fit, noisy[None], clean[None])
    elif name == "predict_marginals":
        model = models[name]().fit(X, y)
        before = resident_mb()
        _, seconds = timed(model.predict_marginals, X, n_perturbations=100)
    else:
        model = models[name]()
        _, seconds = timed(model.fit, X, y)
    return dict(seconds=seconds, peak_mb=peak_mb(), before_mb=before, solved=solved[0])


def measure(kind, name, size, timeout):
    return run_child(f"{kind} {name} {size}", child(__file__, kind, name, size), timeout)


def slope(x, y) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def size_runs(sides, lengths, timeout):
    rows = []
    plans = [("grid", name, side, side * side) for name in GRID_ESTIMATORS for side in sides]
    plans += [("grid", "predict_marginals", side, side * side) for side in sides]
    plans += [("chain", name, d, d) for name in CHAIN_ESTIMATORS for d in lengths]
    for kind, name, size, nodes in plans:
        result = measure(kind, name, size, timeout)
        if result is None:
            print(f"{kind:5} {name:22} {size:>6}: over {timeout} s, not measured", flush=True)
            continue
        rows.append(dict(kind=kind, name=name, size=size, nodes=nodes, **result))
        print(
            f"{kind:5} {name:22} {size:>6}: {result['seconds']:8.3f} s, peak "
            f"{result['peak_mb']:7.1f} MB (before {result['before_mb']:.0f} MB)"
            + (f", {result['solved']} clamped problems" if result["solved"] else ""),
            flush=True,
        )
    return rows


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) and a.dtype != object:
        return np.array_equal(a, b)
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def n_jobs_cases(data_path, quick=False):
    """(name, run(n_jobs) -> result) of every kind of call that uses workers, small to large
    (``quick``: the first fits only)."""
    from joblib import Parallel, delayed
    from multilabel import blocky_images  # not at the top: the size children's memory
    from sklearn.preprocessing import StandardScaler

    from pmap_sklearn import (
        LogSupermodularDenoiser,
        MarginalPerturbMAPCRF,
        NodeTransformer,
        PerturbMAPCRF,
        StructuredSVM,
    )
    from pmap_sklearn.datasets import (
        add_flip_noise,
        horse_split,
        load_weizmann_horse_masks,
        load_weizmann_horses,
        make_grid_data,
    )

    split = horse_split()
    horses = load_weizmann_horses(data_path, n_jobs=2)
    labeled = list(split.labeled)
    scaler = NodeTransformer(StandardScaler()).fit([horses.data[i] for i in labeled])
    X = scaler.transform([horses.data[i] for i in labeled])
    y = [horses.target[i] for i in labeled]
    X_test = scaler.transform([horses.data[i] for i in split.test])
    masks = load_weizmann_horse_masks(data_path).images
    noisy = add_flip_noise(masks[split.perm[:100]], 0.1, random_state=0)
    grids = make_grid_data(n_samples=8, shape=(128, 128), noise=1.0, random_state=0)
    large = make_grid_data(n_samples=8, shape=(256, 256), noise=1.0, random_state=0)
    large_grids = large.data, large.target
    colours, classes = blocky_images(np.random.default_rng(0), 20, 24, 4, 1.0)
    one_epoch = dict(max_iter=1, learning_rate="constant", eta0=0.01, random_state=0)
    # Then start the workers and import the library in them, so that no case pays for it.
    # (max_nbytes=None as the library's calls: other arguments would restart the workers)
    Parallel(n_jobs=2, max_nbytes=None)(
        delayed(importlib.import_module)("pmap_sklearn") for _ in range(8)
    )

    def fit(make, X, y):
        return lambda n_jobs: make(n_jobs).fit(X, y).coef_

    cases = [
        (
            "PerturbMAPCRF fit, 50 horse graphs",
            fit(
                lambda j: PerturbMAPCRF("graph", max_iter=5, tol=None, random_state=0, n_jobs=j),
                X,
                y,
            ),
        ),
        (
            "MarginalPerturbMAPCRF fit, 50 horse graphs",
            fit(
                lambda j: MarginalPerturbMAPCRF(
                    "graph", class_weight="balanced", max_iter=5, random_state=0, n_jobs=j
                ),
                X,
                y,
            ),
        ),
        (
            "StructuredSVM fit, 50 horse graphs",
            fit(lambda j: StructuredSVM("graph", max_iter=5, random_state=0, n_jobs=j), X, y),
        ),
        (
            "PerturbMAPCRF fit, 20 4-class 24x24 grids (α-expansion)",
            fit(lambda j: PerturbMAPCRF("grid", random_state=0, n_jobs=j), colours, classes),
        ),
        (
            "MarginalPerturbMAPCRF epoch, 8 4-class 24x24 grids",
            fit(
                lambda j: MarginalPerturbMAPCRF("grid", **one_epoch, n_jobs=j),
                colours[:8],
                classes[:8],
            ),
        ),
        (
            "MarginalPerturbMAPCRF epoch, 8 128x128 grids",
            fit(
                lambda j: MarginalPerturbMAPCRF("grid", **one_epoch, n_jobs=j),
                grids.data,
                grids.target,
            ),
        ),
        (
            "PerturbMAPCRF fit (defaults), 8 256x256 binary grids",
            fit(lambda j: PerturbMAPCRF("grid", random_state=0, n_jobs=j), *large_grids),
        ),
    ]
    if quick:
        return cases[: QUICK["n_jobs_cases"]]
    binary = PerturbMAPCRF("grid", max_iter=5, random_state=0).fit(grids.data, grids.target)
    cases.append(
        (
            "predict_marginals, 4 128x128 binary grids, M = 100",
            lambda j: binary.set_params(n_jobs=j).predict_marginals(grids.data[:4]),
        )
    )
    marginal = MarginalPerturbMAPCRF("graph", max_iter=5, random_state=0).fit(X, y)
    for n in (2, 5, 10, 40, 80, len(X_test)):
        cases.append(
            (
                f"predict_marginals, {n} horse graphs, M = 100",
                lambda j, n=n: marginal.set_params(n_jobs=j).predict_marginals(
                    X_test[:n], n_perturbations=100
                ),
            )
        )
    multi = PerturbMAPCRF("grid", random_state=0).fit(colours, classes)
    for n in (5, 20):
        cases.append(
            (
                f"predict (MAP), {n} 4-class 24x24 grids",
                lambda j, n=n: multi.set_params(n_jobs=j).predict(colours[:n]),
            )
        )
    cases.append(
        (
            "predict_marginals, 20 4-class 24x24 grids, M = 20",
            lambda j: multi.set_params(n_jobs=j).predict_marginals(colours, n_perturbations=20),
        )
    )
    denoiser = LogSupermodularDenoiser(noise_level=0.1, max_iter=5, random_state=0)
    denoiser.fit(noisy[:50], masks[split.perm[:50]])
    for n in (2, 10, 100):
        cases.append(
            (
                f"denoiser marginal decoding, {n} 50x50 masks, M = 100",
                lambda j, n=n: denoiser.set_params(n_jobs=j).predict(
                    noisy[:n], decoding="marginal"
                ),
            )
        )
    return cases


def n_jobs_ratios(data_path, quick=False):
    """Median seconds of n_jobs = 1 and 2, runs interleaved (more repeats for short calls)."""
    rows = []
    for name, run in n_jobs_cases(data_path, quick):
        times = {1: [], 2: []}
        results = {}
        while True:
            for n_jobs in (1, 2):
                results[n_jobs], seconds = timed(run, n_jobs)
                times[n_jobs].append(seconds)
            spent = sum(times[1]) + sum(times[2])
            if len(times[1]) >= 7 or (len(times[1]) >= 3 and spent > 10) or spent > 60:
                break
        serial, parallel = float(np.median(times[1])), float(np.median(times[2]))
        same = _same(results[1], results[2])
        rows.append(
            dict(
                case=name,
                serial=serial,
                parallel=parallel,
                first_parallel=times[2][0],
                repeats=len(times[1]),
                identical=bool(same),
            )
        )
        print(
            f"{name:58} n_jobs=1 {serial:7.3f} s, n_jobs=2 {parallel:7.3f} s, ratio "
            f"{serial / parallel:4.2f}x (first call {serial / times[2][0]:4.2f}x), "
            f"{len(times[1])} repeats, identical {same}",
            flush=True,
        )
    return sorted(rows, key=lambda r: r["serial"])


def n_jobs_table(ratios) -> list[str]:
    def verdict(r):
        ratio = r["serial"] / r["parallel"]
        if ratio < 0.95:
            return "slower"
        return "< 1.5x" if r["serial"] >= 1.0 and ratio < 1.5 else "ok"

    lines = [
        "| case | n_jobs=1 s | n_jobs=2 s | ratio | first n_jobs=2 call | repeats | identical "
        "| target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['case']} | {r['serial']:.3f} | {r['parallel']:.3f} | "
        f"{r['serial'] / r['parallel']:.2f}x | {r['serial'] / r['first_parallel']:.2f}x | "
        f"{r['repeats']} | {r['identical']} | {verdict(r)} |"
        for r in ratios
    ]
    return lines


def plot(rows, path):
    plt = pyplot()

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, kind in zip(axes, ("grid", "chain"), strict=True):
        for name in sorted({r["name"] for r in rows if r["kind"] == kind}):
            points = [r for r in rows if r["kind"] == kind and r["name"] == name]
            axis.loglog(
                [p["nodes"] for p in points], [p["seconds"] for p in points], "o-", label=name
            )
        axis.set_xlabel("nodes of the sample")
        axis.set_ylabel("seconds (one epoch / one predict call)")
        axis.set_title("binary grid images" if kind == "grid" else "chains (K = 5)")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    save_figure(figure, path, 110)


def main():
    cli = parser(
        __doc__,
        "sides up to 64, chains up to 316 nodes, the horse fits of part 2",
        data="folder with the Weizmann horses",
        child=3,
    )
    cli.add_argument("--part", choices=["sizes", "n_jobs", "all"], default="all")
    cli.add_argument("--max-side", type=int, default=512)
    cli.add_argument("--max-length", type=int, default=10_000)
    cli.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    args = cli.parse_args()
    if args.one:
        kind, name, size = args.one
        warnings.simplefilter("ignore", ConvergenceWarning)  # one epoch, by design
        print_result(run_one(kind, name, int(size)))
        return
    run = Run(__file__, args.quick)
    if args.part in ("sizes", "all"):
        size_part(run, args)
    if args.part in ("n_jobs", "all"):
        warnings.simplefilter("ignore", ConvergenceWarning)  # few epochs, by design
        load_start = loads()[0]
        ratios, seconds = timed(n_jobs_ratios, args.data, args.quick)
        notes = run.notes("--part", "n_jobs", minutes=seconds / 60, load_start=load_start)
        text = "\n".join(
            [
                "Median seconds of each call with n_jobs = 1 and 2 on 2 cores, runs interleaved "
                "in one process (workers started beforehand), sorted by the serial time; target: "
                "never below 0.95x, at least 1.5x from one second of serial work.",
                "",
                *n_jobs_table(ratios),
                "",
                rerun(notes),
            ]
        )
        print("\n" + text)
        run.write("n_jobs.md", "# n_jobs = 1 against 2\n\n" + text + "\n")
        run.write_json("n_jobs.json", dict(command=notes["command"], run=notes, n_jobs=ratios))


def size_part(run, args):
    max_side = min(args.max_side, QUICK["max_side"]) if args.quick else args.max_side
    max_length = min(args.max_length, QUICK["max_length"]) if args.quick else args.max_length
    sides = [s for s in (32, 64, 128, 256, 512) if s <= max_side]
    lengths = [d for d in (100, 316, 1000, 3162, 10_000) if d <= max_length]
    load_start = loads()[0]
    rows, run_seconds = timed(size_runs, sides, lengths, args.timeout)
    slopes = []
    for kind, name in sorted({(r["kind"], r["name"]) for r in rows}):
        points = [r for r in rows if r["kind"] == kind and r["name"] == name]
        if len(points) < 2:
            continue
        nodes = np.array([p["nodes"] for p in points], float)
        seconds = np.array([p["seconds"] for p in points])
        extra = np.array([max(p["peak_mb"] - p["before_mb"], 1e-3) for p in points])
        entry = dict(kind=kind, name=name, time=slope(nodes, seconds), memory=slope(nodes, extra))
        if all(p["solved"] for p in points):
            work = nodes * np.array([p["solved"] for p in points], float)
            entry["time_vs_nodes_x_queries"] = slope(work, seconds)
        slopes.append(entry)
    lines = [
        "| sample | estimator | nodes | seconds | peak RSS MB | above start MB | clamped "
        "problems |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['kind']} {r['size']} | {r['name']} | {r['nodes']} | {r['seconds']:.3f} | "
        f"{r['peak_mb']:.0f} | {r['peak_mb'] - r['before_mb']:.0f} | {r['solved'] or ''} |"
        for r in rows
    ]
    lines += [
        "",
        "Log-log slopes against the nodes of the sample (memory: peak above the start of the run):",
        "",
        "| sample | estimator | time | memory | time vs nodes × solved queries |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {s['kind']} | {s['name']} | {s['time']:.2f} | {s['memory']:.2f} | "
        f"{s.get('time_vs_nodes_x_queries', float('nan')):.2f} |"
        for s in slopes
    ]
    notes = run.notes(
        "--part",
        "sizes",
        *([f"--max-side {args.max_side}"] if args.max_side != 512 else []),
        *([f"--max-length {args.max_length}"] if args.max_length != 10_000 else []),
        minutes=run_seconds / 60,
        load_start=load_start,
    )
    text = "\n".join([*lines, "", rerun(notes)]) + "\n"
    print("\n" + text)
    run.write("scaling.md", "# Scaling\n\n" + text)
    payload = dict(command=notes["command"], run=notes, rows=rows, slopes=slopes)
    run.write_json("scaling.json", payload)
    plot(rows, run.path("scaling.png"))


if __name__ == "__main__":
    main()
