"""Where a default fit spends its time: the MAP oracle against the work around it.

Six workloads, each with the library's defaults (only ``random_state`` set):

- OCR words: :class:`~pmap_sklearn.PerturbMAPCRF` on the training words of fold 0 (the small
  protocol: 626 words);
- treebank: PerturbMAPCRF on the first 3,000 sentences of the UD English treebank's train
  split through ``SequenceVectorizer(token_features)`` (sparse token features);
- horse graphs: :class:`~pmap_sklearn.MarginalPerturbMAPCRF` on the superpixel graphs of the
  50 labelled training horses (``horse_split``), node features standardised as
  ``benchmarks/horse_table.py`` does;
- 4-class grids: PerturbMAPCRF on the 20 blocky 24² training grids of
  ``benchmarks/multilabel.py`` (α-expansion);
- 8 binary 128² grids: PerturbMAPCRF on 8 ``make_grid_data`` images of 128² (graph cuts);
- 512² photo predict: :class:`~pmap_sklearn.ContinuousLogSupermodularDenoiser`
  (``patch_size=8``, fitted on the four training photos of ``benchmarks/image_denoising.py``)
  denoising the 512² camera photo (σ = 25).

Each runs in its own process: a warm-up (the same call on two samples, one epoch), then the
measured call (a fresh fit, or the predict). Its time is shared out by sampling its Python
stack with py-spy (wall time, 250 samples a second, ``--nonblocking``: pausing the process
to read its stack made the deeper stacks of the step-size search look 30 % cheaper than its
own clock says); a sample goes to the category of the innermost frame that
:data:`CATEGORIES` names, and counts for ``eta0="auto"`` when ``calibrate_eta0`` is on its
stack. Where py-spy cannot run, ``cProfile``'s ``tottime`` is shared out by the same table
(the header says which) and the search's share is its own clock's. The peak resident memory
of the measured call is the process's ``VmHWM`` after resetting it
(``/proc/self/clear_refs``) just before the call.

Run: ``python benchmarks/profile_fits.py [--quick] [--only NAME ...] [--label LABEL]``
(``--quick``: smaller data, for a check); writes ``docs/results/profile_fits.{md,json}``,
keeping the runs stored under other labels in the JSON (the "before" table of a change); the
page shows the run just stored. ``--render`` rewrites the page from the JSON.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from _common import (
    Run,
    child,
    loads,
    parser,
    peak_mb,
    print_result,
    render,
    rerun,
    reset_peak,
    resident_mb,
    run_child,
    selected,
    timed,
)

HERE = Path(__file__).resolve().parent

#: The categories of time: each a list of ``(module, function, line)`` rules — ``module`` the
#: file name without its folders, ``function`` the last part of the function's name, ``"*"``
#: any, and ``line`` (optional) a text the frame's source line must hold. A stack sample goes to
#: the category of its innermost frame that a rule names (for one frame, a rule with a line
#: before one naming the function, before one naming the module alone), so numpy inside the
#: Viterbi kernel is the oracle's and numpy inside ``check_graph`` is validation's; frames named
#: nowhere (numpy, scipy, scikit-learn, PyMaxflow's Python side) fall through to their callers,
#: and a stack with no named frame is "other".
CATEGORIES = {
    # the MAP computation itself: PyMaxflow's max-flow (in C, called on the named lines), the
    # chain and forest max-product kernels, the continuous prior's proximal steps
    "MAP oracle proper": [
        ("mincut.py", "*", "maxflow("),
        ("cut.py", "*", "maxflow("),
        ("viterbi.py", "*"),
        ("forest.py", "*"),
        ("group_prox.py", "*"),
        ("level_tree.py", "*"),
    ],
    # α-expansion's per-move work around its max-flow: the moves' terms, candidates, graphs
    "α-expansion move building": [("expansion.py", "*")],
    # PyMaxflow graphs: building them, their capacities, clamps (the per-clamp loop of the
    # dynamic cuts), reading the cut
    "graph building": [
        ("mincut.py", "*"),
        ("cut.py", "*"),
        ("shared_graphs.py", "*"),
    ],
    # the structure's potentials and joint feature map: products of features and weights
    "feature products": [
        ("_base.py", "*"),
        ("_joint_feature.py", "*"),
        ("_hidden_states.py", "*"),
        ("_edge_features.py", "*"),
        ("chain.py", "*"),
        ("grid.py", "*"),
        ("graph.py", "*"),
        ("multilabel.py", "*"),
        ("potentials.py", "*"),
        ("_utils.py", "onehot"),
        ("_utils.py", "dot"),
    ],
    # the SGD engine, the learners' oracles, the perturbations, gathering mini-batches
    "SGD loop": [
        ("sgd.py", "*"),
        ("step_search.py", "*"),
        ("_estimator.py", "*"),
        ("_queries.py", "*"),
        ("_sgd_learner.py", "*"),
        ("perturb_map.py", "*"),
        ("marginal.py", "*"),
        ("perturbation.py", "*"),
        ("samples.py", "*"),
        ("_labels.py", "*"),
        ("_parallel.py", "*"),
        ("_utils.py", "*"),
    ],
    # per-call checks of graphs, potentials and queries
    "per-call validation": [
        ("*", "check_graph"),
        ("*", "__post_init__"),
        ("*", "_check"),
        ("*", "check_queries"),
        ("*", "check_move_costs"),
        ("_validation.py", "*"),
    ],
    # the logistic start of grids and graphs (scikit-learn's L-BFGS); patch extraction of the
    # continuous denoiser; anything not named above
    "other": [("_estimator.py", "_start_from_logistic")],
}
ORDER = list(CATEGORIES)
#: How each profiler's shares are read, for the results' header.
METHODS = {
    "py-spy": "py-spy (wall time: --idle --nonblocking)",
    "cprofile": "cProfile (tottime; PyMaxflow's compiled methods are invisible to it, so the "
    "max-flow counts as graph building; the search's share by its own clock)",
}


# ---- workloads ---------------------------------------------------------------------------
def _ocr(quick):
    from pmap_sklearn import PerturbMAPCRF
    from pmap_sklearn.datasets import load_ocr

    ocr = load_ocr()
    train = np.flatnonzero(np.asarray(ocr.folds) == 0)
    if quick:
        train = train[:200]
    X, y = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
    return PerturbMAPCRF(random_state=0), X, y


def _treebank(quick):
    from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_ud_treebank, token_features

    n = 1000 if quick else 3000
    data = load_ud_treebank("train")
    X = SequenceVectorizer(token_features).fit_transform(data.sentences[:n])
    return PerturbMAPCRF(random_state=0), X, data.tags[:n]


def _horses(quick):
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from pmap_sklearn import MarginalPerturbMAPCRF, NodeTransformer
    from pmap_sklearn.datasets import horse_split, load_weizmann_horses

    labeled = list(horse_split().labeled)
    if quick:
        labeled = labeled[:20]
    horses = load_weizmann_horses(indices=labeled, n_jobs=2)
    model = Pipeline(
        [
            ("scale", NodeTransformer(StandardScaler())),
            ("model", MarginalPerturbMAPCRF("graph", random_state=0)),
        ]
    )
    return model, horses.data, horses.target


def _four_class(quick):
    from multilabel import blocky_images

    from pmap_sklearn import GridStructure, PerturbMAPCRF

    X, y = blocky_images(np.random.default_rng(1), 10 if quick else 20, 24, 4, 1.0)
    return PerturbMAPCRF(GridStructure(), random_state=0), X, y


def _binary_grids(quick):
    from pmap_sklearn import GridStructure, PerturbMAPCRF
    from pmap_sklearn.datasets import make_grid_data

    size = 64 if quick else 128
    data = make_grid_data(n_samples=8, shape=(size, size), random_state=0)
    return PerturbMAPCRF(GridStructure(), random_state=0), data.data, data.target


def _photo(quick):
    from image_denoising import TRAIN, noised, photo

    from pmap_sklearn import ContinuousLogSupermodularDenoiser

    train = [photo(name) for name in TRAIN]
    model = ContinuousLogSupermodularDenoiser(patch_size=8, random_state=0).fit(train)
    clean = photo("camera")
    if quick:
        clean = clean[:256, :256]
    model.set_params(noise_std=25)
    return model, noised(clean, 25)


#: name -> (what is measured, data maker). A fit maker returns ``(estimator, X, y)``, a predict
#: maker ``(fitted estimator, X)``.
WORKLOADS = {
    "OCR words": ("fit", _ocr),
    "treebank 3,000 sentences": ("fit", _treebank),
    "horse graphs (MarginalPerturbMAPCRF)": ("fit", _horses),
    "4-class grids": ("fit", _four_class),
    "8 binary 128² grids": ("fit", _binary_grids),
    "512² photo predict": ("predict", _photo),
}


def _measured(call):
    """The call whose stack samples count (its name marks them)."""
    return call()


def run_one(name, quick, profile_path=None):
    """Run one workload in this process (the child); print its JSON line."""
    from sklearn.base import clone

    sys.path.insert(0, str(HERE))
    kind, maker = WORKLOADS[name]
    made = maker(quick)
    if kind == "fit":
        estimator, X, y = made
        with warnings.catch_warnings():  # one epoch does not converge
            warnings.simplefilter("ignore")
            clone(estimator).set_params(**_one_epoch(estimator)).fit(X[:2], y[:2])  # warm-up
        model = clone(estimator)

        def call():
            return model.fit(X, y)
    else:
        model, X = made
        model.predict(X[:64, :64])  # warm-up

        def call():
            return model.predict(X)

    import gc

    from pmap_sklearn.learners import _sgd_learner

    search = _sgd_learner.calibrate_eta0
    searched = []

    def timed_search(*args, **kwargs):  # the step-size search's own seconds
        result, seconds = timed(search, *args, **kwargs)
        searched.append(seconds)
        return result

    _sgd_learner.calibrate_eta0 = timed_search
    gc.collect()
    reset = reset_peak()
    before = resident_mb()
    profiler = None
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    _, seconds = timed(_measured, call)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_path)
    out = dict(seconds=seconds, rss_before_mb=before, peak_mb=peak_mb())
    out["peak_reset"] = reset
    if kind == "fit":
        fitted = model[-1] if hasattr(model, "steps") else model
        out.update(
            eta0=float(fitted.eta0_),
            eta0_seconds=sum(searched),
            epochs=int(fitted.n_iter_),
            n_samples=len(X),
            settings={k: str(v) for k, v in getattr(fitted, "sgd_settings_", {}).items()},
        )
    print_result(out)


def _one_epoch(estimator):
    """Parameters of a one-epoch warm-up (the estimator may be a Pipeline)."""
    prefix = "model__" if hasattr(estimator, "steps") else ""
    return {f"{prefix}max_iter": 1}


# ---- attribution -------------------------------------------------------------------------
def _frame(text):
    """``(function, module, path, line)`` of a py-spy raw frame ``qualified.name (path:line)``:
    the function's last name part, the file name without its folders."""
    function, _, where = text.rpartition(" (")
    path, _, line = where.rstrip(")").rpartition(":")
    name = function.strip().rsplit(".", 1)[-1]
    return name, os.path.basename(path), path, int(line) if line.isdigit() else 0


