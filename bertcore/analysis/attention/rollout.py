"""Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers", ACL, section 3).

Both treat the layers as a graph whose edges are the head-averaged attention plus the residual
connection, ``A_hat = 0.5 * mean_heads(A) + 0.5 * I`` with each row renormalised to sum to 1:

- **rollout** multiplies these matrices from the first layer up: ``R_l = A_hat_l @ R_(l-1)``;
  row i of ``R_l`` says how much each input token reaches token i of layer l.
- **flow** treats ``A_hat`` as edge capacities and asks for the maximum flow from input token j
  to token i of layer l; each row is then normalised to sum to 1.

Flow costs one max-flow per (layer, input token) on a graph of ``(l+2) * T`` nodes and
``(l+1) * T^2`` edges. networkx (:func:`flow_networkx`, the reference, as the paper's code) takes
~4 s at 20 tokens and a minute at 40; :func:`flow` solves the same problems with SciPy's
``scipy.sparse.csgraph.maximum_flow`` (Dinic, integer capacities: ``A_hat`` scaled by 2^30 and
rounded, an error below 1e-6) about 50x faster, and is offered up to :data:`FLOW_MAX_TOKENS`
tokens (~0.6 s on one CPU core at 40 tokens, 6 layers).
Arrays are numpy; layers are 0-based blocks here (index l = ``encoder.layer[l]``, whose output is
``hidden_states[l + 1]``; the UI's "layer l+1").
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

RESIDUAL_WEIGHT = 0.5  # the 0.5 * A + 0.5 * I of the paper
FLOW_MAX_TOKENS = 40  # above this, one flow takes over a second (see bench/bench_views.py)
_FLOW_SCALE = 2**30  # integer capacities for SciPy: the total flow into one token is at most 1 -> 2^30 < 2^31
METHODS = {"raw": "Raw attention", "rollout": "Attention rollout", "flow": "Attention flow"}


class FlowTooLongError(ValueError):
    """Attention flow was asked for on an input longer than :data:`FLOW_MAX_TOKENS` tokens."""


def _check(attentions: np.ndarray) -> np.ndarray:
    a = np.asarray(attentions)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attentions must have shape (layers, heads, T, T); got {a.shape}")
    return a


def residual_attention(attentions: np.ndarray, residual_weight: float = RESIDUAL_WEIGHT) -> np.ndarray:
    """``A_hat``: head-averaged attention mixed with the identity (the residual stream), rows renormalised.

    Args:
        attentions: ``(L, heads, T, T)`` attention probabilities (rows sum to 1).
        residual_weight: weight of the identity (0.5 in the paper).
    Returns:
        ``(L, T, T)`` float64, each row sums to 1.
    Raises:
        ValueError: another shape.
    """
    a = _check(attentions).astype(np.float64).mean(axis=1)  # (L, T, T)
    a_hat = (1.0 - residual_weight) * a + residual_weight * np.eye(a.shape[-1])[None]  # (L, T, T)
    return a_hat / a_hat.sum(axis=-1, keepdims=True)


def rollout(attentions: np.ndarray, residual_weight: float = RESIDUAL_WEIGHT) -> np.ndarray:
    """Attention rollout of every layer: ``R_0 = A_hat_0``, ``R_l = A_hat_l @ R_(l-1)``.

    Args:
        attentions: ``(L, heads, T, T)`` attention probabilities.
    Returns:
        ``(L, T, T)`` float64: ``[l, i, j]`` = share of input token j in token i after block l (0-based: in
        ``hidden_states[l + 1]``); rows sum to 1.
    Raises:
        ValueError: another shape.
    """
    a_hat = residual_attention(attentions, residual_weight)  # (L, T, T)
    out = np.empty_like(a_hat)
    out[0] = a_hat[0]
    for layer in range(1, a_hat.shape[0]):  # L matrix products, one per layer
        out[layer] = a_hat[layer] @ out[layer - 1]
    return out


def flow_graph(a_hat: np.ndarray) -> nx.DiGraph:
    """The layered graph of attention flow: node ``(l, i)`` is token i in ``hidden_states[l]``, the input of block l
    (``l`` a hidden_states index: 0 = embeddings; ``l = L``: the last block's output). Edge ``(l, j) -> (l+1, i)`` has
    capacity ``a_hat[l, i, j]``.

    Args:
        a_hat: ``(L, T, T)`` from :func:`residual_attention`.
    """
    num_layers, t, _ = a_hat.shape
    graph = nx.DiGraph()
    for layer in range(num_layers):
        rows, cols = np.nonzero(a_hat[layer] > 0)
        graph.add_edges_from(((layer, int(j)), (layer + 1, int(i)), {"capacity": float(a_hat[layer, i, j])})
                             for i, j in zip(rows, cols))
    graph.add_nodes_from((layer, i) for layer in range(num_layers + 1) for i in range(t))
    return graph


def _check_flow(attentions: np.ndarray, query: int, max_tokens: int) -> np.ndarray:
    a_hat = residual_attention(attentions)  # (L, T, T)
    t = a_hat.shape[-1]
    if t > max_tokens:
        raise FlowTooLongError(f"attention flow is offered up to {max_tokens} tokens (this input has {t}): "
                               "it needs one max-flow per layer and input token. Use rollout, or a shorter text.")
    if not 0 <= query < t:
        raise ValueError(f"query must lie in [0, {t}); got {query}")
    return a_hat


def flow(attentions: np.ndarray, query: int, max_tokens: int = FLOW_MAX_TOKENS) -> np.ndarray:
    """Attention flow into one token at every layer (SciPy max-flow on the graph of :func:`flow_graph`).

    Args:
        attentions: ``(L, heads, T, T)`` attention probabilities.
        query: the token (0-based position) whose inputs are traced.
        max_tokens: refuse longer inputs (each value is a max-flow; see the module docstring).
    Returns:
        ``(L, T)`` float64: ``[l, j]`` = max-flow from input token j to token ``query`` after layer
        l+1, normalised so each row sums to 1.
    Raises:
        FlowTooLongError: more than ``max_tokens`` tokens.
        ValueError: a bad shape or a query outside ``[0, T)``.
    """
    a_hat = _check_flow(attentions, query, max_tokens)  # (L, T, T)
    num_layers, t, _ = a_hat.shape
    caps = np.rint(a_hat * _FLOW_SCALE).astype(np.int32)  # (L, T, T)
    out = np.zeros((num_layers, t))
    for layer in range(num_layers):  # a graph of layers 0..layer only: later layers cannot carry flow back
        n = (layer + 2) * t  # nodes: token i of level l is l * t + i
        dense = np.zeros((n, n), dtype=np.int32)
        for lv in range(layer + 1):
            dense[lv * t:(lv + 1) * t, (lv + 1) * t:(lv + 2) * t] = caps[lv].T  # edge (lv, j) -> (lv+1, i)
        graph = csr_matrix(dense)
        sink = (layer + 1) * t + query
        for j in range(t):  # one max-flow per input token (Abnar & Zuidema's compute_flows)
            out[layer, j] = maximum_flow(graph, j, sink).flow_value / _FLOW_SCALE
        out[layer] /= out[layer].sum()
    return out


def flow_networkx(attentions: np.ndarray, query: int, max_tokens: int = 24) -> np.ndarray:
    """:func:`flow` computed with ``networkx.maximum_flow_value`` on :func:`flow_graph` (float
    capacities, no rounding): the reference, as in the paper's code; slow beyond ~20 tokens."""
    a_hat = _check_flow(attentions, query, max_tokens)  # (L, T, T)
    num_layers, t, _ = a_hat.shape
    out = np.zeros((num_layers, t))
    for layer in range(num_layers):
        graph = flow_graph(a_hat[: layer + 1])
        for j in range(t):
            out[layer, j] = nx.maximum_flow_value(graph, (0, j), (layer + 1, query))
        out[layer] /= out[layer].sum()
    return out


def contributions(attentions: np.ndarray, query: int, method: str) -> np.ndarray:
    """How much each input token contributes to token ``query`` at each layer, by one of :data:`METHODS`.

    ``raw``: the head-averaged attention row of each layer (what that layer alone looks at);
    ``rollout``: row ``query`` of :func:`rollout`; ``flow``: :func:`flow`.

    Returns:
        ``(L, T)`` float64, each row sums to 1.
    Raises:
        ValueError: an unknown method, a bad shape or query; FlowTooLongError as :func:`flow`.
    """
    a = _check(attentions)
    if not 0 <= query < a.shape[-1]:
        raise ValueError(f"query must lie in [0, {a.shape[-1]}); got {query}")
    if method == "raw":
        return a[:, :, query, :].astype(np.float64).mean(axis=1)  # (L, T)
    if method == "rollout":
        return rollout(a)[:, query, :]
    if method == "flow":
        return flow(a, query)
    raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
