"""Peak memory of predictions against the number of samples, and of a treebank fit.

Predictions take ``X`` in chunks of a bounded number of nodes (``PREDICT_NODES`` in
``pmap_sklearn/_parallel.py``), so their memory beyond the outputs should not grow with the
number of samples. Each case runs in its own process:

- grids: :class:`~pmap_sklearn.PerturbMAPCRF` with ``GridStructure()`` (graph cuts), fitted
  for two epochs on four ``make_grid_data`` images of 128², predicting 8 and 64 other images
  of 128²;
- sentences: PerturbMAPCRF with its defaults, fitted on the first 2,000 sentences of the UD
  English treebank's train split through ``SequenceVectorizer(token_features)``, predicting
  (``predict``, and ``predict_marginals``: exact forward-backward) 500 and 4,000 sentences: the
  longest sentence of the split (159 tokens) and the ones after the 2,000 fitted;
- treebank fit: PerturbMAPCRF with its defaults on the whole train split (12,544 sentences),
  vectorised before the call, and the same fit as ``make_pipeline(SequenceVectorizer(
  token_features), PerturbMAPCRF())`` from the sentences;
- Viterbi: ``ChainSolver.map`` on the lengths of 32, 500 and 4,000 treebank sentences (the
  longest first) with random scores over the 17 tags, the best of several calls.

A prediction is measured after a warm-up (the same call on two samples), the garbage
collected and the freed heap handed back to the system (``malloc_trim``): the peak resident
memory of the call is ``VmHWM`` reset just before it (``/proc/self/clear_refs``); "beyond the
outputs" subtracts what the process holds after the call and a second ``malloc_trim``
(the outputs). The same call is then repeated under ``tracemalloc``, whose peak above the
start, less the outputs it still holds, counts the Python and numpy allocations alone
(PyMaxflow's graphs are invisible to it).

Run: ``python benchmarks/predict_memory.py [--quick] [--label LABEL] [--only NAME ...]``
(``--quick``: the cases of few samples and the short Viterbi calls, written to a temporary
folder); writes ``docs/results/predict_memory.{md,json}``, keeping the runs stored under
other labels in the JSON (the "before" table of a change; ``--only`` replaces those rows of its
label); the page shows the run just stored. ``--render`` rewrites the page from the JSON.
The "before" rows ran the library of commit 8c3a621: ``git archive 8c3a621 pmap_sklearn |
tar -x -C DIR`` and ``PYTHONPATH=DIR python benchmarks/predict_memory.py --label "before
..."`` (each row records the package it imported).
"""

import gc
import tracemalloc
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

#: Sentences the sentence cases fit on; the predicted ones come after them.
FIT_SENTENCES = 2000


def _reset_peak():
    """Reset ``VmHWM``: without it the peaks would be the process's, not the call's."""
    if not reset_peak():
        raise OSError("/proc/self/clear_refs refused: VmHWM cannot be reset on this system")


def _trim():
    from pmap_sklearn._utils import release_freed_memory

    gc.collect()
    release_freed_memory()


