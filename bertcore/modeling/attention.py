"""Scaled dot-product self-attention (Vaswani et al. 2017, section 3.2; BERT section 3).

The math is one pure function, :func:`attention`, that returns ``(context, probs)``; the
module :class:`BertSelfAttention` only projects to queries, keys and values. Module and
weight names mirror ``transformers/models/bert/modeling_bert.py`` (``BertSelfAttention``,
``BertSelfOutput``, ``BertAttention``) so HF state dicts load unchanged.

ModernBERT's attention is a configuration of the same modules: no biases (``attention_bias``), queries and keys
rotated by their positions before the dot product (``rotary``: :mod:`bertcore.modeling.rotary`), and on its local
layers an additive mask that hides keys farther than ``local_attention // 2`` (:func:`sliding_window_mask`).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .interventions import Edit, Tap, layer_norm
from .rotary import apply_rotary

HeadAblation = Literal["zero", "uniform"]
HEAD_ABLATIONS: tuple[str, ...] = ("zero", "uniform")


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """Turn a key padding mask into the additive mask the attention scores take.

    Args:
        attention_mask: ``(B, T)`` int/bool, 1 (or True) for tokens to attend to, 0 for padding;
            or None.
    Returns:
        ``(B, 1, 1, T)`` tensor of ``dtype`` holding 0 where attended and the most negative
        finite value of ``dtype`` where padded (as HF, so padded keys get probability exactly 0);
        None when there is no mask, or nothing is padded and the mask is on the CPU (the fast path; on an
        accelerator, asking would make the call wait for the device, so the mask is always built there).
    """
    if attention_mask is None or attention_mask.device.type == "cpu" and bool(attention_mask.all()):
        return None
    keep = attention_mask[:, None, None, :].to(torch.bool)  # (B, 1, 1, T)
    zero = torch.zeros((), dtype=dtype, device=attention_mask.device)
    return torch.where(keep, zero, torch.finfo(dtype).min)  # (B, 1, 1, T)


def sliding_window_mask(length: int, half_window: int, dtype: torch.dtype,
                        device: torch.device | None = None) -> torch.Tensor:
    """The additive mask of a bidirectional sliding window: query i sees key j when ``|i - j| <= half_window``.

    Returns ``(1, 1, T, T)`` of ``dtype``: 0 inside the window, the most negative finite value outside.
    Source: HF ``sliding_window_bidirectional_overlay`` (ModernBERT: ``half_window = local_attention // 2``).
    """
    pos = torch.arange(length, device=device)
    inside = (pos[:, None] - pos[None, :]).abs() <= half_window  # (T, T)
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(inside, zero, torch.finfo(dtype).min)[None, None]  # (1, 1, T, T)


def get_head_mask(head_mask: torch.Tensor | None, num_layers: int, num_heads: int,
                  dtype: torch.dtype = torch.float32,
                  device: torch.device | str | None = None) -> list[torch.Tensor | None]:
    """One ``(heads,)`` mask per layer from a user head mask, as HF 4.x ``get_head_mask``.

    Args:
        head_mask: ``(heads,)`` (the same for every layer) or ``(layers, heads)``; 1.0 keeps a
            head, 0.0 switches it off (multiplied into its attention probabilities); None: keep all.
        device: where the masks go (the model's); None: where ``head_mask`` is.
    Returns:
        ``num_layers`` entries, each a ``(heads,)`` tensor of ``dtype`` or None (no mask given).
    Raises:
        ValueError: a shape other than ``(heads,)`` or ``(layers, heads)``.
    Source: ``transformers.modeling_utils.ModuleUtilsMixin.get_head_mask`` (transformers < 5;
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?").
    """
    if head_mask is None:
        return [None] * num_layers
    head_mask = torch.as_tensor(head_mask, device=device)
    if head_mask.dim() == 1:
        head_mask = head_mask.unsqueeze(0).expand(num_layers, -1)  # (L, heads)
    if tuple(head_mask.shape) != (num_layers, num_heads):
        raise ValueError(f"head_mask must have shape ({num_heads},) or ({num_layers}, {num_heads}); "
                         f"got {tuple(head_mask.shape)}")
    head_mask = head_mask.to(dtype)
    return list(head_mask.unbind(0))


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    need_probs: bool = False,
    softmax_dtype: torch.dtype | None = None,
    tap: Tap | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(Q K^T / sqrt(d) + mask) V, per head.

    Args:
        query, key, value: ``(B, heads, T, d)`` floating tensors.
        mask: additive mask broadcastable to ``(B, heads, T, T)`` (see :func:`additive_mask`), or None.
        dropout_p: dropout on the probabilities (pass 0.0 in eval).
        need_probs: return the attention probabilities. When False the fused
            ``torch.nn.functional.scaled_dot_product_attention`` kernel runs and probs is None.
        softmax_dtype: compute the softmax in this dtype and cast back (ModernBERT: float32, as transformers'
            eager attention does even in a float64 model); None: the scores' dtype. When it differs from the
            scores' dtype, the probabilities are computed explicitly (no fused kernel).
        tap: the block's ``attn.hook_attn_scores`` and ``attn.hook_pattern`` sites
            (:mod:`bertcore.modeling.interventions`), or None; when either is edited or recorded the probabilities
            are computed explicitly. A head mask is edits at these sites (:func:`head_mask_edits`).
    Returns:
        ``(context, probs)``: context ``(B, heads, T, d)``; probs ``(B, heads, T, T)`` post-softmax
        (each row sums to 1, padded keys exactly 0; as edited at ``attn.hook_pattern``) or None.
    Source: HF ``eager_attention_forward`` / ``sdpa_attention_forward``.
    """
    if softmax_dtype == query.dtype:
        softmax_dtype = None
    if tap is not None and not (tap.wants("attn.hook_attn_scores") or tap.wants("attn.hook_pattern")):
        tap = None
    if not need_probs and softmax_dtype is None and tap is None:
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
        return context, None
    scores = torch.matmul(query, key.transpose(-1, -2))  # (B, heads, T, T)
    scores.mul_(query.size(-1) ** -0.5)  # in place; the same rounding as HF's (q @ k^T) * scaling
    if mask is not None:
        scores.add_(mask)
    if tap is not None:
        scores = tap("attn.hook_attn_scores", scores)
    probs = _softmax(scores, softmax_dtype)  # (B, heads, T, T)
    if tap is not None:
        probs = tap("attn.hook_pattern", probs)
    weights = F.dropout(probs, p=dropout_p) if dropout_p > 0 else probs
    context = torch.matmul(weights, value)  # (B, heads, T, d)
    return context, probs


def _softmax(scores: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """Softmax over the keys, in ``dtype`` when given (then cast back to the scores' dtype, as HF)."""
    if dtype is None:
        return torch.softmax(scores, dim=-1)
    return torch.softmax(scores, dim=-1, dtype=dtype).to(scores.dtype)


def head_mask_edits(masks: list[torch.Tensor | None], head_ablation: HeadAblation = "zero",
                    need_probs: bool = False) -> dict[str, "Edit"]:
    """A head mask as edits at the intervention sites of :mod:`bertcore.modeling.interventions`.

    Args:
        masks: per block a ``(heads,)`` float mask (:func:`get_head_mask`; 1 keep, 0 off) or None.
        head_ablation: ``"zero"``: the probabilities times the mask (HF 4.x ``head_mask``; Michel et al. 2019), an
            edit of ``attn.hook_pattern`` when they are returned (``need_probs``, as HF returns them masked), else of
            ``attn.hook_z`` (``(p * m) @ V == m * (p @ V)``, so the fused kernel still runs); ``"uniform"``: heads
            whose mask is 0 attend uniformly to every key they may see (Kovaleva et al. 2019, section 6), an edit of
            ``attn.hook_attn_scores`` that keeps only the additive mask (padding, a local window) of those heads.
    Returns:
        ``{site: edit}`` for the blocks with a mask.
    Raises:
        ValueError: an unknown ``head_ablation``.
    """
    if head_ablation not in HEAD_ABLATIONS:
        raise ValueError(f"head_ablation must be one of {HEAD_ABLATIONS}; got {head_ablation!r}")
    edits = {}
    for i, m in enumerate(masks):
        if m is None:
            continue
        if head_ablation == "uniform":
            if not bool((m == 0).any()):
                continue  # nothing dropped in this block: its attention stays on the fused path
            def uniform(scores: torch.Tensor, dropped: torch.Tensor = m == 0) -> torch.Tensor:  # (B, heads, T, T)
                low = torch.finfo(scores.dtype).min
                hidden = scores < low / 2  # keys the additive mask hides
                flat = torch.where(hidden, low, torch.zeros((), dtype=scores.dtype, device=scores.device))
                return torch.where(dropped.to(scores.device).view(1, -1, 1, 1), flat, scores)
            edits[f"blocks.{i}.attn.hook_attn_scores"] = uniform
        elif need_probs:
            edits[f"blocks.{i}.attn.hook_pattern"] = lambda p, m=m: p * m.to(p).view(1, -1, 1, 1)  # (B, heads, T, T)
        else:
            edits[f"blocks.{i}.attn.hook_z"] = lambda z, m=m: z * m.to(z).view(1, 1, -1, 1)  # (B, T, heads, d)
    return edits


class BertSelfAttention(nn.Module):
    """Projects hidden states to per-head queries, keys and values and attends.

    Weights: ``query``, ``key``, ``value`` (each ``nn.Linear(H, H)``), as HF. With rotary positions the queries
    and keys are rotated after the projection and the softmax runs in float32 (as transformers' ModernBERT).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.head_size
        bias = config.attention_bias
        self.query = nn.Linear(config.hidden_size, config.hidden_size, bias=bias)
        self.key = nn.Linear(config.hidden_size, config.hidden_size, bias=bias)
        self.value = nn.Linear(config.hidden_size, config.hidden_size, bias=bias)
        self.dropout_p = config.attention_probs_dropout_prob
        self.softmax_dtype = torch.float32 if config.position_embedding_type == "rotary" else None

    def _project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(B, T, H)`` -> queries, keys, values, each ``(B, heads, T, d)`` contiguous.

        Always read from the live ``query``/``key``/``value`` weights: nothing is cached between calls
        (an earlier cache keyed on parameter versions went stale under fused AdamW, which updates
        weights in place without bumping ``_version``). Two layouts of the same dot products, each
        where it measured faster on the CPU: with autograd, one matmul against the three weights
        stacked anew each call (its backward is one matmul too); without autograd, three matmuls, as
        HF (no ``(3H, H)`` copy per call).
        """
        b, t, _ = hidden_states.shape
        heads, d = self.num_attention_heads, self.attention_head_size
        if torch.is_grad_enabled():
            weight = torch.cat((self.query.weight, self.key.weight, self.value.weight))  # (3H, H)
            bias = None if self.query.bias is None else torch.cat((self.query.bias, self.key.bias, self.value.bias))
            qkv = F.linear(hidden_states, weight, bias).view(b, t, 3, heads, d)  # (B, T, 3, heads, d)
            return qkv.permute(2, 0, 3, 1, 4).contiguous().unbind(0)  # each (B, heads, T, d)
        return tuple(lin(hidden_states).view(b, t, heads, d).transpose(1, 2).contiguous()  # (B, heads, T, d)
                     for lin in (self.query, self.key, self.value))

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None, need_probs: bool = False,
        tap: Tap | None = None, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``hidden_states (B, T, H)`` -> ``(context (B, T, H), probs (B, heads, T, T) | None)``; ``tap``: this block's
        :class:`bertcore.modeling.interventions.Interventions` sites (``attn.hook_q`` / ``hook_k`` / ``hook_v``,
        with rotary positions ``attn.hook_rot_q`` / ``hook_rot_k`` after the rotation, the scores and pattern,
        ``attn.hook_z``), or None; ``rotary``: ``(cos, sin)`` each ``(B or 1, T, d)``
        (:func:`bertcore.modeling.rotary.cos_sin`), or None."""
        b, t, h = hidden_states.shape
        q, k, v = self._project(hidden_states)  # each (B, heads, T, d)
        if tap is not None:
            q, k, v = tap("attn.hook_q", q), tap("attn.hook_k", k), tap("attn.hook_v", v)
        if rotary is not None:
            q, k = apply_rotary(q, k, *rotary)  # each (B, heads, T, d)
            if tap is not None:
                q, k = tap("attn.hook_rot_q", q), tap("attn.hook_rot_k", k)
        p = self.dropout_p if self.training else 0.0
        context, probs = attention(q, k, v, mask, p, need_probs, self.softmax_dtype, tap)  # (B, heads, T, d)
        if tap is not None:
            context = tap("attn.hook_z", context)
        return context.transpose(1, 2).reshape(b, t, h), probs  # (B, T, H)


class BertSelfOutput(nn.Module):
    """Output projection of attention: dense, dropout, residual add, LayerNorm (post-LN)."""

    def __init__(self, config: BertConfig, layer_norm: bool = True) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.LayerNorm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
                          if layer_norm else nn.Identity())  # ModernBERT's first layer: the embedding norm is it
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_layer_norm = config.pre_layer_norm

    def forward(self, context: torch.Tensor, residual: torch.Tensor, tap: Tap | None = None) -> torch.Tensor:
        """``(B, T, H), (B, T, H) -> (B, T, H)``. In pre-LN mode the LayerNorm is applied
        before attention by :class:`BertAttention`, so here it is only the residual add. ``tap``: the block's
        ``hook_attn_out``, ``hook_resid_mid`` and (post-LN) ``ln1`` sites of :mod:`bertcore.modeling.interventions`,
        or None."""
        if tap is None:
            out = self.dropout(self.dense(context)) + residual  # (B, T, H)
            return out if self.pre_layer_norm else self.LayerNorm(out)
        out = tap("hook_resid_mid", self.dropout(tap("hook_attn_out", self.dense(context))) + residual)  # (B, T, H)
        return out if self.pre_layer_norm else layer_norm(self.LayerNorm, out, tap, "ln1")


class BertAttention(nn.Module):
    """Self-attention sub-layer: ``self`` (:class:`BertSelfAttention`) and ``output``. ``layer_norm=False``: no
    LayerNorm in this sub-layer (ModernBERT's layer 0, pre-LN, whose input the embedding norm has normed)."""

    def __init__(self, config: BertConfig, layer_norm: bool = True) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config, layer_norm)

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None, need_probs: bool = False,
        tap: Tap | None = None, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(B, T, H) -> ((B, T, H), probs (B, heads, T, T) | None)``; ``tap``, ``rotary`` as
        :class:`BertSelfAttention`."""
        pre = self.output.pre_layer_norm
        x = layer_norm(self.output.LayerNorm, hidden_states, tap, "ln1") if pre else hidden_states
        context, probs = self.self(x, mask, need_probs, tap, rotary)  # (B, T, H)
        return self.output(context, hidden_states, tap), probs
