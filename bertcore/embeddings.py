"""BERT input embeddings: WordPiece token + learned position + segment (token type),
then LayerNorm and dropout (Devlin et al. 2019, section 3.2 and figure 2).

Mirrors HF ``BertEmbeddings``; :meth:`BertEmbeddings.parts` exposes every summand for the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .config import BertConfig


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


class BertEmbeddings(nn.Module):
    """``word_embeddings (V, H)``, ``position_embeddings (P, H)``, ``token_type_embeddings (S, H)``,
    ``LayerNorm``, ``dropout`` (HF names)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # Not persistent, as HF: checkpoints may carry it, it is never needed from them.
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings)[None, :], persistent=False)

    def check_inputs(self, input_ids: torch.Tensor | None, token_type_ids: torch.Tensor | None,
                     inputs_embeds: torch.Tensor | None = None) -> None:
        """Raise :class:`InputError` for ids this model cannot embed.

        Checks: exactly one of ``input_ids`` and ``inputs_embeds`` (``(B, T, H)``) is given; ``input_ids`` is 2-D
        ``(B, T)`` with T >= 1 and T <= max_position_embeddings, ids lie in ``[0, vocab_size)``, segment ids lie
        in ``[0, type_vocab_size)`` (these two for CPU tensors only: elsewhere a host read waits for the device).
        """
        cfg = self.config
        if (input_ids is None) == (inputs_embeds is None):
            raise InputError("give exactly one of input_ids and inputs_embeds")
        if inputs_embeds is not None:
            if inputs_embeds.dim() != 3 or inputs_embeds.size(-1) != cfg.hidden_size:
                raise InputError(f"inputs_embeds must have shape (batch, seq_len, {cfg.hidden_size}), "
                                 f"got {tuple(inputs_embeds.shape)}")
            input_ids = torch.zeros(inputs_embeds.shape[:2], dtype=torch.long)  # only its shape is checked
        if input_ids.dim() != 2 or input_ids.size(1) == 0:
            raise InputError("input_ids must have shape (batch, seq_len) with seq_len >= 1, "
                             f"got {tuple(input_ids.shape)}")
        if input_ids.size(1) > cfg.max_position_embeddings:
            raise InputError(
                f"sequence of {input_ids.size(1)} tokens is longer than this model's "
                f"{cfg.max_position_embeddings} positions; truncate the input")
        if input_ids.device.type != "cpu":  # the value checks below read on the host: on an accelerator they would
            return  # make every call wait for the device (the training loop checks its batches on the host)
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= cfg.vocab_size):
            raise InputError(f"input_ids must lie in [0, {cfg.vocab_size}); is the tokenizer this model's?")
        if token_type_ids is not None:
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
        b, t = input_ids.shape
        if position_ids is None:
            position_ids = self.position_ids[:, :t]  # (1, T)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        word = self.word_embeddings(input_ids)  # (B, T, H)
        position = self.position_embeddings(position_ids).expand(b, -1, -1)  # (B, T, H)
        token_type = self.token_type_embeddings(token_type_ids)  # (B, T, H)
        total = word + token_type + position  # (B, T, H), HF's order of addition
        output = self.dropout(self.LayerNorm(total))  # (B, T, H)
        return EmbeddingParts(word, position, token_type, total, output)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``input_ids (B, T)`` long (or ``inputs_embeds (B, T, H)``, the word embeddings, as HF) -> embeddings
        ``(B, T, H)``."""
        x = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, H)
        t = x.size(1)
        if position_ids is None:
            position_ids = self.position_ids[:, :t]  # (1, T)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # segment 0 everywhere
        else:
            x = x + self.token_type_embeddings(token_type_ids)  # (B, T, H)
        x = x + self.position_embeddings(position_ids)  # (B, T, H)
        return self.dropout(self.LayerNorm(x))  # (B, T, H)
