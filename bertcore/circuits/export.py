"""An attribution graph as the JSON that circuit-tracer's local viewer and Neuronpedia's graph viewer open (the
format circuit-tracer 0.5.0 writes: ``circuit_tracer/utils/create_graph_files.py`` with the pydantic models of
``circuit_tracer/frontend/graph_models.py``; Neuronpedia's ``apps/webapp/app/api/graph/graph-schema.json``):
``metadata``, ``qParams``, ``nodes`` (``node_id``, ``feature``, ``layer``, ``ctx_idx``, ``feature_type``,
``jsNodeId``, ``clerp``, ``influence``, ``activation``; a logit also ``token_prob`` and ``is_target_logit``) and
``links`` (``source``, ``target``, ``weight``) of the pruned graph.

Ids, as the viewer lays them out: a feature ``"{block}_{latent}_{position}"``; an error ``"{block}_-1_{position}"``;
an embedding ``"E_{token id}_{position}"`` on layer ``"E"``; a logit ``"{L + 1}_{token id}_{position}"`` (a contrast
pair, which is no single token: ``vocab_size + j`` for the ``j``-th target, as circuit-tracer numbers its custom
targets).

**A logit's clerp** is circuit-tracer's ``Node.logit_node`` text, ``Output "{token}" (p={prob:.3f})``: both viewers
read it (``attribution_graph/util-cg.js``: ``d.clerp.split('(p=')[1].split(')')[0]`` for the probability, the text
between the first two ``"`` for the token); a clerp without ``(p=`` throws there and the graph draws no node.

**A feature's ``feature`` is circuit-tracer's Cantor pair** :func:`cantor` ``(block, latent)``, with
``metadata.schema_version`` 1, as ``Node.feature_node`` and ``Metadata`` write them. The viewer JS decides it:
``init-cg.js`` reads ``graphSchemaVersion = metadata.schema_version || 0`` and ``init-cg-feature-detail.js``, for
a version above 0, labels a feature ``L{layer}/{featIdx}`` with ``[layer, featIdx] = util.cantorUnpair(feature)``
(version 0: ``featIdx = feature``). The Cantor pair is kept rather than the version left out because (1) the
pydantic ``Metadata`` defaults ``schema_version`` to 1, so any graph loaded and re-written through circuit-tracer's
models becomes version 1 and would then mislabel a bare latent (block 5 latent 150 showed "L5/14"); (2) the feature
panel loads ``{scan}/{feature}.json`` (``feature_examples/init-feature-examples.js``), and only the pair is unique
across blocks.

Slugs and scans are written in Neuronpedia's character set ``[a-zA-Z0-9_.-]`` (:func:`safe_name`).

:func:`feature_files` writes the viewer's feature panel (``circuit_tracer/frontend/feature_models.py``) from the
held-out feature index stored beside each transcoder (:mod:`bertcore.sae.features`, what the Features page shows).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
import re
import time
from functools import partial
from pathlib import Path
from typing import Any

from .attribution import Graph
from .graph import Pruned

GENERATOR = {"name": "bert-explorer (bertcore.circuits)", "version": "0.1.0"}
DIGITS = 6  #: significant digits of the weights, influences and activations written (the viewer draws them)
SCHEMA_VERSION = 1  #: circuit-tracer's ``Metadata.schema_version``: ``feature`` is :func:`cantor` (block, latent)
SLUG_WORDS = 6  #: words of the text a slug is made of (:func:`slug_of`)
_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


def safe_name(text: str) -> str:
    """``text`` in Neuronpedia's character set for a slug or a scan, ``[a-zA-Z0-9_.-]``: every run of other
    characters (spaces, punctuation, brackets, non-ASCII letters) becomes one ``-``, and ``-`` and ``.`` are stripped
    from both ends. ``"bert-well,-the-keys-(old"`` -> ``"bert-well-the-keys-old"``; a safe name stays as it is.

    Raises:
        ValueError: nothing of ``text`` is left (empty, or only other characters).
    """
    out = re.sub(r"-{2,}", "-", _UNSAFE.sub("-", text)).strip("-.")
    if not out:
        raise ValueError(f"{text!r} has no character of [a-zA-Z0-9_.-] to name a graph with")
    return out


def slug_of(text: str, prefix: str = "bert") -> str:
    """A graph's slug from its text: ``prefix`` and the first :data:`SLUG_WORDS` words, lower-cased, ``[MASK]`` as
    ``mask``, through :func:`safe_name`. ``"Well, the keys (old ones) [MASK] here."`` ->
    ``"bert-well-the-keys-old-ones-mask"``."""
    words = "-".join(text.lower().split()[:SLUG_WORDS]).replace("[mask]", "mask")
    return safe_name(f"{prefix}-{words}")


def cantor(layer: int, latent: int) -> int:
    """circuit-tracer's ``_cantor_pairing`` (``frontend/graph_models.py``): ``(x + y)(x + y + 1) / 2 + y`` of two
    non-negative ints, the inverse of the viewer's ``util.cantorUnpair`` (``frontend/assets/util.js``)."""
    return (layer + latent) * (layer + latent + 1) // 2 + latent


