"""The BERT encoder with its pooler (Devlin et al. 2019, section 3; HF ``BertModel``).

``BertModel(config)(input_ids, attention_mask, token_type_ids, output_attentions=True,
output_hidden_states=True)`` returns a :class:`BertModelOutput` with the same tensors
``transformers.BertModel`` returns for the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

from .attention import HeadAblation, additive_mask, get_head_mask, head_mask_edits
from .checkpoint import load_pretrained as _load_checkpoint, save_pretrained as _save_checkpoint
from .config import BertConfig
from .embeddings import BertEmbeddings
from .encoder import BertEncoder, activation
from .interventions import Interventions

M = TypeVar("M", bound="BertPreTrainedModel")


@dataclass
class BertModelOutput:
    """What :class:`BertModel` returns.

    Attributes:
        last_hidden_state: ``(B, T, H)`` float, output of the last layer.
        pooler_output: ``(B, H)`` float, ``tanh(dense(last_hidden_state[:, 0]))``; None without a pooler.
        hidden_states: L+1 tensors ``(B, T, H)`` (embeddings, then each layer), when asked for.
        attentions: L tensors ``(B, heads, T, T)`` of post-softmax probabilities, when asked for.
    """

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class _Activation(nn.Module):
    """An activation of :func:`bertcore.modeling.encoder.activation` as a module (no weights)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.fn = activation(name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


class BertPooler(nn.Module):
    """``dense (H -> H)`` + tanh on the [CLS] vector (HF ``BertPooler``; BERT section 3.3.2, NSP).

    The other families' sentence heads are configurations of it (``pooler_act``, ``pooler_norm``,
    ``classifier_pooling``): RoBERTa's ``classifier.dense`` + tanh is the same; DistilBERT's ``pre_classifier`` is
    followed by ReLU, ELECTRA's ``classifier.dense`` by GELU; ModernBERT's ``head`` is ``dense``, GELU, then a
    LayerNorm, over [CLS] or the mean of the unpadded tokens.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.head_bias)
        self.activation = nn.Tanh() if config.pooler_act == "tanh" else _Activation(config.pooler_act)
        if config.pooler_norm:
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias)
        self.mean = config.classifier_pooling == "mean"

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``(B, T, H)`` (and the ``(B, T)`` padding mask, for mean pooling) -> ``(B, H)``."""
        if self.mean:
            keep = (torch.ones(hidden_states.shape[:2], dtype=torch.bool, device=hidden_states.device)
                    if attention_mask is None else attention_mask)  # (B, T)
            first = (hidden_states * keep.unsqueeze(-1)).sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (B, H)
        else:
            first = hidden_states[:, 0]  # (B, H)
        out = self.activation(self.dense(first))  # (B, H)
        return self.LayerNorm(out) if hasattr(self, "LayerNorm") else out


class BertPreTrainedModel(nn.Module):
    """Shared init, loading and saving for every model class (HF ``BertPreTrainedModel``).

    Subclasses set ``base_model_prefix`` (``"bert"`` for the head classes, ``""`` for
    :class:`BertModel`) and take a :class:`BertConfig` as their only required argument.
    """

    base_model_prefix = "bert"
    # keys whose tensors are aliases of others (tied weights), dropped on save as HF does
    tied_keys: dict[str, str] = {}

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.load_report = None  # set by from_pretrained: checkpoint.LoadReport

    def init_weights(self) -> None:
        """Normal(0, initializer_range) weights, zero biases, LayerNorm 1/0, [PAD] row 0 (HF ``_init_weights``)."""
        std = self.config.initializer_range
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, std)
                if module.padding_idx is not None:
                    with torch.no_grad():
                        module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Tie output embeddings to input embeddings (overridden by the MLM heads)."""

    @property
    def base_model(self) -> "BertModel":
        """The :class:`BertModel` inside any head class (itself for a ``BertModel``); HF's ``base_model``."""
        return getattr(self, self.base_model_prefix, self) if self.base_model_prefix else self

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def num_parameters(self) -> int:
        """Number of distinct parameters (tied tensors counted once)."""
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_pretrained(cls: type[M], path: str | Path, config: BertConfig | None = None, **config_changes) -> M:
        """Load an HF checkpoint folder (``config.json`` + ``model.safetensors`` or
        ``pytorch_model.bin``) into this class.

        Keys are matched after renaming (``gamma``/``beta`` -> ``weight``/``bias``; a ``bert.``
        prefix is added or removed to fit this class); tied weights are filled; the rest must
        match exactly. The result's ``load_report`` lists what was renamed, missing (newly
        initialised, e.g. a fresh classifier) and unexpected (ignored, e.g. an MLM head loaded
        into :class:`BertModel`).

        Raises:
            bertcore.modeling.checkpoint.CheckpointError: no weights file, unreadable or corrupt file,
                a tensor shape that does not match the config, or nothing of the encoder found.
        """
        return _load_checkpoint(cls, path, config=config, **config_changes)

    def save_pretrained(self, path: str | Path) -> None:
        """Write ``config.json`` and ``model.safetensors`` (atomically) in the format of
        :mod:`bertcore.modeling.hf_format`:
        what ``transformers`` loads computes this model's logits (plain BERT for post-LN, RobertaPreLayerNorm for
        pre-LN), or it raises."""
        _save_checkpoint(self, path)


