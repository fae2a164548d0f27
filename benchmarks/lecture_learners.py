"""The lecture's learners (Domokos, lecture 11) — two-stage and piecewise training, the
structured SVM by subgradient descent, mean field learned end to end — against the per-node
classifier and the one-stage perturb-and-MAP CRF.

Protocols:

- Part & Clamp (Pletscher & Ong 2012, Table 1; the protocol of ``part_clamp_table.py``): 64×64
  horse masks seen through Kumar & Hebert's bimodal and Gaussian noise, 10 training and 150
  test images, 4-connected grids as ``GraphSample`` with node feature [x_i] and edge features
  [1, |x_i − x_j|]; MAP test error (mean ± std over the images).
- Multi-class grids (the learning protocol of ``multilabel.py``): blocky 24² images of 4
  classes, one-hot features plus N(0, 1) noise, 20 training and 20 test images; test Hamming
  error (α-expansion for K = 4).
- OCR words, the small protocol of ``ocr_table.py`` (train on one fold, test on the other
  nine), the 10 outer folds: mean ± std of the folds' test Hamming error, mean fit seconds
  (one fit per fold).
- Horses (the setting (a) of ``horse_table.py``): Weizmann-horse superpixel graphs, 50 labelled
  training images, 100 test images, node features standardised in a Pipeline; the size-weighted
  Hamming loss ×100 (every learner with its defaults, where the horse table tunes α by
  cross-validation).

Rows: per-node logistic regression alone (its argmax); :class:`~pmap_sklearn.TwoStageCRF` with
its defaults (logistic regression, 5 folds of samples, then ``PerturbMAPCRF`` with its defaults
on the log-probabilities); the same with stage two given the one-stage row's settings;
:class:`~pmap_sklearn.PiecewiseCRF` (defaults); ``StructuredSVM(algorithm="subgradient")`` (its
defaults otherwise: α 1e-3, 50 passes, as the BCFW rows of the other tables);
:class:`~pmap_sklearn.MeanFieldCRF` (defaults); the one-stage ``PerturbMAPCRF`` as its table
runs it. Fit times are the faster of two fits (the
fits are seeded: the same result).

Run: ``python benchmarks/lecture_learners.py [--quick]`` (needs ``../shared/data/weizmann_horse``
and ``ocr``, and scikit-image for the superpixels); writes
``docs/results/lecture_learners.{md,json}`` (``--quick``: 30 Part & Clamp test images, OCR
outer fold 0, 20 test horses; written to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from multilabel import blocky_images
from ocr_table import split as ocr_split
from part_clamp_table import grid_graph
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import (
    ChainStructure,
    GridStructure,
    MeanFieldCRF,
    NodeTransformer,
    PerturbMAPCRF,
    PiecewiseCRF,
    StructuredSVM,
    TwoStageCRF,
    mean_hamming_loss,
    weighted_hamming_loss,
)
from pmap_sklearn.datasets import (
    add_kumar_hebert_noise,
    horse_split,
    load_ocr,
    load_weizmann_horse_masks,
    load_weizmann_horses,
)

#: ``--quick``: Part & Clamp test images, OCR outer folds and test horses.
QUICK = dict(part_clamp_test=30, ocr_folds=1, horses_test=20)


class NodeClassifier(BaseEstimator):
    """Logistic regression on the nodes of the samples, alone (no pairwise term)."""

    def __init__(self):
        self.model = LogisticRegression(max_iter=1000)

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self.model, "coef_")

    @staticmethod
    def _nodes(x):
        features = x.node_features if hasattr(x, "node_features") else x
        return np.asarray(features).reshape(-1, np.shape(features)[-1])

    def fit(self, X, y):
        self.model.fit(
            np.vstack([self._nodes(x) for x in X]), np.concatenate([np.ravel(t) for t in y])
        )
        return self

    def predict(self, X):
        return [self.model.predict(self._nodes(x)) for x in X]


def fit_twice(model, X, y) -> float:
    """The faster of two (seeded, identical) fits, in seconds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return timed(model.fit, X, y, repeat=2)[1]


def errors(model, X, y) -> np.ndarray:
    """Test error % of each image."""
    return 100.0 * np.array(
        [np.mean(np.ravel(p) != np.ravel(t)) for p, t in zip(model.predict(X), y, strict=True)]
    )


