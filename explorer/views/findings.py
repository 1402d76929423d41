"""The Findings page's views: published analyses of BERT recomputed on a model over held-out BBC segments (Clark et
al. 2019, Kovaleva et al. 2019, Ethayarajh 2019, Wang & Chen 2020), Clark et al.'s syntax heads and attention-only
probe, linear probes per layer (Tenney et al. 2019, Hewitt & Liang 2019), and how faithful six explanations are over
a set of sentences (Ferrando et al. 2022). Each reads the result shipped beside the model when one was computed
with the same files and inputs (:mod:`bertcore.analysis.shipped`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis import shipped
from bertcore.analysis.attention import activations
from bertcore.analysis.papers import published
from bertcore.analysis.representations import syntax
from explorer.figures import findings as figs
from explorer.views.core import load, progress, view


@view
def measures(source, n_segments: int):
    """The papers' measures (:class:`~bertcore.analysis.papers.evalset.FindingsResult`) on ``n_segments`` held-out
    BBC segments (seed 0, at most 128 tokens each). Raises ``DataError`` without the corpus, ``ValueError`` when no
    segment can be built."""
    lm = load(source)
    # Clark et al. 2019, Kovaleva et al. 2019, Ethayarajh 2019 on held-out BBC segments, one forward each
    found = shipped.get(lm, shipped.findings(lm, n_segments), progress)
    return found


@view
def shipped_measures(source, n_segments: int):
    """:func:`measures` as shipped beside the model, or None (nothing is computed)."""
    lm = load(source)
    found = shipped.shipped(lm, shipped.findings(lm, n_segments))
    return found


@view
def position_regression(source) -> dict | None:
    """Wang & Chen 2020's 5-fold linear regression from a position's vector to its index, on the model's learned
    table and on a sinusoidal table of the same size: ``{"learned": {"predictions": (P,), "mae": float},
    "sinusoidal": {...}}``; None for a model without a position table (rotary positions)."""
    lm = load(source)
    regression = None
    if lm.encoder.embeddings.position_embeddings is not None:  # rotary positions (ModernBERT): no table to regress
        regression = shipped.get(lm, shipped.position_regression(lm))
    return regression


@dataclass
class Table:
    """Ours beside the papers: ``rows`` (measure, ours, published, source), and the attention shares of each head
    ``(L, heads)`` to [CLS], to [SEP] and to periods and commas."""

    rows: list[dict]
    to_cls: np.ndarray
    to_sep: np.ndarray
    to_punct: np.ndarray


@view
def table(source, n_segments: int) -> Table:
    """The table of the page: every measure of :func:`measures` and the position regression beside bert-base's
    published number and its source."""
    found = measures(source, n_segments)
    regression = position_regression(source)
    learned = None if regression is None else regression["learned"]["mae"]
    sinusoidal = None if regression is None else regression["sinusoidal"]["mae"]
    rows = published.comparison_rows(found, learned, sinusoidal)
    return Table(rows, found.to_cls, found.to_sep, found.to_punct)


def tokens_figure(t: Table):
    """How much of each head's attention goes to [CLS], to [SEP] and to periods and commas (Clark et al. 2019)."""
    return figs.token_attention_figure({"[CLS]": t.to_cls, "[SEP]": t.to_sep, ". and ,": t.to_punct})


@view
def syntax_heads(source, n_segments: int):
    """Clark et al. 2019's syntax heads and attention-only probe on the held-out segments parsed by spaCy
    (:func:`bertcore.analysis.representations.syntax.run_syntax`). Raises ``SyntaxUnavailable`` without spaCy and
    ``ValueError`` with too few arcs."""
    lm = load(source)
    run = shipped.get(lm, shipped.syntax(lm, n_segments), progress)
    return run


@dataclass
class Example:
    """One arc of a relation and its best head: ``words`` (a window of the segment), ``gold`` (spaCy's arcs in it:
    ``(dependent, head, label)``), ``predicted`` (the head's choice: ``(word that looks, where it looks)``),
    ``title``."""

    words: list[str]
    gold: list[tuple[int, int, str]]
    predicted: list[tuple[int, int]]
    title: str


@view
def syntax_example(source, n_segments: int, relation: str) -> Example:
    """The first arc of ``relation`` in the segments, with spaCy's arcs around it and where the relation's best head
    looks. Raises what :func:`syntax_heads` raises."""
    lm = load(source)
    run = syntax_heads(source, n_segments)
    share, layer, head, direction = run.heads.best(relation)
    seg_i, dep, gov = run.heads.examples[relation][0]
    seg = run.segments[seg_i]
    act = activations.run(lm.encoder, lm.tokenizer, seg.text_a, seg.text_b)
    # attention merged to words: the sum over a word's pieces as keys, the mean over them as queries
    merged, unit = syntax.word_attention(act.attentions, seg)
    other = syntax.predicted_word(merged, unit, layer, head, dep, direction)
    lo, hi = max(0, min(dep, gov) - 4), min(len(seg.words), max(dep, gov) + 5)
    gold = [(d - lo, seg.words[d].head - lo, seg.words[d].dep) for d in range(lo, hi)
            if seg.words[d].head != d and lo <= seg.words[d].head < hi and seg.words[d].dep not in ("punct", "ROOT")]
    looks = (dep, other) if direction == "dep->head" else (other, dep)  # (the word that looks, where it looks)
    predicted = [(looks[0] - lo, looks[1] - lo)] if other is not None and lo <= other < hi else []
    below = (f"where '{seg.words[dep].text}' looks" if direction == "dep->head"
             else f"the word that looks most at '{seg.words[dep].text}'")
    title = (f"Head {layer + 1}-{head + 1} on '{relation}' ({share:.0%} of arcs, {direction}): above, spaCy's arcs; "
             f"below, {below}")
    return Example([w.text for w in seg.words[lo:hi]], gold, predicted, title)


@view
def probes(source, n_segments: int) -> dict:
    """Linear probes per layer for part of speech and dependency label, each with its control task, on the words
    of the parsed segments of :func:`syntax_heads`. Raises what :func:`syntax_heads` raises."""
    lm = load(source)
    results = shipped.get(lm, shipped.probes(lm, n_segments, lambda n: syntax_heads(source, n).segments), progress)
    return results


@view
def shipped_faithfulness(source, n_sentences: int) -> dict | None:
    """:func:`faithfulness` as shipped beside the model, or None (nothing is computed)."""
    lm = load(source)
    found = shipped.shipped(lm, shipped.faithfulness(lm, n_sentences))
    return found


@view
def faithfulness(source, n_sentences: int) -> dict:
    """How well six explanations rank the words that matter for the model's guess at a [MASK], on ``n_sentences``
    held-out State of the Union sentences: ``{"correlations": (N, methods, effects) Spearman's rank correlation with
    occlusion and value zeroing, "sentences": [...]}``."""
    lm = load(source)
    result = shipped.get(lm, shipped.faithfulness(lm, n_sentences), progress)
    return result
