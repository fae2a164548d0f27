"""ChainCRF's defaults on sparse token features against sklearn-crfsuite: UPOS tagging on the
UD English Web Treebank, in one focused run.

The protocol, features and rows are those of ``ud_tagging.py`` (train on train, token
accuracy on test; crfsuite with its tutorial's setting, c1 = c2 = 0.1 and 100 iterations):
sklearn-crfsuite and ``ChainCRF()`` with its defaults, each fitted twice in turn in its own
process (crfsuite, ChainCRF, crfsuite, ChainCRF: the faster run of each counts), then
``ChainCRF`` with every (feature, tag) pair, the rule ``all_possible_states="auto"`` chooses
against (``ud_tagging.py`` also has the dense features' settings). The table gives each
row's fit time over crfsuite's in the same run, its non-zero weights over crfsuite's and its
accuracy minus crfsuite's: what the defaults are held to (at most 1.5× the time, 1.2× the
weights, 0.1 point of accuracy).

Run: ``python benchmarks/chain_crf_defaults.py [--quick]`` (about 6 min on 2 idle cores; needs
``sklearn-crfsuite`` and ``../shared/data/ud_english_ewt``); writes
``docs/results/chain_crf_defaults.{md,json}`` (``--quick``: 2,000 training sentences, written
to a temporary folder).
"""

import tempfile
from pathlib import Path

import ud_tagging
from _common import Run, child, parser, print_result, rerun, run_child
from _tagging import fit_times_line, measure_learners

CRFSUITE = "sklearn-crfsuite (L-BFGS, 100 it.)"
ROWS = (
    CRFSUITE,
    ud_tagging.CHAIN_CRF,
    "ChainCRF, every (feature, tag) pair (all_possible_states=True)",
)
TIMED_TWICE = ROWS[:2]


def main():
    cli = parser(__doc__, "2,000 training sentences", child=2)
    args = cli.parse_args()
    if args.one:
        print_result(ud_tagging.run_one(args.one[0], args.one[1], curve=False))
        return
    run = Run(__file__, args.quick)
    with tempfile.TemporaryDirectory() as folder:
        data_file = str(Path(folder) / "data.pkl")
        info = ud_tagging.prepare(data_file, args.quick)

        def measure(name):
            return run_child(name, child(__file__, name, data_file))

        # crfsuite and the defaults in turn, twice: the second pass of measure_learners
        rows = measure_learners(measure, TIMED_TWICE, TIMED_TWICE)
        rows.update(measure_learners(measure, ROWS[2:], ()))
    target = rows[CRFSUITE]
    lines = [
        "# ChainCRF's defaults against sklearn-crfsuite (UPOS, UD English EWT)",
        "",
        f"{info['sentences']:,} training sentences, {info['tokens']:,} tokens, "
        f"{info['features']:,} features × {info['tags']} tags; {info['test_tokens']:,} test "
        "tokens (the protocol of [ud_tagging.md](ud_tagging.md)).",
        "",
        "| learner | test accuracy (%) | − crfsuite's (point) | fit (s) | fit / crfsuite's | "
        "non-zero weights | state weights / crfsuite's | saved (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {100 * row['accuracy']:.3f} | "
            f"{100 * (row['accuracy'] - target['accuracy']):+.3f} | {row['seconds']:.1f} | "
            f"{row['seconds'] / target['seconds']:.2f}× | "
            f"{row['state_weights']:,} / {row['transition_weights']} | "
            f"{row['state_weights'] / target['state_weights']:.2f}× | {row['saved_mb']:.2f} |"
        )
    notes = run.notes()
    lines += [
        "",
        "Non-zero weights: node (feature, tag) / transition weights (ours count the "
        "structure's bias too); saved: crfsuite's model file, the pickle of our vectoriser "
        "and learner.",
        "",
        fit_times_line(rows, TIMED_TWICE),
        "",
        rerun(notes),
    ]
    text = "\n".join(lines)
    print(text)
    run.save("chain_crf_defaults", text + "\n", dict(info=info, rows=rows, run=notes))


if __name__ == "__main__":
    main()