def logit_clerp(token: str, probability: float) -> str:
    """circuit-tracer's logit clerp (``Node.logit_node``): ``Output "{token}" (p={probability:.3f})``."""
    return f'Output "{token}" (p={probability:.3f})'


def clerp_of(names: Mapping[int, Sequence[str]] | None, block: int, latent: int) -> str:
    """A feature node's clerp: its label (``names[block][latent]``), or ``"block b latent l"`` without one."""
    given = (names or {}).get(block)
    return given[latent] if given is not None else f"block {block} latent {latent}"


def scan_of(transcoder_set) -> str:
    """The model a transcoder set was trained on, as its files name it (the first ``layer-*/cfg.json``'s
    ``metadata.model_name``: ``minilm-mlm`` for the shipped set), or ``"bert"``: the graph's Neuronpedia scan."""
    from ..sae.io import CFG_FILE, SAEError, read_json_object

    first = sorted(Path(transcoder_set).glob("layer-*"))[:1]
    try:
        meta = read_json_object(first[0] / CFG_FILE).get("metadata") if first else None
    except SAEError:
        meta = None
    return (meta or {}).get("model_name") or "bert"


def _num(x, digits: int = DIGITS) -> float:
    """``x`` rounded to ``digits`` significant digits: a link's weight in 10 characters, not 20 (a 64-token graph
    has ~10^5 links)."""
    return float(f"{float(x):.{digits}g}")


