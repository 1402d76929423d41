"""Task heads on top of :class:`~bertcore.modeling.model.BertModel` (HF ``modeling_bert.py`` names).

- :class:`BertForPreTraining`: MLM head (``cls.predictions``, decoder tied to the word
  embeddings, plus an output bias) and NSP head (``cls.seq_relationship``, 2 logits);
  BERT section 3.1, tasks #1 and #2.
- :class:`BertForMaskedLM`: the MLM head alone (no pooler, as HF).
- :class:`BertForSequenceClassification`: dropout + linear on the pooled [CLS] (section 4.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .encoder import activation
from .interventions import Interventions, Tap, layer_norm
from ..tokenization.masking import IGNORE_INDEX
from .model import BertModel, BertPreTrainedModel


class BertPredictionHeadTransform(nn.Module):
    """``dense (H -> H)``, activation, ``LayerNorm`` before the vocabulary projection.

    Per family (:class:`bertcore.modeling.config.BertConfig`): the activation is ``head_act`` (GELU for RoBERTa's
    ``lm_head`` and ELECTRA's generator; else ``hidden_act``); ELECTRA's generator projects to its embedding width
    E (``dense (H -> E)``, as its tied decoder reads E); ModernBERT's ``head`` has no biases.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        width = config.embedding_width
        self.dense = nn.Linear(config.hidden_size, width, bias=config.head_bias)
        self.transform_act_fn = activation(config.head_act or config.hidden_act)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps, bias=config.norm_bias)

    def forward(self, hidden_states: torch.Tensor, tap: Tap | None = None) -> torch.Tensor:
        """``(..., H) -> (..., E)``; ``tap``: the ``mlm_head.*`` sites of :mod:`bertcore.modeling.interventions`,
        or None."""
        if tap is None:
            return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))  # (..., E)
        post = tap("mlm_head.hook_post", self.transform_act_fn(tap("mlm_head.hook_pre", self.dense(hidden_states))))
        return layer_norm(self.LayerNorm, post, tap, "mlm_head.ln")  # (..., E)


