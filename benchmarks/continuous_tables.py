"""Shpakova (2019) Tables 4.1–4.3: continuous log-supermodular priors, MAP against MMSE.

Table 4.1: the 1-D prior e^{−|α|}, σ = 1 (the thesis does not state its noise level), 10 000
test points, mean squared error of the continuous MAP (soft thresholding), the MAP on levels
of step 0.5 and 0.05, the exact posterior mean on levels of step 0.05 (enumerated), and its
perturb-and-MAP estimate with M = 100 and 1000. Decoded with the true prior; the weight learned
from 10 000 prior samples is reported beside it.

Tables 4.2 / 4.3: 8×8 patches of ``skimage.data.camera()`` (the thesis's boat image is not
available), a random half of the 4096 patches for training and 256 random patches of the other
half for testing; Gaussian noise with σ set so that the noisy image is at 22.33 dB; SNR (dB) of
the test patches, mean ± std over 10 noise draws. Priors on the pixels (baseline d = 0, unary,
grid; raw intensities as in the thesis, and centred patches) and on Haar wavelets (baseline,
unary, tree); decodings: the exact continuous MAP, the MAP on levels Δ = 10 and Δ = 1, the MMSE
with M = 100 on levels Δ = 10; learning on levels Δ = 1 (100 AdaGrad steps of 10 perturbed
MAPs). Lhood: the negative log-likelihood bound per training patch.

Run: ``python benchmarks/continuous_tables.py [--quick]``; writes
``docs/results/continuous_tables.{md,json}`` and ``docs/results/continuous_patches.png``
(``--quick``: fewer points, draws and steps, written to a temporary folder).
"""

import numpy as np
from _common import Run, parser, pyplot, rerun, save_figure, timed
from scipy.special import softmax
from skimage.data import camera

from pmap_sklearn import ContinuousLogSupermodularDenoiser
from pmap_sklearn.denoisers.continuous import snr

THESIS_41 = {
    "continuous MAP": 0.693,
    "MAP, levels 0.5": 0.744,
    "exact MMSE, levels 0.05": 0.626,
    "MMSE, M = 100": 0.632,
    "MMSE, M = 1000": 0.628,
}
THESIS = {  # c.MAP, MAP Δ10, MAP Δ1, MMSE, Lhood
    "pixels": {
        "baseline": (22.33, 21.95, 22.32, 22.31, 356.4),
        "unary": (22.32, 21.95, 22.31, 22.30, 355.7),
        "grid": (26.16, 25.36, 26.16, 25.99, 253.5),
    },
    "wavelets": {
        "baseline": (22.33, 21.98, 22.33, 22.29, 480.0),
        "unary": (24.96, 24.63, 25.02, 25.17, 185.5),
        "tree": (24.66, 24.44, 24.72, 25.15, 183.0),
    },
}
DECODINGS = [
    ("c.MAP", "continuous_map", 1.0),
    ("MAP Δ10", "map", 10.0),
    ("MAP Δ1", "map", 1.0),
    ("MMSE Δ10", "mmse", 10.0),
]


def table_41(quick):
    rng = np.random.default_rng(0)
    n = 2000 if quick else 10_000
    clean = rng.laplace(size=(n, 1))
    noisy = clean + rng.normal(size=clean.shape)
    model = ContinuousLogSupermodularDenoiser(
        grid_step=0.05, noise_std=1.0, max_iter=200, random_state=0
    ).fit(rng.laplace(size=(n, 1)))
    learned = float(model.group_weights_[0])
    model.group_weights_ = np.array([1.0])  # the true prior

    def error(estimate):
        return float(np.mean((estimate - clean) ** 2))

    rows = {"noisy input": error(noisy)}
    rows["continuous MAP"] = error(model.predict(noisy, decoding="continuous_map"))
    for step in (0.5, 0.05):
        model.set_params(grid_step=step)
        rows[f"MAP, levels {step}"] = error(model.predict(noisy, decoding="map"))
    # the exact posterior mean on the levels: Σ_z p(z | y) u_z tanh(u_z y), signs summed out,
    # with the trapezoid weights of the levels 0, Δ, …, up to the fitted domain
    step = model.grid_step
    values = step * np.arange(int(np.ceil(model.domain_[0] / step - 1e-9)) + 1)
    log_weights = np.full(len(values), np.log(step))
    log_weights[[0, -1]] = np.log(step / 2)
    y = noisy[:, :1]
    log_post = log_weights - values - values**2 / 2 + np.logaddexp(values * y, -values * y)
    rows["exact MMSE, levels 0.05"] = error(
        (softmax(log_post, axis=1) * values * np.tanh(values * y)).sum(axis=1, keepdims=True)
    )
    for m in (100, 1000):
        model.set_params(n_perturbations=m)
        rows[f"MMSE, M = {m}"] = error(model.predict(noisy, decoding="mmse"))
    return {"errors": rows, "learned_d": learned}


def patches():
    image = camera().astype(float)
    all_patches = image.reshape(64, 8, 64, 8).swapaxes(1, 2).reshape(-1, 8, 8)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(all_patches))
    train = all_patches[order[:2048]]
    test = all_patches[order[2048:]][:256]
    sigma = np.linalg.norm(image) / np.sqrt(image.size) / 10 ** (22.33 / 20)
    return train, test, sigma


