"""Which head links a verb to its subject? Attention from each verb to the noun it agrees with, per layer
and head, on sentences of the generated agreement language (:mod:`bertcore.data.synthetic`).

A head that puts much of a verb's attention on its subject, and little on the attractor noun between them
(the noun of a prepositional phrase or relative clause), is what a model needs to get agreement right
across an attractor; Chen et al. 2023 ("Sudden drops in the loss") see such syntactic heads appear at the
drop of the loss. Measured as Clark et al. 2019 measure a head's syntactic relation: the attention weight
from the dependent (here the verb) to its head (the subject), averaged over sentences.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ...data import synthetic
from ...device import device_of
from ...tokenization.tokenizer import encode, is_wordpiece
from ..attention.activations import run_encoding


@dataclass(frozen=True)
class AgreementHeads:
    """``to_subject``: ``(L, heads)`` mean attention from the main verb to its subject; ``to_attractor``:
    ``(L, heads)`` mean attention from the same verb to the attractor noun; ``n``: sentences measured."""

    to_subject: np.ndarray
    to_attractor: np.ndarray
    n: int

    @property
    def best(self) -> tuple[int, int]:
        """0-based ``(layer, head)`` (block ``encoder.layer[layer]``, head) with the most attention to the subject:
        ``to_subject[best]`` is :attr:`best_score`."""
        layer, head = np.unravel_index(int(np.argmax(self.to_subject)), self.to_subject.shape)
        return int(layer), int(head)

    @property
    def best_score(self) -> float:
        return float(self.to_subject.max())


def attractor_sentences(n: int = 64, seed: int = 1234) -> list[synthetic.Sentence]:
    """``n`` generated sentences with an attractor (a PP or RC noun of the other number), from ``seed``."""
    rng = random.Random(seed)
    out: list[synthetic.Sentence] = []
    while len(out) < n:
        s = synthetic.sentence(rng, rng.choice(("pp", "rc")))
        if s.attractor:
            out.append(s)
    return out


def agreement_heads(model, tokenizer, sentences: list[synthetic.Sentence] | None = None) -> AgreementHeads:
    """Mean attention from each sentence's main verb to its subject (and to the attractor), per layer and head.

    Args:
        model: a :class:`~bertcore.modeling.model.BertModel` (eval mode).
        tokenizer: its tokenizer; words split into several pieces are measured at their first piece.
        sentences: default :func:`attractor_sentences` (64, fixed seed).
    Returns:
        :class:`AgreementHeads`.
    Raises:
        ValueError: no sentence.
    """
    sentences = sentences if sentences is not None else attractor_sentences()
    if not sentences:
        raise ValueError("no sentence to measure")
    to_subject, to_attractor = [], []
    for s in sentences:
        enc = encode(tokenizer, s.text)
        first = {}
        for t, w in enumerate(enc.word_ids):
            if w is not None and w not in first:
                first[w] = t
        verb, subject = s.agreements[-1]  # the main verb and the sentence's subject
        attractor = s.agreements[0][1] if s.kind == "rc" else subject + 3  # RC noun, or the PP's noun (P Det N)
        attn = run_encoding(model, enc).attentions  # (L, heads, T, T)
        to_subject.append(attn[:, :, first[verb], first[subject]])
        to_attractor.append(attn[:, :, first[verb], first[attractor]])
    return AgreementHeads(np.mean(to_subject, axis=0), np.mean(to_attractor, axis=0), len(sentences))


@dataclass(frozen=True)
class VerbCheck:
    """One sentence's agreement, as the Attention page states it beside its default example.

    ``p_correct`` / ``p_other``: MLM probabilities of the correct verb and its other-number form at the verb
    masked; ``right``: ``p_correct > p_other``; ``head``: 0-based ``(layer, head)`` whose attention from the
    (unmasked) verb to the subject is largest; ``to_subject`` / ``to_attractor``: that head's weights from the
    verb to the subject and to the attractor noun."""

    p_correct: float
    p_other: float
    right: bool
    head: tuple[int, int]
    to_subject: float
    to_attractor: float


def check_verb(model, tokenizer, text: str, verb: str, other_verb: str, subject: str, attractor: str) -> VerbCheck:
    """Does the model agree ``verb`` with ``subject`` across ``attractor`` in ``text``, and which head links them?

    Args:
        model: a model with an MLM head (:func:`bertcore.readouts.fill_mask.mlm_head_of`), eval mode.
        tokenizer: its tokenizer. ``verb``, ``other_verb``, ``subject``, ``attractor``: whole words of ``text``
            (each its first occurrence, measured at its first WordPiece); the two verbs single WordPieces.
    Returns:
        :class:`VerbCheck`.
    Raises:
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
        ValueError: a word is not in ``text``, or a verb is not one WordPiece.
    """
    import torch

    from ...readouts.fill_mask import mlm_logits_at

    enc = encode(tokenizer, text)
    words = [w.lower() for w, _ in tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text)]  # = word_ids
    first: dict[int, int] = {}
    for t, w in enumerate(enc.word_ids):
        if w is not None and w not in first:
            first[w] = t

    def at(word: str) -> int:
        if word.lower() not in words:
            raise ValueError(f"{word!r} is not a word of {text!r}")
        return first[words.index(word.lower())]

    if is_wordpiece(tokenizer):
        ids = [tokenizer.convert_tokens_to_ids(v) for v in (verb, other_verb)]
    else:  # byte-level BPE: a word after a space is its own token, "Ġare"
        pieces = [tokenizer(" " + v, add_special_tokens=False)["input_ids"] for v in (verb, other_verb)]
        ids = [p[0] if len(p) == 1 else tokenizer.unk_token_id for p in pieces]
    if tokenizer.unk_token_id in ids:
        raise ValueError(f"{verb!r} and {other_verb!r} must each be one token of this model's vocabulary")
    v, s, a = at(verb), at(subject), at(attractor)
    masked = torch.tensor([enc.input_ids], device=device_of(model))
    masked[0, v] = tokenizer.mask_token_id
    probs = torch.softmax(mlm_logits_at(model, masked, [v])[0], -1)
    attn = run_encoding(model.base_model, enc).attentions  # (L, heads, T, T)
    layer, head = np.unravel_index(int(np.argmax(attn[:, :, v, s])), attn.shape[:2])
    p_correct, p_other = float(probs[ids[0]]), float(probs[ids[1]])
    return VerbCheck(p_correct, p_other, p_correct > p_other, (int(layer), int(head)),
                     float(attn[layer, head, v, s]), float(attn[layer, head, v, a]))
