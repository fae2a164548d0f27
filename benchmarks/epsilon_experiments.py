"""The experiments of Hazan & Urtasun (2010), §6, with EpsilonCRF.

(i)   One 10×10 binary image, 10 training and 10 test copies with every pixel flipped with
      probability 0.2; untied weights (per pixel and per edge); ε ∈ {1, 0.5, 0.01, 0} with
      c_α = c_v = 1: final primal-dual gap, test errors (wrong pixels over the 10 test images),
      fit time; plus ε = 0.01 trained and decoded with ε = 1, and the library's exact-MAP
      StructuredSVM (graph cuts) on the same untied model.
(ii)  One 5×5 binary image, same protocol at ε = 1: untied (per pixel / edge) against shared
      weights.
(iii) Kumar & Hebert's protocol on 64×64 Weizmann horse masks (their four base images are not
      available): 4 base masks (the first four test masks of the fixed split) × 50 noisy copies
      per noise model, 40 training / 10 test copies per base, one model per base image, as in
      the paper; node features [x, x², 1], K×K edge tables; EpsilonCRF (ε = 1) untied and
      shared, StructuredSVM and PerturbMAPCRF (shared Potts weights, graph cuts) as this
      library's exact / perturb-and-MAP baselines. Untied weights memorise the base image, so
      the honest figure is last: shared weights trained on the four bases' copies, tested on
      20 masks never seen in training.

Run: ``python benchmarks/epsilon_experiments.py [--quick]``; writes
``docs/results/epsilon_experiments.{md,json}`` and ``docs/results/epsilon_examples.png``
(``--quick``: fewer iterations and images, written to a temporary folder).
"""

import numpy as np
from _common import Run, parser, pyplot, rerun, save_figure, timed
from joblib import Parallel, delayed

from pmap_sklearn import EpsilonCRF, GridStructure, PerturbMAPCRF, StructuredSVM
from pmap_sklearn.datasets import (
    add_flip_noise,
    add_kumar_hebert_noise,
    horse_split,
    load_weizmann_horse_masks,
)

PAPER_FIG1 = {  # Hazan & Urtasun (2010), Fig. 1: test error % on I1..I4
    "gaussian": {
        "ours (untied, ε = 1)": [0.0488, 0.0073, 0.1294, 0.1318],
        "best LBP / MF baseline": [2.7344, 2.4194, 3.1299, 2.3145],
    },
    "bimodal": {
        "ours (untied, ε = 1)": [0.0537, 0.0244, 0.1221, 0.9277],
        "best LBP / MF baseline": [5.2148, 4.3994, 6.0278, 6.6211],
    },
}