def rows(learners, X, y, X_test, y_test) -> list:
    out = []
    for name, model in learners.items():
        seconds = fit_twice(model, X, y)
        wrong = errors(model, X_test, y_test)
        out.append(
            dict(method=name, error=float(wrong.mean()), std=float(wrong.std()), seconds=seconds)
        )
        print(
            f"{name:<60} {wrong.mean():6.2f} ± {wrong.std():5.2f} %  {seconds:6.2f} s", flush=True
        )
    return out


def part_clamp_protocol(n_test=150) -> dict:
    split = horse_split()
    indices = list(split.perm[100:110]) + list(split.perm[:n_test])
    masks = load_weizmann_horse_masks(size=(64, 64), indices=indices).images
    y_all = [m.ravel() for m in masks]
    results = {}
    for noise in ("bimodal", "gaussian"):
        X_all = [grid_graph(x) for x in add_kumar_hebert_noise(masks, noise, random_state=0)]
        one_stage = dict(alpha=1e-3, max_iter=50, tol=None, random_state=0)  # the table's
        learners = {
            "per-node logistic regression": NodeClassifier(),
            "TwoStageCRF (defaults)": TwoStageCRF(
                crf=PerturbMAPCRF("graph", random_state=0), random_state=0
            ),
            "TwoStageCRF, stage two with the one-stage settings": TwoStageCRF(
                crf=PerturbMAPCRF("graph", **one_stage), random_state=0
            ),
            "PiecewiseCRF (defaults)": PiecewiseCRF("graph"),
            "StructuredSVM, subgradient": StructuredSVM(
                "graph", algorithm="subgradient", random_state=0
            ),
            "MeanFieldCRF (defaults)": MeanFieldCRF("graph", random_state=0),
            "PerturbMAPCRF (the Part & Clamp table's row)": PerturbMAPCRF("graph", **one_stage),
        }
        print(f"\nPart & Clamp protocol, {noise} noise")
        results[noise] = rows(learners, X_all[:10], y_all[:10], X_all[10:], y_all[10:])
    return results


def multiclass_protocol() -> list:
    rng = np.random.default_rng(1)  # as multilabel.py
    X, y = blocky_images(rng, 20, 24, 4, 1.0)
    X_test, y_test = blocky_images(rng, 20, 24, 4, 1.0)
    learners = {
        "per-node logistic regression": NodeClassifier(),
        "TwoStageCRF (defaults)": TwoStageCRF(
            crf=PerturbMAPCRF(GridStructure(), random_state=0), random_state=0
        ),
        "PiecewiseCRF (defaults)": PiecewiseCRF(GridStructure()),
        "StructuredSVM, subgradient": StructuredSVM(
            GridStructure(), algorithm="subgradient", random_state=0
        ),
        "MeanFieldCRF (defaults)": MeanFieldCRF(GridStructure(), random_state=0),
        "PerturbMAPCRF (defaults, the multilabel table's row)": PerturbMAPCRF(
            GridStructure(), random_state=0
        ),
    }
    print("\nMulti-class grids (K = 4)")
    return rows(learners, X, y, X_test, y_test)


def ocr_protocol(n_folds=10) -> list:
    ocr = load_ocr()
    learners = {
        "TwoStageCRF (defaults)": lambda: TwoStageCRF(
            crf=PerturbMAPCRF(random_state=0), random_state=0
        ),
        "PiecewiseCRF (defaults)": lambda: PiecewiseCRF(ChainStructure()),
        "StructuredSVM, subgradient": lambda: StructuredSVM(
            algorithm="subgradient", random_state=0
        ),
        "MeanFieldCRF (defaults)": lambda: MeanFieldCRF("chain", random_state=0),
        "PerturbMAPCRF (defaults)": lambda: PerturbMAPCRF(random_state=0),
    }
    results = {name: ([], []) for name in learners}
    print("\nOCR, small protocol")
    for fold in range(n_folds):
        train, test = ocr_split(ocr.folds, "small", fold)
        X, y = [ocr.data[i] for i in train], [ocr.target[i] for i in train]
        X_test, y_test = [ocr.data[i] for i in test], [ocr.target[i] for i in test]
        for name, make in learners.items():
            model = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                _, seconds = timed(model.fit, X, y)
            errors_, times = results[name]
            errors_.append(100 * mean_hamming_loss(y_test, model.predict(X_test)))
            times.append(seconds)
            print(f"fold {fold} {name:<40} {errors_[-1]:6.2f} %  {seconds:5.1f} s", flush=True)
    return [
        dict(method=name, error=float(np.mean(e)), std=float(np.std(e)), seconds=float(np.mean(t)))
        for name, (e, t) in results.items()
    ]


