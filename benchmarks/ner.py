"""Named-entity recognition on CoNLL-2002 Spanish, sklearn-crfsuite's own tutorial: the chain
learners with their defaults against crfsuite.

The tutorial's protocol: its token features (:func:`pmap_sklearn.datasets.token_features` on
``(word, pos)`` pairs: the word, its suffixes, shape, part-of-speech tag, and the neighbours'),
train on ``esp.train`` (8,323 sentences), score on ``esp.testb``: the tutorial's token-level F1
weighted over the tags other than O, and the shared task's entity-level F1
(:mod:`pmap_sklearn.metrics`). crfsuite runs the tutorial's setting (L-BFGS, c1 = c2 = 0.1, 100
iterations); our learners are given nothing but ``random_state`` (seeds 0, 1, 2 for
PerturbMAPCRF: the worst counts), beside one row whose settings were chosen on ``esp.testa``
(never on testb).

ChainCRF also runs crfsuite's own model and objective: the elastic net of c1 = c2 = 0.1
(``crfsuite_penalty``) by OWL-QN, on the (attribute, label) pairs seen in training
(``all_possible_states=False``, crfsuite's default), for crfsuite's 100 iterations — and on
every pair. PerturbMAPCRF runs with L1 too (c1 = 0.2, c2 = 0.05, chosen on ``esp.testa``;
seeds 0, 1, 2), against its dense defaults. Each model's non-zero weights and the size of the
saved model (crfsuite's model file, the pickle of our pipeline) are counted.

The same models are also scored on ``esp.testa`` (the tuning split), for the spread between
the two test sets; the defaults' scores with seeds 0–11 give the spread the three seeds of the
table are drawn from. Also timed: predicting testb from the feature dicts (crfsuite from its
dicts; ours through the pipeline's vectoriser) and the per-token marginals, with their
expected calibration error (15 bins of the top probability) and log-loss. Predict and marginal
times are the best of three calls, for every learner.

Each learner runs in its own process; crfsuite, PerturbMAPCRF (seed 0, dense and L1) and
the L1 ChainCRF run twice and the faster fit counts. Run: ``python benchmarks/ner.py
[--quick]`` (needs ``pip install ".[benchmarks]"`` and ``../shared/data/conll2002``); writes
``docs/results/ner.{md,json}``. ``--quick``: the first 1,000 training sentences, 500 of testa
and testb, three seeds for the spread; written to a temporary folder.
"""

import pickle
import tempfile
import warnings
from pathlib import Path

