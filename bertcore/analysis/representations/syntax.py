"""Which attention heads follow syntax (Clark et al. 2019, "What Does BERT Look At?", section 4.2, Figure 5).

Attention is merged to word level with their rule (:mod:`bertcore.analysis.attention.words`), and a head
"predicts" for a word the other word it attends to most ([CLS] and [SEP] excluded). For each dependency relation
and each head, the share of dependents whose prediction is their syntactic head (direction ``dep->head``) and the
share of heads whose prediction is their dependent (``head->dep``); beside it the fixed-offset baseline (always the
word at the relation's most common relative position). The parses come from :mod:`.parses` (spaCy); its names are
re-exported here for the pages that show a parse beside the heads.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...device import device_of
from ..attention.words import word_groups
from .parses import (  # noqa: F401 - re-exported: the parse a syntax-head view draws beside its scores
    INSTALL,
    SPACY_MODEL,
    ParsedSegment,
    SyntaxUnavailable,
    Word,
    align,
    parse,
    parse_segment,
    parser,
    token_labels,
    word_attention,
)
from .syntax_probe import AttentionProbe, attention_probe

#: relations scored when they occur at least this often in the evaluation set
MIN_COUNT = 20


@dataclass
class SyntaxHeads:
    """Clark et al.'s syntax-head scores over an evaluation set.

    Attributes:
        relations: the relations scored (at least :data:`MIN_COUNT` arcs), most frequent first.
        counts: arcs per relation.
        dep_to_head: ``{relation: (L, H) share}``: the dependent's most-attended other word is its head.
        head_to_dep: ``{relation: (L, H) share}``: of the words that attend to the dependent, its head attends most
            (Clark et al.'s reverse direction, as their code scores it: the attention map transposed).
        baseline: ``{relation: (share, offset)}``: always the word at the most common offset (head - dependent).
        examples: ``{relation: [(segment index, dependent word, head word)]}`` (a few, for display).
        uas: ``(L, H)`` share of all scored arcs (every relation but punct) whose dependent's most-attended other
            word is its head: each head's unlabelled attachment score; its maximum is the "best head UAS"
            Chen et al. 2023 track across training.
    """

    relations: list[str]
    counts: dict[str, int]
    dep_to_head: dict[str, np.ndarray]
    head_to_dep: dict[str, np.ndarray]
    baseline: dict[str, tuple[float, int]]
    examples: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    uas: np.ndarray | None = None

    def best(self, relation: str) -> tuple[float, int, int, str]:
        """``(share, layer, head, direction)`` of the best head for ``relation`` (layer and head from 0)."""
        a, b = self.dep_to_head[relation], self.head_to_dep[relation]
        grid, direction = (a, "dep->head") if a.max() >= b.max() else (b, "head->dep")
        layer, head = np.unravel_index(int(grid.argmax()), grid.shape)
        return float(grid.max()), int(layer), int(head), direction


def syntax_heads(attention_maps: list[np.ndarray], segments: list[ParsedSegment],
                 min_count: int = MIN_COUNT) -> SyntaxHeads:
    """Score every head on every relation (Clark et al. 2019, section 4.2).

    Args:
        attention_maps: per segment ``(L, H, T, T)`` attention (eval mode), rows = queries.
        segments: :func:`parse_segment` of the same inputs.
    Raises:
        ValueError: lists of different lengths, or no relation with ``min_count`` arcs.
    """
    if len(attention_maps) != len(segments):
        raise ValueError(f"{len(attention_maps)} attention maps for {len(segments)} segments")
    hits_dh: dict[str, np.ndarray] = {}
    hits_hd: dict[str, np.ndarray] = {}
    counts: Counter = Counter()
    offsets: dict[str, Counter] = defaultdict(Counter)
    arcs: list[tuple[int, str, int, int]] = []  # (segment, relation, dependent word, head word)
    examples: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    all_hits, n_arcs = None, 0
    for s, (att, seg) in enumerate(zip(attention_maps, segments)):
        merged, unit = word_attention(np.asarray(att), seg)
        special = np.array([seg.word_ids[m[0]] is None for m in word_groups(seg.tokens, seg.word_ids).members])
        masked = np.where(special[None, None, None, :], -np.inf, merged)  # never predict [CLS] / [SEP]
        n_units = masked.shape[-1]
        eye = np.eye(n_units, dtype=bool)
        masked = np.where(eye[None, None], -np.inf, masked)  # "the other word"
        pred = masked.argmax(-1)  # (L, H, W'): each unit's most-attended other unit
        # the reverse direction as Clark et al.'s code scores it: the (ordinary) unit that attends most to each unit
        masked_t = np.where(special[None, None, None, :] | eye[None, None], -np.inf, np.swapaxes(merged, -1, -2))
        pred_t = masked_t.argmax(-1)  # (L, H, W')
        for d, w in enumerate(seg.words):
            h = w.head
            if h == d or w.dep in ("ROOT", "punct") or unit[d] < 0 or unit[h] < 0:
                continue
            rel = w.dep
            if rel not in hits_dh:
                hits_dh[rel] = np.zeros(pred.shape[:2])
                hits_hd[rel] = np.zeros(pred.shape[:2])
            hits_dh[rel] += pred[:, :, unit[d]] == unit[h]
            hits_hd[rel] += pred_t[:, :, unit[d]] == unit[h]
            all_hits = (pred[:, :, unit[d]] == unit[h]) + (0 if all_hits is None else all_hits)
            n_arcs += 1
            counts[rel] += 1
            offsets[rel][unit[h] - unit[d]] += 1
            arcs.append((s, rel, d, h))
            if len(examples[rel]) < 5:
                examples[rel].append((s, d, h))
    relations = [r for r, n in counts.most_common() if n >= min_count]
    if not relations:
        raise ValueError(f"no dependency relation occurs {min_count} times: use more segments")
    baseline = {}
    for r in relations:
        off, n = offsets[r].most_common(1)[0]
        baseline[r] = (n / counts[r], off)
    return SyntaxHeads(relations, {r: counts[r] for r in relations},
                       {r: hits_dh[r] / counts[r] for r in relations}, {r: hits_hd[r] / counts[r] for r in relations},
                       baseline, {r: examples[r] for r in relations}, all_hits / n_arcs)


@dataclass
class SyntaxRun:
    """:func:`run_syntax`'s result: the scores and the parsed segments they were computed on."""

    heads: SyntaxHeads
    segments: list[ParsedSegment]
    probe: AttentionProbe | None = None  # when asked for and possible


def run_syntax(encoder, tokenizer, segments, progress=None, min_count: int = MIN_COUNT,
               with_probe: bool = False) -> SyntaxRun:
    """Parse the evaluation segments (:class:`bertcore.analysis.papers.evalset.Segment`), run ``encoder`` once per
    segment with attentions, and score the syntax heads (:func:`syntax_heads`); with ``with_probe``, also
    Clark et al.'s attention-only probe (:func:`bertcore.analysis.representations.syntax_probe.attention_probe`).

    Args:
        encoder: a :class:`bertcore.modeling.model.BertModel` in eval mode.
        segments: objects with ``text_a`` / ``text_b``.
        progress: optional ``callable(done, total)``.
    Raises:
        SyntaxUnavailable: no spaCy; ValueError: too few arcs (or, with the probe, fewer than two segments).
    """
    import torch

    parsed, maps = [], []
    for i, seg in enumerate(segments):
        p = parse_segment(tokenizer, seg.text_a, seg.text_b)
        enc = tokenizer(seg.text_a, seg.text_b, return_tensors="pt").to(device_of(encoder))
        with torch.no_grad():
            out = encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], output_attentions=True)
        parsed.append(p)
        maps.append(torch.stack([a[0] for a in out.attentions]).float().cpu().numpy())
        if progress is not None:
            progress(i + 1, len(segments))
    probe = None
    if with_probe:
        try:
            probe = attention_probe(maps, parsed)
        except ValueError:  # fewer than two segments with words to attach: the heads are still scored
            probe = None
    return SyntaxRun(syntax_heads(maps, parsed, min_count), parsed, probe)


