"""An attribution graph's adjacency matrix and what is read from it: influence, pruning, and the replacement and
completeness scores, with the definitions of circuit-tracer's ``graph.py`` (Ameisen et al. 2025, "Circuit
tracing", sections 3-4; ``normalize_matrix``, ``compute_influence``, ``prune_graph``, ``compute_graph_scores``).

Nodes are ordered ``[features, errors, embeddings, logits]``. ``A[t, s]`` is the direct effect of source ``s`` on
target ``t`` (rows: targets, columns: sources); error and embedding rows are zero (nothing feeds them). The
graph is acyclic (a node is fed only by nodes of lower blocks, embeddings, or errors), so the influence series
``w Â + w Â² + ...`` ends after at most L + 2 terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Layout:
    """How many nodes of each kind a graph has, in the order ``[features, errors, embeddings, logits]``."""

    features: int
    errors: int
    embeddings: int
    logits: int

    @property
    def size(self) -> int:
        return self.features + self.errors + self.embeddings + self.logits

    def part(self, kind: str) -> slice:
        """The rows / columns of ``kind`` (``"features"``, ``"errors"``, ``"embeddings"``, ``"logits"``)."""
        order = ("features", "errors", "embeddings", "logits")
        start = sum(getattr(self, k) for k in order[:order.index(kind)])
        return slice(start, start + getattr(self, kind))


def normalize_matrix(adjacency: torch.Tensor) -> torch.Tensor:
    """``Â``: the absolute adjacency with every row scaled to sum to 1 (a zero row stays zero)."""
    weights = adjacency.abs()
    return weights / weights.sum(dim=1, keepdim=True).clamp(min=1e-10)


def compute_influence(a_hat: torch.Tensor, weights: torch.Tensor, max_terms: int = 1000) -> torch.Tensor:
    """``w ((I - Â)^-1 - I) = w Â + w Â² + ...``: each node's total influence on the weighted targets ``w (n,)``.

    Raises:
        RuntimeError: the series does not end (a cycle in the graph).
    """
    term = weights @ a_hat
    total = term.clone()
    for _ in range(max_terms):
        if not bool(term.any()):
            return total
        term = term @ a_hat
        total += term
    raise RuntimeError(f"the influence series did not end after {max_terms} terms: the graph has a cycle")


def logit_weights(layout: Layout, probabilities: torch.Tensor) -> torch.Tensor:
    """``w (n,)``: each logit target's probability on its row, 0 elsewhere."""
    w = torch.zeros(layout.size, dtype=probabilities.dtype, device=probabilities.device)
    w[layout.part("logits")] = probabilities
    return w


def threshold_for(scores: torch.Tensor, share: float) -> torch.Tensor:
    """The score above which the largest scores add up to ``share`` of their total (the value at the first rank where
    the cumulative share reaches ``share``; the last one for ``share`` 1)."""
    ranked = torch.sort(scores.flatten(), descending=True).values
    cumulative = torch.cumsum(ranked, 0) / ranked.sum()
    at = torch.tensor(share, dtype=cumulative.dtype, device=cumulative.device)
    rank = min(int(torch.searchsorted(cumulative, at)), len(ranked) - 1)
    return ranked[rank]


@dataclass
class Pruned:
    """``nodes (n,)`` and ``edges (n, n)`` bool: what a pruned graph keeps; ``cumulative (n,)``: each node's rank
    as the cumulative share of node influence up to it (the viewer's threshold slider)."""

    nodes: torch.Tensor
    edges: torch.Tensor
    cumulative: torch.Tensor


def prune_graph(adjacency: torch.Tensor, layout: Layout, probabilities: torch.Tensor, node_threshold: float = 0.8,
          edge_threshold: float = 0.98) -> Pruned:
    """Keep the nodes that make up ``node_threshold`` of the total influence on the logits (embeddings and logits
    always), then the edges that make up ``edge_threshold`` of the edge influence among them, then drop feature and
    error nodes left without an outgoing edge and feature nodes without an incoming one, until nothing changes.

    Raises:
        ValueError: a threshold outside 0..1.
    """
    for name, value in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must lie in 0..1; got {value}")
    w = logit_weights(layout, probabilities)
    node_influence = compute_influence(normalize_matrix(adjacency), w)
    nodes = node_influence >= threshold_for(node_influence, node_threshold)
    fixed = slice(layout.part("embeddings").start, layout.size)
    nodes[fixed] = True
    kept = adjacency.clone()
    kept[~nodes] = 0
    kept[:, ~nodes] = 0
    a_hat = normalize_matrix(kept)
    edge_scores = a_hat * (compute_influence(a_hat, w) + w)[:, None]  # an edge's share of its target's influence
    edges = edge_scores >= threshold_for(edge_scores, edge_threshold)
    sources = slice(0, layout.part("embeddings").start)  # features and errors must feed something
    feats = layout.part("features")  # and features must be fed
    while True:
        before = nodes.clone()
        edges[~nodes] = False
        edges[:, ~nodes] = False
        nodes[sources] &= edges[:, sources].any(0)
        nodes[feats] &= edges[feats].any(1)
        if torch.equal(nodes, before):
            break
    edges[~nodes] = False
    edges[:, ~nodes] = False
    ranked, order = torch.sort(node_influence, descending=True)
    cumulative = torch.zeros_like(node_influence)
    cumulative[order] = torch.cumsum(ranked, 0) / ranked.sum()
    return Pruned(nodes, edges, cumulative)


def compute_graph_scores(adjacency: torch.Tensor, layout: Layout, probabilities: torch.Tensor) -> tuple[float, float]:
    """``(replacement, completeness)`` (circuit-tracer's ``compute_graph_scores``):

    - replacement: of the influence that reaches the logits from the embeddings and the error nodes (the graph's
      inputs), the embeddings' share: 1 when every path runs through features;
    - completeness: over every node weighted by its influence on the logits (plus the logits' own weight), the share of
      its incoming (normalised) edges that do not come from error nodes.
    """
    w = logit_weights(layout, probabilities)
    a_hat = normalize_matrix(adjacency)
    node_influence = compute_influence(a_hat, w)
    from_embeddings = node_influence[layout.part("embeddings")].sum()
    from_errors = node_influence[layout.part("errors")].sum()
    replacement = from_embeddings / (from_embeddings + from_errors)
    explained = 1 - a_hat[:, layout.part("errors")].sum(dim=-1)
    weight = node_influence + w
    completeness = (explained * weight).sum() / weight.sum()
    return float(replacement), float(completeness)