class BertModel(BertPreTrainedModel):
    """``embeddings``, ``encoder`` and ``pooler`` (HF ``BertModel``); ELECTRA with ``embedding_size != H`` also
    ``embeddings_project (E -> H)`` between them (HF ``ElectraModel``)."""

    base_model_prefix = ""

    def __init__(self, config: BertConfig, add_pooling_layer: bool | None = None) -> None:
        """``add_pooling_layer``: None: as the family's bare encoder (``config.base_pooler``: BERT and RoBERTa
        have a pooler, DistilBERT, ELECTRA and ModernBERT none)."""
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        if config.embedding_width != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_width, config.hidden_size)
        self.encoder = BertEncoder(config)
        pool = config.base_pooler if add_pooling_layer is None else add_pooling_layer
        self.pooler = BertPooler(config) if pool else None
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        head_mask: torch.Tensor | None = None,
        head_ablation: HeadAblation = "zero",
        inputs_embeds: torch.Tensor | None = None,
        interventions: Interventions | None = None,
    ) -> BertModelOutput:
        """Encode a batch.

        Args:
            input_ids: ``(B, T)`` long WordPiece ids, T <= max_position_embeddings.
            attention_mask: ``(B, T)`` 1 for real tokens, 0 for padding (None: all real).
            token_type_ids: ``(B, T)`` segment ids (None: all 0).
            position_ids: ``(B, T)`` or ``(1, T)`` (None: 0..T-1).
            output_attentions: also return every layer's attention probabilities (this path
                computes them explicitly; otherwise the fused SDPA kernel runs).
            output_hidden_states: also return the embedding output and every layer's output.
            head_mask: ``(heads,)`` or ``(layers, heads)`` float, 1 keeps a head, 0 switches it off
                (HF 4.x ``head_mask``: multiplied into the attention probabilities; Michel et al. 2019), applied as
                edits at the intervention sites (:func:`bertcore.modeling.attention.head_mask_edits`), before any
                edit of ``interventions`` at the same site; None: no ablation and the unchanged fast path.
            head_ablation: ``"zero"`` (as HF) or ``"uniform"``: switched-off heads attend uniformly
                to every unpadded token instead (Kovaleva et al. 2019).
            inputs_embeds: ``(B, T, H)`` float word embeddings used in place of ``word_embeddings(input_ids)``
                (HF's ``inputs_embeds``; pass ``input_ids=None``). Integrated gradients differentiates through it.
            interventions: activation edits and recordings for this call only
                (:class:`bertcore.modeling.interventions.Interventions`; not in HF): how analyses patch or read a shared
                model without hooks. None: the plain path.
        Returns:
            :class:`BertModelOutput` (with a head mask, ``attentions`` are the masked / uniform probabilities).
        Raises:
            bertcore.modeling.embeddings.InputError: ids out of range, sequence too long, both or neither of
                ``input_ids`` and ``inputs_embeds``.
            ValueError: a head mask of another shape, an unknown ``head_ablation``, an intervention site the model
                does not have.
        """
        self.embeddings.check_inputs(input_ids, token_type_ids, inputs_embeds)
        if head_mask is not None:
            cfg = self.config
            masks = get_head_mask(head_mask, cfg.num_hidden_layers, cfg.num_attention_heads, torch.float64,
                                  self.device)  # a mask made elsewhere goes where the model computes
            edits = head_mask_edits(masks, head_ablation, need_probs=output_attentions)
            interventions = Interventions(edits) if interventions is None else interventions.after(edits)
        if interventions is not None:
            interventions.check(self.config)
        tap = interventions.tap() if interventions is not None else None
        x = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds, tap)  # (B, T, E)
        if hasattr(self, "embeddings_project"):
            x = self.embeddings_project(x)  # (B, T, H)
        mask = additive_mask(attention_mask, x.dtype)  # (B, 1, 1, T) or None
        last, hidden_states, attentions = self.encoder(x, mask, output_attentions, output_hidden_states,
                                                       interventions=interventions, position_ids=position_ids)
        pooled = self.pooler(last, attention_mask) if self.pooler is not None else None  # (B, H)
        return BertModelOutput(last, pooled, hidden_states, attentions)
