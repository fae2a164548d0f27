"""Part-of-speech tagging (UPOS) on the UD English Web Treebank: the chain learners against
sklearn-crfsuite, on the same token features.

Features: the sklearn-crfsuite tutorial's (:func:`pmap_sklearn.datasets.token_features`: the
word lower-cased, its 2- and 3-letter suffixes, is-upper / is-title / is-digit, the neighbouring
words' lower-case / title / upper, BOS / EOS), plus crfsuite's constant ``bias`` feature (our
chain structures add their own). crfsuite gets the dicts; our learners get them through
:class:`~pmap_sklearn.SequenceVectorizer` (sparse CSR chains, 54k features × 17 tags).
Training on train (12,544 sentences, 204,577 tokens), token accuracy on test (25,096 tokens).

- sklearn-crfsuite: L-BFGS, c1 = c2 = 0.1, 100 iterations (the tutorial's setting);
- PerturbMAPCRF with its defaults (nothing passed but ``random_state``: with sparse features
  they are AdaGrad steps, mini-batches of 32 sentences bucketed by length, lazy sparse steps,
  8 epochs with the iterates of the second half averaged), seeds 0, 1, 2;
- PerturbMAPCRF with the settings chosen on dev (the same, alpha 1e-5, eta0 0.35, 6 epochs),
  with n_jobs = 1 and 2, and with the "optimal" schedule;
- MarginalPerturbMAPCRF: the marginal (Hamming-loss) likelihood by SGD, defaults and tuned;
- ChainCRF: the exact likelihood, with its defaults (on sparse features crfsuite's model and
  tutorial setting: the (feature, tag) pairs seen in training, the elastic net of c1 = c2 =
  0.1 by OWL-QN, 100 iterations), with every (feature, tag) pair instead
  (``all_possible_states=True``), and with the dense features' settings (every pair, L2 only,
  up to 1,000 iterations: the defaults before crfsuite's became them);
- ChainCRF with crfsuite's model exactly: the defaults without the structure's bias column
  (the features hold crfsuite's);
- PerturbMAPCRF with L1: crfsuite's c1 = 0.2, c2 = 0.05 (``crfsuite_penalty``; the setting
  chosen on CoNLL-2002's testa, checked on dev), seeds 0, 1, 2, against its dense defaults;
- StructuredSVM: the structured hinge loss by BCFW with its defaults (on sparse features
  mini-batches of 16 sentences, 10 passes), its dual blocks kept on each sentence's features.

Predict: the test set from its feature dicts (ours: the vectoriser's transform, then predict).
Marginals: each model's default per-token marginals of the test set (crfsuite's and, on chains,
PerturbMAPCRF's and ChainCRF's exact ones; MarginalPerturbMAPCRF's from 100 perturbed MAPs),
their time, expected calibration error (15 bins of the top probability) and log-loss.
Predict and marginal times are the best of three calls, for every learner.

Each learner runs in its own process (its peak resident memory is its own). crfsuite and
PerturbMAPCRF (seed 0), whose fit times the target compares, run twice, the second time after
all the others, and the faster run counts: on this 2-vCPU machine a run can take 30 % longer
than the same run minutes later (PerturbMAPCRF right after crfsuite: 20.8 s, then 15.4 and
16.1 s alone). The SGD learners
are also run epoch by epoch (``warm_start``) to find the first epoch whose test accuracy
reaches crfsuite's: "time to crfsuite's accuracy" is the fit time summed up to that epoch.
Fit times exclude building the feature dicts (done once for all); the vectoriser's time is
reported on its own row.

Run: ``python benchmarks/ud_tagging.py [--quick]`` (needs ``pip install ".[benchmarks]"`` and
``../shared/data/ud_english_ewt``); writes ``docs/results/ud_tagging.{md,json}``
(``--quick``: 2,000 training sentences, written to a temporary folder).
"""

import argparse
import pickle
import tempfile
import warnings
from pathlib import Path

import numpy as np
from _common import Run, child, parser, peak_mb, print_result, rerun, run_child, timed
from _tagging import (
    PREDICT_REPEATS,
    calibration,
    crfsuite_size,
    feature_dicts,
    fit_and_measure,
    fit_crfsuite,
    fit_times_line,
    learner_params,
    measure_learners,
    model_size,
    size_cells,
    sparse_line,
    token_marginals,
)
from sklearn.exceptions import ConvergenceWarning

