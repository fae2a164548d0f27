"""Binary image denoising, Shpakova (2019), Tables 2.1-2.3.

Horse masks downscaled to 50×50; train = perm[100:200], test = perm[:100] of the fixed split;
every pixel flipped with probability π ∈ {1, 5, 10, 20} %; pixel error % on the 100 test images,
mean ± std over 5 noise draws. Methods:

- supervised ``LogSupermodularDenoiser`` (clean training images given, π known), decoded by the
  posterior MAP ("max-marg.") and by thresholded mean-marginals of 100 perturbations; its two
  penalties are chosen by 3-fold GridSearchCV on the training images of the first draw;
- ``StructuredSVM`` (BCFW, Hamming loss) on the same grid with pixel features
  ``(2z - 1, logit of the mean training mask)`` and a bias; α chosen the same way;
- unsupervised ``LogSupermodularDenoiser`` (noisy training images only) with π known and with π
  learned, fixed penalties 1e-2 as in the thesis.

Run: ``python benchmarks/denoising_table.py [--quick]``; writes
``docs/results/denoising_table.{md,json}`` and ``docs/results/denoising_examples.png``
(``--quick``: one draw, 10 passes; writes nothing).
"""

import numpy as np
from _common import Run, parser, pyplot, rerun, save_figure, timed
from joblib import Parallel, delayed
from sklearn.model_selection import GridSearchCV, KFold

from pmap_sklearn import GridStructure, LogSupermodularDenoiser, StructuredSVM
from pmap_sklearn.datasets import add_flip_noise, horse_split, load_weizmann_horse_masks

NOISE_LEVELS = [0.01, 0.05, 0.10, 0.20]
THESIS = {  # Tables 2.1-2.3 of the thesis, pixel error %
    "supervised, max-marg.": [0.4, 1.1, 2.1, 4.2],
    "supervised, mean-marg.": [0.4, 1.1, 2.0, 4.1],
    "S-SVM": [0.6, 1.5, 2.8, 6.0],
    "unsup. π known, max-marg.": [0.5, 0.9, 1.9, 5.3],
    "unsup. π known, mean-marg.": [0.5, 1.0, 2.1, 6.0],
    "unsup. π learned, max-marg.": [1.0, 3.5, 6.8, 20.0],
    "unsup. π learned, mean-marg.": [1.0, 3.6, 7.0, 20.0],
}
UNSUPERVISED_PENALTY = 1e-2


def pixel_error(predicted, clean) -> float:
    return 100.0 * float(np.mean(np.asarray(predicted) != clean))


def svm_features(noisy, prior):
    """Per pixel: the noisy value in ±1 and the shape prior (the bias is the structure's)."""
    return [np.stack([2.0 * z - 1.0, prior], axis=-1) for z in noisy]


def shape_prior(clean):
    mean = np.clip(clean.mean(axis=0), 0.01, 0.99)
    return np.log(mean / (1.0 - mean))


def noisy_pair(train, test, level_index, draw):
    level = NOISE_LEVELS[level_index]
    return (
        add_flip_noise(train, level, random_state=1000 * level_index + 2 * draw),
        add_flip_noise(test, level, random_state=1000 * level_index + 2 * draw + 1),
    )


def select(train, test, level_index, max_iter, n_jobs):
    """Penalties of the supervised denoiser and α of the S-SVM by CV on the training images."""
    level = NOISE_LEVELS[level_index]
    noisy, _ = noisy_pair(train, test, level_index, 0)
    folds = KFold(3, shuffle=True, random_state=0)
    denoiser = GridSearchCV(
        LogSupermodularDenoiser(noise_level=level, max_iter=max_iter, random_state=0),
        {"alpha_field": [1e-4, 1e-3, 1e-2], "alpha_cut": [1e-4, 1e-3, 1e-2]},
        cv=folds,
        n_jobs=n_jobs,
    ).fit(noisy, train)
    svm = GridSearchCV(
        StructuredSVM(GridStructure(), max_iter=max_iter, random_state=0),
        {"alpha": [1e3, 1e4, 1e5]},
        cv=folds,
        n_jobs=n_jobs,
    ).fit(svm_features(noisy, shape_prior(train)), list(train))
    return denoiser.best_params_, svm.best_params_


