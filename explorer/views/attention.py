"""The Attention page's views: one forward pass with every attention map (``(layers, heads, T, T)``; rows: the
token that looks), as the page shows them (attention to [CLS] / [SEP] hidden, WordPieces merged into words: Clark et
al. 2019); one head's map; per-head statistics; raw attention, rollout and flow across layers (Abnar & Zuidema
2020); the neuron view of one weight (Vig 2019); what actually flows (context mixing: Kobayashi et al. 2020, 2021;
Mohebbi et al. 2023; Ferrando et al. 2022); and the default sentence's agreement check."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis.attention import activations, mixing, neurons, rollout
from bertcore.analysis.attention.words import WordGroups, merge_attention, word_groups
from bertcore.analysis.grammar.agreement import VerbCheck, check_verb
from bertcore.analysis.representations import syntax
from bertcore.readouts.fill_mask import FillMaskError
from explorer.figures import attention as att_figures
from explorer.views.core import load, view


@view
def forward(source, text: str, text_pair: str | None) -> activations.Activations:
    """``text`` (and ``text_pair``) through the encoder: ``encoding``, ``attentions`` ``(L, heads, T, T)`` and
    ``hidden_states`` ``(L + 1, T, H)``, float32. Raises ``TextError`` and ``InputError``."""
    lm = load(source)
    return activations.run(lm.encoder, lm.tokenizer, text, text_pair)


@dataclass
class Maps:
    """Every attention map as shown: ``attentions`` ``(L, heads, U, U)`` over U units (WordPieces, or words and
    special tokens with ``words``); ``labels`` and ``members`` (each unit's token positions); ``groups`` (the
    :class:`~bertcore.analysis.attention.words.WordGroups`, None without ``words``); ``segment_break``: the first
    unit of sentence B (None without one); ``unit_types``: each unit's segment id."""

    attentions: np.ndarray
    labels: list[str]
    members: list[list[int]]
    groups: WordGroups | None
    segment_break: int | None
    unit_types: list[int]


@view
def maps(source, text: str, text_pair: str | None, hide: bool, words: bool) -> Maps:
    """Every layer's and head's attention, with [CLS] / [SEP] hidden (``hide``) and merged into words (``words``).
    Raises what :func:`forward` raises."""
    act = forward(source, text, text_pair)
    enc = act.encoding
    attn = act.attentions  # (layers, heads, T, T), float32
    if hide:  # zero the attention to [CLS] / [SEP] and rescale each row to sum to 1 again
        attn = activations.hide_tokens(attn, np.array(enc.special_tokens_mask, dtype=bool))
    labels, members, groups = list(enc.tokens), [[i] for i in range(len(enc.tokens))], None
    if words:  # words, not WordPieces: to a word = sum over its pieces, from a word = mean (Clark et al. 2019)
        groups = word_groups(enc.tokens, enc.word_ids)
        attn, labels, members = merge_attention(attn, groups), groups.labels, groups.members
    segment_break = next((u for u, m in enumerate(members) if enc.sequence_ids[m[0]] == 1), None)
    return Maps(attn, labels, members, groups, segment_break, [enc.token_type_ids[m[0]] for m in members])


@dataclass
class Head:
    """One head's map as shown: ``attention`` ``(U, U)`` (row: the unit that looks), ``labels``,
    ``segment_break``."""

    attention: np.ndarray
    labels: list[str]
    segment_break: int | None


@view
def one_head(source, text: str, text_pair: str | None, layer: int, head: int, hide: bool, words: bool) -> Head:
    """The attention map of head ``head`` in block ``layer`` (both 0-based: the page's "Layer 1" is block 0)."""
    shown = maps(source, text, text_pair, hide, words)
    # row = the token that looks, column = the token looked at
    return Head(shown.attentions[layer, head], shown.labels, shown.segment_break)


def heatmap_figure(result: Head, labels: list[str] | None = None):
    """The head's map as a heatmap (``labels``: the axes' labels, by default the result's)."""
    return att_figures.attention_heatmap(result.attention, labels or result.labels,
                                         segment_break=result.segment_break)


@dataclass
class PartsOfSpeech:
    """Each WordPiece's word's part of speech and dependency (spaCy), or None with the ``note`` saying why."""

    labels: list[str] | None
    note: str | None


@view
def parts_of_speech(source, text: str, text_pair: str | None) -> PartsOfSpeech:
    """spaCy's English parser on the text, its labels given to each WordPiece of the model's tokenizer."""
    lm = load(source)
    labels = note = None
    try:
        labels, _ = syntax.token_labels(syntax.parse_segment(lm.tokenizer, text, text_pair, max_length=lm.max_length))
    except syntax.SyntaxUnavailable as exc:
        note = str(exc)
    return PartsOfSpeech(labels, note)


