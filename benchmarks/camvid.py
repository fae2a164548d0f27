"""CamVid road scenes (11 classes, 480×360): perturb-and-MAP CRFs on superpixel graphs against
independent per-superpixel classifiers, a hand-set Potts weight and DenseCRF.

Protocol: the standard split (367 training, 101 validation, 233 test frames); SLIC superpixels
(about 1,000 a frame) described by :class:`~pmap_sklearn.superpixels.SuperpixelGraphs` with
its defaults (140 node features, 3 edge features), node labels the majority of each
superpixel's labelled pixels (void superpixels: ``ignore_label=11``). Scores are over the test
pixels, void excluded: global accuracy, class-average accuracy, mean IoU; the expected
calibration error of the marginals over the test superpixels (15 bins). The validation split
chooses the hand-set weights (Potts, DenseCRF); what :class:`~pmap_sklearn.TwoStageCRF`
chooses, it chooses on training frames; nothing is chosen on test.

Rows:

- per-superpixel logistic regression (standardised features) and
  ``HistGradientBoostingClassifier(class_weight="balanced")``, each superpixel on its own (the
  latter is stage one of every two-stage row);
- two-stage CRFs: :class:`~pmap_sklearn.TwoStageCRF` with its defaults around each learner
  (its own defaults, ``ignore_label=11``): the out-of-fold log-probabilities of stage one,
  stage two's unary form, the share of its learned pairwise weights and class offsets on
  the log-probabilities chosen on the last fold's frames, its marginals' temperature fitted
  there. The main rows' folds are 5 blocks of
  consecutive frames (``cv=KFold(5)``), so a frame's neighbours in time are on its side of
  the fold; the rows marked *shuffled* take shuffled folds of frames (the previous protocol,
  whose out-of-fold probabilities are those of near-copies). Rows marked *as fitted* keep
  stage two as the likelihood fitted it (``unary="matrix"`` or ``"scale"``,
  ``pairwise_scale=1``, the settings of earlier versions). Fit seconds are stage two's
  (the choice included; stage one's fits are cached across rows and given once);
- the boosted classifier's probabilities with a Potts weight λ on the shared boundary length,
  set by hand on val, decoded by α-expansion (inference only);
- the boosted classifier's probabilities painted on the pixels with DenseCRF (Krähenbühl &
  Koltun 2011; ``pydensecrf``: Gaussian kernel sxy 3 weight 3, bilateral sxy 80 srgb 13 with
  its weight set on val, 5 iterations), if pydensecrf is installed.

Run: ``python benchmarks/camvid.py`` (needs ``../shared/data/camvid`` and scikit-image; the
superpixel graphs are cached in ``~/.cache/pmap_sklearn`` after the first run, about 2 minutes
on 2 cores); writes ``docs/results/camvid.{md,json,png}``. ``--quick`` runs a few frames and
prints its JSON (writes nothing).
Stage one's fits are cached on disk (``~/.cache/pmap_sklearn/camvid_classifiers``, about 30
minutes of fits on 2 cores) and its test and val probabilities in memory for the run
(:class:`Memoised`), so each two-stage row costs its stage two only.
"""

import dataclasses
import hashlib
import json
import pickle
import time
import warnings
from pathlib import Path

import numpy as np
from _common import Run, parser, pyplot, rerun, save_figure, timed
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import (
    MarginalPerturbMAPCRF,
    MeanFieldCRF,
    PerturbMAPCRF,
    PiecewiseCRF,
    StructuredSVM,
    TwoStageCRF,
)
from pmap_sklearn.datasets import load_camvid
from pmap_sklearn.metrics import expected_calibration_error, segmentation_scores
from pmap_sklearn.superpixels import SuperpixelGraphs, to_pixels

VOID = 11
K = 11
#: The hand-set weights searched on val.
POTTS_WEIGHTS = (0.25, 0.5, 1.0, 2.0, 4.0)
DENSE_WEIGHTS = (2.0, 5.0, 10.0)
SEED = 0


