"""Region confidence on Weizmann-horse superpixel graphs: how well calibrated are the node
marginals and the confidences of whole regions.

The protocol of ``benchmarks/horse_table.py``, setting (a): train on the 50 fully labelled
images of ``horse_split``, score the 100 test images; node features standardised in a Pipeline,
every learner with its defaults (``random_state=0``). For each model:

- node marginals: the top label of ``predict_marginals`` (the estimator's default, the label
  frequencies of 100 perturbed MAPs), right when it is the node's true label;
- regions: the connected regions of the predicted (MAP) segmentation. A region is right when
  every one of its superpixels has the predicted label in the ground truth — the event whose
  probability ``inspection.region_probabilities`` estimates (the frequency over 1,000 draws of
  ``sample``, perturbed MAPs). Compared with two heuristics built from the node marginals: their
  mean over the region (at its label), and their product (the probability if the nodes were
  independent).

A second PerturbMAPCRF (the same seeded fit) gets a temperature fitted by
``calibrate_marginals`` on 50 of the weakly labelled images of the split, with their full masks
(never on test images): the temperature that calibrates the node marginals, and what it does
to the regions.

Scores: expected calibration error over 10 equal-width bins (``metrics.reliability_curve``),
the area under the ROC curve of the confidence as a detector of right regions (how well it ranks
them), the mean confidence and the accuracy. The reliability table is that of the default
PerturbMAPCRF.

Run: ``python benchmarks/segment_confidence.py`` (about a minute once the superpixel features
are cached; the first load computes them, about 40 s on 2 cores); writes
``docs/results/segment_confidence.{md,json}`` (``--quick``: 20 test images, 100 draws,
written to a temporary folder). Skips with a message when the horse images are absent.
"""

import numpy as np
from _common import Run, parser, rerun, timed
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

BINS = 10
N_DRAWS = 1000
#: ``--quick``: the first test images and the draws.
QUICK = dict(test=20, draws=100)


def region_heuristics(predicted, marginals, regions, classes):
    """Mean and product of the predicted label's node marginals over each region."""
    mean, product = [], []
    for labels, marginal, region in zip(predicted, marginals, regions, strict=True):
        at_label = marginal[np.arange(len(labels)), np.searchsorted(classes, labels)]
        counts = np.bincount(region)
        mean.append(np.bincount(region, at_label) / counts)
        with np.errstate(divide="ignore"):
            product.append(np.exp(np.bincount(region, np.log(at_label))))
    return np.concatenate(mean), np.concatenate(product)


def region_correct(predicted, truth, regions):
    """Whether every node of each region has its predicted label in the truth."""
    right = []
    for labels, true, region in zip(predicted, truth, regions, strict=True):
        wrong = np.bincount(region, labels != true, minlength=region.max() + 1)
        right.append(wrong == 0)
    return np.concatenate(right)


def scores(y_true, y_proba, classes=None) -> dict:
    from pmap_sklearn.metrics import expected_calibration_error, reliability_curve

    curve = reliability_curve(y_true, y_proba, classes=classes, n_bins=BINS)
    kept = curve.count > 0
    total = curve.count.sum()
    out = dict(
        ece=expected_calibration_error(y_true, y_proba, classes=classes, n_bins=BINS),
        mean_confidence=float(np.sum(curve.confidence[kept] * curve.count[kept]) / total),
        accuracy=float(np.sum(curve.accuracy[kept] * curve.count[kept]) / total),
        items=int(total),
        curve=dict(
            count=curve.count.tolist(),
            confidence=[None if np.isnan(c) else float(c) for c in curve.confidence],
            accuracy=[None if np.isnan(a) else float(a) for a in curve.accuracy],
        ),
    )
    if classes is None and 0 < np.mean(y_true) < 1:  # events: how well the confidence ranks
        out["auc"] = float(roc_auc_score(y_true, y_proba))
    return out


