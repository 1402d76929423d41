"""ELECTRA's discriminator: replaced-token detection (Clark et al. 2020, section 2; HF ``ElectraForPreTraining``).

The encoder is a configuration of :class:`bertcore.modeling.model.BertModel` (``family="electra"``; its embeddings may
be narrower than the hidden states and are then projected). The head reads every token's last hidden state and
says, with one logit, whether the generator replaced that token: ``dense (H -> H)``, ``hidden_act``,
``dense_prediction (H -> 1)``. A logit above 0 means "replaced". The generator (``ElectraForMaskedLM``) is a
:class:`bertcore.modeling.heads.BertForMaskedLM` whose head projects to the embedding width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .encoder import activation
from .interventions import Interventions
from .model import BertModel, BertPreTrainedModel


class ElectraDiscriminatorPredictions(nn.Module):
    """``dense (H -> H)``, ``hidden_act``, ``dense_prediction (H -> 1)``: one logit per token (HF names)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.activation(self.dense(hidden_states))).squeeze(-1)  # (B, T)


@dataclass
class ReplacedTokenOutput:
    """``loss`` (scalar | None: binary cross-entropy over unpadded tokens), ``logits (B, T)``: > 0 = replaced."""

    loss: torch.Tensor | None
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class ElectraForPreTraining(BertPreTrainedModel):
    """``bert`` (the encoder, no pooler) and ``discriminator_predictions`` (HF ``ElectraForPreTraining``)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
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
    ) -> ReplacedTokenOutput:
        """Per-token "replaced" logits ``(B, T)``; ``labels (B, T)`` 1 = replaced, 0 = original give the loss
        over unpadded tokens (as HF). Other arguments as :meth:`bertcore.modeling.model.BertModel.forward`."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_attentions,
                        output_hidden_states, head_mask=head_mask, head_ablation=head_ablation,
                        inputs_embeds=inputs_embeds, interventions=interventions)
        logits = self.discriminator_predictions(out.last_hidden_state)  # (B, T)
        loss = None
        if labels is not None:
            keep = torch.ones_like(labels, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
            loss = F.binary_cross_entropy_with_logits(logits[keep], labels[keep].to(logits.dtype))
        return ReplacedTokenOutput(loss, logits, out.hidden_states, out.attentions)
