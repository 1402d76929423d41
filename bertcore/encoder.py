"""The stack of Transformer encoder layers (Vaswani et al. 2017, section 3.1; BERT section 3).

Each :class:`BertLayer` is self-attention then a position-wise feed-forward network, each
followed by residual add and LayerNorm (post-LN, as BERT). With ``config.pre_layer_norm``
the LayerNorms move before each sub-layer (Xiong et al. 2020) and a final LayerNorm
closes the stack. Names mirror HF ``BertIntermediate``, ``BertOutput``, ``BertLayer``,
``BertEncoder``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import BertAttention, HeadAblation
from .config import BertConfig
from .interventions import Interventions, Tap


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
    """Feed-forward up-projection ``dense (H -> I)`` and activation."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = activation(config.hidden_act)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(hidden_states))  # (B, T, I)


class BertOutput(nn.Module):
    """Feed-forward down-projection ``dense (I -> H)``, dropout, residual add, ``LayerNorm``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_layer_norm = config.pre_layer_norm

    def forward(self, intermediate: torch.Tensor, residual: torch.Tensor, tap: Tap | None = None) -> torch.Tensor:
        """``(B, T, I), (B, T, H) -> (B, T, H)``; ``tap``: the ``mlp`` site of :mod:`bertcore.interventions`."""
        down = self.dense(intermediate)  # (B, T, H)
        if tap is not None:
            down = tap("mlp", down)
        out = self.dropout(down) + residual  # (B, T, H)
        return out if self.pre_layer_norm else self.LayerNorm(out)


class BertLayer(nn.Module):
    """One encoder layer: ``attention`` (:class:`BertAttention`), ``intermediate``, ``output``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(
        self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None, need_probs: bool = False,
        head_mask: torch.Tensor | None = None, head_ablation: HeadAblation = "zero", tap: Tap | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(B, T, H) -> ((B, T, H), probs (B, heads, T, T) | None)``; ``head_mask (heads,)`` as
        :func:`bertcore.attention.attention`; ``tap``: this layer's intervention sites, or None."""
        x, probs = self.attention(hidden_states, mask, need_probs, head_mask, head_ablation, tap)  # (B, T, H)
        ffn_in = self.output.LayerNorm(x) if self.output.pre_layer_norm else x
        return self.output(self.intermediate(ffn_in), x, tap), probs  # (B, T, H)


class BertEncoder(nn.Module):
    """``layer``: a ``ModuleList`` of L :class:`BertLayer` (+ a final ``LayerNorm`` in pre-LN mode)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        if config.pre_layer_norm:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: list[torch.Tensor | None] | None = None,
        head_ablation: HeadAblation = "zero",
        start_layer: int = 0,
        interventions: Interventions | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]:
        """Returns ``(last (B, T, H), hidden_states (L+1 x (B, T, H)) | None,
        attentions (L x (B, heads, T, T)) | None)``.

        ``hidden_states[0]`` is the embedding output and ``hidden_states[i]`` the output of layer i,
        as HF (in pre-LN mode the last entry is after the final LayerNorm). ``head_mask``: one
        ``(heads,)`` tensor or None per layer (:func:`bertcore.attention.get_head_mask`).

        ``start_layer`` (0-based, not in HF): ``hidden_states`` is the input of layer ``start_layer`` and
        only layers ``start_layer..L-1`` run (the returned lists then start at that input). Activation
        patching uses it to resume a run from a recorded residual stream instead of from the embeddings.

        ``interventions`` (not in HF): edits and recordings for this call only
        (:class:`bertcore.interventions.Interventions`); ``("resid", l)`` is called on layer l's output before
        the final LayerNorm of a pre-LN stack. None: the plain path.
        """
        if not 0 <= start_layer < len(self.layer):
            raise ValueError(f"start_layer must be in 0..{len(self.layer) - 1}; got {start_layer}")
        all_hidden = [hidden_states] if output_hidden_states else None
        all_probs = [] if output_attentions else None
        for i in range(start_layer, len(self.layer)):
            layer = self.layer[i]
            layer_mask = head_mask[i] if head_mask is not None else None
            tap = interventions.tap(i + 1) if interventions is not None else None
            hidden_states, probs = layer(hidden_states, mask, output_attentions, layer_mask, head_ablation,
                                         tap)  # (B, T, H)
            if interventions is not None:
                hidden_states = interventions("resid", i + 1, hidden_states)
            if i == len(self.layer) - 1 and hasattr(self, "LayerNorm"):
                hidden_states = self.LayerNorm(hidden_states)
            if all_hidden is not None:
                all_hidden.append(hidden_states)
            if all_probs is not None:
                all_probs.append(probs)
        return (hidden_states,
                tuple(all_hidden) if all_hidden is not None else None,
                tuple(all_probs) if all_probs is not None else None)
