"""Named entities with word vectors beside the token features: CoNLL-2002 Spanish, the
tutorial's features with and without word vectors made from the corpus, as a dense block or
as cluster ids.

The features of ``benchmarks/ner.py`` (:func:`pmap_sklearn.datasets.token_features` on
``(word, pos)`` pairs), joined by :class:`pmap_sklearn.SequenceUnion` to word vectors from
:func:`pmap_sklearn.embeddings.cooccurrence_vectors` (the truncated SVD of the PPMI matrix of
lower-cased word co-occurrences) — as in ``examples/plot_token_embeddings.py`` — taken two
ways: :class:`pmap_sklearn.TokenEmbeddings` (the vectors' dimensions as dense columns) and
:class:`pmap_sklearn.TokenClusters` (its defaults: one-hot k-means cluster ids at 50 / 200 /
1000 clusters of the word and of its two neighbours, the practice of Turian, Ratinov & Bengio
2010 for linear taggers). The vectors' settings and each block's scale were chosen on
``esp.testa`` with seed 0, never on testb. :class:`pmap_sklearn.PerturbMAPCRF` runs with its
defaults and seeds 0, 1, 2 in every row (a seed moves the entity F1 by about a point).

Two sources of vectors: the training sentences alone, and the sentences of all three splits
without their tags — transductive: the test sentences' words then have vectors and clusters
too (what a large untagged corpus covering the test words would give). And the example's
setting, few tagged sentences beside more untagged text: the tagger learns from the first
1,000 training sentences, the vectors come from all of them without their tags.

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
#: the dense block scaled by 0.03 / 0.1 / 0.3: 0.7432 / 0.7511 / 0.7458; standardised columns
#: instead of unit rows: 0.7424 (scaled by 0.1), 0.7093 (by 1); 100 dimensions: 0.7449; a
#: window of 1: 0.7457; the neighbours' vectors too: 0.7494.
VECTORS = dict(n_components=50, window=2)
SCALE = 0.1
#: TokenClusters' defaults (k-means into 50 / 200 / 1000 clusters; the word and its two
#: neighbours), the block scaled by CLUSTER_SCALE.
#: On esp.testa with seed 0, scaled by 1 / 0.3 / 0.1: the training sentences' clusters
#: 0.7368 / 0.7459 / 0.7440 (the word's own clusters alone, by 0.3: 0.7439); the transductive
#: clusters 0.7472 / 0.7525 / 0.7523.
CLUSTER_SCALE = 0.3
SEEDS = (0, 1, 2)
#: The rows with few tagged sentences: the first FEW training sentences keep their tags, the
#: vectors come from all the training sentences, untagged (semi-supervised: no test words).
FEW = 1000
#: Rows: (the splits whose untagged sentences make the vectors, how the tagger takes them,
#: whether it learns from the first FEW training sentences only).
ROWS = {
    "no vectors": (None, None, False),
    "dense vectors of the training sentences": (("train",), "dense", False),
    "clusters of the training sentences' vectors": (("train",), "clusters", False),
    "dense vectors of train + testa + testb sentences (transductive)": (
        ("train", "testa", "testb"),
        "dense",
        False,
    ),
    "clusters of train + testa + testb sentences' vectors (transductive)": (
        ("train", "testa", "testb"),
        "clusters",
        False,
    ),
    "few tagged: no vectors": (None, None, True),
    "few tagged: dense vectors of the training sentences": (("train",), "dense", True),
    "few tagged: clusters of the training sentences' vectors": (("train",), "clusters", True),
}
#: ``--quick``: the first training, testa and testb sentences, and the seeds.
QUICK = dict(train=1000, testa=500, testb=500, seeds=(0,), few=200)


def tagger(vectors, kind, seed: int):
    """The tutorial's features, and the vectors as a dense block or as cluster ids."""
    from sklearn.pipeline import make_pipeline

    from pmap_sklearn import (
        PerturbMAPCRF,
        SequenceUnion,
        SequenceVectorizer,
        TokenClusters,
        TokenEmbeddings,
    )
    from pmap_sklearn.datasets import token_features

    blocks = [("tokens", SequenceVectorizer(token_features))]
    if kind == "dense":
        blocks.append(("vectors", TokenEmbeddings(vectors, lowercase=True)))
    elif kind == "clusters":
        blocks.append(("vectors", TokenClusters(vectors, lowercase=True)))
    scale = {"dense": SCALE, "clusters": CLUSTER_SCALE}.get(kind)
    union = SequenceUnion(blocks, transformer_weights={"vectors": scale} if kind else None)
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
    few = QUICK["few"] if args.quick else FEW
    rows, made = {}, {}
    for name, (splits, kind, is_few) in ROWS.items():
        tagged = first(data["train"], few) if is_few else data["train"]
        vectors, vector_seconds = None, 0.0
        if splits is not None and splits not in made:
            corpus = [s for split in splits for s in data[split].sentences]
            made[splits] = timed(cooccurrence_vectors, corpus, **VECTORS)
        if splits is not None:
            vectors, vector_seconds = made[splits]
        runs = []
        for seed in seeds:
            model = tagger(vectors, kind, seed)
            _, seconds = timed(model.fit, tagged.tokens, tagged.tags)
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
            tagged=len(tagged.tags),
        )
    notes = run.notes()
    run.publish("ner_vectors", page(rows, seeds, notes), dict(rows=rows, seeds=seeds, run=notes))


def page(rows: dict, seeds, notes: dict) -> list:
    """The results page's lines: one row per source of vectors, the mean entity F1 over the
    seeds and each seed's, on testb and testa."""
    bases = {row["tagged"]: row for row in rows.values() if row["n_words"] == 0}
    lines = [
        "# Named entities with word vectors: CoNLL-2002 Spanish",
        "",
        "The tutorial's token features (those of the named-entity table) with and without word "
        "vectors beside them: `SequenceUnion` of `SequenceVectorizer(token_features)` and "
        "either `TokenEmbeddings` of `cooccurrence_vectors` (50 dimensions, a window of 2, unit "
        f"rows; the dense block scaled by {SCALE}) or `TokenClusters` of the same vectors (its "
        "defaults: k-means into 50, 200 and 1000 clusters, one-hot ids of the word and of its "
        f"two neighbours; the block scaled by {CLUSTER_SCALE}), lower-cased words; words "
        "without a vector add nothing. The scales were chosen on testa with seed 0. "
        "Transductive rows make the vectors from the untagged test sentences too. The rows "
        "of few tagged sentences learn from the first ones of the training split only, their "
        "vectors still made from every training sentence without its tags (semi-supervised); "
        "their gains are over the features alone on those sentences. "
        "`PerturbMAPCRF` with its defaults, seeds "
        f"{', '.join(map(str, seeds))}: the entity F1 (conlleval's) of each seed and their "
        "mean, and the mean's gain over the features without vectors.",
        "",
        "| features | entity F1 testb (mean) | per seed | gain | entity F1 testa (mean) | "
        "per seed | gain | words with a vector |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        base = bases[row["tagged"]]
        label = name.replace("few tagged", f"{row['tagged']:,} tagged sentences")
        per = {
            split: " / ".join(f"{r[split]:.4f}" for r in row["runs"])
            for split in ("testb", "testa")
        }
        lines.append(
            f"| {label} | {row['testb']:.4f} | {per['testb']} | "
            f"{row['testb'] - base['testb']:+.4f} | {row['testa']:.4f} | {per['testa']} | "
            f"{row['testa'] - base['testa']:+.4f} | {row['n_words']:,} |"
        )
    return lines + ["", rerun(notes)]


if __name__ == "__main__":
    main()
