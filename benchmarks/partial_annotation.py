"""Learning from partial annotation on UD English EWT (UPOS, test token accuracy): tokens
labelled with a tag dictionary's set of candidate tags instead of their tag.

Protocol: the first sentences of the training split; the first tenth of them keep their gold
tags, and in the others each token is, with probability 0.6, annotated by the *set* of tags its
word takes in the training sentences (its ambiguity class, a dictionary's entry; a word of one
tag keeps that tag). Three annotations of the same tokens:

- ``full``: every gold tag (the ceiling);
- ``sets``: the dictionary's sets at the chosen tokens (:ref:`label-sets`);
- ``unknown``: the chosen tokens unknown (``-1``), what a learner without sets can use.

Learners with their defaults (``random_state=0``): ``ChainCRF`` and ``MarginalPerturbMAPCRF``,
which learn from sets, and the strongest plain tagger, ``PerturbMAPCRF``, on ``full`` and
``unknown`` (it does not learn from sets). The tutorial's token features
(``SequenceVectorizer`` over ``token_features``).

Run: ``python benchmarks/partial_annotation.py [--quick]`` (about 10 minutes on 2 cores);
writes ``docs/results/partial_annotation.{md,json}`` (``--quick``: 400 training and 300 test
sentences, to a temporary folder).
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from _tagging import feature_dicts
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

#: Training and test sentences of a full run and of ``--quick``.
SIZES = dict(full=(3000, None), quick=(400, 300))
#: The share of the tokens (of the sentences past the first tenth) annotated partially.
SHARE = 0.6


def annotations(sentences, tags, rng) -> dict:
    """The three annotations of the protocol (see the module docstring)."""
    dictionary = {}
    for words, labels in zip(sentences, tags, strict=True):
        for word, tag in zip(words, labels, strict=True):
            dictionary.setdefault(word.lower(), set()).add(tag)
    n_seed = len(sentences) // 10
    with_sets, unknown, n_partial, n_tokens = [], [], 0, 0
    for i, (words, labels) in enumerate(zip(sentences, tags, strict=True)):
        chosen = rng.random(len(words)) < SHARE if i >= n_seed else np.zeros(len(words), bool)
        sets = np.array(labels, dtype=object)
        for d in np.flatnonzero(chosen):
            candidates = dictionary[words[d].lower()]
            sets[d] = set(candidates) if len(candidates) > 1 else labels[d]
        with_sets.append(sets)
        unknown.append(np.where(chosen, "?", np.asarray(labels, dtype=object)))
        n_partial += int(sum(isinstance(s, set) for s in sets))
        n_tokens += len(words)
    return dict(full=tags, sets=with_sets, unknown=unknown), n_partial / n_tokens


def main():
    from pmap_sklearn import ChainCRF, MarginalPerturbMAPCRF, PerturbMAPCRF, SequenceVectorizer
    from pmap_sklearn.datasets import load_ud_treebank

    args = parser(__doc__, "400 training and 300 test sentences").parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, args.quick)
    n_train, n_test = SIZES["quick" if args.quick else "full"]
    train, test = load_ud_treebank("train"), load_ud_treebank("test")
    sentences, tags = train.sentences[:n_train], train.tags[:n_train]
    test_sentences, test_tags = test.sentences[:n_test], test.tags[:n_test]
    labelled, share = annotations(sentences, tags, np.random.default_rng(0))
    X, X_test = feature_dicts(sentences), feature_dicts(test_sentences)
    truth = np.concatenate(test_tags)
    learners = {
        "ChainCRF": (lambda: ChainCRF(unknown_label="?"), ("full", "sets", "unknown")),
        "MarginalPerturbMAPCRF": (
            lambda: MarginalPerturbMAPCRF(unknown_label="?", random_state=0),
            ("full", "sets", "unknown"),
        ),
        "PerturbMAPCRF": (
            lambda: PerturbMAPCRF(unknown_label="?", random_state=0),
            ("full", "unknown"),
        ),
    }
    rows = []
    for name, (make, kinds) in learners.items():
        for kind in kinds:
            model = make_pipeline(SequenceVectorizer(), make())
            _, seconds = timed(model.fit, X, labelled[kind])
            accuracy = float(np.mean(np.concatenate(model.predict(X_test)) == truth))
            rows.append(dict(learner=name, labels=kind, accuracy=accuracy, fit=seconds))
            print(f"{name:22s} {kind:8s} {100 * accuracy:.2f} % {seconds:.1f} s", flush=True)
    notes = run.notes()
    lines = [
        "# Learning from partial annotation: UD English EWT (UPOS, test token accuracy)",
        "",
        f"{len(sentences):,} training sentences; past the first tenth, {100 * share:.1f} % of "
        "the tokens carry their word's set of dictionary tags (two or more) instead of their "
        f"tag; {len(truth):,} test tokens. Defaults, `random_state=0`.",
        "",
        "| learner | labels | test accuracy (%) | fit (s) |",
        "|---|---|---|---|",
        *[
            f"| {r['learner']} | {r['labels']} | {100 * r['accuracy']:.2f} | {r['fit']:.1f} |"
            for r in rows
        ],
        "",
        "Labels: `full`, every gold tag; `sets`, the dictionary's sets at the partially "
        "annotated tokens; `unknown`, those tokens unknown.",
        "",
        rerun(notes),
    ]
    run.publish("partial_annotation", lines, dict(run=notes, rows=rows))


if __name__ == "__main__":
    main()