class BertLMPredictionHead(nn.Module):
    """``transform``, then ``decoder (H -> V)`` whose weight is the word embedding matrix and
    whose bias is ``bias`` (one tensor, tied as in HF)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.embedding_width, config.vocab_size, bias=True)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def forward(self, hidden_states: torch.Tensor, tap: Tap | None = None) -> torch.Tensor:
        """``(..., H) -> (..., V)``; ``tap`` as :class:`BertPredictionHeadTransform`."""
        return self.decoder(self.transform(hidden_states, tap))  # (..., V)


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output: torch.Tensor, pooled_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


def _mlm_logits(
    head: BertLMPredictionHead, sequence_output: torch.Tensor, labels: torch.Tensor | None, masked_only: bool,
    masked_positions: torch.Tensor | None = None, tap: Tap | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """MLM logits and the labels they align with (``tap``: the head's intervention sites, or None).

    With ``masked_only`` and labels, the head runs on the selected positions only (labels !=
    -100): logits ``(N, V)`` and labels ``(N,)`` in row-major order, which saves the
    ``(B*T, H) x (H, V)`` projection of every unselected token. Otherwise logits ``(B, T, V)``.
    ``masked_positions`` ``(N,)`` long: those positions as flat indices into ``B*T``, found on the host by the
    collator (``mlm_positions``); given, the selection needs no ``nonzero`` on the device, which waits for it.
    """
    if masked_only and labels is not None:
        if masked_positions is not None:
            flat = sequence_output.reshape(-1, sequence_output.size(-1))  # (B*T, H)
            return (head(flat.index_select(0, masked_positions), tap),
                    labels.reshape(-1).index_select(0, masked_positions))
        selected = labels != IGNORE_INDEX  # (B, T)
        return head(sequence_output[selected], tap), labels[selected]  # (N, V), (N,)
    return head(sequence_output, tap), labels


def _mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits (..., V)`` against ``labels (...)``, skipping -100 (unselected)."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE_INDEX)


class _TiedMLM:
    """Mixin: tie ``cls.predictions.decoder.weight`` to the word embeddings."""

    tied_keys = {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def tie_weights(self) -> None:
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
        self.cls.predictions.decoder.bias = self.cls.predictions.bias


@dataclass
class BertForPreTrainingOutput:
    """What :class:`BertForPreTraining` returns.

    Attributes:
        loss: mlm_loss + nsp_loss (scalar) when both label sets are given, else the one given.
        mlm_loss / nsp_loss: scalar cross-entropies (MLM ignores -100 labels).
        prediction_logits: ``(B, T, V)``; or ``(N, V)`` for the selected positions only
            (``masked_only=True`` with labels), aligned with ``mlm_labels (N,)``.
        seq_relationship_logits: ``(B, 2)``: index 0 = "B follows A" (IsNext), 1 = random (NotNext).
        hidden_states / attentions: as :class:`~bertcore.modeling.model.BertModelOutput`.
    """

    loss: torch.Tensor | None
    prediction_logits: torch.Tensor
    seq_relationship_logits: torch.Tensor
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    mlm_labels: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class MaskedLMOutput:
    """``loss`` (scalar | None), ``logits`` ``(B, T, V)`` or ``(N, V)`` aligned with ``labels (N,)``."""

    loss: torch.Tensor | None
    logits: torch.Tensor
    labels: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class SequenceClassifierOutput:
    """``loss`` (scalar | None), ``logits (B, num_labels)``."""

    loss: torch.Tensor | None
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class BertForPreTraining(_TiedMLM, BertPreTrainedModel):
    """``bert`` (:class:`BertModel` with pooler) and ``cls`` (:class:`BertPreTrainingHeads`)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
        head_mask: torch.Tensor | None = None,
        head_ablation: str = "zero",
        inputs_embeds: torch.Tensor | None = None,
        interventions: Interventions | None = None,
        masked_positions: torch.Tensor | None = None,
    ) -> BertForPreTrainingOutput:
        """MLM + NSP. ``labels (B, T)``: original ids at selected positions, -100 elsewhere;
        ``next_sentence_label (B,)``: 0 IsNext, 1 NotNext; ``masked_positions (N,)``: the selected positions as
        flat indices, found on the host (no device wait; ``masked_only`` only). See :class:`BertForPreTrainingOutput`;
        the other arguments as :meth:`BertModel.forward`."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_attentions,
                        output_hidden_states, head_mask=head_mask, head_ablation=head_ablation,
                        inputs_embeds=inputs_embeds, interventions=interventions)
        logits, mlm_labels = _mlm_logits(self.cls.predictions, out.last_hidden_state, labels, masked_only,
                                         masked_positions, interventions.tap() if interventions is not None else None)
        nsp_logits = self.cls.seq_relationship(out.pooler_output)  # (B, 2)
        mlm_loss = nsp_loss = None
        if labels is not None:
            mlm_loss = _mlm_loss(logits, mlm_labels)
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.reshape(-1))
        losses = [x for x in (mlm_loss, nsp_loss) if x is not None]
        loss = sum(losses) if losses else None
        return BertForPreTrainingOutput(loss, logits, nsp_logits, mlm_loss, nsp_loss,
                                        mlm_labels if masked_only else None, out.hidden_states, out.attentions)


class BertForMaskedLM(_TiedMLM, BertPreTrainedModel):
    """``bert`` (:class:`BertModel` without pooler) and ``cls`` (:class:`BertOnlyMLMHead`)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
        head_mask: torch.Tensor | None = None,
        head_ablation: str = "zero",
        inputs_embeds: torch.Tensor | None = None,
        interventions: Interventions | None = None,
        masked_positions: torch.Tensor | None = None,
    ) -> MaskedLMOutput:
        """Masked-token logits; cross-entropy over positions whose label is not -100; ``masked_positions`` as
        :class:`BertForPreTraining`; ``head_mask`` / ``head_ablation`` / ``inputs_embeds`` / ``interventions`` as
        :meth:`BertModel.forward`."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_attentions,
                        output_hidden_states, head_mask=head_mask, head_ablation=head_ablation,
                        inputs_embeds=inputs_embeds, interventions=interventions)
        logits, mlm_labels = _mlm_logits(self.cls.predictions, out.last_hidden_state, labels, masked_only,
                                         masked_positions, interventions.tap() if interventions is not None else None)
        loss = None
        if labels is not None:
            loss = _mlm_loss(logits, mlm_labels)
        return MaskedLMOutput(loss, logits, mlm_labels if masked_only else None, out.hidden_states, out.attentions)


class BertForSequenceClassification(BertPreTrainedModel):
    """``bert`` (with pooler), ``dropout``, ``classifier (H -> num_labels)``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=True)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
        head_ablation: str = "zero",
        inputs_embeds: torch.Tensor | None = None,
        interventions: Interventions | None = None,
    ) -> SequenceClassifierOutput:
        """Class logits ``(B, num_labels)``; cross-entropy against ``labels (B,)`` long when given;
        ``head_mask`` / ``head_ablation`` / ``inputs_embeds`` / ``interventions`` as :meth:`BertModel.forward`."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_attentions,
                        output_hidden_states, head_mask=head_mask, head_ablation=head_ablation,
                        inputs_embeds=inputs_embeds, interventions=interventions)
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, C)
        loss = F.cross_entropy(logits, labels.reshape(-1)) if labels is not None else None
        return SequenceClassifierOutput(loss, logits, out.hidden_states, out.attentions)