def run_draw(train, test, level_index, draw, chosen, max_iter):
    """Every method on one noise draw; returns {method: error %} and the example outputs."""
    level = NOISE_LEVELS[level_index]
    noisy_train, noisy_test = noisy_pair(train, test, level_index, draw)
    errors, seconds, examples = {}, {}, {"noisy": noisy_test[0]}
    supervised = LogSupermodularDenoiser(
        noise_level=level, max_iter=max_iter, random_state=draw, **chosen["denoiser"]
    )
    _, seconds["supervised fit"] = timed(supervised.fit, noisy_train, train)
    for decoding, name in [("map", "max-marg."), ("marginal", "mean-marg.")]:
        predicted = supervised.predict(noisy_test, decoding=decoding)
        errors[f"supervised, {name}"] = pixel_error(predicted, test)
        examples[f"supervised, {name}"] = predicted[0]

    def fit_svm():  # the shape prior and the features are timed with the fit
        prior = shape_prior(train)
        svm = StructuredSVM(GridStructure(), max_iter=max_iter, random_state=draw, **chosen["svm"])
        return prior, svm.fit(svm_features(noisy_train, prior), list(train))

    (prior, svm), seconds["S-SVM fit"] = timed(fit_svm)
    predicted = np.stack(svm.predict(svm_features(noisy_test, prior)))
    errors["S-SVM"] = pixel_error(predicted, test)
    for known, noise_level in [("known", level), ("learned", "learn")]:
        unsupervised = LogSupermodularDenoiser(
            noise_level=noise_level,
            alpha_field=UNSUPERVISED_PENALTY,
            alpha_cut=UNSUPERVISED_PENALTY,
            max_iter=max_iter,
            random_state=draw,
        )
        _, seconds[f"unsup. π {known} fit"] = timed(unsupervised.fit, noisy_train)
        for decoding, name in [("map", "max-marg."), ("marginal", "mean-marg.")]:
            predicted = unsupervised.predict(noisy_test, decoding=decoding)
            errors[f"unsup. π {known}, {name}"] = pixel_error(predicted, test)
            examples[f"unsup. π {known}, {name}"] = predicted[0]
        if known == "learned":
            errors["learned π %"] = 100.0 * unsupervised.noise_level_
    errors["noisy input"] = pixel_error(noisy_test, test)
    return level_index, draw, errors, seconds, examples


def table(results, n_draws):
    methods = list(THESIS) + ["learned π %", "noisy input"]
    lines = [
        f"Pixel error % on the 100 test images, mean ± std over {n_draws} noise draws "
        "(thesis value in brackets).",
        "",
        "| method | " + " | ".join(f"π = {100 * p:g} %" for p in NOISE_LEVELS) + " |",
        "|---|" + "---|" * len(NOISE_LEVELS),
    ]
    for method in methods:
        cells = []
        for i in range(len(NOISE_LEVELS)):
            values = np.array([r[2][method] for r in results if r[0] == i])
            cell = f"{values.mean():.2f} ± {values.std():.2f}"
            if method in THESIS:
                cell += f" ({THESIS[method][i]})"
            cells.append(cell)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(test, results, path):
    plt = pyplot()

    columns = ["clean", "noisy", "supervised, mean-marg.", "unsup. π known, max-marg."]
    fig, axes = plt.subplots(len(NOISE_LEVELS), len(columns), figsize=(8, 8))
    for i, level in enumerate(NOISE_LEVELS):
        examples = next(r[4] for r in results if r[0] == i and r[1] == 0)
        examples = {"clean": test[0], **examples}
        for j, column in enumerate(columns):
            axes[i, j].imshow(examples[column], cmap="gray", vmin=0, vmax=1)
            axes[i, j].set_xticks([])
            axes[i, j].set_yticks([])
            if i == 0:
                axes[i, j].set_title(column, fontsize=8)
        axes[i, 0].set_ylabel(f"π = {100 * level:g} %")
    save_figure(fig, path, 100)


def main():
    args = parser(
        __doc__, "one draw, 10 passes (smoke run); writes nothing", n_jobs="processes"
    ).parse_args()
    n_draws, max_iter = (1, 10) if args.quick else (5, 30)
    run = Run(__file__, args.quick)
    split = horse_split()
    masks = load_weizmann_horse_masks().images
    train, test = masks[split.perm[100:200]], masks[split.perm[:100]]
    chosen = []
    for i in range(len(NOISE_LEVELS)):
        denoiser, svm = select(train, test, i, max_iter, args.n_jobs)
        chosen.append({"denoiser": denoiser, "svm": svm})
        print(f"π = {NOISE_LEVELS[i]:.2f}: chosen {chosen[-1]}", flush=True)
    selection_seconds = run.minutes() * 60
    results = Parallel(n_jobs=args.n_jobs)(
        delayed(run_draw)(train, test, i, draw, chosen[i], max_iter)
        for i in range(len(NOISE_LEVELS))
        for draw in range(n_draws)
    )
    total = run.minutes() * 60
    notes = run.notes(
        *([f"--n-jobs {args.n_jobs}"] if args.n_jobs != 2 else []),
        minutes=total / 60,
        processes=args.n_jobs,
        selection_seconds=selection_seconds,
    )
    text = table(results, n_draws)
    timing = {name: float(np.mean([r[3][name] for r in results])) for name in results[0][3]}
    summary = (
        f"{text}\n\nChosen hyper-parameters (3-fold CV on the training images of draw 0): "
        + "; ".join(f"π = {100 * p:g} %: {c}" for p, c in zip(NOISE_LEVELS, chosen, strict=True))
        + "\n\nMean fit seconds per draw: "
        + ", ".join(f"{k} {v:.1f}" for k, v in timing.items())
        + f"\n\n{rerun(notes)}"
    )
    print(summary)
    if not args.quick:
        records = [{"noise": NOISE_LEVELS[r[0]], "draw": r[1], **r[2]} for r in results]
        payload = {"results": records, "chosen": chosen, "minutes": total / 60, "run": notes}
        run.save("denoising_table", summary + "\n", payload)
        figure(test, results, run.path("denoising_examples.png"))


if __name__ == "__main__":
    main()
