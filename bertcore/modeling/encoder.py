"""The stack of Transformer encoder layers (Vaswani et al. 2017, section 3.1; BERT section 3).

Each :class:`BertLayer` is self-attention then a position-wise feed-forward network, each
followed by residual add and LayerNorm (post-LN, as BERT). With ``config.pre_layer_norm``
the LayerNorms move before each sub-layer (Xiong et al. 2020) and a final LayerNorm
closes the stack. Names mirror HF ``BertIntermediate``, ``BertOutput``, ``BertLayer``,
``BertEncoder``.

ModernBERT (Warner et al. 2024) is a configuration of the same stack: pre-LN without biases, a GeGLU feed-forward
(``gated_ffn``), rotary positions with a base per layer kind, and sliding-window attention on every layer but each
``global_attn_every_n_layers``-th (:meth:`BertEncoder.layer_inputs` builds each kind's mask and rotation once).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .rotary import cos_sin, inverse_frequencies
from .attention import BertAttention, sliding_window_mask
from .config import BertConfig
from .interventions import Interventions, Tap, layer_norm


def activation(name: str):
    """The activation function HF's ``ACT2FN[name]`` gives (``"gelu"`` is the exact erf GELU)."""
    if name == "gelu":
        return F.gelu
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu
    return F.silu  # "silu" / "swish"


class BertIntermediate(nn.Module):
    """Feed-forward up-projection ``dense (H -> I)`` and activation; with ``gated_ffn`` (GeGLU, Shazeer 2020;
    ModernBERT's ``mlp.Wi``) ``dense (H -> 2I)`` and ``act(first I) * (last I)``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.gated = config.gated_ffn
        width = config.intermediate_size * (2 if self.gated else 1)
        self.dense = nn.Linear(config.hidden_size, width, bias=config.mlp_bias)
        self.intermediate_act_fn = activation(config.hidden_act)

    def forward(self, hidden_states: torch.Tensor, tap: Tap | None = None) -> torch.Tensor:
        """``(B, T, H) -> (B, T, I)``; ``tap``: the block's ``mlp.hook_pre`` / ``hook_pre_linear`` / ``hook_post``
        sites of :mod:`bertcore.modeling.interventions`, or None."""
        if tap is None:
            if self.gated:
                up, gate = self.dense(hidden_states).chunk(2, dim=-1)  # each (B, T, I)
                return self.intermediate_act_fn(up) * gate  # (B, T, I)
            return self.intermediate_act_fn(self.dense(hidden_states))  # (B, T, I)
        if self.gated:
            up, gate = self.dense(hidden_states).chunk(2, dim=-1)  # each (B, T, I)
            up, gate = tap("mlp.hook_pre", up), tap("mlp.hook_pre_linear", gate)
            return tap("mlp.hook_post", self.intermediate_act_fn(up) * gate)  # (B, T, I)
        return tap("mlp.hook_post", self.intermediate_act_fn(tap("mlp.hook_pre", self.dense(hidden_states))))


class BertOutput(nn.Module):
    """Feed-forward down-projection ``dense (I -> H)``, dropout, residual add, ``LayerNorm``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_layer_norm = config.pre_layer_norm

    def forward(self, intermediate: torch.Tensor, residual: torch.Tensor, tap: Tap | None = None) -> torch.Tensor:
        """``(B, T, I), (B, T, H) -> (B, T, H)``; ``tap``: the block's ``hook_mlp_out``, ``hook_resid_post`` and
        (post-LN) ``ln2`` and ``hook_normalized_resid_post`` sites of :mod:`bertcore.modeling.interventions`, or
        None."""
        if tap is None:
            out = self.dropout(self.dense(intermediate)) + residual  # (B, T, H)
            return out if self.pre_layer_norm else self.LayerNorm(out)
        out = tap("hook_resid_post", self.dropout(tap("hook_mlp_out", self.dense(intermediate))) + residual)
        if self.pre_layer_norm:
            return out
        return tap("hook_normalized_resid_post", layer_norm(self.LayerNorm, out, tap, "ln2"))  # (B, T, H)