def stacked(data):
    features = np.vstack([g.node_features for g in data.data])
    labels = np.concatenate(data.target)
    frame = np.concatenate([np.full(g.n_nodes, i) for i, g in enumerate(data.data)])
    return features, labels, frame


def per_frame(values, data):
    return np.split(values, np.cumsum([g.n_nodes for g in data.data])[:-1])


def scores_of(truth, painted) -> dict:
    """The three scores (%) of pixel labellings, void excluded."""
    s = segmentation_scores(truth, painted, labels=np.arange(K), void=VOID)
    out = {key: 100 * s[key] for key in ("global_accuracy", "class_average_accuracy", "mean_iou")}
    out["class_accuracy"] = [float(100 * a) for a in s["class_accuracy"]]
    return out


def pixel_scores(data, node_labels) -> dict:
    """Scores over the pixels of node labellings painted on the frames."""
    painted = [to_pixels(g, p) for g, p in zip(data.data, node_labels, strict=True)]
    return scores_of(data.pixel_target, painted)


def calibration(data, marginals) -> float:
    return expected_calibration_error(data.target, marginals, void=VOID)


def with_log_proba(data, proba):
    return [
        dataclasses.replace(g, node_features=np.log(np.maximum(p, 1e-6)))
        for g, p in zip(data.data, per_frame(proba, data), strict=True)
    ]


def boosted():
    return HistGradientBoostingClassifier(class_weight="balanced", random_state=SEED)


def feature_seconds(data, n_frames=10) -> float:
    """Seconds per frame of reading a frame and building its superpixel graph (no cache)."""
    from skimage import io

    def frames():
        for file in data.filenames[:n_frames]:
            SuperpixelGraphs().transform([io.imread(file)])

    return timed(frames)[1] / n_frames


def hand_potts(template, weight):
    """A copy of a fitted graph CRF whose unary scores are the log-probabilities themselves
    and whose Potts weight is ``-weight`` times the shared boundary length (edge feature 2)."""
    import copy

    model = copy.deepcopy(template)
    unary, pairwise = model.structure_.unpack(model.coef_)
    unary[:] = 0
    unary[:K] = np.eye(K)
    pairwise[:] = [0.0, 0.0, -weight]
    return model


def densecrf(photo_file, pixel_proba, bilateral_weight):
    import pydensecrf.densecrf as dcrf
    from skimage import io

    image = np.ascontiguousarray(io.imread(photo_file)[..., :3])
    height, width, k = pixel_proba.shape
    crf = dcrf.DenseCRF2D(width, height, k)
    energy = -np.log(np.clip(pixel_proba, 1e-6, 1)).transpose(2, 0, 1).reshape(k, -1)
    crf.setUnaryEnergy(np.ascontiguousarray(energy, dtype=np.float32))
    crf.addPairwiseGaussian(sxy=3, compat=3)
    crf.addPairwiseBilateral(sxy=80, srgb=13, rgbim=image, compat=bilateral_weight)
    return np.array(crf.inference(5)).reshape(k, height, width).argmax(axis=0)


def dense_painted(data, proba, weight, frames) -> list:
    """DenseCRF's pixel labelling of the frames ``frames`` from the node probabilities."""
    node_proba = per_frame(proba, data)
    return [
        densecrf(data.filenames[i], to_pixels(data.data[i], node_proba[i]), weight) for i in frames
    ]


