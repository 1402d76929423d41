"""The Next sentence page's views: the NSP head's P(IsNext) for ``[CLS] A [SEP] B [SEP]`` (Devlin et al. 2019,
section 3.1) and where the final [CLS] looks in every layer and head, over WordPieces or words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis.attention.words import merge_vector, word_groups
from bertcore.readouts import next_sentence
from explorer.figures import next_sentence as nsp_figures
from explorer.views.core import load, view


@view
def has_head(source) -> bool:
    """Whether the model has an NSP head (``cls.seq_relationship``, as ``BertForPreTraining``)."""
    lm = load(source)
    found = next_sentence.has_nsp_head(lm.model)
    return found


@view
def predict(source, a: str, b: str) -> next_sentence.NextSentencePrediction:
    """The NSP head's answer for sentence ``a`` followed by ``b``: ``p_is_next``, the two ``logits``, the encoding
    and [CLS]'s attention ``(L, heads, T)``. Raises ``TextError`` and ``NextSentenceError``."""
    lm = load(source)
    pred = next_sentence.predict(lm.model, lm.tokenizer, a, b, max_length=lm.max_length)
    return pred


@dataclass
class ClsLooks:
    """``p_is_next``; ``cls_attention``: ``(L, heads, T)`` [CLS]'s attention in every layer and head (``(L, heads,
    W)`` over words); ``labels``: the T tokens or W words; ``types``: each one's segment (0 = A, 1 = B)."""

    p_is_next: float
    cls_attention: np.ndarray
    labels: list[str]
    types: list[int]


@view
def cls_looks(source, a: str, b: str, words: bool) -> ClsLooks:
    """Where the final [CLS] (the only input of the NSP head) looks in the pair ``a``, ``b``; with ``words``, a
    word gets the sum of its WordPieces' attention. Raises what :func:`predict` raises."""
    pred = predict(source, a, b)
    enc = pred.encoding
    cls_attention, labels, types = pred.cls_attention, enc.tokens, enc.token_type_ids  # (L, heads, T)
    if words:  # words, not WordPieces: a word gets the sum of its pieces' attention
        groups = word_groups(enc.tokens, enc.word_ids)
        cls_attention = merge_vector(cls_attention, groups, "sum")  # (L, heads, words)
        labels, types = groups.labels, [enc.token_type_ids[m[0]] for m in groups.members]
    return ClsLooks(pred.p_is_next, cls_attention, list(labels), list(types))


def cls_figure(looks: ClsLooks, head: int | None = None):
    """[CLS]'s attention, one row per layer, of the 0-based ``head`` (None: the mean over heads)."""
    return nsp_figures.cls_attention_figure(looks.cls_attention, looks.labels, looks.types, head)
