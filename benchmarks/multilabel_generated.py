"""Multi-label CRFs on generated data no default was chosen on: small and large samples,
sparse binary and unscaled numeric features, 7 to 53 labels, against independent logistic
regressions and a classifier chain.

Each set is drawn by scikit-learn's ``make_multilabel_classification`` (``random_state=0``;
word-count features, each sample's labels from a few topics; documents of 50 words, 300 for the
indicator features) in the shapes of Mulan's data sets: its first samples train and the next
1,000 test (a label absent from training is dropped). The features are the counts, their
indicators (given as a CSR matrix, as a user with bag-of-words data has them), or the counts
with each column multiplied by a factor between 10^-2 and 10^3 (numeric features in mixed
units).

- ``PerturbMAPCRF(MultiLabelStructure())`` (the Chow–Liu tree) and
  ``PerturbMAPCRF(MultiLabelStructure("full"))`` with their defaults (``random_state=0``),
  and ``ChainCRF(MultiLabelStructure())``, on the features as given (on the 53-label set the
  full graph also with ``solver="trws"``, the default before the local search);
- scikit-learn's independent logistic regressions
  (``MultiOutputClassifier(LogisticRegression(max_iter=1000))``) on the features as given and
  standardised (``StandardScaler``, without centring for sparse features), and one
  ``ClassifierChain(LogisticRegression(max_iter=1000))`` as given.

Scores of ``predict``: Hamming loss, subset accuracy and micro-averaged F1 (the F1 of every
label bit, ``f1_score(average="micro")``: a model that predicts no label scores 0). The check
of each set reads the default CRF (the tree) against the better of the two logistic-regression
rows for each score: Hamming loss ≤ 1.02× theirs, subset accuracy ≥ theirs − 0.01 and micro F1
≥ theirs − 0.02; and so does ``ChainCRF`` on the same tree.

``alpha="auto"`` (0.1 on multi-label rows, chosen on yeast and scene) against a choice made
on each set's training samples alone: ``ChainCRF(MultiLabelStructure())``'s ``alpha`` from
{0.01, 0.03, 0.1, 0.3, 1} by 3 shuffled folds' Hamming loss (``GridSearchCV``), refitted on
the training set and scored on test beside the default.

Run: ``python benchmarks/multilabel_generated.py`` (about 4 minutes on 2 cores; writes
``docs/results/multilabel_generated.{md,json}``); ``--quick``: the three smallest sets only,
written to a temporary folder.
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from scipy import sparse
from sklearn.datasets import make_multilabel_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score, hamming_loss
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.multioutput import ClassifierChain, MultiOutputClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pmap_sklearn import ChainCRF, MultiLabelStructure, PerturbMAPCRF, hamming_scorer
from pmap_sklearn._optim.defaults import MULTILABEL_ALPHA

N_TEST = 1000
#: name: (training samples, features, labels, labels per sample on average, feature kind)
SETS = {
    "7 labels, 150 samples": (150, 20, 7, 3, "counts"),
    "10 labels, mixed units": (400, 60, 10, 3, "mixed units"),
    "14 labels, 600 samples": (600, 100, 14, 3, "counts"),
    "14 labels, 3,000 samples": (3000, 100, 14, 3, "counts"),
    "19 labels, 320 samples": (320, 260, 19, 2, "counts"),
    "27 labels, sparse binary": (460, 1000, 27, 2, "binary"),
    "45 labels, sparse binary": (330, 1400, 45, 2, "binary"),
    "53 labels, sparse binary": (1120, 1000, 53, 3, "binary"),
}
QUICK = ("7 labels, 150 samples", "10 labels, mixed units", "19 labels, 320 samples")
LR = "independent LR"
CRF = "PerturbMAPCRF, tree (default)"
#: The rows the check reads: the default CRF, and the exact likelihood on the same tree.
CHAIN = "ChainCRF, tree"
CHECKED = (CRF, CHAIN)
#: The alphas a training set chooses from (by cross-validation), the default's among them.
ALPHAS = (0.01, 0.03, MULTILABEL_ALPHA["likelihood"], 0.3, 1.0)


def make_set(n_train, n_features, n_labels, per_sample, kind):
    """Train and test ``(X, Y)`` of one generated set."""
    X, Y = make_multilabel_classification(
        n_samples=n_train + N_TEST,
        n_features=n_features,
        n_classes=n_labels,
        n_labels=per_sample,
        length=300 if kind == "binary" else 50,  # indicators of short documents say little
        random_state=0,
    )
    if kind == "binary":
        X = sparse.csr_matrix((X > 0).astype(float))
    elif kind == "mixed units":
        X = X * np.logspace(-2, 3, n_features)[np.random.default_rng(0).permutation(n_features)]
    Y = Y[:, Y[:n_train].any(axis=0)]
    return (X[:n_train], Y[:n_train]), (X[n_train:], Y[n_train:])


#: The set whose full graph is also fitted with TRW-S.
TRWS_SET = "53 labels, sparse binary"


def models(sparse_input, trws=False):
    def lr():
        return MultiOutputClassifier(LogisticRegression(max_iter=1000))

    extra = {}
    if trws:
        full = MultiLabelStructure("full", solver="trws")
        extra["PerturbMAPCRF, full graph, TRW-S"] = PerturbMAPCRF(full, random_state=0)
    return {
        f"{LR}, as given": lr(),
        f"{LR}, standardised": make_pipeline(StandardScaler(with_mean=not sparse_input), lr()),
        "one classifier chain": ClassifierChain(LogisticRegression(max_iter=1000)),
        CRF: PerturbMAPCRF(MultiLabelStructure(), random_state=0),
        "PerturbMAPCRF, full graph": PerturbMAPCRF(MultiLabelStructure("full"), random_state=0),
        **extra,
        CHAIN: ChainCRF(MultiLabelStructure()),
    }


#: The test scores of a row.
SCORES = ("hamming_loss", "subset_accuracy", "micro_f1")


def scores_on(model, X_test, Y_test) -> dict:
    predicted = model.predict(X_test)
    return dict(
        hamming_loss=float(hamming_loss(Y_test, predicted)),
        subset_accuracy=float(accuracy_score(Y_test, predicted)),
        micro_f1=float(f1_score(Y_test, predicted, average="micro", zero_division=0.0)),
    )


def run_set(name):
    n_train, n_features, n_labels, per_sample, kind = SETS[name]
    (X, Y), (X_test, Y_test) = make_set(n_train, n_features, n_labels, per_sample, kind)
    rows = []
    for learner, model in models(sparse.issparse(X), trws=name == TRWS_SET).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _, seconds = timed(model.fit, X, Y)
        solver = getattr(getattr(model, "structure_", None), "solver_", None)
        row = dict(
            data=name,
            features=kind,
            n_train=n_train,
            n_features=n_features,
            n_labels=Y.shape[1],
            learner=learner,
            solver=solver.name if solver is not None else None,
            alpha=getattr(model, "alpha_", None),
            **scores_on(model, X_test, Y_test),
            fit_s=seconds,
        )
        rows.append(row)
        print(
            f"{name:26s} {learner:34s} Hamming {row['hamming_loss']:.4f}  subset "
            f"{row['subset_accuracy']:.3f}  micro F1 {row['micro_f1']:.3f}  fit "
            f"{seconds:6.1f} s",
            flush=True,
        )
    return rows


def alpha_row(name, default_row):
    """``ChainCRF`` on the tree at ``alpha="auto"`` (its row of the main table,
    ``default_row``) and at the ``alpha`` its training samples choose by cross-validation, on
    test."""
    (X, Y), (X_test, Y_test) = make_set(*SETS[name])
    search = GridSearchCV(
        ChainCRF(MultiLabelStructure()),
        {"alpha": ALPHAS},
        scoring=hamming_scorer,
        cv=KFold(3, shuffle=True, random_state=0),
        error_score="raise",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, Y)
    # the scorer's score is 1 − the Hamming loss
    cv_hamming = dict(zip(ALPHAS, 1.0 - search.cv_results_["mean_test_score"], strict=True))
    row = dict(
        data=name,
        default_alpha=default_row["alpha"],
        cv_alpha=search.best_params_["alpha"],
        cv_hamming={str(a): float(h) for a, h in cv_hamming.items()},
        default={key: default_row[key] for key in SCORES},
        chosen=scores_on(search.best_estimator_, X_test, Y_test),
    )
    print(
        f"{name:26s} alpha auto {row['default_alpha']:g}, by CV {row['cv_alpha']:g}: test "
        f"Hamming {row['default']['hamming_loss']:.4f} / {row['chosen']['hamming_loss']:.4f}",
        flush=True,
    )
    return row


def check(rows, learner=CRF):
    """Whether ``learner``'s row (the default CRF) meets each bound against the better
    logistic regression."""
    lr = [r for r in rows if r["learner"].startswith(LR)]
    crf = next(r for r in rows if r["learner"] == learner)
    hamming = min(r["hamming_loss"] for r in lr)
    subset = max(r["subset_accuracy"] for r in lr)
    micro = max(r["micro_f1"] for r in lr)
    return dict(
        hamming=crf["hamming_loss"] <= 1.02 * hamming,
        subset=crf["subset_accuracy"] >= subset - 0.01,
        micro_f1=crf["micro_f1"] >= micro - 0.02,
    )


def alpha_lines(alpha_rows) -> list:
    lines = [
        "",
        '`alpha="auto"` against the `alpha` each training set chooses: '
        "`ChainCRF(MultiLabelStructure())`, `alpha` from "
        f"{{{', '.join(f'{a:g}' for a in ALPHAS)}}} by the Hamming loss of 3 shuffled folds of "
        "the training samples, refitted on them; test scores at the default / at the choice.",
        "",
        "| data | alpha by CV | CV Hamming at auto / choice | Hamming loss | subset accuracy | "
        "micro F1 |",
        "|---|---|---|---|---|---|",
    ]
    for r in alpha_rows:
        auto, chosen = r["default"], r["chosen"]
        cv = r["cv_hamming"]
        lines.append(
            f"| {r['data']} | {r['cv_alpha']:g} | {cv[str(r['default_alpha'])]:.4f} / "
            f"{cv[str(r['cv_alpha'])]:.4f} | {auto['hamming_loss']:.4f} / "
            f"{chosen['hamming_loss']:.4f} | {auto['subset_accuracy']:.3f} / "
            f"{chosen['subset_accuracy']:.3f} | {auto['micro_f1']:.3f} / "
            f"{chosen['micro_f1']:.3f} |"
        )
    return lines


def page(rows, alpha_rows, notes):
    lines = [
        "# Multi-label CRFs on generated data",
        "",
        "Sets drawn by `make_multilabel_classification` (`random_state=0`) in the shapes of "
        f"Mulan's data sets, {N_TEST:,} test samples each; word counts, their indicators "
        "(sparse binary, a CSR matrix) or counts in mixed units (each column times a factor "
        "between 10^-2 and 10^3). Every model with its defaults on the features as given, and "
        "the logistic regressions also standardised. Check: the default CRF (the tree), and "
        "ChainCRF on the same tree, against the better logistic regression of each score — "
        "Hamming ≤ 1.02× theirs, subset accuracy ≥ theirs − 0.01, micro F1 ≥ theirs − 0.02. "
        "Protocol: "
        "`benchmarks/multilabel_generated.py`.",
        "",
        "| data | train × features | learner | solver | Hamming loss | subset accuracy | "
        "micro F1 | fit s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['n_train']:,} × {r['n_features']:,} | {r['learner']} | "
            f"{r['solver'] or '–'} | {r['hamming_loss']:.4f} | {r['subset_accuracy']:.3f} | "
            f"{r['micro_f1']:.3f} | {r['fit_s']:.1f} |"
        )
    lines += [
        "",
        "| data | learner | Hamming | subset accuracy | micro F1 |",
        "|---|---|---|---|---|",
    ]
    names = list(dict.fromkeys(r["data"] for r in rows))
    for name in names:
        for learner in CHECKED:
            met = check([r for r in rows if r["data"] == name], learner)
            keys = ("hamming", "subset", "micro_f1")
            cells = ["met" if met[key] else "missed" for key in keys]
            lines.append(f"| {name} | {learner} | " + " | ".join(cells) + " |")
    lines += alpha_lines(alpha_rows)
    lines += ["", rerun(notes)]
    return lines


def main():
    args = parser(__doc__, "the three smallest sets; writes to a temporary folder").parse_args()
    run = Run(__file__, args.quick)
    names = QUICK if args.quick else list(SETS)
    rows = [row for name in names for row in run_set(name)]
    chain_rows = {r["data"]: r for r in rows if r["learner"] == CHAIN}
    alpha_rows = [alpha_row(name, chain_rows[name]) for name in names]
    notes = run.notes()
    payload = dict(run=notes, rows=rows, alpha=alpha_rows)
    run.publish("multilabel_generated", page(rows, alpha_rows, notes), payload)


if __name__ == "__main__":
    main()