def _rules():
    """``{(module, function): [(line text or None, category), ...]}`` of :data:`CATEGORIES`."""
    rules = {}
    for category, names in CATEGORIES.items():
        for module, function, *line in names:
            rules.setdefault((module, function), []).append((line[0] if line else None, category))
    return rules


def _frame_category(rules, function, module, source_line):
    """The category a rule gives this frame, or None."""
    found = None
    for key in ((module, function), ("*", function), (module, "*")):
        for text, category in rules.get(key, ()):
            if text is not None and text in source_line:
                return category
            if text is None and found is None:
                found = category
    return found


def category_of(frames, rules=None):
    """The category of a stack (outermost frame first) of ``_frame`` tuples."""
    import linecache

    rules = rules or _rules()
    for function, module, path, line in reversed(frames):
        source = linecache.getline(path, line) if path and line else ""
        category = _frame_category(rules, function, module, source)
        if category is not None:
            return category
    return "other"


def shares_from_pyspy(raw_file):
    """Per-category shares (%) of the measured call, the share under ``calibrate_eta0`` and
    the number of samples."""
    rules = _rules()
    counts = dict.fromkeys(ORDER, 0)
    total = calibration = 0
    for line in Path(raw_file).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_frame(f) for f in stack.split(";")]
        names = {f[0] for f in frames}
        if "_measured" not in names:
            continue  # data loading and the warm-up
        n = int(count)
        total += n
        counts[category_of(frames, rules)] += n
        calibration += n * ("calibrate_eta0" in names)
    if not total:
        raise RuntimeError(f"no sample of the measured call in {raw_file}")
    shares = {k: 100.0 * v / total for k, v in counts.items()}
    return shares, 100.0 * calibration / total, total


