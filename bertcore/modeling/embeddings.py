"""BERT input embeddings: WordPiece token + learned position + segment (token type),
then LayerNorm and dropout (Devlin et al. 2019, section 3.2 and figure 2).

Mirrors HF ``BertEmbeddings``; :meth:`BertEmbeddings.parts` exposes every summand for the UI.

The other families are configurations of the same module (:class:`bertcore.modeling.config.BertConfig`): RoBERTa numbers
positions after the padding id (:func:`padding_aware_position_ids`), DistilBERT and ModernBERT have no segment table
(``type_vocab_size = 0``), ModernBERT no position table either (rotary positions act inside attention,
:mod:`bertcore.modeling.rotary`), ELECTRA's tables are ``embedding_size`` wide (projected to H by the model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .config import BertConfig
from .interventions import Tap, layer_norm


class InputError(ValueError):
    """Model inputs that cannot be fed to this model (the message says how to fix them)."""


@dataclass
class EmbeddingParts:
    """The embedding layer taken apart; every tensor is ``(B, T, H)`` float.

    ``total = word + position + token_type``; ``output = dropout(LayerNorm(total))``
    (equal to ``LayerNorm(total)`` in eval mode), which is what the encoder receives.
    """

    word: torch.Tensor
    position: torch.Tensor
    token_type: torch.Tensor
    total: torch.Tensor
    output: torch.Tensor


def padding_aware_position_ids(input_ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """RoBERTa's position ids (fairseq ``make_positions``; HF ``create_position_ids_from_input_ids``): tokens are
    numbered from ``pad_token_id + 1`` and every [PAD] token gets ``pad_token_id``. ``(B, T)`` long -> ``(B, T)``."""
    mask = input_ids.ne(pad_token_id).int()  # (B, T)
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + pad_token_id


class BertEmbeddings(nn.Module):
    """``word_embeddings (V, E)``, ``position_embeddings (P, E)``, ``token_type_embeddings (S, E)``,
    ``LayerNorm``, ``dropout`` (HF names; E = H except for ELECTRA). A family without segments has no
    ``token_type_embeddings``; one with rotary positions no ``position_embeddings``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        width = config.embedding_width
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        if config.position_embedding_type == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, width,
                                                    padding_idx=config.pad_token_id
                                                    if config.padding_aware_positions else None)
        else:
            self.position_embeddings = None
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size else None
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # Not persistent, as HF: checkpoints may carry it, it is never needed from them.
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings)[None, :], persistent=False)

    def check_inputs(self, input_ids: torch.Tensor | None, token_type_ids: torch.Tensor | None,
                     inputs_embeds: torch.Tensor | None = None) -> None:
        """Raise :class:`InputError` for ids this model cannot embed.

        Checks: exactly one of ``input_ids`` and ``inputs_embeds`` (``(B, T, E)``) is given; ``input_ids`` is 2-D
        ``(B, T)`` with T >= 1 and T <= ``config.max_sequence_length``, ids lie in ``[0, vocab_size)``, segment ids
        lie in ``[0, type_vocab_size)`` (a family without segments ignores them, as its tokenizer gives none).
        """
        cfg = self.config
        if (input_ids is None) == (inputs_embeds is None):
            raise InputError("give exactly one of input_ids and inputs_embeds")
        if inputs_embeds is not None:
            if inputs_embeds.dim() != 3 or inputs_embeds.size(-1) != cfg.embedding_width:
                raise InputError(f"inputs_embeds must have shape (batch, seq_len, {cfg.embedding_width}), "
                                 f"got {tuple(inputs_embeds.shape)}")
            input_ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.long,
                                    device=inputs_embeds.device)  # only its shape is checked
        if input_ids.dim() != 2 or input_ids.size(1) == 0:
            raise InputError("input_ids must have shape (batch, seq_len) with seq_len >= 1, "
                             f"got {tuple(input_ids.shape)}")
        if input_ids.size(1) > cfg.max_sequence_length:
            raise InputError(
                f"sequence of {input_ids.size(1)} tokens is longer than this model's "
                f"{cfg.max_sequence_length} positions; truncate the input")
        if input_ids.device.type != "cpu":  # the value checks below read on the host: on an accelerator they would
            return  # make every call wait for the device (the training loop checks its batches on the host)
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= cfg.vocab_size):
            raise InputError(f"input_ids must lie in [0, {cfg.vocab_size}); is the tokenizer this model's?")
        if token_type_ids is not None and self.token_type_embeddings is not None:
            if token_type_ids.shape != input_ids.shape:
                raise InputError(f"token_type_ids shape {tuple(token_type_ids.shape)} "
                                 f"!= input_ids shape {tuple(input_ids.shape)}")
            if token_type_ids.numel() and (int(token_type_ids.min()) < 0
                                           or int(token_type_ids.max()) >= cfg.type_vocab_size):
                raise InputError(f"token_type_ids must lie in [0, {cfg.type_vocab_size})")

    def parts(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> EmbeddingParts:
        """Every summand of the embedding, for display. ``input_ids (B, T)`` long."""
        word = self.word_embeddings(input_ids)  # (B, T, E)
        position = (torch.zeros_like(word) if self.position_embeddings is None
                    else self.position_embeddings(self._position_ids(input_ids, position_ids)).expand_as(word))
        if token_type_ids is None or self.token_type_embeddings is None:
            token_type_ids = torch.zeros_like(input_ids)
        token_type = (torch.zeros_like(word) if self.token_type_embeddings is None
                      else self.token_type_embeddings(token_type_ids))  # (B, T, E)
        total = word + token_type + position  # (B, T, E), HF's order of addition
        output = self.dropout(self.LayerNorm(total))  # (B, T, H)
        return EmbeddingParts(word, position, token_type, total, output)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        tap: Tap | None = None,
    ) -> torch.Tensor:
        """``input_ids (B, T)`` long (or ``inputs_embeds (B, T, H)``, the word embeddings, as HF) -> embeddings
        ``(B, T, H)``. ``tap``: the ``embed.*`` sites of :mod:`bertcore.modeling.interventions`, or None."""
        x = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, E)
        if tap is not None:
            x = tap("embed.hook_embed", x)
        if self.token_type_embeddings is not None:  # DistilBERT, ModernBERT: no segments
            segments = (self.token_type_embeddings.weight[0] if token_type_ids is None  # segment 0 everywhere
                        else self.token_type_embeddings(token_type_ids))  # (B, T, E) or (E,)
            if tap is not None and tap.wants("embed.hook_token_type_embed"):
                segments = tap("embed.hook_token_type_embed", segments.expand_as(x))  # (B, T, E)
            x = x + segments
        if self.position_embeddings is not None:  # ModernBERT: rotary positions, in attention
            positions = self.position_embeddings(self._position_ids(input_ids, position_ids, x.size(1)))  # (1|B, T, E)
            if tap is not None:
                positions = tap("embed.hook_pos_embed", positions)
            x = x + positions  # (B, T, E)
        out = self.dropout(layer_norm(self.LayerNorm, x, tap, "embed.ln"))  # (B, T, E)
        return out if tap is None else tap("hook_full_embed", out)

    def _position_ids(self, input_ids: torch.Tensor | None, position_ids: torch.Tensor | None,
                      t: int | None = None) -> torch.Tensor:
        """The given ``position_ids``, else 0..T-1 ``(1, T)``; RoBERTa's are counted after the padding id
        (:func:`padding_aware_position_ids`; from ``inputs_embeds`` alone, ``pad + 1 .. pad + T``, as HF)."""
        if position_ids is not None:
            return position_ids
        t = input_ids.size(1) if t is None else t
        if not self.config.padding_aware_positions:
            return self.position_ids[:, :t]  # (1, T)
        pad = self.config.pad_token_id
        if input_ids is None:
            return self.position_ids[:, :t] + pad + 1
        return padding_aware_position_ids(input_ids, pad)  # (B, T)
