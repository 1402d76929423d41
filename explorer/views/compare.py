"""The Compare models page's view: two models run on the same sentences, their hidden states compared layer by
layer (linear CKA, Kornblith et al. 2019) and their heads' attention compared (Jensen-Shannon distance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis.representations.compare import head_js, run_pair, sentences_of
from explorer.figures import attention as att_figures
from explorer.figures import compare as cmp_figures
from explorer.views.core import load, view


@dataclass
class Line:
    """One line in both models: its ``tokens``, the attention of A and of B (``(L, heads, T, T)`` each) and the
    ``js`` distance of each head ``(L, heads)`` (mean over query rows; None for models of different shapes)."""

    tokens: list[str]
    attention_a: np.ndarray
    attention_b: np.ndarray
    js: np.ndarray | None


@dataclass
class ModelPair:
    """Two models on the same lines. ``name_a`` / ``name_b``; ``sentences`` (the lines); ``tokens`` (pooled for
    CKA); ``cka`` ``(L+1,)`` (None for different depths), ``cka_matrix`` ``(La+1, Lb+1)``, ``js`` ``(L, heads)``
    (None for different shapes); ``cut`` (1-based lines cut to the models' positions); ``layers`` / ``heads``
    (A, B), ``hidden`` (the larger hidden size) and each :class:`Line`."""

    name_a: str
    name_b: str
    sentences: list[str]
    tokens: int
    cka: np.ndarray | None
    cka_matrix: np.ndarray
    js: np.ndarray | None
    cut: list[int]
    layers: tuple[int, int]
    heads: tuple[int, int]
    hidden: int
    lines: list[Line]


@view
def compare(source, source_b, text: str, include_special: bool = False) -> ModelPair:
    """Model ``source`` (A) and ``source_b`` (B) on each line of ``text``.

    Raises ``TextError`` (no line, too many, too few tokens), ``TokenizationMismatch`` (the models split a line
    differently) and ``InputError``."""
    a, b = load(source), load(source_b)
    sentences = sentences_of(text)  # the non-empty lines, at most MAX_SENTENCES
    # one forward per line and model; CKA over every token's hidden state ([CLS]/[SEP] left out unless asked),
    # JS distance of every head's attention rows
    cmp = run_pair(a.encoder, a.tokenizer, b.encoder, b.tokenizer, sentences, include_special)
    # per line: both attention maps, and each head's JS distance when the models have the same heads
    lines = [Line(list(x.tokens), x.attentions, y.attentions,
                  None if cmp.js is None else head_js(x.attentions, y.attentions))  # js: (L, heads)
             for x, y in zip(cmp.runs_a, cmp.runs_b)]
    return ModelPair(
        name_a=a.source.name, name_b=b.source.name, sentences=cmp.sentences, tokens=cmp.tokens, cka=cmp.cka,
        cka_matrix=cmp.cka_matrix, js=cmp.js, cut=[i + 1 for i, r in enumerate(cmp.runs_a) if r.encoding.num_truncated],
        layers=(a.config.num_hidden_layers, b.config.num_hidden_layers),
        heads=(a.config.num_attention_heads, b.config.num_attention_heads),
        hidden=max(a.config.hidden_size, b.config.hidden_size), lines=lines)


def by_layer_figure(result: ModelPair):
    """CKA of each layer (0 = the embeddings) and the mean JS distance of its heads (models of one depth)."""
    return cmp_figures.by_layer(result.cka, result.js.mean(1) if result.js is not None else None)


def matrix_figure(result: ModelPair):
    """CKA of every layer of A against every layer of B."""
    return cmp_figures.cka_heatmap(result.cka_matrix, result.name_a, result.name_b)


def heads_figure(result: ModelPair):
    """The Jensen-Shannon distance of each head's attention, A against B (models of one shape)."""
    return att_figures.stat_heatmap(result.js, "Jensen-Shannon distance", 0, 1, fmt=".2f", colorscale="Reds")


def side_by_side_figure(result: ModelPair, line: int, layer: int, head: int):
    """One head's attention on one line, model A beside model B (``layer``, ``head``: 0-based)."""
    one = result.lines[line]
    return cmp_figures.side_by_side(one.attention_a[layer, head], one.attention_b[layer, head], one.tokens,
                                    f"A: {result.name_a}", f"B: {result.name_b}")
