"""Out-of-core tagging: ``partial_fit`` over chunks of the UD English treebank against ``fit``,
its accuracy and its peak memory against the number of chunks streamed.

Every run is :class:`~pmap_sklearn.PerturbMAPCRF` (``random_state=0``) on the tutorial's token
features (:func:`pmap_sklearn.datasets.token_features`) hashed by
``SequenceVectorizer(token_features, n_features=2**18)`` — stateless: fitted on nothing it
keeps, so every chunk has the same columns. The train split (12,544 sentences) is cut into 10
chunks of consecutive sentences; UPOS token accuracy is measured on the test split.

- ``fit``: the default fit on the whole split, vectorised at once;
- ``partial_fit, defaults``: the out-of-core recipe, as many epochs as the default fit (its
  ``sgd_settings_["max_iter"]``, 8), each epoch one ``partial_fit`` call per chunk, the
  chunk vectorised just before its call and dropped after it. ``alpha="auto"`` is 0.2 over
  the sentences given so far (the first chunk's at the first call, the whole split's after
  the first epoch, eight times it at the end) and ``average="auto"`` starts averaging after
  half the epochs of the first chunk (0.4 epochs of the stream);
- ``partial_fit, the fit's alpha``: the same stream with ``alpha`` set to what the fit resolves
  on the whole split (``0.2 / 12,544``);
- ``partial_fit, the fit's alpha and average``: and ``average`` too (the second half of the
  epochs, in samples): the settings a user who knows the stream's size gives.

Memory: the peak resident memory (``VmHWM``) of each run in its own process, the treebank's
raw sentences loaded in every one (the loader reads the split at once; a stream from disk would
read them chunk by chunk); "streamed k chunks" runs the same epochs over the first k chunks
only, so its peak against k shows whether memory grows with the number of chunks. Times are
wall seconds of vectorising and fitting (the fit vectorises the split once, a stream each
chunk once per epoch, as the recipe must), indicative: the machine's other core may be busy.

Run: ``python benchmarks/partial_fit.py [--quick]`` (needs ``../shared/data/ud_english_ewt``);
writes ``docs/results/partial_fit.{md,json}`` (``--quick``: 2,000 training sentences, written
to a temporary folder).
"""

import gc
import time
import warnings

import numpy as np
from _common import Run, child, parser, peak_mb, print_result, rerun, run_child

N_CHUNKS = 10
N_HASHED = 2**18
#: Streams of the first k chunks, for memory against the number of chunks.
STREAMED = (1, 2, 5)


def _data(quick: bool):
    from pmap_sklearn.datasets import load_ud_treebank

    train, test = load_ud_treebank("train"), load_ud_treebank("test")
    n = 2000 if quick else len(train.sentences)
    return train.sentences[:n], train.tags[:n], test.sentences, test.tags


def _vectorizer():
    from pmap_sklearn import SequenceVectorizer
    from pmap_sklearn.datasets import token_features

    return SequenceVectorizer(token_features, n_features=N_HASHED).fit([["a"]])


def _accuracy(model, vectorizer, sentences, tags) -> float:
    predicted = model.predict(vectorizer.transform(sentences))
    truth = np.concatenate([np.asarray(t) for t in tags])
    return float(np.mean(np.concatenate(predicted) == truth))