def shares_from_cprofile(stats_file):
    """Per-category shares (%) from ``cProfile`` and its total seconds: each function's own
    time (``tottime``) goes to the category of the innermost named frame on its call path,
    following from each function the caller that spent the most time in it (a C method such as
    ``maxflow`` is matched to its caller's rules by its name, as a source line)."""
    import pstats

    stats = pstats.Stats(str(stats_file)).stats
    rules = _rules()

    def category(func, seen=(), text=""):
        path, _, name = func
        module, function = os.path.basename(path), name.rsplit(".", 1)[-1]
        if path == "~":  # a built-in: its caller decides, with the built-in's name as the line
            text, module, function = name.split("'")[1] + "(" if "'" in name else name, "", ""
        found = _frame_category(rules, function, module, text) if module else None
        if found is not None:
            return found
        callers = stats[func][4]
        if not callers or func in seen:
            return "other"
        caller = max(callers, key=lambda c: callers[c][3])  # the caller of most time
        return category(caller, (*seen, func), text if path == "~" else "")

    counts = dict.fromkeys(ORDER, 0.0)
    for func, (_, _, tottime, _, _) in stats.items():
        counts[category(func)] += tottime
    total = sum(counts.values())
    return {k: 100.0 * v / total for k, v in counts.items()}, total


