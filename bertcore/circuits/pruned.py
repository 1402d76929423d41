"""A pruned attribution graph, ready to draw or to ship: the nodes and edges circuit-tracer's ``prune_graph`` keeps
(:func:`bertcore.circuits.graph.prune_graph`), each node with its kind, place, activation, influence and direct effect
on the prediction, and the replacement and completeness scores of the graph before and after pruning
(``compute_graph_scores``). Plain arrays and lists: a :class:`Circuit` is stored in a model's ``shipped.npz``
(:mod:`bertcore.analysis.shipped`) and drawn by the Circuits page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .attribution import Graph
from .graph import compute_graph_scores, compute_influence, logit_weights, prune_graph


@dataclass
class Circuit:
    """A pruned graph. Per kept node (arrays of one length): ``node_ids`` (``"{kind}:{block}:{position}:{latent}"``),
    ``kinds`` ("feature", "error", "embedding", "logit"), ``layers`` (block; -1 for embeddings, L for logits),
    ``positions``, ``features`` (latent; -1 otherwise), ``activations`` (features: activation; errors: the error
    vector's norm; embeddings: 1; logits: the target's probability), ``influence`` (float64, the node's total
    influence on the probability-weighted targets, circuit-tracer's node influence), ``logit_effect`` (float64,
    direct effect on the targets, weighted by their probabilities), ``labels``. ``edges``: ``(E, 3)`` float64
    (source index, target index, weight) into the kept nodes. ``scores``: ``replacement`` and ``completeness``,
    unpruned and ``*_pruned``. ``tokens``, ``mask_position``, ``targets`` and ``target_probs``, ``n_nodes``
    (unpruned)."""

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


def circuit(g: Graph, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> Circuit:
    """``g`` pruned by cumulative influence (``node_threshold`` of the nodes' influence on the logits,
    ``edge_threshold`` of the edges'; circuit-tracer's ``prune_graph``), with the replacement and completeness
    scores (circuit-tracer's ``compute_graph_scores``) of the graph before and after pruning.

    Raises:
        ValueError: a threshold outside 0..1.
    """
    lay, probs, n_t = g.layout, g.probabilities, len(g.tokens)
    kept = prune_graph(g.edges, lay, probs, node_threshold, edge_threshold)
    rep, comp = compute_graph_scores(g.edges, lay, probs)
    rep_p, comp_p = compute_graph_scores(g.edges * kept.edges, lay, probs)  # the edges pruning keeps
    rows = lay.rows(g.edges.device)
    node_influence = compute_influence(g.edges, logit_weights(lay, probs), rows)  # (n,)
    logits = lay.part("logits")
    direct = (probs[:, None] * g.edges[lay.features:]).sum(0)  # (n,): each node's direct effect on the targets
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
    row, src = kept.edges.nonzero(as_tuple=True)  # edges are [target row, source]
    weights = g.edges[row, src].tolist()  # one read, wherever the graph is
    dst = rows[row]
    edges = np.array([[where[s], where[d], w] for d, s, w in zip(dst.tolist(), src.tolist(), weights)],
                     dtype=np.float64).reshape(-1, 3)
    return Circuit(tokens=list(g.tokens), mask_position=int(g.mask_position), targets=[t.label for t in g.targets],
                   target_probs=[float(p) for p in probs], node_ids=ids, kinds=kinds, layers=np.array(layers),
                   positions=np.array(positions), features=np.array(features), activations=np.array(acts),
                   influence=node_influence[index].cpu().numpy(), logit_effect=direct[index].cpu().numpy(),
                   labels=labels, edges=edges, scores={"replacement": rep, "completeness": comp,
                                                       "replacement_pruned": rep_p, "completeness_pruned": comp_p},
                   n_nodes=lay.size)


def labelled(c: Circuit, names: Mapping[int, Sequence[str]]) -> Circuit:
    """``c`` with each feature node named by its feature's label (``names[block][latent]``,
    :mod:`bertcore.sae.labels`), its place kept in brackets: ``"nouns: keys, doors → are (block 3 #4512)"``. Blocks
    without names keep ``"block b latent l"``."""
    out = []
    for kind, block, latent, label in zip(c.kinds, c.layers, c.features, c.labels):
        given = names.get(int(block)) if kind == "feature" else None
        out.append(f"{given[int(latent)]} (block {int(block)} #{int(latent)})" if given is not None else label)
    return replace(c, labels=out)


def most_influential(c: Circuit, n: int) -> Circuit:
    """The ``n`` most influential nodes of ``c`` (by :attr:`Circuit.influence`) besides its logit nodes, which are
    always kept, and the edges among them: the graph at a glance. ``n`` at least the nodes ``c`` has gives ``c``.

    Raises:
        ValueError: ``n`` below 1.
    """
    if n < 1:
        raise ValueError(f"keep at least one node besides the logits; got {n}")
    logits = [i for i, k in enumerate(c.kinds) if k == "logit"]
    others = [i for i in np.argsort(-c.influence, kind="stable").tolist() if c.kinds[i] != "logit"][:n]
    keep = sorted(logits + others)
    if len(keep) == len(c.kinds):
        return c
    where = {old: new for new, old in enumerate(keep)}
    edges = np.array([[where[int(s)], where[int(d)], w] for s, d, w in c.edges if int(s) in where and int(d) in where],
                     dtype=np.float64).reshape(-1, 3)

    def pick(values):
        return [values[i] for i in keep] if isinstance(values, list) else np.asarray(values)[keep]
    return replace(c, node_ids=pick(c.node_ids), kinds=pick(c.kinds), layers=pick(c.layers),
                   positions=pick(c.positions), features=pick(c.features), activations=pick(c.activations),
                   influence=pick(c.influence), logit_effect=pick(c.logit_effect), labels=pick(c.labels), edges=edges)
