"""Neuron view: where one attention weight comes from (bertviz's neuron view, Vig 2019, "A
Multiscale Visualization of Attention in the Transformer Model", section 3.3).

For one layer, head and query token: the query vector q, every key vector k_j, their elementwise
product q * k_j (whose sum is the dot product), the scaled scores ``q . k_j / sqrt(d)`` and the
softmax probabilities, which are the model's attention for that head (Vaswani et al. 2017, eq. 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...modeling.model import BertModel


@dataclass
class NeuronView:
    """One query's attention in one head, taken apart.

    Attributes:
        layer, head, query: the 0-based block (``encoder.layer[layer]``), head and query position.
        query_vector: ``(d,)`` float32, q of the query token (d = head size).
        key_vectors: ``(T, d)`` float32, k of every token.
        product: ``(T, d)`` float32, ``q * k_j`` elementwise; row sums are the dot products.
        scores: ``(T,)`` float32, ``q . k_j / sqrt(d)`` (pre-softmax).
        probs: ``(T,)`` float32, softmax of the scores: the attention of ``query`` in this head.
    """

    layer: int
    head: int
    query: int
    query_vector: np.ndarray
    key_vectors: np.ndarray
    product: np.ndarray
    scores: np.ndarray
    probs: np.ndarray


@torch.no_grad()
def neuron_view(model: BertModel, layer_input: np.ndarray, layer: int, head: int, query: int) -> NeuronView:
    """Recompute one head's attention for one query from the layer's input hidden states.

    Args:
        model: the :class:`BertModel` that produced ``layer_input`` (eval mode).
        layer_input: ``(T, H)`` float, the input of block ``layer`` (``Activations.hidden_states[layer]``).
        layer: the 0-based block, ``0..L-1``; head: ``0..heads-1``; query: ``0..T-1``.
    Returns:
        :class:`NeuronView` (a single unpadded sequence: no attention mask).
    Raises:
        ValueError: layer, head or query out of range (the message names the valid range), or ``layer_input`` of
            another shape.
    Source: HF ``BertSelfAttention`` (query / key projections, per-head split, scaling).
    """
    cfg = model.config
    x = np.asarray(layer_input)
    if x.ndim != 2 or x.shape[1] != cfg.hidden_size:
        raise ValueError(f"layer_input must have shape (T, {cfg.hidden_size}); got {x.shape}")
    t = x.shape[0]
    for name, value, hi in (("layer", layer, cfg.num_hidden_layers), ("head", head, cfg.num_attention_heads)):
        if not 0 <= value < hi:
            raise ValueError(f"{name} must lie in 0..{hi - 1}; got {value}")
    if not 0 <= query < t:
        raise ValueError(f"query must lie in 0..{t - 1}; got {query}")
    block = model.encoder.layer[layer].attention
    p = next(model.parameters())
    h = torch.tensor(x, dtype=p.dtype, device=p.device)  # (T, H), a copy (the cached array is read-only)
    if block.output.pre_layer_norm:
        h = block.output.LayerNorm(h)
    d = cfg.head_size
    cols = slice(head * d, (head + 1) * d)
    sa = block.self
    q = torch.nn.functional.linear(h[query], sa.query.weight[cols], sa.query.bias[cols])  # (d,)
    k = torch.nn.functional.linear(h, sa.key.weight[cols], sa.key.bias[cols])  # (T, d)
    product = q[None, :] * k  # (T, d)
    scores = product.sum(-1) * d ** -0.5  # (T,)
    probs = torch.softmax(scores, dim=-1)  # (T,)

    def as_np(v):
        return v.float().cpu().numpy()

    return NeuronView(layer, head, query, as_np(q), as_np(k), as_np(product), as_np(scores), as_np(probs))
