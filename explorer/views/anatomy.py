"""The Model anatomy page's views: every named parameter of the model, grouped (Hugging Face's names); two
architectures part by part and the presets' sizes, counted from their configs and checked against ``transformers``;
what the pooler does to one sentence (``tanh(W h_[CLS] + b)``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.modeling.config import PRESETS
from bertcore.readouts import anatomy
from bertcore.tokenization.tokenizer import encode
from explorer.figures import anatomy as ana_figures
from explorer.views.core import load, view


@dataclass
class Parameters:
    """The model's named tensors: ``rows`` (name, shape, count, group, part), ``totals`` (group -> parameters, in
    order) and ``tied`` (pairs of names that are one tensor, counted once)."""

    rows: list[anatomy.ParamRow]
    totals: dict[str, int]
    tied: list[tuple[str, str]]


@view
def parameters(source) -> Parameters:
    """Every named parameter of the model, grouped (embeddings, each encoder layer, pooler, heads)."""
    lm = load(source)
    rows = anatomy.parameter_table(lm.model)  # every named tensor, Hugging Face names
    totals = anatomy.group_totals(rows)  # group -> parameter count
    return Parameters(rows, totals, anatomy.tied_parameters(lm.model))


@dataclass
class Pooler:
    """The pooler on one sentence: ``dense`` ``(H,)`` (``W h_[CLS] + b``) and ``pooled`` ``(H,)`` (after tanh), or
    None for a model without a pooler; ``matches_model``: equal to the model's ``pooler_output``; ``n_tokens`` and
    ``num_truncated``: the sentence's tokens kept and cut."""

    dense: np.ndarray | None
    pooled: np.ndarray | None
    matches_model: bool
    n_tokens: int
    num_truncated: int


@view
def pooler(source, text: str) -> Pooler:
    """What the pooler does to ``text``: the last layer's [CLS] vector through a dense layer and tanh.

    Raises ``TextError`` (an empty or unreadable text) and ``InputError``."""
    lm = load(source)
    enc = encode(lm.tokenizer, text, max_length=lm.max_length)
    t = enc.tensors(lm.device)  # (1, T) each
    # the pooler: tanh(W h_[CLS] + b); None when the model has none (BertForMaskedLM drops it)
    steps = anatomy.pooler_steps(lm.model, t["input_ids"], t["attention_mask"], t["token_type_ids"])
    dense = pooled = None
    matches = False
    if steps is not None:  # (H,) each
        dense, pooled, matches = steps.dense.cpu().numpy(), steps.pooled.cpu().numpy(), steps.matches_model
    return Pooler(dense, pooled, matches, len(enc), enc.num_truncated)


@dataclass
class Anatomy:
    """The model's parameters and its pooler on one sentence."""

    parameters: Parameters
    pooler: Pooler


@view
def model_anatomy(source, text: str) -> Anatomy:
    """Parameters per group (:func:`parameters`) and the pooler on ``text`` (:func:`pooler`)."""
    return Anatomy(parameters(source), pooler(source, text))


def groups_figure(result: Anatomy):
    """Parameters per group."""
    totals = result.parameters.totals
    return ana_figures.groups_figure(list(totals), list(totals.values()))


def pooler_figure(result: Anatomy):
    """Each dimension of the pooled vector: before tanh (x) and after (y)."""
    return ana_figures.pooler_figure(result.pooler.dense, result.pooler.pooled)


@dataclass
class Architectures:
    """Two published architectures part by part: ``rows`` (part, shapes and parameters in each, difference) and
    the bare encoders' ``counts`` and ``layers``."""

    rows: list[dict]
    counts: tuple[int, int]
    layers: tuple[int, int]


@view
def architectures(arch_a: str, arch_b: str) -> Architectures:
    """Two architectures of :data:`bertcore.readouts.anatomy.BASE_CONFIGS` at their base sizes, built on PyTorch's
    ``meta`` device (shapes only, no memory)."""
    cfg_a, cfg_b = anatomy.base_config(arch_a), anatomy.base_config(arch_b)
    rows = anatomy.compare_architectures(cfg_a, cfg_b)
    counts = tuple(sum(anatomy.group_totals(anatomy.parameter_table(anatomy.build_on_meta(c, "base"))).values())
                   for c in (cfg_a, cfg_b))
    return Architectures(rows, counts, (cfg_a.num_hidden_layers, cfg_b.num_hidden_layers))


@view
def presets() -> list[dict]:
    """Every preset's parameter counts beside ``transformers``' own classes built for the same config."""
    rows = []
    for c in anatomy.preset_counts():
        hf_base, hf_tensors = anatomy.transformers_count(PRESETS[c.name], "base")
        hf_pre, _ = anatomy.transformers_count(PRESETS[c.name], "pretraining")
        rows.append({"preset": c.name, "layers L": c.layers, "hidden H": c.hidden, "heads": c.heads,
                     "intermediate I": c.intermediate, "BertModel": c.base, "named tensors": c.named_tensors,
                     "BertForPreTraining": c.pretraining,
                     "equal to transformers": c.base == hf_base and c.pretraining == hf_pre
                     and c.named_tensors == hf_tensors})
    return rows