class Memoised(BaseEstimator, ClassifierMixin):
    """``estimator`` whose fits and probabilities are kept for the run, keyed by the data: the
    two-stage rows fit stage one's folds and final classifier once, and predict the test and
    val frames' probabilities once, however many learners and rows use them. The fits are
    also kept on disk (``CACHE``, keyed by the estimator's parameters and the data), with
    the seconds they took, so a rerun does not refit stage one."""

    _fits: dict = {}
    _probabilities: dict = {}
    _spent = [0.0]  # seconds in fit this run, fitting or reading the cache

    def __init__(self, estimator=None):
        self.estimator = estimator

    def fit(self, X, y):
        X, y = np.asarray(X), np.asarray(y)
        key = (repr(self.estimator), _data_key(X), y.tobytes())
        if key not in Memoised._fits:
            started = time.perf_counter()
            Memoised._fits[key] = _cached_fit(self.estimator, X, y, key)
            Memoised._spent[0] += time.perf_counter() - started
        self.fitted_, self.seconds_ = Memoised._fits[key]
        self.classes_ = self.fitted_.classes_
        return self

    def predict_proba(self, X):
        X = np.asarray(X)
        key = (id(self.fitted_), _data_key(X))
        if key not in Memoised._probabilities:
            Memoised._probabilities[key] = self.fitted_.predict_proba(X)
        return Memoised._probabilities[key]

    @classmethod
    def clear(cls) -> None:
        cls._fits.clear()
        cls._probabilities.clear()

    @classmethod
    def seconds(cls) -> float:
        """Seconds the distinct fits so far took (when they were made, if cached)."""
        return sum(seconds for _, seconds in cls._fits.values())

    @classmethod
    def spent(cls) -> float:
        """Seconds spent in ``fit`` this run."""
        return cls._spent[0]


#: Where stage one's fits are kept between runs (a fit of the boosted classifier on four
#: fifths of the training superpixels takes about 3 minutes on 2 cores).
CACHE = Path.home() / ".cache" / "pmap_sklearn" / "camvid_classifiers"


def _cached_fit(estimator, X, y, key) -> tuple:
    """``(fitted clone of estimator, seconds of its fit)``, from ``CACHE`` when a run made it."""
    path = CACHE / f"{hashlib.sha1(pickle.dumps(key)).hexdigest()}.pkl"
    if path.exists():
        with path.open("rb") as file:
            return pickle.load(file)
    fitted = timed(clone(estimator).fit, X, y)
    CACHE.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        pickle.dump(fitted, file)
    return fitted


