"""The Overview page's view: the card of the loaded model (its configuration, in Hugging Face's field names)."""

from __future__ import annotations

from dataclasses import dataclass

from bertcore.device import describe

from explorer.views.core import load, view


@dataclass
class Card:
    """The loaded model: ``name``, ``path`` (its folder, or None), ``head`` (the head on top), ``has_mlm_head``,
    the sizes the page quotes, ``config`` (every config.json field) and ``load_report`` (the checkpoint keys
    renamed, missing, tied ..., or None)."""

    name: str
    path: str | None
    parameters: int
    layers: int
    heads: int
    hidden: int
    vocab: int
    max_positions: int
    intermediate: int
    head_size: int
    tokenizer_size: int
    head: str
    has_mlm_head: bool
    config: dict
    load_report: str | None
    device: str  # where the model's weights are and its views compute, in words (bertcore.device.describe)


@view
def card(source) -> Card:
    """The loaded model and its configuration (``bertcore.modeling.config.BertConfig``, HF field names)."""
    lm = load(source)
    cfg = lm.config
    report = getattr(lm.model, "load_report", None)  # how the checkpoint's keys were matched
    return Card(name=lm.source.name, path=None if lm.path is None else str(lm.path),
                parameters=lm.model.num_parameters(), layers=cfg.num_hidden_layers, heads=cfg.num_attention_heads,
                hidden=cfg.hidden_size, vocab=cfg.vocab_size, max_positions=cfg.max_position_embeddings,
                intermediate=cfg.intermediate_size, head_size=cfg.hidden_size // cfg.num_attention_heads,
                tokenizer_size=len(lm.tokenizer), head=lm.head, has_mlm_head=lm.has_mlm_head, config=cfg.to_dict(),
                load_report=None if report is None else report.summary(), device=describe(lm.device))
