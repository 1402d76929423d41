"""An attribution graph's adjacency matrix and what is read from it: influence, pruning, and the replacement and
completeness scores, with the definitions of circuit-tracer's ``graph.py`` (Ameisen et al. 2025, "Circuit
tracing", sections 3-4; ``normalize_matrix``, ``compute_influence``, ``prune_graph``, ``compute_graph_scores``).

Nodes are ordered ``[features, errors, embeddings, logits]``. ``A[t, s]`` is the direct effect of source ``s`` on
target ``t`` (rows: targets, columns: sources). Nothing feeds an error or an embedding, so their rows of the square
``(n, n)`` matrix are zero, and a graph holds only its **target rows** (``edges``, ``(R, n)``: the feature nodes'
rows, then the logits', :meth:`Layout.rows`), as circuit-tracer's ``attribute`` fills its ``edge_matrix``: with one
error node per block and position, the square would grow with the square of the input. The graph is acyclic (a node
is fed only by nodes of lower blocks, embeddings, or errors), so the influence series ``w Â + w Â² + ...`` ends after
at most L + 2 terms.
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

    def rows(self, device: torch.device | str | None = None) -> torch.Tensor:
        """``(features + logits,)`` long: the node of each row of a graph's ``edges`` (the feature nodes, then the
        logit nodes), on ``device`` (None: the CPU)."""
        device, logits = device or "cpu", self.part("logits")
        return torch.cat([torch.arange(self.features, device=device),
                          torch.arange(logits.start, logits.stop, device=device)])


def square(edges: torch.Tensor, layout: Layout) -> torch.Tensor:
    """The ``(n, n)`` adjacency of a graph's target rows ``edges (R, n)`` (zero rows for errors and embeddings), for
    small graphs and comparisons."""
    out = torch.zeros(layout.size, layout.size, dtype=edges.dtype, device=edges.device)
    out[layout.rows(edges.device)] = edges
    return out


def normalize_matrix(adjacency: torch.Tensor) -> torch.Tensor:
    """``Â``: the absolute adjacency (or any of its rows, ``(R, n)``) with every row scaled to sum to 1 (a zero row
    stays zero)."""
    weights = adjacency.abs()
    return weights / weights.sum(dim=1, keepdim=True).clamp(min=1e-10)


def compute_influence(edges: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor, max_terms: int = 1000,
                      chunk: int = 1 << 22) -> torch.Tensor:
    """``w ((I - Â)^-1 - I) = w Â + w Â² + ...``: each node's total influence ``(n,)`` on the weighted targets
    ``w (n,)``, ``Â`` the row-normalised absolute adjacency (circuit-tracer's ``compute_influence`` on
    ``normalize_matrix``). From the rows that are not zero, ``edges (R, n)`` (raw or already normalised: normalising
    is idempotent), ``rows (R,)`` long naming each one's node (:meth:`Layout.rows` for a whole graph; the rows computed
    so far while a graph is built, as circuit-tracer's ``compute_partial_influences``).

    Without a normalised copy of ``edges``: the series runs on the rows' own ``(R, R)`` block (a path's inner nodes
    are targets), then one product with ``Â`` reads ``edges`` ``chunk`` values at a time.

    Raises:
        RuntimeError: the series does not end (a cycle in the graph).
    """
    step = max(1, chunk // max(1, edges.shape[1]))
    sums = torch.cat([edges[i:i + step].abs().sum(1) for i in range(0, len(edges), step)]) if len(edges) else \
        edges.new_zeros(0)
    scale = 1 / sums.clamp(min=1e-10)  # Â = |edges| * scale[:, None]
    inner = edges[:, rows].abs() * scale[:, None]  # (R, R): Â among the rows' nodes
    term = weights[rows] @ inner  # the series at the rows' nodes
    at_rows = term.clone()
    for _ in range(max_terms):
        if not bool(term.any()):
            break
        term = term @ inner
        at_rows += term
    else:
        raise RuntimeError(f"the influence series did not end after {max_terms} terms: the graph has a cycle")
    coef = (weights[rows] + at_rows) * scale  # every node: (w + influence) at the rows, times Â
    total = torch.zeros_like(weights)
    for i in range(0, len(edges), step):
        total += coef[i:i + step] @ edges[i:i + step].abs()
    return total


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
    """``nodes (n,)`` and ``edges (R, n)`` bool (the graph's target rows, :meth:`Layout.rows`): what a pruned graph
    keeps; ``cumulative (n,)``: each node's rank as the cumulative share of node influence up to it (the viewer's
    threshold slider)."""

    nodes: torch.Tensor
    edges: torch.Tensor
    cumulative: torch.Tensor


def prune_graph(edges: torch.Tensor, layout: Layout, probabilities: torch.Tensor, node_threshold: float = 0.8,
          edge_threshold: float = 0.98) -> Pruned:
    """Of a graph's target rows ``edges (R, n)`` (module docstring), keep the nodes that make up ``node_threshold``
    of the total influence on the logits (embeddings and logits always), then the edges that make up
    ``edge_threshold`` of the edge influence among them, then drop feature and error nodes left without an outgoing
    edge and feature nodes without an incoming one, until nothing changes.

    Raises:
        ValueError: a threshold outside 0..1.
    """
    for name, value in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must lie in 0..1; got {value}")
    w, rows = logit_weights(layout, probabilities), layout.rows(edges.device)
    node_influence = compute_influence(edges, w, rows)
    nodes = node_influence >= threshold_for(node_influence, node_threshold)
    fixed = slice(layout.part("embeddings").start, layout.size)
    nodes[fixed] = True
    kept = edges.clone()
    kept[~nodes[rows]] = 0
    kept[:, ~nodes] = 0
    a_hat = normalize_matrix(kept)
    del kept
    edge_scores = a_hat * (compute_influence(a_hat, w, rows) + w)[rows, None]  # an edge's share of its target's
    # influence
    kept_edges = edge_scores >= threshold_for(edge_scores, edge_threshold)
    del edge_scores, a_hat
    sources = slice(0, layout.part("embeddings").start)  # features and errors must feed something
    feats = slice(0, layout.features)  # and features must be fed (their rows come first)
    while True:
        before = nodes.clone()
        kept_edges[~nodes[rows]] = False
        kept_edges[:, ~nodes] = False
        nodes[sources] &= kept_edges[:, sources].any(0)
        nodes[feats] &= kept_edges[feats].any(1)
        if torch.equal(nodes, before):
            break
    kept_edges[~nodes[rows]] = False
    kept_edges[:, ~nodes] = False
    ranked, order = torch.sort(node_influence, descending=True)
    cumulative = torch.zeros_like(node_influence)
    cumulative[order] = torch.cumsum(ranked, 0) / ranked.sum()
    return Pruned(nodes, kept_edges, cumulative)


def compute_graph_scores(edges: torch.Tensor, layout: Layout, probabilities: torch.Tensor) -> tuple[float, float]:
    """``(replacement, completeness)`` of a graph's target rows ``edges (R, n)`` (circuit-tracer's
    ``compute_graph_scores``):

    - replacement: of the influence that reaches the logits from the embeddings and the error nodes (the graph's
      inputs), the embeddings' share: 1 when every path runs through features;
    - completeness: over every node weighted by its influence on the logits (plus the logits' own weight), the share of
      its incoming (normalised) edges that do not come from error nodes.
    """
    w, rows = logit_weights(layout, probabilities), layout.rows(edges.device)
    a_hat = normalize_matrix(edges)
    node_influence = compute_influence(a_hat, w, rows)
    from_embeddings = node_influence[layout.part("embeddings")].sum()
    from_errors = node_influence[layout.part("errors")].sum()
    replacement = from_embeddings / (from_embeddings + from_errors)
    explained = torch.ones_like(w)  # a node nothing feeds (an error, an embedding) has no incoming error share
    explained[rows] = 1 - a_hat[:, layout.part("errors")].sum(dim=-1)
    weight = node_influence + w
    completeness = (explained * weight).sum() / weight.sum()
    return float(replacement), float(completeness)