def _grid_model():
    from pmap_sklearn import GridStructure, PerturbMAPCRF
    from pmap_sklearn.datasets import make_grid_data

    data = make_grid_data(n_samples=4, shape=(128, 128), random_state=0)
    model = PerturbMAPCRF(GridStructure(), max_iter=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(data.data, data.target)


def _grids(n):
    from pmap_sklearn.datasets import make_grid_data

    return make_grid_data(n_samples=n, shape=(128, 128), random_state=1).data


def _sentence_model():
    from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_ud_treebank, token_features

    data = load_ud_treebank("train")
    vectorizer = SequenceVectorizer(token_features)
    X = vectorizer.fit_transform(data.sentences[:FIT_SENTENCES])
    model = PerturbMAPCRF(random_state=0).fit(X, data.tags[:FIT_SENTENCES])
    return model, vectorizer, data.sentences


def _sentences(n, vectorizer, sentences):
    longest = max(sentences, key=len)
    chosen = [longest, *sentences[FIT_SENTENCES : FIT_SENTENCES + n - 1]]
    return vectorizer.transform(chosen)


def _predict_case(kind, n, method):
    if kind == "grids":
        model, X = _grid_model(), _grids(n)
    else:
        model, vectorizer, sentences = _sentence_model()
        X = _sentences(n, vectorizer, sentences)
    call = getattr(model, method)
    call(X[:2])  # warm-up
    _trim()
    _reset_peak()
    before = resident_mb()
    out, seconds = timed(call, X)
    peak = peak_mb()
    _trim()
    held = resident_mb()
    output_mb = sum(np.asarray(a).nbytes for a in out) / 2**20
    del out
    _trim()
    tracemalloc.start()
    start_traced = tracemalloc.get_traced_memory()[0]
    out = call(X)
    held_traced, peak_traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return dict(
        seconds=seconds,
        nodes=int(sum(np.shape(a)[0] * (np.shape(a)[1] if kind == "grids" else 1) for a in out)),
        longest=int(max(np.shape(a)[0] for a in out)),
        rss_before_mb=before,
        peak_mb=peak,
        during_mb=peak - before,
        beyond_outputs_mb=peak - held,
        outputs_mb=output_mb,
        traced_peak_mb=(peak_traced - start_traced) / 2**20,
        traced_beyond_outputs_mb=(peak_traced - held_traced) / 2**20,
    )


def _fit_case(pipeline):
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_ud_treebank, token_features

    data = load_ud_treebank("train")
    if pipeline:
        model = make_pipeline(SequenceVectorizer(token_features), PerturbMAPCRF(random_state=0))
        X = data.sentences
    else:
        X = SequenceVectorizer(token_features).fit_transform(data.sentences)
        model = PerturbMAPCRF(random_state=0)
    _trim()
    _reset_peak()
    before = resident_mb()
    _, seconds = timed(model.fit, X, data.tags)
    peak = peak_mb()
    coef = (model[-1] if pipeline else model).coef_
    return dict(
        seconds=seconds,
        rss_before_mb=before,
        peak_mb=peak,
        during_mb=peak - before,
        coef_checksum=float(np.abs(coef).sum()),
        coef_digest=__import__("hashlib").sha1(np.ascontiguousarray(coef).tobytes()).hexdigest(),
    )


def _viterbi_case(n):
    """Seconds of Viterbi (``ChainSolver.map``, best of several calls) on the lengths of ``n``
    treebank sentences (the longest first) with random scores over the 17 tags."""
    from pmap_sklearn.datasets import load_ud_treebank
    from pmap_sklearn.solvers import ChainSolver, Potentials

    sentences = load_ud_treebank("train").sentences
    lengths = np.array([len(max(sentences, key=len))] + [len(s) for s in sentences[: n - 1]])
    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    heads = np.setdiff1d(np.arange(offsets[-1]), offsets[1:] - 1)
    potentials = Potentials(
        3 * rng.normal(size=(offsets[-1], 17)),
        np.stack([heads, heads + 1], axis=1),
        rng.normal(size=(17, 17)),
        offsets,
        np.concatenate([[0], np.cumsum(lengths - 1)]),
    )
    solver = ChainSolver()
    solver.map(potentials)
    _, best = timed(solver.map, potentials, repeat=max(5, 4000 // n))
    return dict(seconds=best, nodes=int(lengths.sum()))


#: name -> (what it measures, arguments of the case)
CASES = {
    "8 grids of 128², predict": ("predict", ("grids", 8, "predict")),
    "64 grids of 128², predict": ("predict", ("grids", 64, "predict")),
    "500 sentences, predict": ("predict", ("sentences", 500, "predict")),
    "4,000 sentences, predict": ("predict", ("sentences", 4000, "predict")),
    "500 sentences, predict_marginals": ("predict", ("sentences", 500, "predict_marginals")),
    "4,000 sentences, predict_marginals": ("predict", ("sentences", 4000, "predict_marginals")),
    "treebank fit (12,544 vectorised sentences)": ("fit", (False,)),
    "treebank fit, pipeline from the sentences": ("fit", (True,)),
    "Viterbi, 32 sentences": ("kernel", (32,)),
    "Viterbi, 500 sentences": ("kernel", (500,)),
    "Viterbi, 4,000 sentences": ("kernel", (4000,)),
}

#: ``--quick``: the few-sample side of each pair and the shorter Viterbi calls (no treebank fit).
QUICK = [
    "8 grids of 128², predict",
    "500 sentences, predict",
    "500 sentences, predict_marginals",
    "Viterbi, 32 sentences",
    "Viterbi, 500 sentences",
]

#: the pairs whose ratio the table reports: (few samples, many samples)
PAIRS = [
    ("8 grids of 128², predict", "64 grids of 128², predict"),
    ("500 sentences, predict", "4,000 sentences, predict"),
    ("500 sentences, predict_marginals", "4,000 sentences, predict_marginals"),
]


def run_one(name):
    kind, args = CASES[name]
    maker = {"predict": _predict_case, "fit": _fit_case, "kernel": _viterbi_case}[kind]
    out = maker(*args)
    import pmap_sklearn

    out["package"] = str(Path(pmap_sklearn.__file__).parent)
    print_result(out)


def measure(name):
    load = loads()[0]
    result = run_child(name, child(__file__, name))
    return dict(case=name, load_1min=load, **result)


def table(rows):
    lines = [
        "| case | call (s) | peak RSS of the process (MB) | grew during the call (MB) | "
        "beyond the outputs (MB) | outputs (MB) | traced beyond the outputs (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    kernels = [r for r in rows if "peak_mb" not in r]
    for r in rows:
        if "peak_mb" not in r:
            continue
        beyond = r.get("beyond_outputs_mb")
        lines.append(
            f"| {r['case']} | {r['seconds']:.2f} | {r['peak_mb']:.0f} | {r['during_mb']:.1f} | "
            + (
                f"{beyond:.1f} | {r['outputs_mb']:.1f} | {r['traced_beyond_outputs_mb']:.1f}"
                if beyond is not None
                else "– | – | –"
            )
            + " |"
        )
    by_name = {r["case"]: r for r in rows}
    ratios = []
    for few, many in PAIRS:
        if few in by_name and many in by_name:
            a, b = by_name[few], by_name[many]
            rss = b["beyond_outputs_mb"] / max(a["beyond_outputs_mb"], 1e-9)
            traced = b["traced_beyond_outputs_mb"] / max(a["traced_beyond_outputs_mb"], 1e-9)
            ratios.append(
                f"- {many} / {few}: {rss:.2f}× beyond the outputs (RSS), {traced:.2f}× traced"
            )
    if kernels:
        lines += [
            "",
            "| Viterbi (ChainSolver.map; 17 tags, random scores) | nodes | ms (best) |",
        ]
        lines += ["|---|---|---|"]
        lines += [f"| {r['case']} | {r['nodes']:,} | {1000 * r['seconds']:.2f} |" for r in kernels]
    return "\n".join(lines + ([""] + ratios if ratios else []))


def markdown(label, record):
    """The page: the protocol, the tables of the run ``record`` (stored as ``label``) and how
    to rerun it; its notes, loads and the other labelled runs stay in the JSON."""
    parts = [
        "# Peak memory of predictions and of a treebank fit",
        "",
        "Each case in its own process. Peak RSS: "
        "`VmHWM` reset just before the call (after a warm-up and `malloc_trim`); grew during "
        "the call: above the resident memory before it; beyond the outputs: above what the "
        "process holds after the call (the outputs; after a second `malloc_trim`); traced: "
        "the same call under `tracemalloc` (numpy and Python allocations, not PyMaxflow's "
        "graphs), its peak less the outputs it holds. Grids: PerturbMAPCRF with graph cuts on "
        "`make_grid_data` images of 128² (fitted two epochs on four); sentences: PerturbMAPCRF "
        "(defaults) fitted on 2,000 treebank sentences, predicting the longest sentence of the "
        "split (159 tokens) and the ones after the fitted sentences; treebank fit: "
        "PerturbMAPCRF's defaults on the 12,544 train sentences; Viterbi: `ChainSolver.map`, "
        "the best of several calls on the lengths of treebank sentences (the longest, 159 "
        "tokens, first) with random scores.",
        "",
        table(record["rows"]),
        "",
        rerun(record),
    ]
    return "\n".join(parts) + "\n"


def main():
    args = parser(
        __doc__, "the few-sample cases only", only="cases", label=True, child=1
    ).parse_args()
    if args.one is not None:
        return run_one(args.one[0])
    if args.render:
        return render("predict_memory", markdown)
    names = selected(QUICK if args.quick else CASES, args.only)
    run = Run(__file__, args.quick)
    rows = []
    for name in names:
        row = measure(name)
        rows.append(row)
        print(
            f"{name:<45} {row['seconds']:6.3f} s  peak {row.get('peak_mb', np.nan):5.0f} MB  "
            f"during {row.get('during_mb', np.nan):6.1f}  beyond outputs "
            f"{row.get('beyond_outputs_mb', float('nan')):6.1f}  traced "
            f"{row.get('traced_beyond_outputs_mb', float('nan')):6.1f}  "
            f"load {row['load_1min']:.1f}",
            flush=True,
        )
    record = run.record(rows, only=args.only)
    print("\n" + table(rows))
    if not args.no_write:
        run.store("predict_memory", args.label, record, markdown, _own_rows if args.only else None)


def _own_rows(stored, record):
    """A partial rerun (``--only``) replaces its own rows of the stored run only."""
    kept = {r["case"]: r for r in stored["rows"]}
    kept.update({r["case"]: r for r in record["rows"]})
    return dict(stored, rows=[kept[name] for name in CASES if name in kept])


if __name__ == "__main__":
    main()