#: The learners whose fit times are compared by the target: timed twice.
#: PerturbMAPCRF with L1, crfsuite's c1 = 0.2, c2 = 0.05: the setting chosen on CoNLL-2002's
#: testa (``benchmarks/ner.py``). On dev, seeds 0 / 1: 94.06 / 94.00 % with 64k non-zero state
#: weights, against the defaults' 94.21 / 94.12 % with 115k (crfsuite: 93.95 %, 43k); c1, c2 =
#: 0.1, 0.05: 94.05 %, 91k; 0.3, 0.05: 94.02 %, 49k (seed 0).
PMAP_L1 = "PerturbMAPCRF, L1: crfsuite's c1 = 0.2, c2 = 0.05 (chosen on CoNLL-2002)"
CHAIN_CRF = "ChainCRF (defaults)"
TIMED_TWICE = (
    "sklearn-crfsuite (L-BFGS, 100 it.)",
    CHAIN_CRF,
    "PerturbMAPCRF (defaults)",
    "PerturbMAPCRF",
    PMAP_L1,
)

#: What the SGD learners are given, chosen on the dev split: AdaGrad steps (one step size per
#: feature, large for rare ones), mini-batches of 32 sentences and the average of the iterates
#: of the second half of the epochs (``average`` is set to that many samples in ``run_one``).
#: PerturbMAPCRF, dev accuracy after 6 epochs with alpha 1e-6: eta0 0.2 / 0.35 / 0.6 / "auto"
#: (0.8) 94.02 / 94.10 / 94.07 / 93.86 %; alpha 1e-5: 94.12 %; batches of 16: 93.78 %, of 64
#: (8 epochs) 94.04 %. Averaging from the second epoch instead keeps the poor early iterates.
#: MarginalPerturbMAPCRF, dev accuracy after 8 epochs: alpha 1e-5 / 1e-6 / 1e-7 93.36 / 93.91 /
#: 93.80 % (eta0 0.35), eta0 1 93.86 % (alpha 1e-6).
SGD = dict(batch_size=32, learning_rate="adagrad", average="second half", random_state=0, tol=None)
PMAP = dict(SGD, alpha=1e-5, eta0=0.35, max_iter=6)
LEARNERS = {
    "sklearn-crfsuite (L-BFGS, 100 it.)": ("crfsuite", {}),
    "PerturbMAPCRF (defaults)": ("PerturbMAPCRF", dict(random_state=0)),
    "PerturbMAPCRF (defaults), random_state=1": ("PerturbMAPCRF", dict(random_state=1)),
    "PerturbMAPCRF (defaults), random_state=2": ("PerturbMAPCRF", dict(random_state=2)),
    "MarginalPerturbMAPCRF (defaults)": ("MarginalPerturbMAPCRF", dict(random_state=0)),
    PMAP_L1: ("PerturbMAPCRF", dict(random_state=0, crfsuite_c=(0.2, 0.05))),
    f"{PMAP_L1}, random_state=1": ("PerturbMAPCRF", dict(random_state=1, crfsuite_c=(0.2, 0.05))),
    f"{PMAP_L1}, random_state=2": ("PerturbMAPCRF", dict(random_state=2, crfsuite_c=(0.2, 0.05))),
    "PerturbMAPCRF (defaults), marginals at a temperature fitted on dev": (
        "PerturbMAPCRF",
        dict(random_state=0, calibrate_on_dev=True),
    ),
    "PerturbMAPCRF": ("PerturbMAPCRF", PMAP),
    "PerturbMAPCRF, n_jobs=2": ("PerturbMAPCRF", dict(PMAP, n_jobs=2)),
    "PerturbMAPCRF, random_state=1": ("PerturbMAPCRF", dict(PMAP, random_state=1)),
    "PerturbMAPCRF, random_state=2": ("PerturbMAPCRF", dict(PMAP, random_state=2)),
    "PerturbMAPCRF, schedule (batches of 8, eta0 4, 8 epochs)": (
        "PerturbMAPCRF",
        dict(SGD, batch_size=8, learning_rate="optimal", alpha=1e-5, eta0=4.0, max_iter=8),
    ),
    "MarginalPerturbMAPCRF": (
        "MarginalPerturbMAPCRF",
        dict(SGD, alpha=1e-6, eta0=0.35, max_iter=8),
    ),
    # on sparse features crfsuite's model (observed states), c1 = c2 = 0.1 by OWL-QN, 100 it.
    CHAIN_CRF: ("ChainCRF", {}),
    "ChainCRF, every (feature, tag) pair (all_possible_states=True)": (
        "ChainCRF",
        dict(all_possible_states=True),
    ),
    "ChainCRF, the dense features' settings: every pair, L2 only, up to 1,000 it.": (
        "ChainCRF",
        dict(crfsuite_c=(0.0, 0.1), all_possible_states=True, max_iter=1000),
    ),
    # the features hold their bias, so the structure adds none: crfsuite's model exactly
    "ChainCRF (defaults) without the structure's bias column (the features' bias only)": (
        "ChainCRF",
        dict(structure_bias=False),
    ),
    # on sparse features: mini-batches of 16 sentences, 10 passes (the setting chosen on dev)
    "StructuredSVM (defaults)": ("StructuredSVM", dict(random_state=0)),
}


