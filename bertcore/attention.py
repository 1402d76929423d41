"""Scaled dot-product self-attention (Vaswani et al. 2017, section 3.2; BERT section 3).

The math is one pure function, :func:`attention`, that returns ``(context, probs)``; the
module :class:`BertSelfAttention` only projects to queries, keys and values. Module and
weight names mirror ``transformers/models/bert/modeling_bert.py`` (``BertSelfAttention``,
``BertSelfOutput``, ``BertAttention``) so HF state dicts load unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """Turn a key padding mask into the additive mask the attention scores take.

    Args:
        attention_mask: ``(B, T)`` int/bool, 1 (or True) for tokens to attend to, 0 for padding;
            or None.
    Returns:
        ``(B, 1, 1, T)`` tensor of ``dtype`` holding 0 where attended and the most negative
        finite value of ``dtype`` where padded (as HF, so padded keys get probability exactly 0);
        None when there is no mask or nothing is padded (the fast path).
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    keep = attention_mask[:, None, None, :].to(torch.bool)  # (B, 1, 1, T)
    zero = torch.zeros((), dtype=dtype, device=attention_mask.device)
    return torch.where(keep, zero, torch.finfo(dtype).min)  # (B, 1, 1, T)


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    need_probs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(Q K^T / sqrt(d) + mask) V, per head.

    Args:
        query, key, value: ``(B, heads, T, d)`` floating tensors.
        mask: additive mask broadcastable to ``(B, heads, T, T)`` (see :func:`additive_mask`), or None.
        dropout_p: dropout on the probabilities (pass 0.0 in eval).
        need_probs: return the attention probabilities. When False the fused
            ``torch.nn.functional.scaled_dot_product_attention`` kernel runs and probs is None.
    Returns:
        ``(context, probs)``: context ``(B, heads, T, d)``; probs ``(B, heads, T, T)`` post-softmax
        (each row sums to 1, padded keys exactly 0) or None.
    Source: HF ``eager_attention_forward`` / ``sdpa_attention_forward``.
    """
    if not need_probs:
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
        return context, None
    scores = torch.matmul(query, key.transpose(-1, -2))  # (B, heads, T, T)
    scores.mul_(query.size(-1) ** -0.5)  # in place; the same rounding as HF's (q @ k^T) * scaling
    if mask is not None:
        scores.add_(mask)
    probs = torch.softmax(scores, dim=-1)  # (B, heads, T, T)
    weights = F.dropout(probs, p=dropout_p) if dropout_p > 0 else probs
    context = torch.matmul(weights, value)  # (B, heads, T, d)
    return context, probs


class BertSelfAttention(nn.Module):
    """Projects hidden states to per-head queries, keys and values and attends.

    Weights: ``query``, ``key``, ``value`` (each ``nn.Linear(H, H)``), as HF.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob
        self._qkv_cache: tuple | None = None  # (stamp, weight (3H, H), bias (3H,)), see _qkv_weights

    def _qkv_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Query, key and value stacked into one ``(3H, H)`` weight and ``(3H,)`` bias, so one matmul
        projects all three (each output column is the same dot product as in three matmuls).
        Without autograd the stack is cached until a weight changes (its ``_version``, storage,
        device or dtype); with autograd it is rebuilt each call so gradients reach each Linear."""
        params = (self.query.weight, self.key.weight, self.value.weight, self.query.bias, self.key.bias, self.value.bias)
        if torch.is_grad_enabled():
            return torch.cat(params[:3]), torch.cat(params[3:])
        stamp = tuple((p.data_ptr(), p._version, p.device, p.dtype) for p in params)
        if self._qkv_cache is None or self._qkv_cache[0] != stamp:
            self._qkv_cache = (stamp, torch.cat(params[:3]), torch.cat(params[3:]))
        return self._qkv_cache[1], self._qkv_cache[2]

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None, need_probs: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``hidden_states (B, T, H)`` -> ``(context (B, T, H), probs (B, heads, T, T) | None)``."""
        b, t, h = hidden_states.shape
        qkv = F.linear(hidden_states, *self._qkv_weights())  # (B, T, 3H)
        qkv = qkv.view(b, t, 3, self.num_attention_heads, self.attention_head_size)  # (B, T, 3, heads, d)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).contiguous().unbind(0)  # each (B, heads, T, d), one copy
        p = self.dropout_p if self.training else 0.0
        context, probs = attention(q, k, v, mask, p, need_probs)  # (B, heads, T, d)
        return context.transpose(1, 2).reshape(b, t, h), probs  # (B, T, H)


class BertSelfOutput(nn.Module):
    """Output projection of attention: dense, dropout, residual add, LayerNorm (post-LN)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_layer_norm = config.pre_layer_norm

    def forward(self, context: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """``(B, T, H), (B, T, H) -> (B, T, H)``. In pre-LN mode the LayerNorm is applied
        before attention by :class:`BertAttention`, so here it is only the residual add."""
        out = self.dropout(self.dense(context)) + residual  # (B, T, H)
        return out if self.pre_layer_norm else self.LayerNorm(out)


class BertAttention(nn.Module):
    """Self-attention sub-layer: ``self`` (:class:`BertSelfAttention`) and ``output``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None, need_probs: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(B, T, H) -> ((B, T, H), probs (B, heads, T, T) | None)``."""
        x = self.output.LayerNorm(hidden_states) if self.output.pre_layer_norm else hidden_states
        context, probs = self.self(x, mask, need_probs)  # (B, T, H)
        return self.output(context, hidden_states), probs