def tables_42_43(quick):
    train, test, sigma = patches()
    n_draws = 3 if quick else 10
    steps = 30 if quick else 100
    noisy = [
        test + sigma * np.random.default_rng(100 + k).normal(size=test.shape)
        for k in range(n_draws)
    ]
    setups = {
        "pixels": [
            ("baseline", "unary", False),
            ("unary", "unary", False),
            ("grid", "grid", False),
        ],
        "centred pixels": [("unary", "unary", True), ("grid", "grid", True)],
        "wavelets": [
            ("baseline", "unary", False),
            ("unary", "unary", False),
            ("tree", "tree", False),
        ],
    }
    results, examples = {}, {}
    for table, models in setups.items():
        results[table] = {}
        for name, groups, center in models:

            def fit(name=name, groups=groups, center=center, table=table):
                model = ContinuousLogSupermodularDenoiser(
                    groups=groups,
                    basis="haar" if table == "wavelets" else "identity",
                    center=center,
                    grid_step=1.0,
                    noise_std=sigma,
                    max_iter=steps,
                    random_state=0,
                    n_jobs=2,
                ).fit(train)
                if name == "baseline":
                    model.group_weights_ = np.zeros_like(model.group_weights_)
                return model

            model, fit_seconds = timed(fit)
            row = {"lhood": float(-model.score_samples(train).mean()), "fit_s": fit_seconds}
            for label, decoding, step in DECODINGS:
                model.set_params(grid_step=step, decoding=decoding)

                def decode(model=model):
                    denoised = [model.predict(x) for x in noisy]
                    return denoised, [snr(test, d) for d in denoised]

                (denoised, scores), seconds = timed(decode)
                row[label] = [float(np.mean(scores)), float(np.std(scores))]
                row[f"{label} s"] = seconds
                examples[(table, name, label)] = denoised[0][:4]
            results[table][name] = row
            print(table, name, row, flush=True)
    results["noisy_snr"] = [float(np.mean([snr(test, x) for x in noisy]))]
    results["sigma"] = float(sigma)
    return results, (test[:4], noisy[0][:4], examples)


def main():
    args = parser(__doc__, "fewer points, draws and steps").parse_args()
    run = Run(__file__, args.quick)
    results = {"quick": args.quick, "table_41": table_41(args.quick)}
    print(results["table_41"], flush=True)
    tables, figure_data = tables_42_43(args.quick)
    results.update(tables)
    results["run"] = run.notes()
    results["minutes"] = results["run"]["minutes"]
    write(run, results)
    plot(run, *figure_data)


def write(run, results):
    t41 = results["table_41"]
    lines = [
        "# Continuous log-supermodular priors, Shpakova (2019) Tables 4.1–4.3",
        "",
        "The thesis's values in brackets.",
        "",
        "## Table 4.1: 1-D prior e^{−|α|}, σ = 1, mean squared error",
        "",
        "| decoding | ℓ2 loss |",
        "|---|---|",
    ]
    for name, value in t41["errors"].items():
        cite = f" [{THESIS_41[name]:.3f}]" if name in THESIS_41 else ""
        lines.append(f"| {name} | {value:.3f}{cite} |")
    lines += [
        "",
        f"Weight learned from the prior's samples: d = {t41['learned_d']:.3f} (true 1).",
        "",
    ]
    lines += [
        f"## Tables 4.2 / 4.3: camera 8×8 patches, σ = {results['sigma']:.2f}, noisy input "
        f"{results['noisy_snr'][0]:.2f} dB; SNR dB, mean ± std over the noise draws",
        "",
    ]
    for table in ("pixels", "centred pixels", "wavelets"):
        names = list(results[table])
        lines += [
            f"### {table}",
            "",
            "| | " + " | ".join(names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]
        thesis = THESIS.get(table, {})
        for i, (label, _, _) in enumerate(DECODINGS):
            cells = []
            for name in names:
                mean, std = results[table][name][label]
                cite = f" [{thesis[name][i]:.2f}]" if name in thesis else ""
                cells.append(f"{mean:.2f} ± {std:.2f}{cite}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        cells = []
        for name in names:
            cite = f" [{thesis[name][4]:.1f}]" if name in thesis else ""
            cells.append(f"{results[table][name]['lhood']:.1f}{cite}")
        lines.append("| Lhood | " + " | ".join(cells) + " |")
        lines.append(
            "| fit s / MMSE s | "
            + " | ".join(
                f"{results[table][n]['fit_s']:.0f} / {results[table][n]['MMSE Δ10 s']:.0f}"
                for n in names
            )
            + " |"
        )
        lines.append("")
    lines.append(rerun(results["run"]))
    text = "\n".join(lines) + "\n"
    print(text)
    run.save("continuous_tables", text, results)


def plot(run, clean, noisy, examples):
    plt = pyplot()

    columns = [
        ("clean", clean),
        ("noisy", noisy),
        ("pixels grid, c.MAP", examples[("pixels", "grid", "c.MAP")]),
        ("centred grid, c.MAP", examples[("centred pixels", "grid", "c.MAP")]),
        ("wavelet tree, MAP Δ10", examples[("wavelets", "tree", "MAP Δ10")]),
        ("wavelet tree, MMSE Δ10", examples[("wavelets", "tree", "MMSE Δ10")]),
    ]
    figure, axes = plt.subplots(4, len(columns), figsize=(1.7 * len(columns), 7))
    for j, (title, images) in enumerate(columns):
        for i in range(4):
            axes[i, j].imshow(images[i], cmap="gray", vmin=0, vmax=255)
            axes[i, j].axis("off")
        axes[0, j].set_title(title, fontsize=8)
    save_figure(figure, run.path("continuous_patches.png"), 90)


if __name__ == "__main__":
    main()