def _accuracy(predicted, truth) -> float:
    return float(np.mean(np.concatenate(predicted) == np.concatenate(truth)))


def run_one(name: str, data_file: str, curve: bool) -> dict:
    """Fit one learner (in its own process) and score it on test."""
    warnings.simplefilter("ignore", ConvergenceWarning)
    with open(data_file, "rb") as handle:
        data = pickle.load(handle)
    kind, params = LEARNERS[name]
    if kind == "crfsuite":
        fitted = fit_crfsuite(data["train_dicts"], data["train_tags"], data["test_dicts"])
        ece, log_loss = calibration(
            fitted["marginals"], np.concatenate(data["test_tags"]), fitted["classes"]
        )
        return dict(
            seconds=fitted["seconds"],
            accuracy=_accuracy(fitted["predicted"], data["test_tags"]),
            peak_mb=peak_mb(),
            held_mb=fitted["held"],
            predict_seconds=fitted["predict_seconds"],
            marginal_seconds=fitted["marginal_seconds"],
            ece=ece,
            log_loss=log_loss,
            **crfsuite_size(fitted["model"]),
        )

    import pmap_sklearn

    X, y = data["train"], data["train_tags"]
    if params.get("average") == "second half":  # tail averaging: start halfway
        params = dict(params, average=len(X) * (params["max_iter"] // 2))
    if curve:  # epoch by epoch, scoring each
        model = getattr(pmap_sklearn, kind)(**dict(params, max_iter=1, warm_start=True))
        curve, total = [], 0.0
        for _ in range(params["max_iter"]):
            total += timed(model.fit, X, y)[1]
            curve.append((total, _accuracy(model.predict(data["test"]), data["test_tags"])))
        return dict(curve=curve)
    params = learner_params(params, len(X))
    calibrate = params.pop("calibrate_on_dev", False)
    model = getattr(pmap_sklearn, kind)(**params)
    seconds, held = fit_and_measure(model, X, y)
    if calibrate:  # temperature scaling of the marginals on the dev split
        model.calibrate_marginals(data["dev"], data["dev_tags"])

    # predicting from the test set's feature dicts, as crfsuite does: the vectoriser's time too
    def vectorise_and_predict(dicts):
        return model.predict(data["vectorizer"].transform(dicts))

    predicted, predict_seconds = timed(
        vectorise_and_predict, data["test_dicts"], repeat=PREDICT_REPEATS
    )
    accuracy = _accuracy(predicted, data["test_tags"])
    row = dict(
        seconds=seconds,
        accuracy=accuracy,
        peak_mb=peak_mb(),
        held_mb=held,
        predict_seconds=predict_seconds,
        **model_size(model, data["vectorizer"]),
    )
    marginals, seconds = token_marginals(model, data["test"])
    if marginals is not None:  # the model's default marginals, timed and calibrated
        row["marginal_seconds"] = seconds
        row["ece"], row["log_loss"] = calibration(
            marginals, np.concatenate(data["test_tags"]), model.classes_
        )
    return row


def measure(name: str, data_file: str, curve: bool = False) -> dict:
    return run_child(name, child(__file__, name, data_file) + ["--curve"] * curve)


def prepare(data_file: str, quick: bool) -> dict:
    from pmap_sklearn import SequenceVectorizer
    from pmap_sklearn.datasets import load_ud_treebank

    train, dev, test = (load_ud_treebank(split) for split in ("train", "dev", "test"))
    if quick:
        train.sentences, train.tags = train.sentences[:2000], train.tags[:2000]

    (train_dicts, test_dicts), feature_seconds = timed(
        lambda: (feature_dicts(train.sentences), feature_dicts(test.sentences))
    )
    vectorizer = SequenceVectorizer()
    train_chains, vectorise_seconds = timed(
        lambda: vectorizer.fit_transform([[{**d} for d in s] for s in train_dicts])
    )
    test_chains = vectorizer.transform(test_dicts)
    data = dict(
        dev=vectorizer.transform(feature_dicts(dev.sentences)),
        dev_tags=dev.tags,
        train_dicts=train_dicts,
        test_dicts=test_dicts,
        train_tags=train.tags,
        test_tags=test.tags,
        train=train_chains,
        test=test_chains,
        vectorizer=vectorizer,
    )
    with open(data_file, "wb") as handle:
        pickle.dump(data, handle)
    return dict(
        sentences=len(train.sentences),
        tokens=int(sum(map(len, train.sentences))),
        test_tokens=int(sum(map(len, test.sentences))),
        features=vectorizer.n_features_out_,
        tags=len({t for tags in train.tags for t in tags}),
        feature_seconds=feature_seconds,
        vectorise_seconds=vectorise_seconds,
    )


def _chain_crf_line(rows: dict, target: dict) -> str:
    """ChainCRF's defaults against crfsuite in this run: the fit-time, weight and accuracy
    ratios the defaults are held to."""
    ours = rows[CHAIN_CRF]
    return (
        f"{CHAIN_CRF} against sklearn-crfsuite in this run: fit "
        f"{ours['seconds'] / target['seconds']:.2f}× its time (each the faster of its two runs), "
        f"{ours['state_weights'] / target['state_weights']:.2f}× its non-zero state weights, "
        f"test accuracy {100 * (ours['accuracy'] - target['accuracy']):+.3f} point."
    )


def _settings() -> str:
    """The SGD learners' parameters, for the table's footnote."""
    return "; ".join(
        f"{name}: " + ", ".join(f"{k}={v}" for k, v in LEARNERS[name][1].items())
        for name in ("PerturbMAPCRF", "MarginalPerturbMAPCRF")
    )


def main():
    cli = parser(__doc__, "2,000 training sentences", child=2)
    cli.add_argument("--curve", action="store_true", help=argparse.SUPPRESS)
    args = cli.parse_args()
    if args.one:
        print_result(run_one(args.one[0], args.one[1], args.curve))
        return
    run = Run(__file__, args.quick)
    with tempfile.TemporaryDirectory() as folder:
        data_file = str(Path(folder) / "data.pkl")
        info = prepare(data_file, args.quick)
        print(
            f"{info['sentences']} sentences, {info['tokens']} tokens, {info['features']} "
            f"features, {info['tags']} tags; dicts {info['feature_seconds']:.1f} s, "
            f"vectoriser {info['vectorise_seconds']:.1f} s",
            flush=True,
        )
        rows = measure_learners(lambda name: measure(name, data_file), LEARNERS, TIMED_TWICE)
        target = rows["sklearn-crfsuite (L-BFGS, 100 it.)"]
        for name in ("PerturbMAPCRF", "MarginalPerturbMAPCRF"):
            curve = measure(name, data_file, curve=True)["curve"]
            rows[name]["curve"] = curve
            reached = [t for t, acc in curve if acc >= target["accuracy"]]
            rows[name]["to_target"] = reached[0] if reached else None
            print(name, "curve", curve, flush=True)
    notes = run.notes()
    lines = [
        "# UPOS tagging on UD English EWT (test token accuracy)",
        "",
        f"{info['sentences']:,} training sentences, "
        f"{info['tokens']:,} tokens, {info['features']:,} features × {info['tags']} tags; "
        f"{info['test_tokens']:,} test tokens. Building the feature dicts took "
        f"{info['feature_seconds']:.1f} s (for every learner), `SequenceVectorizer` "
        f"{info['vectorise_seconds']:.1f} s more for ours.",
        "",
        "| learner | test accuracy (%) | fit (s) | crfsuite's fit time / this | time to crfsuite's "
        "accuracy (s) | peak memory (MB) | held after fit (MB) | predict (s) | marginals (s) | "
        "ECE | log-loss | non-zero weights | saved (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        ratio = target["seconds"] / row["seconds"]
        reach = "—"
        if "curve" in row:
            reach = (
                f"{row['to_target']:.1f}"
                if row["to_target"]
                else (
                    f"not reached in {len(row['curve'])} epochs "
                    f"(best {100 * max(a for _, a in row['curve']):.2f} %)"
                )
            )
        lines.append(
            f"| {name} | {100 * row['accuracy']:.3f} | {row['seconds']:.1f} | "
            f"{ratio:.2f}× | {reach} | {row['peak_mb']:.0f} | {row['held_mb']:.0f} | "
            + " | ".join(
                f"{row[key]:.{digits}f}" if key in row else "—"
                for key, digits in (
                    ("predict_seconds", 2),
                    ("marginal_seconds", 2),
                    ("ece", 4),
                    ("log_loss", 4),
                )
            )
            + " | "
            + size_cells(row)
        )
    lines += [
        "",
        "Non-zero weights: node (feature, tag) / transition weights (crfsuite's state / "
        "transition features; ours count the structure's bias too); saved: crfsuite's model "
        "file, the pickle of our vectoriser and learner.",
        "",
        _settings() + ".",
        "",
        fit_times_line(rows, TIMED_TWICE),
        "",
        _chain_crf_line(rows, target),
        "",
        sparse_line(rows, PMAP_L1, "PerturbMAPCRF (defaults)", target, "accuracy", percent=True),
        "",
        rerun(notes),
    ]
    text = "\n".join(lines)
    print(text)
    run.save("ud_tagging", text + "\n", dict(info=info, rows=rows, sgd=SGD, run=notes))


if __name__ == "__main__":
    main()
