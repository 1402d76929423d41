"""The Head ablation page's views: the model read out with and without some attention heads (zeroed, Michel et al.
2019, or made uniform, Kovaleva et al. 2019), how far its hidden states move, and its MLM loss on a fixed held-out
batch."""

from __future__ import annotations

from dataclasses import dataclass

from bertcore.analysis.attention import ablation
from bertcore.tokenization.tokenizer import encode
from explorer.figures import ablation as abl_figures
from explorer.views.core import load, view


@view
def encoded(source, text: str, text_pair: str | None):
    """``text`` (and ``text_pair``) as the model reads it, cut to its positions: an
    :class:`~bertcore.tokenization.tokenizer.Encoding`. Raises ``TextError``."""
    lm = load(source)
    enc = encode(lm.tokenizer, text, text_pair, max_length=lm.max_length)
    return enc


@dataclass
class Ablated:
    """One input read out before and after switching heads off. ``before`` / ``after``:
    :class:`~bertcore.analysis.attention.ablation.Readout` (hidden states, fill-mask top-k, P(IsNext), class
    probabilities); ``movement``: their cosine per token and layer (1 = unchanged); ``tokens``: the T WordPieces;
    ``layer_names``: the hidden_states rows."""

    before: ablation.Readout
    after: ablation.Readout
    movement: ablation.Movement
    tokens: list[str]
    layer_names: list[str]


@view
def ablate(source, text: str, text_pair: str | None, mode: str, off: tuple[tuple[int, int], ...]) -> Ablated:
    """The model on ``text`` with the heads ``off`` (0-based ``(block, head)``) switched off by ``mode`` ("zero":
    their output zeroed, HF's ``head_mask``; "uniform": they attend to every token equally), against the unablated
    run. Raises ``TextError`` and ``InputError``."""
    lm = load(source)
    cfg = lm.config
    enc = encoded(source, text, text_pair)
    # 1 keep / 0 off per (layer, head)
    mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, heads=off,
                                   device=lm.device)  # (L, heads)
    before = ablation.readout(lm.model, lm.head, lm.tokenizer, enc, None, mode)
    after = ablation.readout(lm.model, lm.head, lm.tokenizer, enc, mask, mode)
    mv = ablation.movement(before, after)  # cosine to the unablated run, 1 = unchanged
    layer_names = ["embeddings"] + [f"layer {i}" for i in range(1, cfg.num_hidden_layers + 1)]
    return Ablated(before, after, mv, enc.tokens, layer_names)


@view
def mlm_loss(source, mode: str, off: tuple[tuple[int, int], ...]) -> float:
    """The MLM loss (nats) on a fixed held-out batch of BBC News paragraphs (masked once with seed 0, 15%,
    80/10/10) with the heads ``off`` switched off by ``mode`` (none: the unablated model). Raises ``DataError``
    without the corpus."""
    lm = load(source)
    cfg = lm.config
    batch = ablation.heldout_batch(lm.tokenizer, ablation.heldout_texts(),
                                   max_length=min(ablation.HELDOUT_TOKENS, lm.max_length))
    mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, heads=off,
                                   device=lm.device) if off else None
    loss = ablation.mlm_loss(lm.model, batch, mask, mode)
    return loss


def movement_figure(ablated: Ablated):
    """How far each layer's hidden states and the sentence embedding moved."""
    mv = ablated.movement
    return abl_figures.movement_figure(mv.per_layer, ablated.layer_names, mv.cls, mv.mean_pooled, mv.pooled)
