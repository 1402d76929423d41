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
from ...tokenizer import encode
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
        """1-based ``(layer, head)`` with the most attention to the subject."""
        layer, head = np.unravel_index(int(np.argmax(self.to_subject)), self.to_subject.shape)
        return int(layer) + 1, int(head) + 1

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
        model: a :class:`~bertcore.model.BertModel` (eval mode).
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
