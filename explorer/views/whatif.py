"""The what-if views shared by several pages (``explorer.whatif`` draws them): input A beside an edited input
B, their WordPieces aligned (difflib), each aligned token's hidden-state cosine per layer, each head's Jensen-Shannon
distance and the paired [MASK]s' guesses (:mod:`bertcore.analysis.representations.whatif`); and the one-click edits
of B (:mod:`bertcore.analysis.representations.edits`)."""

from __future__ import annotations

from bertcore.analysis.representations import edits
from bertcore.analysis.representations import whatif
from explorer.figures import attention as att_figures
from explorer.figures import whatif as wi_figures
from explorer.views.core import load, view


@view
def grammatical_edits(text: str) -> list[edits.Edit] | None:
    """One-click edits of ``text`` that spaCy finds: another number, another tense, *not*; None without spaCy."""
    found = edits.grammatical_edits_or_none(text)
    return found


@view
def words(source, text: str) -> list[tuple[int, int, str]]:
    """The words of ``text`` as the model's tokenizer splits them: ``(start, end, word)`` each. Raises
    ``TextError``."""
    lm = load(source)
    found = edits.words(lm.tokenizer, text)
    return found


@view
def model_edits(source, text: str, word: int, text_pair: str | None = None) -> list[edits.Edit]:
    """The model's own most probable whole words for word ``word`` of ``text`` (made [MASK]), as edits. Raises
    ``TextError``, ``InputError`` and ``FillMaskError``."""
    lm = load(source)
    found = edits.model_edits(lm.model, lm.tokenizer, text, word, text_pair=text_pair)
    return found


@view
def compare(source, text_a: str, text_b: str, pair_a: str | None = None, pair_b: str | None = None) -> whatif.WhatIf:
    """Input A (``text_a`` [+ ``pair_a``]) against input B (``text_b`` [+ ``pair_b``]): the two forward passes,
    their WordPieces aligned, each aligned token's hidden-state cosine per layer ``(L+1, n)``, each aligned query's
    attention Jensen-Shannon distance per head ``(L, heads, n)`` and the k-th [MASK] of A against the k-th of B
    (None: a model without an MLM head). Raises ``TextError`` and ``InputError``."""
    lm = load(source)
    # tokens aligned by difflib's SequenceMatcher on the WordPieces (identical inputs: zero difference)
    w = whatif.compare(lm.model, lm.tokenizer, text_a, text_b, pair_a, pair_b)
    return w


def cosine_figure(w: whatif.WhatIf):
    """Each aligned token's cosine between A and B, layer by layer (edited tokens marked)."""
    return wi_figures.cosine_by_layer(w.cosine, w.labels(), ~w.alignment.same)


def js_figure(w: whatif.WhatIf):
    """Each head's mean Jensen-Shannon distance between A's and B's attention over the paired tokens."""
    return att_figures.stat_heatmap(w.head_js, "JS distance A vs B", 0.0, max(float(w.head_js.max()), 1e-6),
                                    fmt=".2f")


def head_figure(w: whatif.WhatIf, layer: int, head: int):
    """One head's attention on A and on B (``layer``, ``head``: 0-based)."""
    return wi_figures.pair_heatmaps(w.act_a.attentions[layer, head], w.act_a.tokens,
                                    w.act_b.attentions[layer, head], w.act_b.tokens, "A", "B")
