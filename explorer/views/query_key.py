"""The Query-key map page's views: one head's queries and keys over many sentences in one 2-D picture
(AttentionViz, Yeh et al. 2023), a sentence's attention recomputed from them, and every head of a layer."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis.attention import query_key as QK
from bertcore.analysis.representations import syntax
from explorer.figures import query_key as figs
from explorer.views.core import load, view

MAX_TOKENS = 128  # tokens read of one sentence, [CLS]/[SEP] included


@dataclass
class Lines:
    """The sentences as the map reads them: ``lengths`` (tokens of each, before the cut), ``limit`` (the most read
    of one) and ``cut`` (1-based numbers of the lines cut to ``limit``)."""

    lengths: list[int]
    limit: int
    cut: list[int]


@view
def lines(source, sentences: tuple[str, ...]) -> Lines:
    """How many tokens each sentence has, and which are cut to what the map reads."""
    lm = load(source)
    limit = min(lm.max_length, MAX_TOKENS)
    lengths = [len(ids) for ids in lm.tokenizer(list(sentences))["input_ids"]]
    return Lines(lengths, limit, [i + 1 for i, n in enumerate(lengths) if n > limit])


@dataclass
class QKMap:
    """One head's map: ``qk`` (:class:`~bertcore.analysis.attention.query_key.QueryKeys`: the raw ``(N, d)`` queries
    and keys, each token's sentence, position and WordPiece), ``c`` (the scale that gives both clouds one spread) and
    the ``(N, 2)`` projected ``queries`` and ``keys``."""

    qk: QK.QueryKeys
    c: float
    queries: np.ndarray
    keys: np.ndarray


@view
def qk_map(source, sentences: tuple[str, ...], layer: int, head: int, method: str = "pca") -> QKMap:
    """The queries and keys of head ``head`` of block ``layer`` (both from 0: the page's "Layer 1" is block 0) on
    every sentence, normalised and projected to 2-D by ``method`` ("pca" or "tsne").

    Raises ``ValueError`` (no sentence, a layer or head out of range, an unknown method)."""
    lm = load(source)
    # record hook_q / hook_k of that head on each sentence: (N, d) each, N = every token of every sentence
    qk = QK.query_keys(lm.encoder, lm.tokenizer, list(sentences), layer, head,
                       max_length=min(lm.max_length, MAX_TOKENS))
    # keys centred on the queries, queries scaled by c and keys by 1/c: the same spread, the same attention
    q, k, c = QK.normalize(qk.queries, qk.keys)
    pq, pk = QK.project(q, k, method)  # (N, 2) each
    return QKMap(qk, float(c), pq, pk)


@dataclass
class PartsOfSpeech:
    """spaCy's part of speech of every token of the map, in its order ("special" for [CLS] / [SEP])."""

    labels: list[str]


@view
def parts_of_speech(source, sentences: tuple[str, ...]) -> PartsOfSpeech:
    """Each token's part of speech (spaCy, through the word each WordPiece belongs to).

    Raises ``SyntaxUnavailable`` without spaCy's English model."""
    lm = load(source)
    labels = []
    for s in sentences:
        seg = syntax.parse_segment(lm.tokenizer, s, max_length=min(lm.max_length, MAX_TOKENS))
        labels += ["special" if w is None else seg.words[w].pos for w in seg.word_ids]
    return PartsOfSpeech(labels)


@dataclass
class SentenceAttention:
    """One sentence of the map: its ``tokens`` and the head's ``(T, T)`` ``attention``."""

    tokens: list[str]
    attention: np.ndarray


@view
def sentence_attention(source, sentences: tuple[str, ...], layer: int, head: int, sentence: int,
                       method: str = "pca") -> SentenceAttention:
    """The head's attention on sentence ``sentence`` (0-based), recomputed from the raw queries and keys of
    :func:`qk_map`: softmax of q . k / sqrt(d), as the model computes it."""
    qk = qk_map(source, sentences, layer, head, method).qk
    idx = np.flatnonzero(qk.sentence == sentence)
    return SentenceAttention([qk.tokens[i] for i in idx], QK.attention_from(qk.queries, qk.keys, qk, sentence))


@dataclass
class EveryHead:
    """Every head of a layer: ``projections`` ``[(queries (N, 2), keys (N, 2))]``, one PCA per head."""

    projections: list[tuple[np.ndarray, np.ndarray]]


@view
def every_head(source, sentences: tuple[str, ...], layer: int) -> EveryHead:
    """Each head of block ``layer`` as :func:`qk_map` draws it with PCA."""
    lm = load(source)
    out = []
    for h in range(lm.config.num_attention_heads):
        one = QK.query_keys(lm.encoder, lm.tokenizer, list(sentences), layer, h,
                            max_length=min(lm.max_length, MAX_TOKENS))
        out.append(QK.project(*QK.normalize(one.queries, one.keys)[:2], "pca"))
    return EveryHead(out)


def map_figure(result: QKMap, title: str = "", colour: str = "role", labels: list[str] | None = None):
    """Queries (circles) and keys (squares) in one picture, coloured by ``colour``: "role" (query or key),
    "position" (in the sentence, over its length) or "pos" (``labels``: a part of speech per token)."""
    qk = result.qk
    kwargs = {}
    if colour == "position":
        lengths = np.asarray(qk.lengths)[qk.sentence]
        kwargs = {"color": qk.position / np.maximum(lengths - 1, 1), "color_name": "position / length"}
    elif colour == "pos" and labels is not None and len(labels) == len(qk.tokens):
        kwargs = {"categorical": labels}
    n_sentences = len(set(qk.sentence.tolist()))
    return figs.qk_scatter(result.queries, result.keys, qk.tokens, qk.sentence, title=(
        f"{title}: {len(qk.tokens)} queries and keys of {n_sentences} sentences (c = {result.c:.2f})"), **kwargs)