def neuronpedia_json(graph: Graph, pruned: Pruned, scan: str, slug: str, prompt: str,
                     node_threshold: float = 0.8, edge_threshold: float = 0.98, digits: int = DIGITS,
                     feature_dirs: list[str] | None = None,
                     names: Mapping[int, Sequence[str]] | None = None) -> dict[str, Any]:
    """The pruned ``graph`` (``pruned`` from :func:`bertcore.circuits.graph.prune_graph`) as the graph JSON of
    circuit-tracer 0.5.0's ``create_graph_files`` (module docstring). ``scan``: the model's name (Neuronpedia's model
    id); ``slug``: the graph's name (both through :func:`safe_name`); ``prompt``: the input text; ``digits``:
    significant digits of the numbers written (weights: direct effects in the target's units; influence: the
    cumulative share 0..1 the viewer's pruning slider reads; activation: the transcoder's, in its scaled units).

    ``feature_dirs``: one folder per block where the viewer finds the feature files (:func:`feature_files`), as
    circuit-tracer writes a list of transcoders: ``scan`` becomes ``"custom-{scan}"`` and ``transcoder_list`` the
    folders (the viewer reads block ``b``'s features from ``transcoder_list[b]``; a folder starting ``./`` is read
    from the viewer's own server). Without: ``transcoder_list`` is empty.

    ``names``: ``{block: [label]}``, each transcoder feature's label
    (:func:`bertcore.sae.report.set_label_texts`), written as its clerp; a feature without one reads ``"block b
    latent l"``.

    Raises:
        ValueError: a ``scan`` or ``slug`` with no character of Neuronpedia's set; ``feature_dirs`` not one per
            block.
    """
    num = partial(_num, digits=digits)
    lay, t, n_blocks = graph.layout, len(graph.tokens), graph.layout.errors // max(1, len(graph.tokens))
    vocab = len(graph.targets[0].vector) if graph.targets else 0
    ids: dict[int, str] = {}
    nodes = []
    for i in pruned.nodes.nonzero().flatten().tolist():
        influence = num(pruned.cumulative[i])
        if i < lay.features:
            block, pos, latent = (int(v) for v in graph.features[i])
            node = {"node_id": f"{block}_{latent}_{pos}", "feature": cantor(block, latent), "layer": str(block),
                    "ctx_idx": pos, "feature_type": "cross layer transcoder", "jsNodeId": f"{block}_{latent}-{pos}",
                    "clerp": clerp_of(names, block, latent), "influence": influence,
                    "activation": num(graph.activations[i])}
        elif i < lay.part("embeddings").start:
            block, pos = divmod(i - lay.features, t)
            node = {"node_id": f"{block}_-1_{pos}", "feature": -1, "layer": str(block), "ctx_idx": pos,
                    "feature_type": "mlp reconstruction error", "jsNodeId": f"{block}_err-{pos}",
                    "clerp": f"error of block {block} at '{graph.tokens[pos]}'", "influence": influence,
                    "activation": None}
        elif i < lay.part("logits").start:
            pos = i - lay.part("embeddings").start
            token_id = int(graph.input_ids[pos])
            node = {"node_id": f"E_{token_id}_{pos}", "feature": token_id, "layer": "E", "ctx_idx": pos,
                    "feature_type": "embedding", "jsNodeId": f"E_{token_id}-{pos}",
                    "clerp": f"'{graph.tokens[pos]}' (embedding)", "influence": influence, "activation": None}
        else:
            j = i - lay.part("logits").start
            target = graph.targets[j]
            # one token: its id; a contrast pair: a virtual index past the vocabulary, as circuit-tracer's custom
            # targets (create_graph_files: vocab_size + the target's position)
            token_id = target.token_ids[0] if len(target.token_ids) == 1 else vocab + j
            pos = graph.mask_position
            node = {"node_id": f"{n_blocks + 1}_{token_id}_{pos}", "feature": token_id, "layer": str(n_blocks + 1),
                    "ctx_idx": pos, "feature_type": "logit", "jsNodeId": f"L_{token_id}-{pos}",
                    "clerp": logit_clerp(target.label, target.probability), "influence": influence,
                    "activation": None, "token_prob": target.probability, "is_target_logit": j == 0}
        ids[i] = node["node_id"]
        nodes.append(node)
    rows = lay.rows().tolist()
    links = [{"source": ids[s], "target": ids[rows[r]], "weight": num(graph.edges[r, s])}
             for r, s in pruned.edges.nonzero().tolist() if s in ids and rows[r] in ids]
    scan = safe_name(scan)
    if feature_dirs is not None:
        if len(feature_dirs) != n_blocks:
            raise ValueError(f"feature_dirs names {len(feature_dirs)} folders; the graph has {n_blocks} blocks")
        scan, transcoder_list = f"custom-{scan}", list(feature_dirs)
    else:
        transcoder_list = []
    metadata = {"slug": safe_name(slug), "scan": scan, "transcoder_list": transcoder_list,
                "prompt_tokens": list(graph.tokens), "prompt": prompt, "node_threshold": node_threshold,
                "schema_version": SCHEMA_VERSION,
                "info": {"generator": GENERATOR, "create_time_ms": int(time.time() * 1000)},
                "generation_settings": {"max_n_logits": len(graph.targets)},
                "pruning_settings": {"node_threshold": node_threshold, "edge_threshold": edge_threshold}}
    qparams = {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""}
    return {"metadata": metadata, "qParams": qparams, "nodes": nodes, "links": links}


