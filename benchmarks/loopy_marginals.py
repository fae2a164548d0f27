"""How good are the marginals of loopy models? Every method against the exact marginals.

Models with known weights: 4-connected 10×10 binary and 7×7 three-label grids, unary scores
drawn from N(0, 1) per node and label, one Potts weight ``w`` on every edge (the score
``w [y_i != y_j]``, ``w = −λ``) with λ = 0.25 / 1.0 / 2.5 (weak / medium / strong coupling),
5 instances each. The exact marginals and log-partition function come from a transfer matrix
over the rows (K^W joint states of a row: 1,024 and 2,187), checked against enumeration in
``tests/learners/test_queries.py`` and ``tests/backend/test_gibbs.py``.

Methods, each through the library's solvers (graph cuts for binary MAPs, α-expansion for three
labels):

- perturb-and-MAP: label frequencies over M = 100 / 1,000 / 10,000 Gumbel-perturbed MAPs
  (10,000 on the binary grids only);
- mean field: ``MeanFieldSolver()`` (its default, 10 sequential sweeps) and 100 sweeps;
- belief propagation: ``MessagePassingSolver`` with Bethe counting numbers (exact on trees)
  and with convex ones, up to 500 sweeps (how many of the 5 converged is shown);
- Gibbs sampling: 10 chromatic Gibbs chains from random labellings, run for the wall time of
  100 perturbed MAPs of the same model, and for that of the next row; each node's conditional
  label probabilities averaged over the second half of the sweeps;
- Gibbs chains from perturbed MAPs (``predict_marginals(method="gibbs")``): 100 chains, each
  started at a perturbed MAP, 10 sweeps or 20 (the default).

Error: the mean absolute error of the node marginals over nodes and labels, averaged over the
instances; and, to tell a global error from local ones, the error of the grid's label
proportions (the mean over labels of ``|Σ_d q_d(k) − p_d(k)| / D``). Log-partition: the exact
log Z against the perturb-and-MAP bound ``A_G = E_z max_y f(y) + z(y)`` (mean of the 1,000
perturbed maxima; 10,000 on binary grids), the Bethe and convex free energies and the
mean-field lower bound. Seconds per instance.

Run: ``python benchmarks/loopy_marginals.py [--quick]`` (about 3 minutes on 2 cores); writes
``docs/results/loopy_marginals.{md,json}`` (``--quick``: one instance of each model, written to
a temporary folder).
"""

import sys
import time
from pathlib import Path

import numpy as np
from _common import Run, parser, rerun, timed

