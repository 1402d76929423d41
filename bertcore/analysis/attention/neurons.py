"""Neuron view: where one attention weight comes from (bertviz's neuron view, Vig 2019, "A
Multiscale Visualization of Attention in the Transformer Model", section 3.3).

For one layer, head and query token: the query vector q, every key vector k_j, their elementwise
product q * k_j (whose sum is the dot product), the scaled scores ``q . k_j / sqrt(d)`` and the
softmax probabilities, which are the model's attention for that head (Vaswani et al. 2017, eq. 1).

Every number is read from the sites of :mod:`bertcore.modeling.interventions` that the block's one forward pass
records (``attn.hook_q`` / ``hook_k``, a rotary model's ``hook_rot_q`` / ``hook_rot_k``, ``attn.hook_attn_scores``,
``attn.hook_pattern``): nothing is recomputed from the weights, and the shared model is only read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...device import device_of
from ...modeling.model import BertModel
from .decompose import record_block


@dataclass
class NeuronView:
    """One query's attention in one head, taken apart.

    Attributes:
        layer, head, query: the 0-based block (``encoder.layer[layer]``), head and query position.
        query_vector: ``(d,)`` float32, q of the query token (d = head size; a rotary model's after the rotation).
        key_vectors: ``(T, d)`` float32, k of every token (rotated, likewise).
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
    """One head's attention for one query, recorded while block ``layer`` runs on its input hidden states.

    The encoder runs from block ``layer`` (``start_layer``) on ``layer_input`` and stops once the block's pattern is
    recorded; q and k are its ``attn.hook_q`` / ``hook_k`` sites (``hook_rot_q`` / ``hook_rot_k`` in a rotary model,
    whose dot product is the score), the scores ``attn.hook_attn_scores`` and the probabilities
    ``attn.hook_pattern``. A key that a local layer's sliding window hides (probability 0) shows its unmasked
    ``q . k / sqrt(d)``: the window's additive mask (the dtype's minimum) would swamp it.

    Args:
        model: the :class:`BertModel` that produced ``layer_input`` (eval mode); only read.
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
    rot = "rot_" if cfg.position_embedding_type == "rotary" else ""
    q_site, k_site = f"attn.hook_{rot}q", f"attn.hook_{rot}k"
    # one forward pass from the block's input, stopped once its pattern is recorded; a copy (the array is read-only)
    sites = record_block(model, torch.tensor(x, device=device_of(model)), layer,
                         [q_site, k_site, "attn.hook_attn_scores", "attn.hook_pattern"])
    q = sites[q_site][query, head]  # (d,)
    k = sites[k_site][:, head]  # (T, d)
    product = q[None, :] * k  # (T, d)
    scores = sites["attn.hook_attn_scores"][head, query]  # (T,)
    hidden = scores <= torch.finfo(scores.dtype).min / 2  # keys outside a local layer's window
    if bool(hidden.any()):
        scores = torch.where(hidden, product.sum(-1) * q.shape[-1] ** -0.5, scores)
    probs = sites["attn.hook_pattern"][head, query]  # (T,)

    def as_np(v):
        return v.float().cpu().numpy()

    return NeuronView(layer, head, query, as_np(q), as_np(k), as_np(product), as_np(scores), as_np(probs))