def dumps(doc: dict[str, Any]) -> str:
    """``doc`` (:func:`neuronpedia_json`) as compact JSON text, UTF-8 characters as they are: what the download and
    the size benchmark write (without the spaces of ``json.dumps``' defaults: the benchmark's 64-token graph 5.59 MB,
    not 6.12)."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


# ----------------------------------------------------------------------------- the viewer's feature panel
EXAMPLES = 8  #: top contexts per feature file (the Features page's dashboard shows 8)
N_LOGITS = 10  #: top and bottom logits per feature file
HIST_BINS = 30  #: bins of a feature file's histogram, linear over 0..act_max


def _histogram(counts, act_max: float):
    """A feature's stored counts in :data:`bertcore.sae.features.HIST_EDGES` bins (log-spaced) as
    ``(histogram (HIST_BINS,), quantile_values (100,))``: each log bin's count put in the linear bin over
    ``0..act_max`` that holds its geometric centre (the viewer draws linear bins), and the activation at each
    percentile 1..100 as the upper edge of the log bin where the cumulative count reaches it (capped at ``act_max``;
    the resolution of the stored bins)."""
    import numpy as np

    from ..sae.features import HIST_EDGES

    counts = np.asarray(counts, dtype=np.float64)
    centres = np.sqrt(HIST_EDGES[:-1] * HIST_EDGES[1:])
    edges = np.linspace(0.0, max(act_max, 1e-12), HIST_BINS + 1)
    where = np.clip(np.searchsorted(edges, centres, side="right") - 1, 0, HIST_BINS - 1)
    histogram = np.bincount(where, weights=counts, minlength=HIST_BINS)
    total = counts.sum()
    if total <= 0:
        return histogram.tolist(), [0.0] * 100
    cumulative = np.cumsum(counts) / total
    at = np.searchsorted(cumulative, np.arange(1, 101) / 100 - 1e-12)
    quantiles = np.minimum(HIST_EDGES[1:][np.clip(at, 0, len(counts) - 1)], act_max)
    return histogram.tolist(), [float(q) for q in quantiles]


def feature_files(graph: Graph, pruned: Pruned, model, tokenizer, transcoder_set, model_folder, out,
                  scan: str, examples: int = EXAMPLES, n_logits: int = N_LOGITS, batch: int = 32,
                  progress=None) -> tuple[list[str], int, list[int]]:
    """The feature panel of circuit-tracer's viewer for every feature node of the pruned graph: one JSON file per
    feature in the format of ``circuit_tracer/frontend/feature_models.py`` (``Model``), at
    ``out/features/{scan}/block-{b}/{cantor(b, latent)}.json``, where the viewer of circuit-tracer's local server
    (``frontend/local_server.py``: ``/data/<path>`` is ``<data dir>/<path>``) reads them with ``out`` its data folder
    and ``./data/features/{scan}/block-{b}`` block ``b``'s entry of ``transcoder_list``
    (:func:`neuronpedia_json`'s ``feature_dirs``).

    What a file holds, from the transcoder's stored held-out index (:func:`bertcore.sae.report.stored_index`; what the
    Features page's dashboard shows, computed the same way): ``examples_quantiles``, one quantile "Top activations" of
    the ``examples`` held-out sentences of its strongest activations, each with its WordPieces and the feature's
    activation on every one (:func:`bertcore.sae.explore.activations`, one forward pass per ``batch`` sentences of a
    block, sentences of like length together; the tokens as :func:`_display` writes them; ``train_token_ind`` the top
    token; ``is_repeated_datapoint`` a sentence already shown); ``top_logits`` / ``bottom_logits``, the ``n_logits``
    WordPieces it promotes and suppresses through the MLM head (:func:`bertcore.sae.explore.logit_effect` at its
    strongest activation; empty without a head); ``act_max`` its strongest held-out activation (``act_min`` 0),
    ``histogram`` and ``quantile_values`` (:func:`_histogram`), ``activation_frequency`` the share of held-out tokens
    where it fires. Activations are in the transcoder's scaled units.

    Args:
        transcoder_set: the set folder (``layer-<n>/`` per block); model_folder: the model's files (the index's
            key); out: the data folder; scan: the folder name under ``features/`` (through :func:`safe_name`).
    Returns:
        ``(feature_dirs, written, unindexed)``: the viewer's folder of each block, the files written, and the blocks
        skipped because their transcoder has no stored index for this model (their feature panel stays empty).
    Raises:
        bertcore.sae.io.SAEError: an unreadable transcoder set or one that does not fit the model.
    """
    import torch

    from ..readouts.fill_mask import FillMaskError
    from ..sae import explore
    from ..sae.io import SAEError
    from ..sae.stream import pad
    from ..sae.report import stored_index
    from ..sae.transcoder import load_set, set_folders

    cfg = getattr(model, "base_model", model).config
    tcs = load_set(transcoder_set, cfg.hidden_size, cfg.num_hidden_layers)
    folders = set_folders(transcoder_set)
    scan = safe_name(scan)
    root = Path(out) / "features" / scan
    dirs = [f"./data/features/{scan}/block-{b}" for b in range(cfg.num_hidden_layers)]
    by_block: dict[int, list[int]] = {}  # block -> its latents among the kept feature nodes
    for i in pruned.nodes[:graph.layout.features].nonzero().flatten().tolist():
        block, _, latent = (int(v) for v in graph.features[i])
        by_block.setdefault(block, [])
        if latent not in by_block[block]:
            by_block[block].append(latent)
    written, unindexed, done = 0, [], 0
    total = sum(len(v) for v in by_block.values())
    for block, latents in sorted(by_block.items()):
        index = stored_index(folders[block], model_folder, block)
        if index is None:
            unindexed.append(block)
            continue
        tc, text = tcs[block], index.text
        rows = {lat: [int(r) for r in index.top_rows[lat] if r >= 0][:examples] for lat in latents}
        sentences = sorted({text.sentence_of(r) for rs in rows.values() for r in rs},
                           key=lambda k: text.starts[k + 1] - text.starts[k])  # by length: batches pad little
        acts: dict[int, torch.Tensor] = {}  # sentence -> (T, len(latents)) the latents' activations
        for s in range(0, len(sentences), batch):
            part = sentences[s:s + batch]
            chunks = [text.token_ids[text.starts[k]:text.starts[k + 1]] for k in part]
            z = explore.activations(model, pad(chunks, tokenizer.pad_token_id), tc, block)[..., latents]
            for k, c, zz in zip(part, chunks, z):
                acts[k] = zz[:len(c)]
        folder = root / f"block-{block}"
        folder.mkdir(parents=True, exist_ok=True)
        for col, latent in enumerate(latents):
            strength = float(index.top_values[latent][0])
            seen, shown = set(), []
            for r in rows[latent]:
                k = text.sentence_of(r)
                ids = text.token_ids[text.starts[k]:text.starts[k + 1]]
                shown.append({"tokens_acts_list": [float(f"{v:.4g}") for v in acts[k][:, col].tolist()],
                              "train_token_ind": int(r - text.starts[k]), "is_repeated_datapoint": k in seen,
                              "tokens": _display(tokenizer.convert_ids_to_tokens([int(i) for i in ids]))})
                seen.add(k)
            try:
                up, down = explore.logit_effect(model, tokenizer, tc, block, latent, index.mean, strength or 1.0,
                                                n=n_logits)
            except (FillMaskError, SAEError):
                up = down = []
            histogram, quantiles = _histogram(index.hist[latent], strength)
            doc = {"transcoder_id": f"{scan}/block-{block}", "index": latent,
                   "examples_quantiles": [{"quantile_name": "Top activations", "examples": shown}],
                   "top_logits": [w for w, _ in up], "bottom_logits": [w for w, _ in down],
                   "act_min": 0.0, "act_max": strength, "quantile_values": quantiles, "histogram": histogram,
                   "activation_frequency": float(index.fired[latent]) / max(len(text.token_ids), 1)}
            (folder / f"{cantor(block, latent)}.json").write_text(dumps(doc), encoding="utf-8")
            written += 1
            done += 1
            if progress is not None:
                progress(done, total)
    return dirs, written, unindexed


def _display(pieces: list[str]) -> list[str]:
    """WordPieces as the viewer's context strip joins them (it writes tokens side by side, as GPT-style tokens carry
    their own spaces): a word's first piece with a leading space (not the first token), a ``##`` continuation
    without its ``##``. One string per token, so the activations stay aligned."""
    return [p[2:] if p.startswith("##") else (p if i == 0 else " " + p) for i, p in enumerate(pieces)]


def add_graph_metadata(folder, metadata: dict[str, Any]) -> Path:
    """List a graph in ``folder/graph-metadata.json`` (``{"graphs": [...]}``), the index circuit-tracer's viewer
    opens (``frontend/utils.py``'s ``add_graph_metadata``: an entry of the same slug replaced, others kept). The
    entry holds the fields of circuit-tracer's ``Metadata`` (slug, scan, transcoder_list, prompt_tokens, prompt,
    node_threshold, schema_version). Returns the file's path."""
    path = Path(folder) / "graph-metadata.json"
    entry = {k: metadata[k] for k in ("slug", "scan", "transcoder_list", "prompt_tokens", "prompt", "node_threshold",
                                      "schema_version") if k in metadata}
    graphs = json.loads(path.read_text(encoding="utf-8")).get("graphs", []) if path.is_file() else []
    graphs = [g for g in graphs if g.get("slug") != entry["slug"]] + [entry]
    path.write_text(json.dumps({"graphs": graphs}, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