from pmap_sklearn import grid_edges
from pmap_sklearn._backend import GIBBS_SWEEPS, conditional_probabilities
from pmap_sklearn.perturbation import perturb_and_map
from pmap_sklearn.solvers import (
    AlphaExpansionSolver,
    GibbsSampler,
    GraphCutSolver,
    GridLayout,
    MeanFieldSolver,
    MessagePassingSolver,
    Potentials,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers import grid_exact_marginals  # noqa: E402 (the tests' transfer matrix)

GRIDS = {"binary 10×10": (10, 2), "3 labels 7×7": (7, 3)}
COUPLINGS = {"weak": 0.25, "medium": 1.0, "strong": 2.5}
N_INSTANCES = 5
GIBBS_CHAINS = 10
BP_SWEEPS = 500


def potts_grid(rng, size, k, coupling):
    """Unary scores N(0, 1) and the Potts weight ``−coupling`` on every edge of a grid."""
    edges, directions = grid_edges((size, size), return_directions=True)
    layout = GridLayout(((size, size),), ((0, 1), (1, 0)), directions)
    return Potentials(
        rng.normal(size=(size * size, k)), edges, np.full(len(edges), -coupling), layout=layout
    )


def chains(potentials, starts, rng, n_sweeps=None, seconds=None):
    """Gibbs chains from ``starts`` (n_chains, n_nodes) for ``n_sweeps`` sweeps or until
    ``seconds`` have passed: the conditional label probabilities averaged over the chains and
    the second half of the sweeps, and the number of sweeps."""
    n_chains, n_nodes = starts.shape
    copies = potentials.take(np.zeros(n_chains, dtype=np.intp))
    session = GibbsSampler(n_sweeps=1).session(copies)
    labels, history = starts.ravel(), []
    start = time.perf_counter()  # the budget's clock
    while len(history) < 2 or (
        len(history) < n_sweeps if seconds is None else time.perf_counter() - start < seconds
    ):
        labels = session.sample(copies, labels, rng)
        probabilities = conditional_probabilities(copies, labels)
        history.append(probabilities.reshape(n_chains, n_nodes, -1).mean(axis=0))
    return np.mean(history[len(history) // 2 :], axis=0), len(history)


def belief_propagation(potentials, counting):
    """Sum-product beliefs and free energy, and whether the messages converged."""
    session = MessagePassingSolver(counting).beliefs(potentials, 1.0)
    converged = session.run(BP_SWEEPS, 1e-9) < BP_SWEEPS
    return session.node_beliefs(session.edge_beliefs()), float(session.objective()[0]), converged


def instance(size, k, coupling, seed):
    """Every method's marginals on one model: {method: (error, seconds)} and log-Z values."""
    rng = np.random.default_rng(seed)
    p = potts_grid(rng, size, k, coupling)
    (exact, log_z), exact_seconds = timed(lambda: grid_exact_marginals(p, (size, size)))
    solver = GraphCutSolver() if k == 2 else AlphaExpansionSolver()
    error = {}

    def record(name, marginals, seconds):
        proportions = np.abs((marginals - exact).mean(axis=0)).mean()
        error[name] = (float(np.abs(marginals - exact).mean()), seconds, float(proportions))

    draws = (100, 1_000, 10_000) if k == 2 else (100, 1_000)
    bound = None
    for m in draws:
        average, seconds = timed(lambda m=m: perturb_and_map(solver, p, m, seed))
        record(f"perturb-and-MAP, {m:,} draws", average.marginals, seconds)
        bound = (float(average.max_mean[0]), float(average.max_sem[0]))
        if m == 100:
            pmap_seconds = seconds
    for sweeps in (10, 100):
        result, seconds = timed(lambda s=sweeps: MeanFieldSolver(n_sweeps=s).marginals(p))
        label = "mean field, 10 sweeps (default)" if sweeps == 10 else "mean field, 100 sweeps"
        record(label, result.node, seconds)
        if sweeps == 100:
            mean_field_bound = float(result.log_partition[0])
    converged, free_energy = {}, {}
    for counting in ("bethe", "convex"):
        (beliefs, energy, done), seconds = timed(lambda c=counting: belief_propagation(p, c))
        record(f"belief propagation, {counting}", beliefs, seconds)
        converged[counting], free_energy[counting] = done, energy
    gibbs_rows = {}
    for sweeps in (GIBBS_SWEEPS // 2, GIBBS_SWEEPS):
        gibbs_rows[sweeps] = timed(
            lambda s=sweeps: perturb_and_map(solver, p, 100, seed, maxima=False, n_sweeps=s)
        )
    random_starts = rng.integers(k, size=(GIBBS_CHAINS, size * size))
    n_sweeps = {}
    for name, budget in [
        ("100 perturbed MAPs", pmap_seconds),
        (f"the default row (100 × {GIBBS_SWEEPS})", gibbs_rows[GIBBS_SWEEPS][1]),
    ]:
        (marginals, n_sweeps[name]), seconds = timed(
            lambda b=budget: chains(p, random_starts, np.random.default_rng(seed), seconds=b)
        )
        record(f"Gibbs, random starts, time of {name}", marginals, seconds)
    for sweeps, (average, seconds) in gibbs_rows.items():
        default = ' (method="gibbs")' if sweeps == GIBBS_SWEEPS else ""
        name = f"Gibbs from perturbed MAPs, 100 × {sweeps} sweeps{default}"
        record(name, average.marginals, seconds)
    return dict(
        error=error,
        log_z=float(log_z),
        exact_seconds=exact_seconds,
        a_g=bound,
        bethe=free_energy["bethe"],
        convex=free_energy["convex"],
        mean_field=mean_field_bound,
        converged=converged,
        gibbs_sweeps=n_sweeps,
    )


def every_model(n_instances=N_INSTANCES):
    warm = potts_grid(np.random.default_rng(0), 4, 2, 1.0)  # imports and first calls
    perturb_and_map(GraphCutSolver(), warm, 2, 0, n_sweeps=2)
    results = {}
    for grid, (size, k) in GRIDS.items():
        for strength, coupling in COUPLINGS.items():
            key = f"{grid}, {strength}"
            results[key] = [
                instance(size, k, coupling, seed=1000 * size + 100 * k + i)
                for i in range(n_instances)
            ]
            runs = results[key]
            mean = {m: np.mean([r["error"][m][0] for r in runs]) for m in runs[0]["error"]}
            print(key, {m: round(v, 4) for m, v in mean.items()}, flush=True)
    return results


def error_cells(results, columns, method, index) -> list:
    """Per (grid, strength) column, the mean over the instances of entry ``index`` of
    ``method``'s error (0: the marginals' error, 2: the label proportions'); "–" where the
    method did not run."""
    cells = []
    for grid, strength in columns:
        runs = results[f"{grid}, {strength}"]
        if method in runs[0]["error"]:
            cells.append(f"{np.mean([r['error'][method][index] for r in runs]):.3f}")
        else:
            cells.append("–")
    return cells


def tables(results, notes, n_instances=N_INSTANCES):
    methods = list(next(iter(results.values()))[0]["error"])
    columns = [(grid, strength) for strength in COUPLINGS for grid in GRIDS]
    short = {"binary 10×10": "2", "3 labels 7×7": "3"}
    lines = [
        "# Loopy marginals: every method against the exact marginals",
        "",
        "4-connected grids, unary scores N(0, 1), one Potts weight −λ on "
        "every edge (λ = "
        + " / ".join(f"{v:g}" for v in COUPLINGS.values())
        + f": weak / medium / strong), {n_instances} instances each; exact marginals by a "
        "transfer matrix over the rows. Mean absolute error of the node marginals (over nodes "
        "and labels); columns 2 = binary 10×10, 3 = three labels 7×7; seconds per instance.",
        "",
        "| method | " + " | ".join(f"{s} {short[g]}" for g, s in columns) + " | s (2) | s (3) |",
        "|---|" + "---|" * (len(columns) + 2),
    ]
    for method in methods:
        cells = error_cells(results, columns, method, 0)
        for grid in GRIDS:
            seconds = [
                r["error"][method][1]
                for strength in COUPLINGS
                for r in results[f"{grid}, {strength}"]
                if method in r["error"]
            ]
            cells.append(f"{np.mean(seconds):.3f}" if seconds else "–")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Belief propagation converged (messages within 1e-9 in "
        f"{BP_SWEEPS} sweeps) on "
        + " and ".join(
            f"{sum(r['converged'][c] for runs in results.values() for r in runs)} of "
            f"{sum(len(runs) for runs in results.values())} models with {c} numbers"
            for c in ("bethe", "convex")
        )
        + ". Gibbs from random starts ran "
        + "; ".join(
            f"{key}: "
            + " / ".join(
                f"{np.mean([r['gibbs_sweeps'][name] for r in runs]):.0f}"
                for name in runs[0]["gibbs_sweeps"]
            )
            for key, runs in results.items()
        )
        + f" sweeps of {GIBBS_CHAINS} chains (its two rows).",
        "",
        "**Error of the grid's label proportions** (the part of the error shared by all nodes: "
        "a mode's weight):",
        "",
        "| method | " + " | ".join(f"{s} {short[g]}" for g, s in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for method in methods:
        cells = error_cells(results, columns, method, 2)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "**Log-partition function** (mean over the instances; differences from the exact log Z). "
        "A_G is the mean perturbed maximum of the largest perturb-and-MAP run (an upper bound "
        "with exact MAPs; α-expansion's maxima can fall short of it on three labels); the "
        "convex free energy bounds log Z from above, mean field (100 sweeps) from below; the "
        "Bethe free energy is neither.",
        "",
        "| grid, coupling | log Z | A_G − log Z | Bethe − log Z | convex − log Z "
        "| mean field − log Z |",
        "|---|---|---|---|---|---|",
    ]
    for key, runs in results.items():
        log_z = np.array([r["log_z"] for r in runs])

        def gap(name, runs=runs, log_z=log_z):
            return np.mean([r[name] for r in runs] - log_z)

        a_g = np.array([r["a_g"][0] for r in runs]) - log_z
        sem = np.sqrt(np.mean([r["a_g"][1] ** 2 for r in runs]) / len(runs))
        lines.append(
            f"| {key} | {log_z.mean():.2f} | {a_g.mean():.2f} ± {sem:.2f} | "
            f"{gap('bethe'):.2f} | {gap('convex'):.2f} | {gap('mean_field'):.2f} |"
        )
    exact_seconds = {
        grid: np.mean([r["exact_seconds"] for s in COUPLINGS for r in results[f"{grid}, {s}"]])
        for grid in GRIDS
    }
    lines += [
        "",
        "Exact marginals by the transfer matrix: "
        + ", ".join(f"{g} {s:.2f} s" for g, s in exact_seconds.items())
        + " per instance.",
        "",
        rerun(notes),
    ]
    return lines


def main():
    args = parser(__doc__, "one instance of each model").parse_args()
    n_instances = 1 if args.quick else N_INSTANCES
    run = Run(__file__, args.quick)
    results = every_model(n_instances)
    notes = run.notes()
    lines = tables(results, notes, n_instances)
    payload = dict(
        load=run.load,
        minutes=notes["minutes"],
        run=notes,
        couplings=COUPLINGS,
        grids={g: dict(size=s, labels=k) for g, (s, k) in GRIDS.items()},
        results=results,
    )
    run.publish("loopy_marginals", lines, payload)


if __name__ == "__main__":
    main()
