"""The heavy results of the app's default views, computed here and shipped beside the model
(:mod:`bertcore.loading.shipped_file`) so that a first visit answers at once.

Each function below returns a :class:`Computation`: a name, the parameters that determine the result, and how to
compute it. The app calls :func:`get` (the shipped result when it belongs to this model and these parameters,
else the computation, with its progress bar); ``python -m bertcore.analysis.shipped`` writes the file for a
model folder (:func:`default_views`: every default view of the app). The inputs of those default views live
here (one owner; the pages read them): change one and the shipped entry no longer matches, so the page
computes again until the file is rewritten. Bump :data:`VERSION` when a computation changes what it returns;
``tests/analysis/test_shipped.py`` recomputes every shipped entry and compares.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..loading import shipped_file

VERSION = 1
# The inputs of the app's default views (the pages import these)
PROBE_SEGMENTS = 60  # Findings' probing classifiers: enough words for stable accuracies, a first computation < 2 min
GRAMMAR_PAIRS = 40  # pairs per paradigm of the Grammar page's suite
GRAMMAR_METRIC = "within_word_l2r"
CORPUS_TEXT = "She deposited the cheque at the bank on Monday."
CORPUS_WORD = "bank"  # the token the Corpus search page follows by default
CORPUS_LAYER = 4
CORPUS_K = 20
CORPUS_SEGMENTS = 150
PROJECTOR_CORPUS = "sotu"  # the Embedding projector's default view: tokens of held-out sentences, PCA, part of speech
PROJECTOR_POINTS = 2000
PROJECTOR_LAYER = 3
PROJECTOR_METHOD = "pca"
PROJECTOR_COLOUR = "pos"
PROJECTOR_UNIT = "token"
CIRCUIT_TEXT = "The keys to the cabinet [MASK] on the table."  # the Circuits page's default sentence
CIRCUIT_CONTRAST = ("are", "is")  # and its contrast pair: the graph explains logit(are) - logit(is)

Progress = Callable[[int, int], None] | None


@dataclass(frozen=True)
class Computation:
    """One shippable result: ``name``, the ``params`` it depends on (with the model: the file's key) and
    ``compute(progress)``, which returns it."""

    name: str
    params: dict
    compute: Callable[[Progress], Any]


def get(loaded, computation: Computation, progress: Progress = None) -> Any:
    """The shipped result of ``computation`` for ``loaded`` (a :class:`bertcore.loading.sources.LoadedModel`) when its
    folder holds one keyed by the same model files and parameters, else ``computation.compute(progress)``."""
    found = shipped(loaded, computation)
    return computation.compute(progress) if found is None else found


def shipped(loaded, computation: Computation) -> Any | None:
    """The shipped result of ``computation`` for ``loaded``, or None (none shipped, or it belongs to other files or
    parameters)."""
    folder = getattr(loaded, "path", None)
    return None if folder is None else shipped_file.read(folder, computation.name, computation.params)


def _limit(loaded, max_tokens: int) -> int:
    return min(max_tokens, loaded.max_length)


def segments(loaded, n_segments: int, max_tokens: int):
    """The held-out BBC segments every analysis below reads (:func:`bertcore.analysis.papers.evalset.build_segments`,
    seed 0). Raises ``bertcore.data.DataError`` without the packaged corpus."""
    from .papers import evalset

    return evalset.build_segments(loaded.tokenizer, evalset.heldout_documents(), n_segments, max_tokens)


def findings(loaded, n_segments: int, segments_of=None) -> Computation:
    """Clark / Kovaleva / Ethayarajh measures (:func:`bertcore.analysis.papers.evalset.run_findings`) on
    ``n_segments`` held-out segments. ``segments_of(n, max_tokens)``: where the segments come from (a cache)."""
    from .papers import evalset

    limit = _limit(loaded, evalset.MAX_TOKENS)
    seg = segments_of or (lambda n, m: segments(loaded, n, m))
    return Computation("findings", {"version": VERSION, "n_segments": n_segments, "max_tokens": limit, "seed": 0},
                       lambda progress: evalset.run_findings(loaded.encoder, loaded.tokenizer, seg(n_segments, limit),
                                                             progress=progress))


def position_regression(loaded) -> Computation:
    """Wang & Chen 2020's 5-fold position regression on the learned and a sinusoidal table
    (:func:`bertcore.readouts.positional.regression_summary`)."""
    from ..readouts import positional

    return Computation("position_regression", {"version": VERSION, "n_splits": 5, "seed": 0},
                       lambda progress: positional.regression_summary(loaded.model))


def syntax(loaded, n_segments: int, segments_of=None) -> Computation:
    """Clark et al.'s syntax heads and attention-only probe (:func:`.representations.syntax.run_syntax`)."""
    from .papers import evalset
    from .representations import syntax as syntax_mod

    limit = _limit(loaded, evalset.MAX_TOKENS)
    seg = segments_of or (lambda n, m: segments(loaded, n, m))
    return Computation("syntax", {"version": VERSION, "n_segments": n_segments, "max_tokens": limit,
                                  "min_count": syntax_mod.MIN_COUNT, "probe": True},
                       lambda progress: syntax_mod.run_syntax(loaded.encoder, loaded.tokenizer, seg(n_segments, limit),
                                                              progress=progress, with_probe=True))


def probes(loaded, n_segments: int, parsed_of=None) -> Computation:
    """Linear probes for part of speech and dependency label per layer
    (:func:`.representations.probes.probe_all`) on the parsed segments of :func:`syntax`. ``parsed_of(n)``: where
    the parsed segments come from (a cache of the syntax run)."""
    from .papers import evalset
    from .representations import probes as probes_mod

    limit = _limit(loaded, evalset.MAX_TOKENS)

    def compute(progress):
        parsed = parsed_of(n_segments) if parsed_of else syntax(loaded, n_segments).compute(None).segments
        return probes_mod.probe_all(loaded.encoder, loaded.tokenizer, parsed, progress=progress)

    return Computation("probes", {"version": VERSION, "n_segments": n_segments, "max_tokens": limit,
                                  "tasks": list(probes_mod.TASKS)}, compute)


def grammar_suite(loaded, n_per_paradigm: int, metric: str) -> Computation:
    """The minimal-pair suite (:mod:`.grammar.minimal_pairs`, its fixed seed) scored by pseudo-log-likelihood."""
    from .grammar import minimal_pairs as M

    def compute(progress):
        pairs = M.generate(n_per_paradigm)
        out = []
        for i, r in enumerate(M.score(loaded.model, loaded.tokenizer, pairs, metric)):
            out.append(r)
            if progress is not None:
                progress(i + 1, len(pairs))
        return out

    return Computation("grammar_suite", {"version": VERSION, "n_per_paradigm": n_per_paradigm, "metric": metric,
                                         "seed": M.SUITE_SEED}, compute)


def _check_hidden_index(loaded, layer: int) -> None:
    """Raise ``ValueError`` unless ``layer`` is a hidden_states index (0 = embeddings) of ``loaded``: ``0..L``."""
    n = loaded.config.num_hidden_layers
    if not 0 <= int(layer) <= n:
        raise ValueError(f"layer must be a hidden_states index in 0..{n} (0 = embeddings); got {layer}")


def corpus_neighbours(loaded, texts: list[str], text: str, position: int, layer: int, k: int,
                      cache: Path | None = None, progress: Progress = None) -> dict:
    """The ``k`` tokens of ``texts`` nearest (cosine) to token ``position`` of ``text`` at ``layer``, a hidden_states
    index (0 = embeddings), ``0..L`` (exBERT, Hoover et al. 2020; :mod:`.representations.corpus_search`): every
    ordinary token of the texts is indexed at that layer (each text and ``text`` read up to 128 tokens), then
    searched. ``cache``: a folder where the index is kept (``cache/corpus-index/<key>.npz``, keyed on the model's
    files, the texts and the layer): read when it is there, written when it is built. Returns ``{"hits",
    "labels" (POS, dependency of each hit; None without spaCy), "n_tokens", "n_texts"}``.

    Raises ``ValueError`` for a layer outside ``0..L`` or no text, ``TextError`` for an unusable ``text``."""
    import torch

    from ..loading.sources import files_stamp
    from ..tokenization.tokenizer import encode
    from .representations import corpus_search as CS
    from .representations import parses

    _check_hidden_index(loaded, layer)
    limit = _limit(loaded, CS.MAX_TOKENS)
    path = None
    if cache is not None:  # keyed as (kind, ref, files stamp): rewritten model files give a new index
        model_key = repr((loaded.source.kind, loaded.source.ref, files_stamp(loaded.source)))
        path = CS.index_path(Path(cache), model_key, texts, layer)
    index = CS.load_index(path) if path is not None and path.is_file() else None
    if index is None:
        index = CS.build_index(loaded.encoder, loaded.tokenizer, texts, layer, progress=progress)
        if path is not None:
            try:
                CS.save_index(index, path)
            except OSError:
                pass  # the index on disk is an optimisation only
    t = encode(loaded.tokenizer, text, max_length=limit).tensors(loaded.device)
    with torch.no_grad():
        hidden = loaded.encoder(t["input_ids"], t["attention_mask"], t["token_type_ids"],
                                output_hidden_states=True).hidden_states[layer][0, position].cpu().numpy()
    hits = CS.search(index, hidden, k)
    try:
        labels = CS.hit_labels(index, hits, loaded.tokenizer)
    except parses.SyntaxUnavailable:
        labels = None
    return {"hits": hits, "labels": labels, "n_tokens": len(index.tokens), "n_texts": len(texts)}


def corpus_search(loaded, text: str, position: int, layer: int, k: int, n_segments: int,
                  segments_of=None, cache: Path | None = None) -> Computation:
    """:func:`corpus_neighbours` over ``n_segments`` held-out BBC segments (:func:`segments`): ``{"hits", "labels",
    "n_tokens", "n_texts"}``. ``cache``: where the index is kept (not a parameter of the result). Raises
    ``ValueError`` (naming the range) for a layer outside ``0..L`` at once, before anything is computed."""
    _check_hidden_index(loaded, layer)
    limit = _limit(loaded, 128)
    seg = segments_of or (lambda n, m: segments(loaded, n, m))

    def compute(progress):
        texts = [f"{s.text_a} {s.text_b}" for s in seg(n_segments, limit)]
        return corpus_neighbours(loaded, texts, text, position, layer, k, cache=cache, progress=progress)

    return Computation("corpus_search", {"version": VERSION, "text": text, "position": position, "layer": layer,
                                         "k": k, "n_segments": n_segments, "max_tokens": limit}, compute)


def corpus_default_position(loaded) -> int:
    """The token of :data:`CORPUS_TEXT` the Corpus search page follows by default (:data:`CORPUS_WORD`, else the
    first ordinary token)."""
    from ..tokenization.tokenizer import encode

    enc = encode(loaded.tokenizer, CORPUS_TEXT, max_length=_limit(loaded, 128))
    special = set(loaded.tokenizer.all_special_ids)
    ordinary = [i for i, tid in enumerate(enc.input_ids) if tid not in special]
    return next((i for i in ordinary if enc.tokens[i] == CORPUS_WORD), ordinary[0])


FAITHFULNESS_SENTENCES = 200  # Findings' "which explanation is faithful" set: held-out sotu sentences


def faithfulness(loaded, n_sentences: int = FAITHFULNESS_SENTENCES) -> Computation:
    """Which explanation is faithful, over a whole set: :func:`bertcore.analysis.causal.faithfulness.over_sentences` on
    ``n_sentences`` held-out ``sotu`` sentences (one word masked in each). The value: ``{"correlations": (N,
    methods, effects), "sentences": [...]}``. Not among :func:`default_views` (about 1-2 s a sentence on 2 CPU
    cores): the Findings page computes it on request unless a shipped file holds it."""
    from .causal import faithfulness as faith

    def compute(progress):
        sentences = faith.sotu_sentences(n_sentences, seed=0)
        res = faith.over_sentences(loaded.model, loaded.tokenizer, sentences, seed=0,
                                   progress=None if progress is None else
                                   (lambda f: progress(round(f * len(sentences)), len(sentences))))
        return {"correlations": res.correlations, "sentences": res.sentences}

    return Computation("faithfulness", {"version": VERSION, "n_sentences": n_sentences, "seed": 0,
                                        "ig_steps": faith.IG_STEPS}, compute)


def projector(loaded, corpus: str = PROJECTOR_CORPUS, n_points: int = PROJECTOR_POINTS,
              layer: int = PROJECTOR_LAYER, method: str = PROJECTOR_METHOD, colour: str = PROJECTOR_COLOUR,
              unit: str = PROJECTOR_UNIT) -> Computation:
    """The Embedding projector's view (:func:`bertcore.analysis.projector_view.view`), shipped without its vectors: each
    point's nearest neighbours at ``layer`` (a hidden_states index (0 = embeddings), ``0..L``; ``ValueError`` at once
    outside it) are stored instead (``neighbour_ids`` / ``neighbour_cos``, exact)."""
    _check_hidden_index(loaded, layer)
    from . import projector_view as PV
    from .representations import projector as P

    def compute(progress):
        view = PV.view(loaded, corpus, n_points, layer, method, colour, unit, progress=progress)
        proj = view.projection
        proj.neighbour_ids, proj.neighbour_cos = P.neighbour_table(proj.vectors)
        proj.vectors = None
        return view

    return Computation("projector", {"version": VERSION, "corpus": corpus, "n_points": n_points, "layer": layer,
                                     "method": method, "colour": colour, "unit": unit, "seed": 0,
                                     "max_tokens": PV.MAX_TOKENS, "k": P.K_NEIGHBOURS}, compute)


def circuit(loaded, text: str, contrast: tuple[str, str] | None, transcoders: str | Path,
            node_threshold: float = 0.8, edge_threshold: float = 0.98, graph_of=None) -> Computation:
    """The Circuits page's pruned attribution graph (:func:`bertcore.circuits.pruned.circuit`) of ``text`` through the
    transcoder set in ``transcoders``, keyed by those files' bytes (:func:`bertcore.loading.shipped_file.files_hash`),
    not their path. ``graph_of()``: where the unpruned graph comes from (a cache), else
    :func:`bertcore.circuits.attribution.build`."""
    from ..circuits import attribution, pruned
    from ..sae.transcoder import load_set

    def compute(progress):
        if graph_of is not None:
            g = graph_of()
        else:
            config = loaded.model.config
            tcs = load_set(transcoders, config.hidden_size, config.num_hidden_layers)
            g = attribution.build(loaded.model, loaded.tokenizer, text, tcs, contrast=contrast)
        return pruned.circuit(g, node_threshold, edge_threshold)

    return Computation("circuit", {"version": VERSION, "text": text, "contrast": list(contrast) if contrast else None,
                                   "transcoders": shipped_file.files_hash(transcoders),
                                   "node_threshold": node_threshold, "edge_threshold": edge_threshold}, compute)


def default_circuit(loaded) -> Computation:
    """The Circuits page's default view: :data:`CIRCUIT_TEXT` and :data:`CIRCUIT_CONTRAST` through the model's
    shipped transcoder set (``<model folder>/transcoders``, :data:`bertcore.sae.catalog.TRANSCODERS_DIR`).

    Raises:
        FileNotFoundError: the model's folder holds no transcoder set.
    """
    from ..sae.catalog import TRANSCODERS_DIR, shipped_transcoders

    folder = shipped_transcoders(loaded.path)
    if folder is None:
        raise FileNotFoundError(f"{loaded.path}/{TRANSCODERS_DIR} holds no transcoder set (layer-<n>/cfg.json)")
    return circuit(loaded, CIRCUIT_TEXT, CIRCUIT_CONTRAST, folder)


def default_views(loaded) -> list[Computation]:
    """Every heavy computation of the app's default views for ``loaded`` (the Grammar suite only with an MLM head)."""
    from .papers import evalset

    out = [findings(loaded, evalset.DEFAULT_SEGMENTS), position_regression(loaded),
           syntax(loaded, evalset.DEFAULT_SEGMENTS), probes(loaded, PROBE_SEGMENTS),
           corpus_search(loaded, CORPUS_TEXT, corpus_default_position(loaded), CORPUS_LAYER, CORPUS_K,
                         CORPUS_SEGMENTS), projector(loaded)]
    if loaded.has_mlm_head:
        out.append(grammar_suite(loaded, GRAMMAR_PAIRS, GRAMMAR_METRIC))
        from ..sae.catalog import shipped_transcoders

        if shipped_transcoders(loaded.path) is not None:
            out.append(default_circuit(loaded))
    return out


def write(loaded, computations: list[Computation] | None = None, log=print) -> Path:
    """Compute ``computations`` (default :func:`default_views`) for ``loaded`` and write them into its folder.

    Raises:
        bertcore.loading.shipped_file.ShippedFileError: a result that cannot be stored; OSError: an unwritable folder.
    """
    entries = []
    for comp in computations if computations is not None else default_views(loaded):
        t0 = time.perf_counter()
        entries.append((comp.name, comp.params, comp.compute(None)))
        log(f"{comp.name}: {time.perf_counter() - t0:.1f} s")
    return shipped_file.write(loaded.path, entries, notes={"written_by": "python -m bertcore.analysis.shipped",
                                                          "version": VERSION})


EXTRA = {"faithfulness": faithfulness}
"""Computations not among :func:`default_views` that ``--add NAME`` ships beside them."""
ADDABLE = {**EXTRA, "projector": projector, "circuit": default_circuit,
           "probes": lambda loaded: probes(loaded, PROBE_SEGMENTS)}
"""What ``--add NAME`` may compute alone and add to a file: :data:`EXTRA`, default views added after a file
was written (``projector``, ``circuit`` once transcoders are shipped), and ``probes`` (recomputed alone after its
fits took one BLAS thread)."""


def add(loaded, computations: list[Computation], log=print) -> Path:
    """Compute ``computations`` and write them into ``loaded``'s file beside the entries it already holds for the
    same model files (those are kept as they are; an entry of the same name is replaced).

    Raises:
        bertcore.loading.shipped_file.ShippedFileError, OSError: as :func:`write`.
    """
    head = shipped_file.manifest(loaded.path)
    names = {c.name for c in computations}
    entries = []
    if head is not None and head.get("model_hash") == shipped_file.model_hash(loaded.path):
        for entry in head["entries"].values():
            value = shipped_file.read(loaded.path, entry["name"], entry["params"])
            if value is not None and entry["name"] not in names:
                entries.append((entry["name"], entry["params"], value))
    for comp in computations:
        t0 = time.perf_counter()
        entries.append((comp.name, comp.params, comp.compute(None)))
        log(f"{comp.name}: {time.perf_counter() - t0:.1f} s")
    notes = dict((head or {}).get("notes") or {}, written_by="python -m bertcore.analysis.shipped", version=VERSION)
    return shipped_file.write(loaded.path, entries, notes=notes)


def main(argv: list[str] | None = None) -> None:
    from ..loading.sources import PACKAGED_MLM, ModelSource, load

    ap = argparse.ArgumentParser(description="Compute the app's default views for a model and ship them in its "
                                             f"folder ({shipped_file.FILE_NAME}).")
    ap.add_argument("--model", help="an HF model folder (default: the shipped MiniLM-MLM, models/minilm-mlm)")
    ap.add_argument("--add", choices=sorted(ADDABLE), action="append", default=[],
                    help="compute only this view and add it to the file's entries (the others are kept)")
    args = ap.parse_args(argv)
    loaded = load(ModelSource("local", args.model) if args.model else PACKAGED_MLM)
    path = add(loaded, [ADDABLE[name](loaded) for name in args.add]) if args.add else write(loaded)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