def one(case: str, quick: bool) -> dict:
    """Measure ``case`` in this process: ``fit``, ``defaults`` or ``objective`` (the streams
    of every chunk), or ``k`` (the default stream of the first k chunks)."""
    from pmap_sklearn import PerturbMAPCRF
    from pmap_sklearn._optim import defaults

    sentences, tags, test_sentences, test_tags = _data(quick)
    vectorizer = _vectorizer()
    classes = np.unique(np.concatenate([np.asarray(t) for t in tags]))
    bounds = np.linspace(0, len(sentences), N_CHUNKS + 1).astype(int)
    chunks = list(zip(bounds[:-1], bounds[1:], strict=True))
    gc.collect()
    start_mb = peak_mb()
    params = dict(random_state=0)
    if case in ("alpha", "objective"):  # what fit resolves on the whole split
        params.update(alpha=defaults.SPARSE_ALPHA / len(sentences))
    if case == "objective":
        params.update(average=len(sentences) * (defaults.SGD_SPARSE["max_iter"] // 2))
    model = PerturbMAPCRF(**params)
    started, vectorising = time.perf_counter(), 0.0
    if case == "fit":
        X = vectorizer.transform(sentences)
        vectorising = time.perf_counter() - started
        model.fit(X, tags)
        n_epochs, n_calls = model.n_iter_, 1
    else:
        use = chunks[: int(case)] if case.isdigit() else chunks
        n_epochs, n_calls, epoch = None, 0, 0
        while n_epochs is None or epoch < n_epochs:
            for a, b in use:
                read = time.perf_counter()
                X = vectorizer.transform(sentences[a:b])  # read, vectorise, fit, drop
                vectorising += time.perf_counter() - read
                model.partial_fit(X, tags[a:b], classes=classes)
                n_calls += 1
                del X
            n_epochs = model.sgd_settings_["max_iter"]  # as many epochs as the default fit
            epoch += 1
    seconds = time.perf_counter() - started
    out = dict(
        case=case,
        seconds=seconds,
        vectorise_seconds=vectorising,
        peak_mb=peak_mb(),
        start_mb=start_mb,
        n_epochs=n_epochs,
        n_calls=n_calls,
        alpha=model.sgd_settings_["alpha"],
        average=model.sgd_settings_["average"],
        eta0=float(model.eta0_),
    )
    if not case.isdigit():
        out["accuracy"] = _accuracy(model, vectorizer, test_sentences, test_tags)
    return out


LABELS = {
    "fit": "fit (whole split)",
    "defaults": f"partial_fit over {N_CHUNKS} chunks, defaults",
    "alpha": f"partial_fit over {N_CHUNKS} chunks, the fit's alpha",
    "objective": f"partial_fit over {N_CHUNKS} chunks, the fit's alpha and average",
}


def markdown(rows: dict, notes: dict, n_train: int) -> str:
    fit = rows["fit"]
    lines = [
        "# partial_fit: out-of-core tagging on the UD English treebank",
        "",
        f"PerturbMAPCRF (`random_state=0`) on the tutorial's token features hashed into "
        f"2^18 columns (`SequenceVectorizer(token_features, n_features=2**18)`), "
        f"{n_train:,} training sentences in {N_CHUNKS} chunks of consecutive sentences, "
        "UPOS token accuracy on the test split. Each `partial_fit` epoch is one call per "
        "chunk, the chunk vectorised just before it; as many epochs as the default fit. "
        "Every run in its own process; times indicative (2 cores, one possibly busy). "
        "Protocol: `benchmarks/partial_fit.py`.",
        "",
        "| run | epochs | calls | alpha | averaging from (samples) | test accuracy | "
        "Δ vs fit (points) | seconds (vectorising) | peak MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case, label in LABELS.items():
        row = rows[case]
        delta = "" if case == "fit" else f"{100 * (row['accuracy'] - fit['accuracy']):+.2f}"
        lines.append(
            f"| {label} | {row['n_epochs']} | {row['n_calls']} | {row['alpha']:.3g} | "
            f"{row['average']} | {100 * row['accuracy']:.2f} % | {delta} | "
            f"{row['seconds']:.1f} ({row['vectorise_seconds']:.1f}) | {row['peak_mb']:.0f} |"
        )
    base = rows["1"]["peak_mb"]
    lines += [
        "",
        "## Peak memory against the number of chunks streamed",
        "",
        "The default stream over the first k chunks (each a tenth of the split), the same "
        "epochs; the process holds the raw sentences of the whole split in every run "
        f"({rows['1']['start_mb']:.0f} MB before fitting, imports included).",
        "",
        "| chunks streamed | calls | seconds | peak MB | × one chunk |",
        "|---|---|---|---|---|",
    ]
    for k in (*map(str, STREAMED), "defaults"):
        row = rows[k]
        n = N_CHUNKS if k == "defaults" else int(k)
        lines.append(
            f"| {n} | {row['n_calls']} | {row['seconds']:.1f} | {row['peak_mb']:.0f} | "
            f"{row['peak_mb'] / base:.2f}× |"
        )
    lines += [
        "",
        f"The fit of the whole split peaks at {fit['peak_mb']:.0f} MB "
        f"({fit['peak_mb'] / base:.2f}× one chunk's stream): its features are all held, but "
        "with hashed features the weights (2^18 × 17 of them, 36 MB a copy, with AdaGrad's "
        "sums and the average) weigh more than the features of the split, and a stream "
        "keeps a copy of its fit state during each call (a call that fails leaves the "
        "model as it was). A stream vectorises and parses each chunk once per epoch, where "
        "the fit does it once; each call also settles the lazy sparse steps and copies the "
        "fit state (about 0.1 s a call here, by a profile of one chunk's calls).",
        "",
        rerun(notes),
        "",
    ]
    return "\n".join(lines)


def main():
    args = parser(__doc__, "2,000 training sentences, to a temporary folder", child=2).parse_args()
    if args.one:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            print_result(one(args.one[0], args.one[1] == "1"))
        return
    run = Run(__file__, quick=args.quick)
    rows = {}
    for case in (*LABELS, *map(str, STREAMED)):
        rows[case] = run_child(case, child(__file__, case, int(args.quick)))
        print(case, rows[case], flush=True)
    n_train = 2000 if args.quick else 12544
    notes = run.notes()
    run.save("partial_fit", markdown(rows, notes, n_train), dict(notes=notes, rows=rows))
    print(markdown(rows, notes, n_train))


if __name__ == "__main__":
    main()