def measure(name, quick, method, rate):
    """Run one workload in a child process under the profiler; its row."""
    command = child(__file__, name) + (["--quick"] if quick else [])
    with tempfile.TemporaryDirectory() as folder:
        out_file = Path(folder) / "profile"
        if method == "py-spy":
            spy = [
                "record",
                "--nonblocking",
                "--idle",
                "--rate",
                str(rate),
                "--format",
                "raw",
                "-o",
                str(out_file),
            ]
            command = [shutil.which("py-spy"), *spy, "--", *command]
        else:
            command += ["--stats", str(out_file)]
        load = loads()[0]
        result = run_child(name, command)
        if method == "py-spy":
            shares, calibration, samples = shares_from_pyspy(out_file)
        else:  # cProfile slows the calls it counts: the search's share by its own clock
            shares, samples = shares_from_cprofile(out_file)
            calibration = 100.0 * result.get("eta0_seconds", 0.0) / result["seconds"]
    row = dict(workload=name, shares=shares, samples=samples, load_1min=load, **result)
    if "eta0" in result:
        row["eta0_auto_share"] = calibration
    return row


def pyspy_works():
    """Whether py-spy is installed and may sample a child process here."""
    spy = shutil.which("py-spy")
    if spy is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "probe"
        probe = [
            sys.executable,
            "-c",
            "import time; t = time.time()\nwhile time.time() < t + 0.3: pass",
        ]
        done = subprocess.run(
            [spy, "record", "--format", "raw", "-o", str(out), "--", *probe],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode == 0 and out.exists() and out.stat().st_size > 0


# ---- tables ------------------------------------------------------------------------------
def table(rows):
    names = [r["workload"] for r in rows]
    lines = [
        "| % of the call | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for category in ORDER:
        cells = " | ".join(f"{r['shares'][category]:.0f}" for r in rows)
        lines.append(f"| {category} | {cells} |")
    cells = " | ".join(f"{r['eta0_auto_share']:.0f}" if "eta0" in r else "–" for r in rows)
    lines.append(f'| of the whole fit: `eta0="auto"` | {cells} |')
    cells = " | ".join(f"{r['eta0_seconds']:.2f}" if "eta0" in r else "–" for r in rows)
    lines.append(f'| `eta0="auto"` (s, its own clock) | {cells} |')
    lines.append("| call (s) | " + " | ".join(f"{r['seconds']:.1f}" for r in rows) + " |")
    lines.append(
        "| peak resident memory of the call (MB) | "
        + " | ".join(f"{r['peak_mb']:.0f}" for r in rows)
        + " |"
    )
    lines.append(
        "| η0 chosen / epochs | "
        + " | ".join(f"{r['eta0']:.3g} / {r['epochs']}" if "eta0" in r else "–" for r in rows)
        + " |"
    )
    return "\n".join(lines)


def markdown(label, record):
    """The page: the protocol, the table of the run ``record`` (stored as ``label``) and how
    to rerun it; its notes, loads and the other labelled runs stay in the JSON."""
    parts = [
        "# Where a default fit spends its time",
        "",
        "One default fit (or predict) per workload after "
        "a warm-up, in its own process, profiled by "
        f"{record['method']}. Shares (%) of the measured call by where its stack is "
        '(the innermost frame named in the script\'s `CATEGORIES`: "MAP oracle proper" is '
        "PyMaxflow's max-flow, the Viterbi / max-product kernels and the continuous prior's "
        'proximal steps; "graph building" the PyMaxflow graphs and their capacities; '
        '"feature products" the structure\'s potentials and joint feature map; "SGD loop" the '
        'engine and the learners\' oracle glue). The `eta0="auto"` row is the share of the fit '
        "under the step-size search. Peak memory: `VmHWM` reset just before the call. Times "
        "depend on the load of the machine; the shares much less.",
        "",
        table(record["rows"]),
        "",
        rerun(record),
    ]
    return "\n".join(parts) + "\n"


def main():
    cli = parser(__doc__, "smaller data, for a check", only="workloads", label=True, child=1)
    cli.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    cli.add_argument(
        "--profiler",
        choices=["auto", "py-spy", "cprofile"],
        default="auto",
        help="auto: py-spy where it can sample a child process here, else cProfile",
    )
    cli.add_argument("--stats", default=None, help=argparse.SUPPRESS)
    args = cli.parse_args()
    if args.one is not None:
        return run_one(args.one[0], args.quick, args.stats)
    if args.render:
        return render("profile_fits", markdown)
    names = selected(WORKLOADS, args.only)
    method = args.profiler
    if method == "auto":
        method = "py-spy" if pyspy_works() else "cprofile"
    run = Run(__file__, args.quick)
    rows = []
    for name in names:
        row = measure(name, args.quick, method, args.rate)
        rows.append(row)
        print(
            f"{name:<38} {row['seconds']:6.1f} s  "
            f"eta0 share {row.get('eta0_auto_share', 0):5.1f} %  "
            f"peak {row['peak_mb']:6.0f} MB  load {row['load_1min']:.1f}  "
            + "  ".join(f"{k} {v:.0f}" for k, v in row["shares"].items()),
            flush=True,
        )
    record = run.record(rows, only=args.only, method=METHODS[method])
    print("\n" + table(rows))
    if not args.no_write:
        run.store("profile_fits", args.label, record, markdown, categories=CATEGORIES)


if __name__ == "__main__":
    main()