@dataclass
class TokenLabels:
    """The maps' axis labels as the page shows them: one per token (or word), with its word's part of speech and
    dependency appended when asked (``"keys · NOUN nsubj"``); ``note`` says why they are missing, else None."""

    labels: list[str]
    note: str | None


@view
def token_labels(source, text: str, text_pair: str | None, hide: bool, words: bool,
                 part_of_speech: bool) -> TokenLabels:
    """The labels of :func:`maps` (tokens, or words with ``words``), each with the part of speech of the word its
    first piece belongs to when ``part_of_speech`` (:func:`parts_of_speech`)."""
    shown = maps(source, text, text_pair, hide, words)
    labels, note = list(shown.labels), None
    if part_of_speech:
        pos = parts_of_speech(source, text, text_pair)
        note = pos.note
        if note is None and len(pos.labels) == len(forward(source, text, text_pair).tokens):
            labels = [f"{lab} · {pos.labels[m[0]]}" if pos.labels[m[0]] else lab
                      for lab, m in zip(labels, shown.members)]
    return TokenLabels(labels, note)


@view
def head_stats(source, text: str, text_pair: str | None) -> activations.HeadStats:
    """Per layer and head, on the full attention: entropy, distance, share on [CLS] / [SEP] / itself and the
    like, averaged over the queries."""
    lm = load(source)
    act = forward(source, text, text_pair)
    return activations.head_stats(act.attentions, act.tokens, lm.tokenizer.cls_token, lm.tokenizer.sep_token)


@dataclass
class Rollout:
    """Across layers: ``raw`` (each layer's attention averaged over heads) and ``rollout`` (multiplied from the
    bottom up, with the residual as 0.5·A + 0.5·I), each ``(L, U, U)`` float64."""

    raw: np.ndarray
    rollout: np.ndarray


@view
def rolled_out(source, text: str, text_pair: str | None, hide: bool, words: bool) -> Rollout:
    """Raw attention and attention rollout (Abnar & Zuidema 2020) of every layer."""
    act = forward(source, text, text_pair)
    enc = act.encoding
    attn = act.attentions  # (layers, heads, T, T)
    if hide:
        attn = activations.hide_tokens(attn, np.array(enc.special_tokens_mask, dtype=bool))
    mean = attn.astype(np.float64).mean(axis=1)  # (L, T, T): the heads' mean
    if words:  # merging is linear, so it commutes with the mean
        mean = merge_attention(mean, word_groups(enc.tokens, enc.word_ids)).astype(np.float64)
    return Rollout(mean, rollout.rollout(mean[:, None]))


@view
def flow(source, text: str, text_pair: str | None, hide: bool, words: bool, query: int) -> np.ndarray:
    """Attention flow into ``query`` (Abnar & Zuidema 2020): the layers' mean attention read as pipes, the maximum
    flow from each input token, ``(L, U)``. Raises ``FlowTooLongError`` above ``rollout.FLOW_MAX_TOKENS``."""
    mean = rolled_out(source, text, text_pair, hide, words).raw  # (L, U, U)
    return rollout.flow(mean[:, None], query)


@view
def neuron_view(source, text: str, text_pair: str | None, layer: int, head: int, query: int) -> neurons.NeuronView:
    """Where one attention weight comes from (Vig 2019): block ``layer``'s query vector of ``query``, every key, their
    product, the scores and the softmax in head ``head`` (all 0-based)."""
    lm = load(source)
    act = forward(source, text, text_pair)
    return neurons.neuron_view(lm.encoder, act.hidden_states[layer], layer, head, query)  # block layer's input


@view
def mixing_maps(source, text: str, text_pair: str | None, method: str) -> np.ndarray:
    """What flows between the tokens of every layer by ``method`` (:data:`bertcore.analysis.attention.mixing.METHODS`),
    ``(L, T, T)`` float64. Raises ``ValueError`` for a post-LN-only method on a pre-LN model."""
    lm = load(source)
    enc = forward(source, text, text_pair).encoding
    return mixing.mixing(lm.model, enc.tensors(lm.device), method)


@dataclass
class Agreement:
    """The default sentence's agreement: ``check`` (:class:`~bertcore.analysis.grammar.agreement.VerbCheck`), or
    None (no MLM head, or ``note``: why it does not apply)."""

    check: VerbCheck | None
    note: str | None


@view
def agreement(source, text: str, verb: str, other_verb: str, subject: str, attractor: str) -> Agreement:
    """Does the model prefer ``verb`` to ``other_verb`` in ``text``, and which head links the verb to its subject?"""
    lm = load(source)
    check = note = None
    try:
        check = check_verb(lm.model, lm.tokenizer, text, verb, other_verb, subject, attractor)
    except FillMaskError:
        pass  # an encoder without an MLM head cannot say which verb it prefers
    except ValueError as exc:  # a vocabulary without the verbs as one token (a small BPE): no verdict
        note = str(exc)
    return Agreement(check, note)