class BertLayer(nn.Module):
    """One encoder layer: ``attention`` (:class:`BertAttention`), ``intermediate``, ``output``. ``index``: its
    place in the stack (ModernBERT's layer 0 has no attention LayerNorm)."""

    def __init__(self, config: BertConfig, index: int = 0) -> None:
        super().__init__()
        self.attention = BertAttention(config, layer_norm=config.first_attention_norm or index > 0)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None, need_probs: bool = False,
        tap: Tap | None = None, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(B, T, H) -> ((B, T, H), probs (B, heads, T, T) | None)``; ``tap``: this block's intervention sites, or
        None; ``rotary``:
        ``(cos, sin)`` of its positions (:class:`bertcore.modeling.attention.BertSelfAttention`), or None."""
        if tap is not None:
            hidden_states = tap("hook_resid_pre", hidden_states)
        x, probs = self.attention(hidden_states, mask, need_probs, tap, rotary)  # (B, T, H)
        ffn_in = layer_norm(self.output.LayerNorm, x, tap, "ln2") if self.output.pre_layer_norm else x
        return self.output(self.intermediate(ffn_in, tap), x, tap), probs  # (B, T, H)


class BertEncoder(nn.Module):
    """``layer``: a ``ModuleList`` of L :class:`BertLayer` (+ a final ``LayerNorm`` in pre-LN mode)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList(BertLayer(config, i) for i in range(config.num_hidden_layers))
        if config.pre_layer_norm:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)

    def layer_inputs(self, mask: torch.Tensor | None, x: torch.Tensor, position_ids: torch.Tensor | None = None,
                     ) -> list[tuple[torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None]]:
        """Each layer's ``(additive mask, (cos, sin) | None)``: the padding ``mask`` ``(B, 1, 1, T)`` (or None)
        as is for global layers; on a local layer also the sliding window (``(B or 1, 1, T, T)``); the rotation
        of the layer's kind (RoPE base ``rope_theta`` or ``local_rope_theta``) when positions are rotary. Each kind
        is built once per forward pass. ``x``: the ``(B, T, H)`` input (dtype, device, length);
        ``position_ids``: ``(B or 1, T)``, None: 0..T-1."""
        cfg = self.config
        t = x.size(1)
        local_mask = None
        if cfg.local_attention and not all(cfg.is_global_layer(i) for i in range(len(self.layer))):
            window = sliding_window_mask(t, cfg.local_attention // 2, x.dtype, x.device)  # (1, 1, T, T)
            local_mask = window if mask is None else torch.minimum(mask, window)  # hidden if padded or outside
            if mask is not None:  # a [PAD] query whose window holds only [PAD] keys would attend to nothing (NaN in
                # transformers' eager path): it sees itself instead. Real tokens never see [PAD] keys: no change.
                diag = torch.arange(t, device=x.device)
                dead = (local_mask == torch.finfo(x.dtype).min).all(-1)  # (B, 1, T)
                local_mask = local_mask.clone()
                local_mask[..., diag, diag] = torch.where(dead, 0.0, local_mask[..., diag, diag])
        rot: dict[bool, tuple[torch.Tensor, torch.Tensor]] = {}
        if cfg.position_embedding_type == "rotary":
            pos = torch.arange(t, device=x.device)[None] if position_ids is None else position_ids
            for is_global, base in ((True, cfg.rope_theta), (False, cfg.local_rope_theta)):
                rot[is_global] = cos_sin(pos, inverse_frequencies(cfg.head_size, base).to(x.device), x.dtype)
        return [(mask if cfg.is_global_layer(i) else local_mask, rot.get(cfg.is_global_layer(i)))
                for i in range(len(self.layer))]

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        start_layer: int = 0,
        interventions: Interventions | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]:
        """Returns ``(last (B, T, H), hidden_states (L+1 x (B, T, H)) | None,
        attentions (L x (B, heads, T, T)) | None)``.

        ``hidden_states[0]`` is the embedding output and ``hidden_states[i]`` the output of layer i,
        as HF (in pre-LN mode the last entry is after the final LayerNorm).

        ``start_layer`` (0-based, not in HF): ``hidden_states`` is the input of layer ``start_layer`` and
        only layers ``start_layer..L-1`` run (the returned lists then start at that input). Activation
        patching uses it to resume a run from a recorded residual stream instead of from the embeddings.

        ``interventions`` (not in HF): edits and recordings for this call only
        (:class:`bertcore.modeling.interventions.Interventions`: the sites of blocks ``start_layer..L-1`` and
        ``ln_final``). None: the plain path.

        ``position_ids`` ``(B or 1, T)``: the positions rotary attention rotates by (None: 0..T-1); unused with
        learned positions (the embeddings add them).
        """
        if not 0 <= start_layer < len(self.layer):
            raise ValueError(f"start_layer must be in 0..{len(self.layer) - 1}; got {start_layer}")
        all_hidden = [hidden_states] if output_hidden_states else None
        all_probs = [] if output_attentions else None
        plain = self.config.local_attention == 0 and self.config.position_embedding_type == "absolute"
        inputs = None if plain else self.layer_inputs(mask, hidden_states, position_ids)
        for i in range(start_layer, len(self.layer)):
            layer = self.layer[i]
            tap = interventions.tap(i) if interventions is not None else None
            attn_mask, rotary = (mask, None) if inputs is None else inputs[i]
            hidden_states, probs = layer(hidden_states, attn_mask, output_attentions, tap, rotary)  # (B, T, H)
            if i == len(self.layer) - 1 and hasattr(self, "LayerNorm"):
                final_tap = interventions.tap() if interventions is not None else None
                hidden_states = layer_norm(self.LayerNorm, hidden_states, final_tap, "ln_final")
            if all_hidden is not None:
                all_hidden.append(hidden_states)
            if all_probs is not None:
                all_probs.append(probs)
        return (hidden_states,
                tuple(all_hidden) if all_hidden is not None else None,
                tuple(all_probs) if all_probs is not None else None)