def base_image(size: int) -> np.ndarray:
    """A fixed binary test pattern: a filled square and a bar."""
    image = np.zeros((size, size), dtype=int)
    image[size // 5 : size // 2 + 1, size // 5 : size // 2 + 1] = 1
    image[size - size // 3 :, 1 : size - 1] = 1
    return image


def flip_copies(image, n, seed):
    return list(add_flip_noise(np.repeat(image[None], n, axis=0), 0.2, random_state=seed))


def features(noisy):
    """Per pixel [x, x²] (the bias is the structure's)."""
    return [np.stack([x, x**2], axis=-1).astype(float) for x in noisy]


def errors(model, X, truth) -> int:
    return int(sum(np.sum(p != t) for p, t in zip(model.predict(X), truth, strict=True)))


def epsilon_model(untied, epsilon=1.0, max_iter=300, tol=1e-5, alpha=1e-3, structure=None):
    structure = structure or GridStructure(
        pairwise="table", untied=untied, solver="message_passing"
    )
    return EpsilonCRF(structure, epsilon=epsilon, alpha=alpha, max_iter=max_iter, tol=tol)


def experiment_small(size, epsilons, quick):
    image = base_image(size)
    train, test = flip_copies(image, 10, 0), flip_copies(image, 10, 1)
    X, X_test = features(train), features(test)
    y, y_test = [image] * 10, [image] * 10
    rows = []
    max_iter = 300 if quick else 2000

    def run(name, model, decode_epsilon=None):
        _, seconds = timed(model.fit, X, y)
        if decode_epsilon is not None:
            model.set_params(epsilon=decode_epsilon)
        gap = getattr(model, "gap_history_", [np.nan])[-1]
        n_iter = getattr(model, "n_iter_", 0)
        rows.append(
            dict(
                model=name,
                gap=float(gap),
                n_iter=int(n_iter),
                errors=errors(model, X_test, y_test),
                seconds=seconds,
            )
        )

    for epsilon in epsilons:
        run(f"EpsilonCRF ε = {epsilon}, untied", epsilon_model(True, epsilon, max_iter))
    if size == 10:
        run(
            "EpsilonCRF trained ε = 0.01, decoded ε = 1",
            epsilon_model(True, 0.01, max_iter),
            decode_epsilon=1.0,
        )
        potts = GridStructure(untied=True)
        run(
            "StructuredSVM (graph cuts), untied Potts",
            StructuredSVM(potts, alpha=1e-3, max_iter=200, random_state=0),
        )
    else:
        run("EpsilonCRF ε = 1, shared", epsilon_model(False, 1.0, max_iter))
    return rows


def one_base(index, base, noise, quick):
    copies = np.repeat(base[None], 50, axis=0)
    noisy = add_kumar_hebert_noise(copies, noise, random_state=1000 * index + (noise == "bimodal"))
    X = features(noisy)
    X_train, X_test, y_train, y_test = X[:40], X[40:], list(copies[:40]), list(copies[40:])
    if quick:
        X_train, y_train = X_train[:10], y_train[:10]
    models = {
        "EpsilonCRF ε = 1, untied": epsilon_model(True, max_iter=100, tol=1e-4),
        "EpsilonCRF ε = 1, shared": epsilon_model(False, max_iter=100, tol=1e-4),
        "StructuredSVM, shared Potts": StructuredSVM(
            GridStructure(), alpha=1e-3, max_iter=30, random_state=0
        ),
        # tol=None: on 40 images of 4096 pixels the default stopping rule (no gain of the
        # stochastic objective) ends the fit after a few epochs, far from converged
        "PerturbMAPCRF, shared Potts": PerturbMAPCRF(
            GridStructure(), alpha=1e-3, max_iter=60, tol=None, random_state=0
        ),
    }
    out, shown = {}, {}
    for name, model in models.items():
        _, seconds = timed(model.fit, X_train, y_train)
        predicted = model.predict(X_test)
        error = 100.0 * np.mean([np.mean(p != t) for p, t in zip(predicted, y_test, strict=True)])
        out[name] = dict(error=float(error), seconds=seconds)
        shown[name] = predicted[0]
    return index, noise, out, (noisy[40], shown)


def unseen(bases, others, noise, quick):
    """Shared weights trained on the four bases' copies, tested on masks never seen."""
    train = np.repeat(bases, 10 if quick else 40, axis=0)
    noisy = add_kumar_hebert_noise(train, noise, random_state=7)
    test_noisy = add_kumar_hebert_noise(others, noise, random_state=8)
    model = epsilon_model(False, max_iter=100, tol=1e-4).fit(features(noisy), list(train))
    predicted = model.predict(features(test_noisy))
    return 100.0 * float(np.mean([np.mean(p != t) for p, t in zip(predicted, others, strict=True)]))


def main():
    args = parser(__doc__, "fewer iterations and images").parse_args()
    run = Run(__file__, args.quick)
    results = {}

    small = experiment_small(10, [1.0, 0.5, 0.01, 0.0], args.quick)
    results["10x10"] = small
    tiny = experiment_small(5, [1.0], args.quick)
    results["5x5"] = tiny

    split = horse_split()
    masks = load_weizmann_horse_masks(size=(64, 64), indices=list(split.test[:24])).images
    bases, others = masks[:4], masks[4:24]
    jobs = [(i, b, noise) for noise in ("gaussian", "bimodal") for i, b in enumerate(bases)]
    done = Parallel(n_jobs=2)(delayed(one_base)(i, b, noise, args.quick) for i, b, noise in jobs)
    table, examples = {}, {}
    for index, noise, out, shown in done:
        for name, row in out.items():
            table.setdefault(noise, {}).setdefault(name, [None] * 4)[index] = row
        if index == 0:
            examples[noise] = shown
    honest = Parallel(n_jobs=2)(
        delayed(unseen)(bases, others, noise, args.quick) for noise in ("gaussian", "bimodal")
    )
    results["kumar_hebert"] = table
    results["unseen_masks"] = dict(zip(("gaussian", "bimodal"), honest, strict=True))
    results["run"] = run.notes()
    results["minutes"] = results["run"]["minutes"]
    results["quick"] = args.quick

    lines = ["# Hazan & Urtasun (2010), §6, with EpsilonCRF", ""]
    for title, rows in (
        ("(i) 10×10, flips 0.2, 10 test images", small),
        ("(ii) 5×5, flips 0.2, 10 test images", tiny),
    ):
        lines += [
            f"## {title}",
            "",
            "| model | iterations | final gap | test errors (pixels) | fit s |",
            "|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['model']} | {r['n_iter']} | {r['gap']:.2e} | {r['errors']} | "
                f"{r['seconds']:.1f} |"
            )
        lines.append("")
    lines += ["## (iii) Kumar–Hebert noise on 64×64 horse masks: test error % per base image", ""]
    for noise, rows in table.items():
        lines += [
            f"### {noise}",
            "",
            "| model | I1 | I2 | I3 | I4 | fit s (mean) |",
            "|---|---|---|---|---|---|",
        ]
        for name, per_base in rows.items():
            cells = " | ".join(f"{r['error']:.3f}" for r in per_base)
            mean_s = np.mean([r["seconds"] for r in per_base])
            lines.append(f"| {name} | {cells} | {mean_s:.1f} |")
        for name, values in PAPER_FIG1[noise].items():
            lines.append(f"| paper: {name} | " + " | ".join(f"{v:.4f}" for v in values) + " | |")
        lines.append("")
    lines += [
        "## Shared weights on 20 masks not seen in training",
        "",
        "| noise | test error % |",
        "|---|---|",
    ]
    for noise, value in results["unseen_masks"].items():
        lines.append(f"| {noise} | {value:.2f} |")
    lines += ["", rerun(results["run"])]
    text = "\n".join(lines) + "\n"
    print(text)
    run.save("epsilon_experiments", text, results)
    plot(run, examples, bases[0])


def plot(run, examples, clean):
    plt = pyplot()

    names = list(next(iter(examples.values()))[1])
    figure, axes = plt.subplots(2, 2 + len(names), figsize=(2.2 * (2 + len(names)), 4.6))
    for row, (noise, (noisy, shown)) in enumerate(examples.items()):
        panels = [("clean", clean), (f"{noise} noise", noisy)] + list(shown.items())
        for axis, (title, image) in zip(axes[row], panels, strict=True):
            axis.imshow(image, cmap="gray")
            axis.set_title(title.replace(", ", "\n"), fontsize=8)
            axis.axis("off")
    save_figure(figure, run.path("epsilon_examples.png"), 90)


if __name__ == "__main__":
    main()
