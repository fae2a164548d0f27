"""Data-parallel fits: ``n_shards`` 1 / 2 / 4 against ``n_jobs`` 1 / 2 on the UD English
treebank, time and UPOS accuracy, with a dask ``LocalCluster`` row.

Every run is the default :class:`~pmap_sklearn.PerturbMAPCRF` (``random_state=0``) in a
pipeline after ``SequenceVectorizer(token_features)`` (the tutorial's token features), fitted
on the whole train split (12,544 sentences) and scored by UPOS token accuracy on the test
split. The pipeline's fit is timed in its two parts: vectorising (the same for every run, one
process) and the CRF's fit. All runs are in one process: joblib's loky workers are started
and import the library before timing (one small sharded fit), the runs are interleaved and
repeated, and the fewest seconds of each are reported (the other core may be busy). The
coefficients of ``n_jobs=1`` and ``n_jobs=2`` at the same ``n_shards`` are checked identical,
and the dask run (``joblib.parallel_config(backend="dask")`` on a ``LocalCluster`` of 2
worker processes, 1 thread each) against loky's. What two cores give at most: one serial
fit alone in a worker against two serial fits at once in two workers.

Run: ``python benchmarks/shards.py [--quick]`` (needs ``../shared/data/ud_english_ewt``);
writes ``docs/results/shards.{md,json}`` (``--quick``: 2,000 training sentences, one repeat,
written to a temporary folder).
"""

import time
import warnings

import numpy as np
from _common import Run, parser, rerun

#: (n_shards, n_jobs) of the loky runs, in the order they are timed.
CASES = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2)]
REPEAT = 5


def _accuracy(vectorizer, model, sentences, tags) -> float:
    predicted = model.predict(vectorizer.transform(sentences))
    truth = np.concatenate([np.asarray(t) for t in tags])
    return float(np.mean(np.concatenate(predicted) == truth))


def _serial_fit_seconds(X, tags, start_at: float) -> float:
    """Seconds of a serial default fit started at the wall-clock time ``start_at`` (so that
    two of them in two workers run at once)."""
    from pmap_sklearn import PerturbMAPCRF

    time.sleep(max(0.0, start_at - time.time()))
    started = time.perf_counter()
    PerturbMAPCRF(random_state=0).fit(X, tags)
    return time.perf_counter() - started


def _fits_alone_and_at_once(X, tags, repeat: int) -> tuple[float, list]:
    """The fewest seconds of a serial fit alone in a worker, and of each of two serial fits
    run at once in two workers, over ``repeat`` interleaved rounds."""
    from joblib import Parallel, delayed

    alone, at_once = np.inf, [np.inf, np.inf]
    with Parallel(n_jobs=2) as parallel:
        for _ in range(repeat):
            for n_fits in (1, 2):
                start_at = time.time() + 3.0  # after the data have reached the workers
                seconds = parallel(
                    delayed(_serial_fit_seconds)(X, tags, start_at) for _ in range(n_fits)
                )
                if n_fits == 1:
                    alone = min(alone, seconds[0])
                else:
                    at_once = [min(a, b) for a, b in zip(at_once, seconds, strict=True)]
    return alone, at_once


def measure(quick: bool) -> dict:
    from joblib import parallel_config

    from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_ud_treebank, token_features

    train, test = load_ud_treebank("train"), load_ud_treebank("test")
    n = 2000 if quick else len(train.sentences)
    sentences, tags = train.sentences[:n], train.tags[:n]
    # both workers started and importing the library: four shards, two of them in the pool
    SequenceVectorizer(token_features, n_jobs=2).fit_transform(sentences[:3000])
    warm = SequenceVectorizer(token_features).fit_transform(sentences[:400])
    PerturbMAPCRF(random_state=0, n_shards=4, n_jobs=2, max_iter=1).fit(warm, tags[:400])
    vectorise = {1: [], 2: []}
    chains = {}
    for _ in range(1 if quick else 3):
        for n_jobs in vectorise:
            vectorizer = SequenceVectorizer(token_features, n_jobs=n_jobs)
            started = time.perf_counter()
            chains[n_jobs] = vectorizer.fit_transform(sentences)
            vectorise[n_jobs].append(time.perf_counter() - started)
    X = chains[1]
    same_chains = all(
        a.shape == b.shape and (a != b).nnz == 0 for a, b in zip(X, chains[2], strict=True)
    )

    rows = {case: dict(n_shards=case[0], n_jobs=case[1], seconds=[]) for case in CASES}
    models = {}
    for _ in range(1 if quick else REPEAT):
        for case, row in rows.items():
            model = PerturbMAPCRF(random_state=0, n_shards=case[0], n_jobs=case[1])
            started = time.perf_counter()
            models[case] = model.fit(X, tags)
            row["seconds"].append(time.perf_counter() - started)
    for case, row in rows.items():
        model = models[case]
        row.update(fit_seconds=min(row["seconds"]), n_iter=model.n_iter_)
        row["accuracy"] = _accuracy(vectorizer, model, test.sentences, test.tags)
        serial = models[(case[0], 1)]
        row["same_as_n_jobs_1"] = bool(np.array_equal(model.coef_, serial.coef_))
    two = models[(2, 1)].coef_
    repeat = 1 if quick else REPEAT
    out = dict(
        n_train=n,
        vectorise_seconds={str(n_jobs): min(seconds) for n_jobs, seconds in vectorise.items()},
        vectorise_same=same_chains,
        rows=list(rows.values()),
    )
    # the two cores' ceiling: one serial fit alone, and two at once, in the workers
    out["alone_seconds"], out["at_once_seconds"] = _fits_alone_and_at_once(X, tags, repeat)
    out["repeat"] = repeat
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        return out
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster),
        parallel_config(backend="dask"),
    ):
        seconds = []
        for _ in range(1 if quick else 2):
            model = PerturbMAPCRF(random_state=0, n_shards=2, n_jobs=2)
            started = time.perf_counter()
            model.fit(X, tags)
            seconds.append(time.perf_counter() - started)
    out["dask"] = dict(
        n_shards=2,
        n_workers=2,
        fit_seconds=min(seconds),
        seconds=seconds,
        same_as_loky=bool(np.array_equal(model.coef_, two)),
    )
    return out