import numpy as np
from _common import Run, child, parser, peak_mb, print_result, rerun, run_child, timed
from _tagging import (
    PREDICT_REPEATS,
    broken_bio_transitions,
    calibration,
    crfsuite_size,
    feature_dicts,
    first,
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

CRFSUITE = "sklearn-crfsuite (tutorial: L-BFGS, c1 = c2 = 0.1, 100 it.)"
CHAINCRF_L1 = (
    "ChainCRF, crfsuite's model: c1 = c2 = 0.1, observed states, the features' bias only, "
    "100 it. (OWL-QN)"
)
#: On esp.testa after one fit each (seed 0): alpha 1e-4 / 1e-5 at the default 8 epochs, token
#: F1 0.768 / 0.776; alpha 1e-5 with 12 epochs 0.779, with 16 epochs 0.777.
TUNED = dict(random_state=0, alpha=1e-5, max_iter=12)
#: PerturbMAPCRF with L1 (``crfsuite_c``: crfsuite's c1, c2 through ``crfsuite_penalty``),
#: chosen on esp.testa over seeds 0-2 (mean token F1; the defaults 0.7739 with 85k non-zero
#: state weights): (c1, c2) = (0.1, 0.1), crfsuite's, 0.7700 with 64k; (0.2, 0.1) 0.7680, 45k;
#: (0.2, 0.05) 0.7722, 48k; (0.2, 0.025) 0.7713, 48k; (0.2, 0) 0.7696, 48k; (0.25, 0.05) 0.7690,
#: 39k; (0.3, 0.05) 0.7674, 36k; (0.4, 0.05) 0.7653, 29k.
PMAP_L1 = "PerturbMAPCRF, L1: crfsuite's c1 = 0.2, c2 = 0.05 (chosen on testa)"
PMAP_BIO = "PerturbMAPCRF, BIO constraints"
LEARNERS = {
    CRFSUITE: ("crfsuite", {}),
    "PerturbMAPCRF (defaults)": ("PerturbMAPCRF", dict(random_state=0)),
    "PerturbMAPCRF (defaults), random_state=1": ("PerturbMAPCRF", dict(random_state=1)),
    "PerturbMAPCRF (defaults), random_state=2": ("PerturbMAPCRF", dict(random_state=2)),
    "PerturbMAPCRF, alpha=1e-5, max_iter=12 (chosen on testa)": ("PerturbMAPCRF", TUNED),
    PMAP_L1: ("PerturbMAPCRF", dict(random_state=0, crfsuite_c=(0.2, 0.05))),
    f"{PMAP_L1}, random_state=1": ("PerturbMAPCRF", dict(random_state=1, crfsuite_c=(0.2, 0.05))),
    f"{PMAP_L1}, random_state=2": ("PerturbMAPCRF", dict(random_state=2, crfsuite_c=(0.2, 0.05))),
    "PerturbMAPCRF (defaults), marginals at a temperature fitted on testa": (
        "PerturbMAPCRF",
        dict(random_state=0, calibrate_on_testa=True),
    ),
    PMAP_BIO: ("PerturbMAPCRF", dict(random_state=0, constraints="BIO")),
    "MarginalPerturbMAPCRF (defaults)": ("MarginalPerturbMAPCRF", dict(random_state=0)),
    "MarginalPerturbMAPCRF, BIO constraints": (
        "MarginalPerturbMAPCRF",
        dict(random_state=0, constraints="BIO"),
    ),
    "ChainCRF (defaults)": ("ChainCRF", {}),
    # crfsuite's model and penalty: c1 = c2 = 0.1 (alpha, l1_ratio from crfsuite_penalty), its
    # observed (attribute, label) pairs only, its 100 iterations; the tutorial's features hold
    # their bias, so the structure adds none (crfsuite's model exactly)
    CHAINCRF_L1: (
        "ChainCRF",
        dict(crfsuite_c=(0.1, 0.1), all_possible_states=False, max_iter=100, structure_bias=False),
    ),
    "ChainCRF, the same with the structure's bias column beside the features' bias": (
        "ChainCRF",
        dict(crfsuite_c=(0.1, 0.1), all_possible_states=False, max_iter=100),
    ),
    "ChainCRF, c1 = c2 = 0.1, every (feature, label) pair, 100 it.": (
        "ChainCRF",
        dict(crfsuite_c=(0.1, 0.1), all_possible_states=True, max_iter=100),
    ),
    "StructuredSVM (defaults)": ("StructuredSVM", dict(random_state=0)),
}
TIMED_TWICE = (CRFSUITE, "PerturbMAPCRF (defaults)", CHAINCRF_L1, PMAP_L1, PMAP_BIO)
#: Seeds of the spread line: PerturbMAPCRF's defaults scored (no timing) with each, so the
#: three seeds of the table can be read against the distribution they are drawn from.
SPREAD_SEEDS = range(12)
#: ``--quick``: the first training, testa and testb sentences, and the spread's seeds.
QUICK = dict(train=1000, testa=500, testb=500, seeds=range(3))


def scores(predicted, truth) -> dict:
    from pmap_sklearn.metrics import entity_precision_recall_fscore_support, flat_f1_score

    precision, recall, f1, _, _ = entity_precision_recall_fscore_support(truth, predicted)
    flat_truth, flat_pred = np.concatenate(truth), np.concatenate(predicted)
    return dict(
        token_f1=flat_f1_score(truth, predicted, exclude="O"),
        entity_precision=precision,
        entity_recall=recall,
        entity_f1=f1,
        accuracy=float(np.mean(flat_truth == flat_pred)),
    )


def run_one(name: str, data_file: str) -> dict:
    """Fit one learner (in its own process) and score it on testb."""
    warnings.simplefilter("ignore", ConvergenceWarning)
    with open(data_file, "rb") as handle:
        data = pickle.load(handle)
    kind, params = LEARNERS[name]
    truth = data["test_tags"]
    if kind == "crfsuite":
        fitted = fit_crfsuite(data["train_dicts"], data["train_tags"], data["test_dicts"])
        model, seconds, held = fitted["model"], fitted["seconds"], fitted["held"]
        predicted, predict_seconds = fitted["predicted"], fitted["predict_seconds"]
        marginals, marginal_seconds = fitted["marginals"], fitted["marginal_seconds"]
        classes = fitted["classes"]
        size = crfsuite_size(model)
    else:
        from sklearn.pipeline import make_pipeline

        import pmap_sklearn

        params = learner_params(params, len(data["train_tags"]))
        calibrate = params.pop("calibrate_on_testa", False)
        model = make_pipeline(
            pmap_sklearn.SequenceVectorizer(), getattr(pmap_sklearn, kind)(**params)
        )
        train_tags = data["train_tags"]
        if params.get("structure") is not None and params["structure"].constraints:
            from pmap_sklearn.metrics import to_bio_tags

            # the one training tag that breaks BIO, read as conlleval reads it
            train_tags = [to_bio_tags(tags) for tags in train_tags]
        seconds, held = fit_and_measure(model, data["train_dicts"], train_tags)
        if calibrate:  # temperature scaling of the marginals on the tuning split
            model[-1].calibrate_marginals(model[0].transform(data["dev_dicts"]), data["dev_tags"])
        predicted, predict_seconds = timed(
            model.predict, data["test_dicts"], repeat=PREDICT_REPEATS
        )
        classes = model[-1].classes_
        marginals, marginal_seconds = token_marginals(model, data["test_dicts"])
        size = model_size(model)
    on_testa = scores(list(model.predict(data["dev_dicts"])), data["dev_tags"])
    row = dict(
        scores(list(predicted), truth),
        broken_transitions=broken_bio_transitions(predicted),
        testa_token_f1=on_testa["token_f1"],
        testa_entity_f1=on_testa["entity_f1"],
        seconds=seconds,
        predict_seconds=predict_seconds,
        marginal_seconds=marginal_seconds,
        peak_mb=peak_mb(),
        held_mb=held,
        **size,
    )
    if marginals is not None:
        row["ece"], row["log_loss"] = calibration(marginals, np.concatenate(truth), classes)
    return row


def seed_spread(data_file: str, seeds=SPREAD_SEEDS) -> dict:
    """Testb and testa scores of ``PerturbMAPCRF``'s defaults with each of ``seeds``."""
    from pmap_sklearn import PerturbMAPCRF, SequenceVectorizer

    with open(data_file, "rb") as handle:
        data = pickle.load(handle)
    vectorizer = SequenceVectorizer().fit(data["train_dicts"])  # the same for every seed
    X, X_testb, X_testa = (
        vectorizer.transform(data[key]) for key in ("train_dicts", "test_dicts", "dev_dicts")
    )
    spread = {}
    for seed in seeds:
        model = PerturbMAPCRF(random_state=seed).fit(X, data["train_tags"])
        testb = scores(list(model.predict(X_testb)), data["test_tags"])
        testa = scores(list(model.predict(X_testa)), data["dev_tags"])
        spread[seed] = dict(
            token_f1=testb["token_f1"],
            entity_f1=testb["entity_f1"],
            testa_token_f1=testa["token_f1"],
            testa_entity_f1=testa["entity_f1"],
        )
    return spread


def spread_line(spread: dict, crfsuite: dict) -> str:
    """One sentence: the range and mean of each score over the seeds, and how many seeds are
    below crfsuite's."""

    def summary(key):
        values = np.array([row[key] for row in spread.values()])
        below = int(np.sum(values < crfsuite[key]))
        return (
            f"{values.min():.4f}–{values.max():.4f}, mean {values.mean():.4f} "
            f"(crfsuite {crfsuite[key]:.4f}; {below} of {len(values)} seeds below it)"
        )

    return (
        f"Seed spread of PerturbMAPCRF's defaults, seeds {min(spread)}–{max(spread)} (scores "
        f"only): testb token F1 {summary('token_f1')}, entity F1 {summary('entity_f1')}; "
        f"testa token F1 {summary('testa_token_f1')}, entity F1 {summary('testa_entity_f1')}."
    )


def measure(name: str, data_file: str) -> dict:
    return run_child(name, child(__file__, name, data_file))


def prepare(data_file: str, quick: bool = False) -> dict:
    from pmap_sklearn.datasets import load_conll2002

    train, dev, test = (load_conll2002("esp", split) for split in ("train", "testa", "testb"))
    if quick:
        train, dev, test = (
            first(bunch, QUICK[split])
            for bunch, split in ((train, "train"), (dev, "testa"), (test, "testb"))
        )

    def build():  # the tutorial's features, its constant bias included
        return dict(
            dev_dicts=feature_dicts(dev.tokens),
            dev_tags=dev.tags,
            train_dicts=feature_dicts(train.tokens),
            test_dicts=feature_dicts(test.tokens),
            train_tags=train.tags,
            test_tags=test.tags,
        )

    data, feature_seconds = timed(build)
    with open(data_file, "wb") as handle:
        pickle.dump(data, handle)
    return dict(
        sentences=len(train.tags),
        tokens=int(sum(map(len, train.tags))),
        test_tokens=int(sum(map(len, test.tags))),
        feature_seconds=feature_seconds,
    )


def _cell(value, digits=4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def main():
    quick = (
        f"the first {QUICK['train']:,} training and {QUICK['testa']} testa / testb sentences, "
        f"seeds 0-{len(QUICK['seeds']) - 1} for the spread"
    )
    args = parser(__doc__, quick, child=2).parse_args()
    if args.one:
        print_result(run_one(*args.one))
        return
    run = Run(__file__, args.quick)
    with tempfile.TemporaryDirectory() as folder:
        data_file = str(Path(folder) / "data.pkl")
        info = prepare(data_file, args.quick)
        rows = measure_learners(lambda name: measure(name, data_file), LEARNERS, TIMED_TWICE)
        spread = seed_spread(data_file, QUICK["seeds"] if args.quick else SPREAD_SEEDS)
    notes = run.notes()
    target = rows[CRFSUITE]
    lines = [
        "# Named entities: CoNLL-2002 Spanish (esp.testb)",
        "",
        f"{info['sentences']:,} training sentences, {info['tokens']:,} tokens; "
        f"{info['test_tokens']:,} test tokens. Token F1: "
        "the tutorial's, weighted over the tags other than O; entity P / R / F1: the shared "
        "task's (conlleval). Predict: testb from its feature dicts (ours through the "
        "pipeline's vectoriser); marginals: per-token marginals of testb, their expected "
        "calibration error (ECE) and log-loss; held after fit: the growth of the process's "
        "resident memory over the fit (the model, plus freed memory the allocator kept). "
        "The testa columns score the same models on the "
        "tuning split (where the tuned row's settings were chosen). Non-zero weights: node "
        "(feature, label) / transition weights (crfsuite's state / transition features; ours "
        "count the structure's bias too); saved: crfsuite's model file, the pickle of our "
        "fitted pipeline. Broken: predicted testb tags that break the BIO scheme (an I-X "
        'not after B-X or I-X); the BIO rows fit `ChainStructure(constraints="BIO")` on the '
        "training tags with their one I-X that opens an entity read as B-X.",
        "",
        "| learner | token F1 | entity P | entity R | entity F1 | broken | testa: token F1 | "
        "testa: "
        "entity F1 | fit (s) | crfsuite's fit / this | predict (s) | marginals (s) | ECE | "
        "log-loss | peak memory (MB) | held after fit (MB) | non-zero weights | saved (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['token_f1']:.4f} | {row['entity_precision']:.4f} | "
            f"{row['entity_recall']:.4f} | {row['entity_f1']:.4f} | "
            f"{row.get('broken_transitions', '—')} | {row['testa_token_f1']:.4f} | "
            f"{row['testa_entity_f1']:.4f} | {row['seconds']:.1f} | "
            f"{target['seconds'] / row['seconds']:.2f}× | {row['predict_seconds']:.2f} | "
            f"{_cell(row['marginal_seconds'], 2)} | {_cell(row.get('ece'))} | "
            f"{_cell(row.get('log_loss'))} | {row['peak_mb']:.0f} | {row['held_mb']:.0f} | "
            + size_cells(row)
        )
    lines += ["", fit_times_line(rows, TIMED_TWICE), "", spread_line(spread, target)]
    l1 = rows[CHAINCRF_L1]
    lines += [
        "",
        f"{CHAINCRF_L1} against crfsuite: token F1 {l1['token_f1']:.4f} against "
        f"{target['token_f1']:.4f}, {l1['state_weights'] / target['state_weights']:.2f}× its "
        f"non-zero state weights, {l1['saved_mb'] / target['saved_mb']:.2f}× its saved size, "
        f"{l1['seconds'] / target['seconds']:.2f}× its fit time.",
    ]
    free, bound = rows["PerturbMAPCRF (defaults)"], rows[PMAP_BIO]
    lines += [
        "",
        f"{PMAP_BIO} against the defaults (seed 0): entity F1 {bound['entity_f1']:.4f} against "
        f"{free['entity_f1']:.4f} ({bound['entity_f1'] - free['entity_f1']:+.4f}), "
        f"{bound['broken_transitions']} broken tags against {free['broken_transitions']}, fit "
        f"{bound['seconds'] / free['seconds']:.2f}× the unconstrained one's (the faster of two "
        "runs each).",
    ]
    lines += [
        "",
        sparse_line(rows, PMAP_L1, "PerturbMAPCRF (defaults)", target, "token_f1"),
        "",
        rerun(notes),
    ]
    text = "\n".join(lines)
    print(text)
    run.save("ner", text + "\n", dict(info=info, rows=rows, seed_spread=spread, run=notes))


if __name__ == "__main__":
    main()