def main():
    from pmap_sklearn import MarginalPerturbMAPCRF, NodeTransformer, PerturbMAPCRF
    from pmap_sklearn.datasets import horse_split, load_weizmann_horses
    from pmap_sklearn.inspection import region_probabilities

    args = parser(
        __doc__,
        "20 test images, 100 draws",
        n_jobs="processes for the first load",
        data="folder with rgb/ and figure_ground/",
    ).parse_args()
    n_draws = QUICK["draws"] if args.quick else N_DRAWS
    run = Run(__file__, args.quick)
    try:
        horses = load_weizmann_horses(args.data, n_jobs=args.n_jobs)
    except FileNotFoundError as error:
        print(f"skipped: the Weizmann horse images are not there ({error})")
        return
    split = horse_split()
    X_train = [horses.data[i] for i in split.labeled]
    y_train = [horses.target[i] for i in split.labeled]
    test = split.test[: QUICK["test"]] if args.quick else split.test
    X_test = [horses.data[i] for i in test]
    y_test = [horses.target[i] for i in test]
    dev = split.weak[:50]  # for the temperature only
    X_dev, y_dev = [horses.data[i] for i in dev], [horses.target[i] for i in dev]
    rows, reliability = [], {}
    for name, learner in (
        ("PerturbMAPCRF", PerturbMAPCRF("graph", random_state=0)),
        (
            "PerturbMAPCRF, temperature fitted on 50 weak images",
            PerturbMAPCRF("graph", random_state=0),
        ),
        ("MarginalPerturbMAPCRF", MarginalPerturbMAPCRF("graph", random_state=0)),
    ):

        def fit(learner=learner, name=name):
            model = make_pipeline(NodeTransformer(StandardScaler()), learner).fit(X_train, y_train)
            if "temperature" in name:
                model[-1].calibrate_marginals(model[0].transform(X_dev), y_dev)
            return model

        model, fit_seconds = timed(fit)
        classes = model[-1].classes_
        predicted = list(model.predict(X_test))
        marginals = list(model.predict_proba(X_test))
        (regions, probabilities), region_seconds = timed(
            region_probabilities, model, X_test, n_draws=n_draws, random_state=0
        )
        regions = [r.ravel() for r in regions]
        right = region_correct(predicted, y_test, regions)
        mean, product = region_heuristics(predicted, marginals, regions, classes)
        confidences = {
            "node marginals (top label)": None,
            f"region_probabilities ({n_draws:,} draws, {region_seconds:.1f} s)": np.concatenate(
                list(probabilities)
            ),
            "mean of the region's node marginals": mean,
            "product of the region's node marginals": product,
        }
        for what, confidence in confidences.items():
            if confidence is None:
                row = scores(y_test, marginals, classes)
            else:
                row = scores(right, confidence)
            rows.append(dict(model=name, confidence=what, fit_seconds=fit_seconds, **row))
            if name == "PerturbMAPCRF":
                reliability[what] = row["curve"]
            print(
                f"{name:<52} {what:<45} ECE {row['ece']:.3f}  AUC {row.get('auc', np.nan):.3f}"
                f"  confidence {row['mean_confidence']:.3f}  accuracy {row['accuracy']:.3f}"
                f"  ({row['items']} items)",
                flush=True,
            )
    notes = run.notes()
    lines = [
        "# Region confidence: Weizmann horses (100 test superpixel graphs)",
        "",
        "Trained on the 50 labelled images of `horse_split`, "
        "defaults, node features standardised. Nodes: the top label of the marginals. "
        "Regions: the connected regions of the MAP segmentation, right when all their "
        f"superpixels are; ECE over {BINS} bins, AUC of the confidence as a detector of right "
        "regions.",
        "",
        "| model | confidence | ECE | AUC | mean confidence | accuracy | items |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        auc = f"{r['auc']:.3f}" if "auc" in r else "–"
        lines.append(
            f"| {r['model']} | {r['confidence']} | {r['ece']:.3f} | {auc} | "
            f"{r['mean_confidence']:.3f} | {r['accuracy']:.3f} | "
            f"{r['items']:,} |"
        )
    lines += [
        "",
        "Reliability of the default PerturbMAPCRF: per bin of confidence, the items, their mean "
        "confidence and the fraction right.",
        "",
        "| bin | " + " | ".join(reliability) + " |",
        "|---|" + "---|" * len(reliability),
    ]
    edges = np.linspace(0, 1, BINS + 1)
    for b in range(BINS):
        cells = []
        for curve in reliability.values():
            n = curve["count"][b]
            cells.append(
                f"{n}: {curve['confidence'][b]:.2f} → {curve['accuracy'][b]:.2f}" if n else "0"
            )
        lines.append(f"| {edges[b]:.1f}–{edges[b + 1]:.1f} | " + " | ".join(cells) + " |")
    lines += ["", rerun(notes)]
    run.publish(
        "segment_confidence",
        lines,
        dict(load=run.load, minutes=notes["minutes"], run=notes, bins=BINS, rows=rows),
    )


if __name__ == "__main__":
    main()