def markdown(result: dict, notes: dict) -> str:
    vectorise = result["vectorise_seconds"]
    rows = result["rows"]
    serial = next(r for r in rows if r["n_shards"] == 1)
    serial_pipeline = serial["fit_seconds"] + vectorise["1"]
    lines = [
        "# Data-parallel fits: n_shards on the UD English treebank",
        "",
        f"The default PerturbMAPCRF (`random_state=0`) after `SequenceVectorizer(token_features)`"
        f", {result['n_train']:,} training sentences, UPOS token accuracy on the test split. "
        "Each epoch every shard runs one pass of the fit's SGD from the mixed weights as one "
        "joblib task (loky; the calling process runs one shard itself while a worker runs the "
        "other, reading its samples and the state from shared files), then the shards' "
        "weights, averages and AdaGrad sums are mixed. The pipeline is the vectoriser with "
        "the row's `n_jobs` (consecutive parts of the corpus on the workers, "
        f"{'the same' if result['vectorise_same'] else 'NOT the same'} matrices for both) "
        "followed by the CRF's fit. "
        f"Seconds: the fewest of {len(serial['seconds'])} interleaved fits in one process, "
        "workers started beforehand. Protocol: `benchmarks/shards.py`.",
        "",
        "| n_shards | n_jobs | epochs | CRF fit (s) | speed-up | vectoriser (s) | "
        "pipeline fit (s) | speed-up | test accuracy | Δ (points) | coef_ as n_jobs=1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        vector = vectorise[str(row["n_jobs"])]
        fit, pipe = row["fit_seconds"], row["fit_seconds"] + vector
        same = row.get("same_as_n_jobs_1", "")
        same = {True: "identical", False: "differ"}.get(same, "")
        lines.append(
            f"| {row['n_shards']} | {row['n_jobs']} | {row['n_iter']} | {fit:.2f} | "
            f"{serial['fit_seconds'] / fit:.2f}× | {vector:.2f} | {pipe:.2f} | "
            f"{serial_pipeline / pipe:.2f}× | "
            f"{100 * row['accuracy']:.2f} % | "
            f"{100 * (row['accuracy'] - serial['accuracy']):+.2f} | {same} |"
        )
    if "dask" in result:
        dask = result["dask"]
        lines += [
            "",
            f'dask (`joblib.parallel_config(backend="dask")`, a `LocalCluster` of '
            f"{dask['n_workers']} worker processes): n_shards=2 in {dask['fit_seconds']:.2f} s "
            f"(CRF fit), coefficients "
            f"{'identical to' if dask['same_as_loky'] else 'different from'} loky's.",
        ]
    alone, at_once = result["alone_seconds"], result["at_once_seconds"]
    lines += [
        "",
        f"The two cores together: a serial fit takes {alone:.2f} s alone in a worker, and "
        f"{at_once[0]:.2f} s and {at_once[1]:.2f} s when two run at once in two workers "
        f"({max(at_once) / alone:.2f}× as long; the fewest seconds of {result['repeat']} "
        "interleaved rounds).",
    ]
    lines += [
        "",
        "What the ratios are made of: a shard's pass takes about half a serial epoch; a "
        "worker reads its shard's samples once (written once per fit, kept for the later "
        "epochs), and each epoch a copy of the fit state (weights, AdaGrad sums, and the "
        "average once averaging starts) from shared files, and writes its state back; the "
        "setup of the fit and the step-size search stay serial. n_shards=2 with n_jobs=1 "
        "measures the cost of copying and "
        "mixing the states alone; 4 shards on 2 cores run two passes per core each epoch. "
        "On a dask cluster the samples and states travel with the tasks.",
        "",
        rerun(notes),
        "",
    ]
    return "\n".join(lines)


def main():
    args = parser(__doc__, "2,000 training sentences, one repeat, to a temporary folder")
    args = args.parse_args()
    run = Run(__file__, quick=args.quick)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = measure(args.quick)
    notes = run.notes()
    run.save("shards", markdown(result, notes), dict(notes=notes, **result))
    print(markdown(result, notes))


if __name__ == "__main__":
    main()