def horse_protocol(n_test=None) -> list:
    horses = load_weizmann_horses(n_jobs=2)
    split = horse_split()
    test = split.test[:n_test]
    X, y = [horses.data[i] for i in split.labeled], [horses.target[i] for i in split.labeled]
    X_test, y_test = [horses.data[i] for i in test], [horses.target[i] for i in test]
    sizes = [x.node_sizes for x in X_test]

    def scaled(model):
        return Pipeline([("scale", NodeTransformer(StandardScaler())), ("model", model)])

    learners = {
        "per-node logistic regression": scaled(NodeClassifier()),
        "TwoStageCRF (defaults)": scaled(
            TwoStageCRF(crf=PerturbMAPCRF("graph", random_state=0), random_state=0)
        ),
        "PiecewiseCRF (defaults)": scaled(PiecewiseCRF("graph")),
        "StructuredSVM, subgradient (balanced loss)": scaled(
            StructuredSVM("graph", algorithm="subgradient", class_weight="balanced", random_state=0)
        ),
        "MeanFieldCRF (defaults)": scaled(MeanFieldCRF("graph", random_state=0)),
        "PerturbMAPCRF (defaults)": scaled(PerturbMAPCRF("graph", random_state=0)),
    }
    print("\nHorses, setting (a): 50 labelled images")
    out = []
    for name, model in learners.items():
        seconds = fit_twice(model, X, y)
        predicted = model.predict(X_test)
        loss = 100 * weighted_hamming_loss(y_test, predicted, sizes)
        each = [
            100 * weighted_hamming_loss([t], [p], [z])
            for t, p, z in zip(y_test, predicted, sizes, strict=True)
        ]
        out.append(dict(method=name, error=float(loss), std=float(np.std(each)), seconds=seconds))
        print(f"{name:<60} {loss:6.2f} %  {seconds:6.2f} s", flush=True)
    return out


def table(rows_: list, reference: str) -> str:
    base = next(r["seconds"] for r in rows_ if r["method"] == reference)
    lines = ["| learner | test error (%) | fit (s) | one-stage fit / this |", "|---|---|---|---|"]
    for r in rows_:
        lines.append(
            f"| {r['method']} | {r['error']:.2f} ± {r['std']:.2f} | {r['seconds']:.2f} | "
            f"{base / r['seconds']:.1f}× |"
        )
    return "\n".join(lines)


def main():
    quick = "30 Part & Clamp test images, OCR outer fold 0, 20 test horses"
    args = parser(__doc__, quick).parse_args()
    run = Run(__file__, args.quick)
    sizes = QUICK if args.quick else dict(part_clamp_test=150, ocr_folds=10, horses_test=None)
    results = dict(
        part_clamp=part_clamp_protocol(sizes["part_clamp_test"]),
        multiclass=multiclass_protocol(),
        ocr=ocr_protocol(sizes["ocr_folds"]),
        horses=horse_protocol(sizes["horses_test"]),
    )
    notes = run.notes()
    run.write_json("lecture_learners.json", dict(minutes=notes["minutes"], run=notes, **results))
    text = "\n".join(
        [
            "# The lecture's learners: two-stage, piecewise, subgradient S-SVM, mean field",
            "",
            "Test error % (mean ± std over the test images); fit seconds, the faster of two fits.",
            "",
            "**Part & Clamp protocol, bimodal noise**",
            "",
            table(results["part_clamp"]["bimodal"], "PerturbMAPCRF (the Part & Clamp table's row)"),
            "",
            "**Part & Clamp protocol, Gaussian noise**",
            "",
            table(
                results["part_clamp"]["gaussian"], "PerturbMAPCRF (the Part & Clamp table's row)"
            ),
            "",
            "**Multi-class blocky grids (K = 4)**",
            "",
            table(results["multiclass"], "PerturbMAPCRF (defaults, the multilabel table's row)"),
            "",
            "**OCR words, small protocol (10 folds; mean fit seconds of one fit per fold)**",
            "",
            table(results["ocr"], "PerturbMAPCRF (defaults)"),
            "",
            "**Horses, setting (a): 50 labelled images (size-weighted Hamming loss ×100)**",
            "",
            table(results["horses"], "PerturbMAPCRF (defaults)"),
            "",
            rerun(notes),
        ]
    )
    print(text)
    run.write("lecture_learners.md", text + "\n")


if __name__ == "__main__":
    main()
