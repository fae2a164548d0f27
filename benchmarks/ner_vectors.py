"""Named entities with word vectors beside the token features: CoNLL-2002 Spanish, the
tutorial's features with and without dense vectors made from the corpus.

The features of ``benchmarks/ner.py`` (:func:`pmap_sklearn.datasets.token_features` on
``(word, pos)`` pairs), joined by :class:`pmap_sklearn.SequenceUnion` to
:class:`pmap_sklearn.TokenEmbeddings` of word vectors from
:func:`pmap_sklearn.embeddings.cooccurrence_vectors` (the truncated SVD of the PPMI matrix of
lower-cased word co-occurrences) — as in ``examples/plot_token_embeddings.py``. The vectors'
settings (50 dimensions, a window of 2, the block scaled by 0.1) were chosen on ``esp.testa``
with seed 0, never on testb. :class:`pmap_sklearn.PerturbMAPCRF` runs with its defaults and
seeds 0, 1, 2 in every row (a seed moves the entity F1 by about a point).

Two sources of vectors: the training sentences alone (the example's), and the sentences of all
three splits without their tags — the test words then have vectors too (the vectors' usual
setting: unlabelled text beside the labelled).

Run: ``python benchmarks/ner_vectors.py [--quick]`` (needs ``../shared/data/conll2002``);
writes ``docs/results/ner_vectors.{md,json}``. ``--quick``: the first 1,000 training sentences,
500 of testa and testb, seed 0 only; written to a temporary folder.
"""

import warnings

import numpy as np
from _common import Run, parser, rerun, timed
from _tagging import first
from sklearn.exceptions import ConvergenceWarning

#: The vectors' settings, chosen on esp.testa with seed 0 (entity F1; no vectors: 0.7463):
#: the block scaled by 0.03 / 0.1 / 0.3: 0.7432 / 0.7511 / 0.7458; standardised columns
#: instead of unit rows: 0.7424 (scaled by 0.1), 0.7093 (by 1); 100 dimensions: 0.7449; a
#: window of 1: 0.7457; the neighbours' vectors too: 0.7494.
VECTORS = dict(n_components=50, window=2)
SCALE = 0.1
SEEDS = (0, 1, 2)
SOURCES = {
    "no vectors": None,
    "vectors of the training sentences": ("train",),
    "vectors of train + testa + testb sentences (untagged)": ("train", "testa", "testb"),
}
#: ``--quick``: the first training, testa and testb sentences, and the seeds.
QUICK = dict(train=1000, testa=500, testb=500, seeds=(0,))


def tagger(vectors, seed: int):
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import PerturbMAPCRF, SequenceUnion, SequenceVectorizer, TokenEmbeddings
    from pmap_sklearn.datasets import token_features

    blocks = [("tokens", SequenceVectorizer(token_features))]
    if vectors is not None:
        blocks.append(("vectors", TokenEmbeddings(vectors, lowercase=True)))
    union = SequenceUnion(blocks, transformer_weights={"vectors": SCALE} if vectors else None)
    return make_pipeline(union, PerturbMAPCRF(random_state=seed))


def main():
    from pmap_sklearn.datasets import load_conll2002
    from pmap_sklearn.embeddings import cooccurrence_vectors
    from pmap_sklearn.metrics import entity_f1_score

    quick = (
        f"the first {QUICK['train']:,} training and {QUICK['testa']} testa / testb sentences, "
        "seed 0"
    )
    args = parser(__doc__, quick).parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    run = Run(__file__, args.quick)
    data = {split: load_conll2002("esp", split) for split in ("train", "testa", "testb")}
    if args.quick:
        data = {split: first(bunch, QUICK[split]) for split, bunch in data.items()}
    seeds = QUICK["seeds"] if args.quick else SEEDS
    rows = {}
    for name, splits in SOURCES.items():
        vectors, vector_seconds = None, 0.0
        if splits is not None:
            corpus = [s for split in splits for s in data[split].sentences]
            vectors, vector_seconds = timed(cooccurrence_vectors, corpus, **VECTORS)
        runs = []
        for seed in seeds:
            model = tagger(vectors, seed)
            _, seconds = timed(model.fit, data["train"].tokens, data["train"].tags)
            scores = {
                split: entity_f1_score(data[split].tags, model.predict(data[split].tokens))
                for split in ("testa", "testb")
            }
            runs.append(dict(seed=seed, seconds=seconds, **scores))
            print(name, runs[-1], flush=True)
        rows[name] = dict(
            runs=runs,
            testa=float(np.mean([r["testa"] for r in runs])),
            testb=float(np.mean([r["testb"] for r in runs])),
            seconds=float(np.mean([r["seconds"] for r in runs])),
            vector_seconds=vector_seconds,
            n_words=0 if vectors is None else len(vectors[0]),
        )
    notes = run.notes()
    run.publish("ner_vectors", page(rows, seeds, notes), dict(rows=rows, seeds=seeds, run=notes))


def page(rows: dict, seeds, notes: dict) -> list:
    """The results page's lines: one row per source of vectors, the mean entity F1 over the
    seeds and each seed's, on testb and testa."""
    base = rows["no vectors"]
    lines = [
        "# Named entities with word vectors: CoNLL-2002 Spanish",
        "",
        "The tutorial's token features (those of the named-entity table) with and without word "
        "vectors beside them: `SequenceUnion` of `SequenceVectorizer(token_features)` and "
        "`TokenEmbeddings` of `cooccurrence_vectors` (50 dimensions, a window of 2, unit "
        f"rows, the block scaled by {SCALE}: chosen on testa with seed 0), lower-cased words; "
        "words without a vector get zeros. `PerturbMAPCRF` with its defaults, seeds "
        f"{', '.join(map(str, seeds))}: the entity F1 (conlleval's) of each seed and their "
        "mean, and the mean's gain over the features without vectors.",
        "",
        "| features | entity F1 testb (mean) | per seed | gain | entity F1 testa (mean) | "
        "per seed | gain | words with a vector |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        per = {
            split: " / ".join(f"{r[split]:.4f}" for r in row["runs"])
            for split in ("testb", "testa")
        }
        lines.append(
            f"| {name} | {row['testb']:.4f} | {per['testb']} | "
            f"{row['testb'] - base['testb']:+.4f} | {row['testa']:.4f} | {per['testa']} | "
            f"{row['testa'] - base['testa']:+.4f} | {row['n_words']:,} |"
        )
    return lines + ["", rerun(notes)]


if __name__ == "__main__":
    main()