def predicted_word(merged: np.ndarray, unit_of_word: list[int], layer: int, head: int, word: int,
                   direction: str = "dep->head") -> int | None:
    """The prediction :func:`syntax_heads` scores for ``word`` in one head, from :func:`word_attention`'s output:
    ``"dep->head"``: the parsed word ``word`` attends to most; ``"head->dep"``: the parsed word that attends most
    to ``word``. None when the word has no WordPiece or only special units remain. ``layer`` / ``head``: the
    0-based block and head (``merged[layer, head]``; ``merged`` is ``(L, heads, U, U)``).

    Raises:
        ValueError: an unknown ``direction``; a layer or head out of range (the message names ``0..L-1`` /
            ``0..heads-1``).
    """
    if direction not in ("dep->head", "head->dep"):
        raise ValueError(f"direction must be 'dep->head' or 'head->dep'; got {direction!r}")
    for name, value, n in (("layer", layer, merged.shape[0]), ("head", head, merged.shape[1])):
        if not 0 <= value < n:
            raise ValueError(f"{name} must lie in 0..{n - 1}; got {value}")
    u = unit_of_word[word]
    if u < 0:
        return None
    word_of_unit = {un: w for w, un in enumerate(unit_of_word) if un >= 0}
    scores = np.full(merged.shape[-1], -np.inf)
    for un in word_of_unit:
        if un != u:
            scores[un] = merged[layer, head, u, un] if direction == "dep->head" else merged[layer, head, un, u]
    if not np.isfinite(scores).any():
        return None
    return word_of_unit[int(scores.argmax())]