def _data_key(X) -> tuple:
    """A cheap fingerprint of a feature matrix (its shape, column sums and a sample of rows)."""
    return (X.shape, X.sum(axis=0).tobytes(), X[:: max(len(X) // 97, 1)].tobytes())


LEARNERS = {
    "PerturbMAPCRF": lambda: PerturbMAPCRF("graph", random_state=SEED),
    "MarginalPerturbMAPCRF": lambda: MarginalPerturbMAPCRF("graph", random_state=SEED),
    "StructuredSVM": lambda: StructuredSVM("graph", random_state=SEED),
    "MeanFieldCRF": lambda: MeanFieldCRF("graph", random_state=SEED),
    "PiecewiseCRF": lambda: PiecewiseCRF("graph"),
}
#: (row name, learner, folds, TwoStageCRF settings besides its defaults); folds "consecutive"
#: (5 blocks of consecutive frames, the main rows) or "shuffled" (5 shuffled folds of frames).
AS_FITTED = dict(unary="matrix", pairwise_scale=1.0)
RECIPE = dict(unary="scale", class_weight="balanced", pairwise_scale=1.0)
TWO_STAGE = [
    *[(name, name, "consecutive", {}) for name in LEARNERS],
    ("PerturbMAPCRF, as fitted", "PerturbMAPCRF", "consecutive", AS_FITTED),
    (
        "PerturbMAPCRF, as fitted, unary='scale', class_weight='balanced'",
        "PerturbMAPCRF",
        "consecutive",
        RECIPE,
    ),
    ("PerturbMAPCRF, shuffled", "PerturbMAPCRF", "shuffled", {}),
    ("PerturbMAPCRF, shuffled, as fitted", "PerturbMAPCRF", "shuffled", AS_FITTED),
]


def figure(test, rows_labels, entropy, path, frames=(0, 90, 180)):
    plt = pyplot()
    from matplotlib.colors import ListedColormap
    from skimage import io

    colours = ListedColormap(
        np.array(
            [
                [128, 128, 128],
                [128, 0, 0],
                [192, 192, 128],
                [128, 64, 128],
                [60, 40, 222],
                [128, 128, 0],
                [192, 128, 128],
                [64, 64, 128],
                [64, 0, 128],
                [64, 64, 0],
                [0, 128, 192],
                [0, 0, 0],
            ]
        )
        / 255.0
    )  # fmt: skip  (SegNet's CamVid colours; black = void)
    columns = ["frame", "truth", *rows_labels, "marginal entropy"]
    fig, axes = plt.subplots(
        len(frames), len(columns), figsize=(3.2 * len(columns), 2.5 * len(frames))
    )
    for row, i in enumerate(frames):
        graph = test.data[i]
        panels = [io.imread(test.filenames[i]), test.pixel_target[i]]
        panels += [to_pixels(graph, labels[i]) for labels in rows_labels.values()]
        panels.append(to_pixels(graph, entropy[i]))
        for col, (name, panel) in enumerate(zip(columns, panels, strict=True)):
            ax = axes[row, col]
            if name == "frame":
                ax.imshow(panel)
            elif name == "marginal entropy":
                ax.imshow(panel, cmap="magma", vmin=0, vmax=np.log(K))
            else:
                ax.imshow(panel, cmap=colours, vmin=0, vmax=11, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(name, fontsize=10)
    save_figure(fig, path, 80)


def main() -> None:
    quick = parser(__doc__, "a few frames (a smoke test); writes nothing").parse_args().quick
    # the fits that do not converge (logistic regression, stage two's SGD) say so every row
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, quick)
    pick = (lambda n: list(range(0, n, 20))) if quick else (lambda n: None)
    data = {
        split: load_camvid(split, indices=pick(n), n_jobs=2)
        for split, n in (("train", 367), ("val", 101), ("test", 233))
    }
    train, val, test = data["train"], data["val"], data["test"]
    results = {"feature_seconds_per_frame": feature_seconds(test), "rows": []}
    F, y, _ = stacked(train)
    known = y != VOID
    F_val, F_test = (stacked(d)[0] for d in (val, test))
    n_frames = len(test.data)

    def add(method, labels, fit=None, predict=None, marginals=None, scores=None, **extra):
        scores = pixel_scores(test, labels) if scores is None else scores
        row = dict(method=method, **scores, fit=fit, predict_ms=predict)
        if marginals is not None:
            row["ece"] = calibration(test, marginals)
        row.update(extra)
        results["rows"].append(row)
        print(
            f"{method:<58} {row['global_accuracy']:5.1f} {row['class_average_accuracy']:5.1f} "
            f"{row['mean_iou']:5.1f}  ece {row.get('ece', float('nan')):.3f}  fit {fit}  "
            f"predict {predict}",
            flush=True,
        )
        return row

    # ---- independent classifiers -------------------------------------------------------------
    logistic = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    _, seconds = timed(logistic.fit, F[known], y[known])
    proba, predict = timed(logistic.predict_proba, F_test)
    add(
        "per-superpixel logistic regression",
        [p.argmax(1) for p in per_frame(proba, test)],
        seconds,
        1000 * predict / n_frames,
        per_frame(proba, test),
    )
    Memoised.clear()
    classifier = Memoised(boosted())  # the final classifier of the two-stage rows too
    classifier_seconds = classifier.fit(F[known], y[known]).seconds_
    proba_test, predict = timed(classifier.predict_proba, F_test)
    proba_val = classifier.predict_proba(F_val)
    add(
        "per-superpixel HistGradientBoosting, balanced",
        [p.argmax(1) for p in per_frame(proba_test, test)],
        classifier_seconds,
        1000 * predict / n_frames,
        per_frame(proba_test, test),
    )

    # ---- two-stage CRFs: TwoStageCRF around each learner ------------------------------------
    X_val = with_log_proba(val, proba_val)
    folds = {"consecutive": KFold(5), "shuffled": KFold(5, shuffle=True, random_state=SEED)}
    labels_of, entropy, fitted = {}, None, {}
    for name, learner, fold, settings in TWO_STAGE:
        model = TwoStageCRF(
            Memoised(boosted()),
            LEARNERS[learner](),
            cv=folds[fold],
            ignore_label=VOID,
            random_state=SEED,
            **settings,
        )
        spent = Memoised.spent()
        _, seconds = timed(model.fit, train.data, train.target)
        seconds -= Memoised.spent() - spent  # stage two's: the new stage-one fits apart
        X_test, X_val_row = (model.stage_two_samples(d.data) for d in (test, val))
        labels, predict = timed(model.crf_.predict, X_test)
        marginals, extra = None, {}
        try:
            marginals, marginal_seconds = timed(model.crf_.predict_marginals, X_test)
            extra["marginals_s_per_frame"] = marginal_seconds / n_frames
        except ValueError:  # a learner without marginals (StructuredSVM)
            pass
        unary, pairwise = model.crf_.structure_.unpack(model.crf_.coef_)
        extra["pairwise_weights"] = [float(v) for v in pairwise]
        if model.unary_ == "scale":  # the trust in the log-probabilities
            extra["unary_scale"] = float(unary[0])
        extra["unary"], extra["pairwise"] = model.unary_, model.pairwise_
        extra["pairwise_scale"] = model.pairwise_scale_
        extra["temperature"] = getattr(model.crf_, "marginal_temperature_", None)
        extra["val"] = pixel_scores(val, model.crf_.predict(X_val_row))  # for diagnosis only
        extra["class_offsets"] = [float(v) for v in model.class_offsets_]
        if model.choice_scores_ is not None:
            extra["choice_mean_iou"] = {
                f"{form}, {pairwise} x {scale:g}, offsets x {share:g}": value
                for (form, pairwise, scale, share), value in model.choice_scores_.items()
            }
        if hasattr(model.crf_, "sgd_settings_"):
            extra["settings"] = dict(model.crf_.sgd_settings_)
        add(f"two-stage {name}", labels, seconds, 1000 * predict / n_frames, marginals, **extra)
        labels_of[name], fitted[name] = labels, model
        if name == "PerturbMAPCRF":
            entropy = [-(m * np.log(np.maximum(m, 1e-12))).sum(axis=1) for m in marginals]
    results["stage_one_seconds"] = dict(
        out_of_fold=Memoised.seconds() - classifier_seconds, final_classifier=classifier_seconds
    )

    # ---- hand-set Potts weight and DenseCRF on the boosted classifier -------------------------
    template = fitted["PerturbMAPCRF, as fitted"].crf_
    val_scores = {
        w: pixel_scores(val, hand_potts(template, w).predict(X_val)) for w in POTTS_WEIGHTS
    }
    best = max(POTTS_WEIGHTS, key=lambda w: val_scores[w]["mean_iou"])
    potts = hand_potts(template, best)
    labels, predict = timed(potts.predict, X_test)
    every_fourth = slice(None, None, 4)  # its weight was set on val, and so is its temperature
    potts.calibrate_marginals(X_val[every_fourth], val.target[every_fourth])
    add(
        f"HistGradientBoosting + Potts weight {best} on the boundary (set on val)",
        labels,
        None,
        1000 * predict / n_frames,
        potts.predict_marginals(X_test),
        val_mean_iou={str(w): s["mean_iou"] for w, s in val_scores.items()},
        temperature=potts.marginal_temperature_,
    )
    try:
        import pydensecrf.densecrf  # noqa: F401
    except ImportError:
        print("pydensecrf is not installed: no DenseCRF row", flush=True)
    else:
        subset = list(range(0, len(val.data), 4))
        truth = [val.pixel_target[i] for i in subset]
        dense_val = {
            w: scores_of(truth, dense_painted(val, proba_val, w, subset)) for w in DENSE_WEIGHTS
        }
        best = max(DENSE_WEIGHTS, key=lambda w: dense_val[w]["mean_iou"])
        painted, seconds = timed(dense_painted, test, proba_test, best, range(n_frames))
        add(
            f"HistGradientBoosting + DenseCRF, bilateral weight {best} (set on val)",
            None,
            predict=1000 * seconds / n_frames,
            scores=scores_of(test.pixel_target, painted),
            val_mean_iou={str(w): v["mean_iou"] for w, v in dense_val.items()},
        )

    results["ceiling"] = pixel_scores(test, test.target)
    results["run"] = run.notes()
    results["minutes"] = results["run"]["minutes"]
    if quick:
        print(json.dumps(results, indent=1, default=float))
        return
    run.write_json("camvid.json", results, default=float)
    figure(
        test,
        {"boosted classifier": [p.argmax(1) for p in per_frame(proba_test, test)],
         "two-stage PerturbMAPCRF": labels_of["PerturbMAPCRF"]},
        entropy,
        run.path("camvid.png"),
    )  # fmt: skip
    write_markdown(run, results)


def write_markdown(run, results) -> None:
    def cell(value, digits=1):
        return "—" if value is None else f"{value:.{digits}f}"

    def kept(row):  # what TwoStageCRF kept of stage two
        if "unary" not in row:
            return ""
        offsets = "" if not any(row["class_offsets"]) else ", class offsets"
        if row.get("pairwise") == "potts":
            return f"{row['unary']}, uniform Potts {row['pairwise_scale']:g}{offsets}"
        return f"{row['unary']}, pairwise × {row['pairwise_scale']:g}{offsets}"

    lines = [
        "# CamVid road scenes: superpixel CRFs",
        "",
        "Test split (233 frames), pixels, void excluded; ECE over the test superpixels. "
        f"Superpixel features {results['feature_seconds_per_frame']:.2f} s a frame (read, SLIC, "
        "features). Two-stage rows: `TwoStageCRF` around the learner (its defaults: stage "
        "two's unary form, its smoothing "
        "(a share of its learned pairwise weights or a uniform Potts weight), class offsets and "
        "its marginals' temperature chosen "
        "on the last fold's training frames, *stage two kept*), stage one "
        "`HistGradientBoostingClassifier(class_weight='balanced')`, folds of 5 blocks of "
        "consecutive frames unless *shuffled* (5 shuffled folds of frames); *as fitted*: stage "
        "two as the likelihood fitted it (`pairwise_scale=1`). Stage one: "
        f"{results['stage_one_seconds']['out_of_fold']:.0f} s out of fold (both kinds of folds) + "
        f"{results['stage_one_seconds']['final_classifier']:.0f} s for the final classifier; the "
        "two-stage fit column is stage two's, the choice included. ECE: of each row's "
        "marginals (a CRF's: 100 perturbed MAPs of every test frame, or its own marginals; "
        "the hand-set Potts weight's with a temperature fitted on val); StructuredSVM has "
        "none.",
        "",
        "| method | global | class avg | mIoU | ECE | stage two kept | fit (s) | predict (ms / "
        "frame) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['method']} | {row['global_accuracy']:.1f} | "
            f"{row['class_average_accuracy']:.1f} | {row['mean_iou']:.1f} | "
            f"{cell(row.get('ece'), 3)} | {kept(row)} | {cell(row['fit'], 0)} | "
            f"{cell(row['predict_ms'], 0)} |"
        )
    c = results["ceiling"]
    lines += [
        f"| *superpixel ceiling (each superpixel its majority label)* | {c['global_accuracy']:.1f}"
        f" | {c['class_average_accuracy']:.1f} | {c['mean_iou']:.1f} | | | |",
        "",
        rerun(results["run"]),
        "",
        "![CamVid test frames](camvid.png)",
    ]
    run.write("camvid.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
