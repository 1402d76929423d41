"""Scoring sentences with a masked LM: pseudo-log-likelihood (PLL) and per-token contributions.

PLL (Salazar et al. 2020, "Masked Language Model Scoring", section 2): mask each token of the sentence in
turn and sum the log-probabilities the model gives the original token there. ``"within_word_l2r"`` (Kauf &
Ivanova 2023, "A Better Way to Do Masked Language Model Scoring"): when a token belongs to a word of several
WordPieces, the pieces of that word to its right are masked too, so a word's later pieces cannot be read off to
give its first ones. The two differ only for multi-piece words. Batched: the T masked copies of a sentence
run as one batch (in chunks of ``batch_size``).

Works on any bertcore model with an MLM head (a live run's checkpoint too); ``minicons``'
``MaskedLMScorer`` (the well-kept reference) gives the same numbers on a transformers model of the same
weights (``tests/analysis/grammar/test_scoring.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...readouts.fill_mask import mlm_head_of

PLL_METRICS = ("original", "within_word_l2r")


class ScoringError(ValueError):
    """A sentence that cannot be scored (empty, or longer than the model's positions); the message says why."""


@dataclass(frozen=True)
class SentenceScore:
    """``tokens``: the scored WordPieces (no [CLS]/[SEP]); ``log_probs``: ``(T,)`` float64, natural log, of each
    token at its masked position; ``word_ids``: the word each token belongs to. ``pll`` = their sum (nats)."""

    text: str
    tokens: list[str]
    log_probs: np.ndarray
    word_ids: list[int]
    metric: str

    @property
    def pll(self) -> float:
        return float(self.log_probs.sum())

    @property
    def mean(self) -> float:
        """PLL per token (nats): comparable across sentences of different lengths."""
        return float(self.log_probs.mean()) if self.log_probs.size else 0.0


def _mask_sets(word_ids: list[int | None], targets: list[int], metric: str) -> list[list[int]]:
    if metric == "original":
        return [[t] for t in targets]
    return [[t] + [j for j in range(t + 1, targets[-1] + 1) if word_ids[j] == word_ids[t]] for t in targets]


@torch.no_grad()
def pseudo_log_likelihood(model, tokenizer, text: str, metric: str = "original",
                          batch_size: int = 64, max_tokens: int | None = None) -> SentenceScore:
    """The PLL of ``text`` and each token's contribution.

    Args:
        model: a bertcore model with an MLM head (:class:`~bertcore.modeling.heads.BertForMaskedLM` or
            :class:`~bertcore.modeling.heads.BertForPreTraining`), eval mode.
        tokenizer: its ``BertTokenizerFast``.
        metric: ``"original"`` (Salazar et al. 2020) or ``"within_word_l2r"`` (Kauf & Ivanova 2023).
        batch_size: masked copies per forward pass.
        max_tokens: refuse longer texts (WordPieces, [CLS]/[SEP] included); None: the model's positions. The
            cost grows with the square of the length (one copy per token).
    Returns:
        :class:`SentenceScore` (log-probabilities in nats, float64).
    Raises:
        ScoringError: empty text or more tokens than the model's positions; ValueError: an unknown metric;
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    if metric not in PLL_METRICS:
        raise ValueError(f"metric must be one of {PLL_METRICS}; got {metric!r}")
    enc = tokenizer(text, return_tensors="pt")
    ids = enc["input_ids"][0]  # (T + 2,)
    limit = min(model.config.max_sequence_length, max_tokens or model.config.max_sequence_length)
    if ids.numel() > limit:
        raise ScoringError(f"{ids.numel()} tokens: more than the {limit} this scoring takes (one forward pass per "
                           "token); score a shorter sentence")
    word_ids = enc.word_ids(0)
    targets = [i for i, w in enumerate(word_ids) if w is not None]
    if not targets:
        raise ScoringError("no token to score: the text is empty after tokenization")
    masks = _mask_sets(word_ids, targets, metric)
    encoder, head = mlm_head_of(model)
    device = next(model.parameters()).device
    ids = ids.to(device)
    out = np.empty(len(targets), dtype=np.float64)
    for start in range(0, len(targets), batch_size):
        chunk = masks[start:start + batch_size]
        batch = ids.repeat(len(chunk), 1)  # (b, T + 2)
        for row, positions in enumerate(chunk):
            batch[row, positions] = tokenizer.mask_token_id
        pos = torch.tensor(targets[start:start + batch_size], device=device)  # (b,)
        hidden = encoder(batch).last_hidden_state  # (b, T + 2, H)
        rows = torch.arange(len(chunk), device=device)
        log_probs = head(hidden[rows, pos]).float().log_softmax(-1)  # (b, V): the head on targets only
        out[start:start + len(chunk)] = log_probs[rows, ids[pos]].double().cpu().numpy()
    return SentenceScore(text, tokenizer.convert_ids_to_tokens(ids[targets].tolist()), out,
                         [word_ids[t] for t in targets], metric)
