"""What flows, read off the context-mixing matrices of :mod:`.mixing`: the shares of one
token's row that land on special tokens, punctuation and the token itself (Kobayashi et al. 2020's finding,
measured on any sentence), and the route graph of one token's representation down to the input tokens (in the
manner of LM Transparency Tool, Tufanov et al. 2024, for an encoder).

Pure numpy on ``(L, T, T)`` matrices (row i receives, column j contributes), except :func:`value_norms` (the size
of what each token sends through one head, for the tour's "weighted sum" step), which records a layer's values and
multiplies them by its weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...device import device_of
from .activations import is_punctuation
from .decompose import LayerMath, base_model, record_block
from .mixing import normalize_rows

SPECIAL = ("[CLS]", "[SEP]")


@dataclass(frozen=True)
class RowShares:
    """Where one row's contributions go, as shares of the row (rows normalised first).

    Attributes:
        special: share on [CLS] + [SEP]; punctuation: on punctuation tokens; itself: on the token's own column;
        mean_special: the mean row's share on [CLS] + [SEP] (every token of the layer, as Kobayashi et al.
            report it).
    """

    special: float
    punctuation: float
    itself: float
    mean_special: float


def column_kinds(labels: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(special, punctuation)`` flags ``(T,)`` bool of token (or word) labels: [CLS] / [SEP], and tokens made
    only of punctuation (:func:`.activations.is_punctuation`)."""
    special = np.array([lab in SPECIAL for lab in labels], dtype=bool)
    punct = np.array([not s and is_punctuation(lab) for lab, s in zip(labels, special)], dtype=bool)
    return special, punct


def row_shares(matrix: np.ndarray, row: int, labels: list[str]) -> RowShares:
    """The shares of row ``row`` of one layer's ``(T, T)`` matrix (any method; rows normalised here) on [CLS] +
    [SEP], on punctuation and on the token itself, and the mean row's share on [CLS] + [SEP].

    Raises:
        ValueError: a matrix that is not square, labels of another length, a row out of range.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"matrix must have shape (T, T); got {m.shape}")
    if len(labels) != m.shape[0]:
        raise ValueError(f"labels must have one entry per token ({m.shape[0]}); got {len(labels)}")
    if not 0 <= row < m.shape[0]:
        raise ValueError(f"row must lie in [0, {m.shape[0]}); got {row}")
    m = normalize_rows(m)
    special, punct = column_kinds(labels)
    return RowShares(float(m[row, special].sum()), float(m[row, punct].sum()), float(m[row, row]),
                     float(m[:, special].sum(-1).mean()))


@dataclass(frozen=True)
class Route:
    """The route graph of one token: nodes ``(level, token)``, ``level`` a hidden_states index (0 = embeddings: the
    input tokens; L = the last block's output, the chosen token at the top), and edges ``(level, i, j, weight)``
    from node ``(level, i)`` down to node ``(level - 1, j)``: token j's share in token i's row of block
    ``level - 1`` (``matrices[level - 1]``, the block whose output is ``hidden_states[level]``)."""

    nodes: list[tuple[int, int]]
    edges: list[tuple[int, int, int, float]]


def routes(matrices: np.ndarray, token: int, threshold: float, max_edges_per_node: int | None = None,
           max_nodes_per_level: int | None = None) -> Route:
    """The contributions that reach ``token`` at the top layer, followed down to the input tokens.

    Starting from ``token`` at level L (the last layer's output), each node keeps the edges to the tokens of the
    level below whose share of its row (rows normalised) is at least ``threshold``; the tokens reached become the
    next level's nodes. A node reached by no edge is not drawn.

    Args:
        matrices: ``(L, T, T)`` of one method of :func:`.mixing.mixing` (row i receives, column j contributes).
        token: the chosen token (0-based).
        threshold: the smallest share kept, in [0, 1].
        max_edges_per_node: keep at most this many of a node's strongest edges (None: all above the threshold).
        max_nodes_per_level: keep at most this many tokens per level, those with the largest summed incoming
            edges (None: all reached); the edges into the others are dropped.
    Returns:
        :class:`Route` (the top node is always there, even when no edge passes the threshold).
    Raises:
        ValueError: another shape, a token out of range, a threshold outside [0, 1].
    """
    m = np.asarray(matrices, dtype=np.float64)
    if m.ndim != 3 or m.shape[1] != m.shape[2]:
        raise ValueError(f"matrices must have shape (layers, T, T); got {m.shape}")
    layers, t, _ = m.shape
    if not 0 <= token < t:
        raise ValueError(f"token must lie in [0, {t}); got {token}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1]; got {threshold}")
    m = normalize_rows(m)
    nodes, edges = [(layers, token)], []
    active = [token]
    for level in range(layers, 0, -1):
        new: list[tuple[int, int, int, float]] = []
        for i in active:
            row = m[level - 1, i]
            keep = [j for j in np.argsort(-row, kind="stable") if row[j] >= threshold and row[j] > 0]
            if max_edges_per_node is not None:
                keep = keep[:max_edges_per_node]
            new.extend((level, i, int(j), float(row[j])) for j in keep)
        incoming: dict[int, float] = {}
        for _, _, j, w in new:
            incoming[j] = incoming.get(j, 0.0) + w
        reached = sorted(incoming, key=lambda j: (-incoming[j], j))[:max_nodes_per_level]
        edges.extend(e for e in new if e[2] in reached)
        active = sorted(reached)
        nodes.extend((level - 1, j) for j in active)
    return Route(nodes, edges)


def value_norms(model, hidden: np.ndarray, layer: int) -> np.ndarray:
    """``||f_h(x_j)||`` for every head and token of one layer, ``f_h(x) = W_O^h (W_V^h x + b_V^h)`` (Kobayashi et
    al. 2020, section 3): the size of the vector token j sends through head h, which its attention weight
    ``a_hij`` scales. What arrives at token i from j through head h is ``a_hij f_h(x_j)``, of size
    ``a_hij ||f_h(x_j)||``. The values ``W_V^h x + b_V^h`` are the block's ``attn.hook_v`` site, recorded (in the
    model's dtype) by a forward pass from ``hidden`` that stops there.

    Args:
        model: a bertcore BERT (any head class), eval mode; only read.
        hidden: ``(T, H)`` the block's input (``hidden_states[layer]``).
        layer: the 0-based block (``encoder.layer[layer]``, ``0..L-1``).
    Returns:
        ``(heads, T)`` float64.
    Raises:
        ValueError: a layer out of range (the message names ``0..L-1``), a hidden state of another width.
    """
    import torch

    base = base_model(model)
    layers = base.encoder.layer
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer must lie in 0..{len(layers) - 1}; got {layer}")
    x = torch.tensor(np.asarray(hidden), device=device_of(base))  # a copy: the cached hidden states are read-only
    if x.ndim != 2 or x.shape[1] != base.config.hidden_size:
        raise ValueError(f"hidden must have shape (T, {base.config.hidden_size}); got {tuple(x.shape)}")
    math = LayerMath(layers[layer], base.config)  # raises for a layer that is not BERT's
    v = record_block(base, x, layer, ["attn.hook_v"])["attn.hook_v"]  # (T, heads, d) the block's values
    with torch.no_grad():
        f = math.head_vectors(v)  # (heads, T, H)
    return torch.linalg.vector_norm(f, dim=-1).cpu().numpy()
