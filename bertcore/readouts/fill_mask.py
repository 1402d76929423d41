"""Fill-mask: what a model with an MLM head predicts at chosen positions (Devlin et al. 2019,
section 3.1, "Task #1: Masked LM"; HF ``BertForMaskedLM`` / ``FillMaskPipeline``).

The encoder runs once on the (corrupted) input; the MLM head (``cls.predictions``: dense, GELU,
LayerNorm, decoder tied to the word embeddings + bias) runs only on the positions asked for,
so the ``(T, H) x (H, V)`` projection of every other token is skipped. Logits are identical to
the head run on every position (``BertForMaskedLM(...).logits[0, positions]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..modeling.heads import IGNORE_INDEX


class FillMaskError(ValueError):
    """A model without an MLM head, or positions / ids that cannot be predicted (the message says why)."""


NO_MLM_HEAD = ("this model has no MLM head (no cls.predictions weights), so it cannot predict masked tokens. "
               "Choose a model that has one: a checkpoint of a pretraining run from the Training page, or an "
               "HF checkpoint saved from BertForMaskedLM / BertForPreTraining (e.g. bert-base-uncased).")


@dataclass
class Prediction:
    """The top-k guesses at one position.

    Attributes:
        position: index in the sequence (0 = [CLS]).
        input_id: id the model saw there ([MASK], a random token or the original).
        original_id: the true id (the MLM label), or None where it is unknown (a [MASK] the user typed).
        ids / tokens / probs: the k most probable ids, their WordPiece strings and softmax
            probabilities over the whole vocabulary, most probable first.
        original_prob: probability given to ``original_id`` (None when unknown).
        original_rank: 1-based rank of ``original_id`` among all V ids (None when unknown).
    """

    position: int
    input_id: int
    original_id: int | None
    ids: list[int]
    tokens: list[str]
    probs: list[float]
    original_prob: float | None = None
    original_rank: int | None = None

    @property
    def recovered(self) -> bool | None:
        """True when the top-1 guess is the original token; None when the original is unknown."""
        return None if self.original_id is None else self.ids[0] == self.original_id


def mlm_head_of(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """``(encoder, cls.predictions)`` of a :class:`~bertcore.modeling.heads.BertForMaskedLM` or
    :class:`~bertcore.modeling.heads.BertForPreTraining`.

    Raises:
        FillMaskError: the model has no MLM head (e.g. the packaged MiniLM, a plain ``BertModel``).
    """
    cls = getattr(model, "cls", None)
    predictions = getattr(cls, "predictions", None)
    if predictions is None:
        raise FillMaskError(NO_MLM_HEAD)
    return model.base_model, predictions


@torch.no_grad()
def mlm_logits_at(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    positions: torch.Tensor | list[int],
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """MLM logits at some positions of one sequence.

    Args:
        model: a model with an MLM head (see :func:`mlm_head_of`), in eval mode.
        input_ids: ``(1, T)`` or ``(T,)`` long, the (corrupted) input.
        positions: N distinct indices in ``[0, T)``.
        attention_mask / token_type_ids: ``(1, T)`` like ``input_ids`` (None: all ones / zeros).
    Returns:
        ``(N, V)`` float logits, row i for ``positions[i]``.
    Raises:
        FillMaskError: no MLM head, or a position outside the sequence.
        bertcore.modeling.embeddings.InputError: ids out of range or a sequence longer than the model's positions.
    """
    encoder, head = mlm_head_of(model)
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise FillMaskError(f"input_ids must be one sequence, shape (1, T) or (T,), got {tuple(input_ids.shape)}")
    pos = torch.as_tensor(positions, dtype=torch.long, device=input_ids.device).reshape(-1)  # (N,)
    t = input_ids.size(1)
    if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= t):
        raise FillMaskError(f"positions must lie in [0, {t}) for a sequence of {t} tokens")
    out = encoder(input_ids, attention_mask, token_type_ids)
    return head(out.last_hidden_state[0, pos])  # (N, V)


@dataclass(frozen=True)
class Decoding:
    """How a distribution is read from logits before it is shown or sampled (HF ``generate``'s warpers, applied in
    its order: temperature, then top-k, then top-p; Holtzman et al. 2020 for top-p "nucleus" sampling).

    Attributes:
        temperature: ``> 0``; the logits are divided by it (``< 1`` sharpens, ``> 1`` flattens).
        top_k: keep the ``top_k`` most probable ids, 0 keeps all (HF ``TopKLogitsWarper``).
        top_p: keep the smallest set of most probable ids whose probability reaches ``top_p`` (HF
            ``TopPLogitsWarper``); 1.0 keeps all.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise FillMaskError(f"temperature must be a positive number, got {self.temperature}")
        if int(self.top_k) != self.top_k or self.top_k < 0:
            raise FillMaskError(f"top_k must be a whole number >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise FillMaskError(f"top_p must lie in (0, 1] (1 = off), got {self.top_p}")

    @property
    def is_plain(self) -> bool:
        """True when nothing changes the softmax (temperature 1, no top-k, no top-p)."""
        return self.temperature == 1.0 and self.top_k == 0 and self.top_p == 1.0


def decoded_probs(logits: torch.Tensor, decoding: Decoding | None = None) -> torch.Tensor:
    """The distribution a :class:`Decoding` gives: ``softmax(logits / T)``, then top-k and top-p filtering with the
    kept probabilities renormalised (the filtered ids get exactly 0).

    Args:
        logits: ``(N, V)`` or ``(V,)`` float logits.
        decoding: None is plain ``softmax(logits)``.
    Returns:
        float32 probabilities of the shape of ``logits``, each row summing to 1.
    Source: ``transformers.generation.logits_process`` ``TemperatureLogitsWarper``, ``TopKLogitsWarper``,
    ``TopPLogitsWarper`` (used as they are; one row of N is one "batch" item).
    """
    from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    d = decoding or Decoding()
    rows = logits.float().reshape(-1, logits.size(-1))  # (N, V)
    warpers = LogitsProcessorList()
    if d.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(d.temperature))
    if d.top_k:
        warpers.append(TopKLogitsWarper(int(d.top_k)))
    if d.top_p < 1.0:
        warpers.append(TopPLogitsWarper(d.top_p))
    scores = warpers(torch.zeros((rows.size(0), 0), dtype=torch.long, device=rows.device), rows)  # (N, V)
    return scores.softmax(-1).reshape(logits.shape)


def sample(logits: torch.Tensor, decoding: Decoding | None = None, seed: int = 0) -> list[int]:
    """Draw one id per row of ``logits (N, V)`` from :func:`decoded_probs`, with a ``torch.Generator`` seeded by
    ``seed``: the same logits, decoding and seed always give the same ids.

    Raises:
        FillMaskError: a seed outside ``[0, 2**63)``.
    """
    if not 0 <= int(seed) < 2**63:
        raise FillMaskError(f"the seed must lie in [0, 2**63), got {seed}")
    probs = decoded_probs(logits, decoding).reshape(-1, logits.size(-1))  # (N, V)
    # drawn on the CPU on purpose: a CPU generator gives the same ids for a seed on every device
    generator = torch.Generator().manual_seed(int(seed))
    return torch.multinomial(probs.cpu(), 1, generator=generator).reshape(-1).tolist()


def predict(
    model: torch.nn.Module,
    tokenizer,
    input_ids: torch.Tensor,
    positions: torch.Tensor | list[int],
    labels: torch.Tensor | None = None,
    k: int = 5,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    decoding: Decoding | None = None,
) -> list[Prediction]:
    """Top-k predictions at each position, and whether the original token was recovered.

    Args:
        model: a model with an MLM head, in eval mode.
        tokenizer: its tokenizer (turns ids into WordPiece strings).
        input_ids: ``(1, T)`` or ``(T,)`` long, the input the model sees (already masked).
        positions: the N positions to predict (e.g. selected by masking, or the [MASK]s typed by the user).
        labels: ``(1, T)`` or ``(T,)`` long, original ids at the positions (as masking's labels);
            -100 or None where the original is unknown.
        k: how many guesses per position (clipped to the vocabulary size).
        decoding: temperature / top-k / top-p of the probabilities (None: the plain softmax).
    Returns:
        N :class:`Prediction`, in the order of ``positions``.
    Raises:
        FillMaskError: no MLM head, bad positions, or k < 1.
    """
    if k < 1:
        raise FillMaskError(f"k must be at least 1, got {k}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    pos = torch.as_tensor(positions, dtype=torch.long, device=input_ids.device).reshape(-1)  # (N,)
    if pos.numel() == 0:
        mlm_head_of(model)  # still say so when the model cannot predict at all
        return []
    logits = mlm_logits_at(model, input_ids, pos, attention_mask, token_type_ids)  # (N, V)
    return predictions_from_logits(tokenizer, input_ids, pos, logits, labels, k, decoding)


def predictions_from_logits(tokenizer, input_ids: torch.Tensor, positions: torch.Tensor | list[int],
                            logits: torch.Tensor, labels: torch.Tensor | None = None, k: int = 5,
                            decoding: Decoding | None = None) -> list[Prediction]:
    """:func:`predict` from logits already computed (``logits (N, V)`` from :func:`mlm_logits_at` at ``positions``):
    a page that redraws the bars for a new temperature reuses one forward pass.

    Probabilities are :func:`decoded_probs`; the rank of the original is its rank in the plain softmax (the
    order no temperature changes; a filtered-out original keeps its rank and gets probability 0).

    Raises:
        FillMaskError: k < 1, or one row of logits per position not given.
    """
    if k < 1:
        raise FillMaskError(f"k must be at least 1, got {k}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    pos = torch.as_tensor(positions, dtype=torch.long, device=input_ids.device).reshape(-1)  # (N,)
    if logits.dim() != 2 or logits.size(0) != pos.numel():
        raise FillMaskError(f"need logits (N, V) for N = {pos.numel()} positions, got {tuple(logits.shape)}")
    probs = decoded_probs(logits, decoding)  # (N, V)
    plain = probs if decoding is None or decoding.is_plain else logits.float().softmax(-1)  # (N, V), for the rank
    top_p, top_i = probs.topk(min(k, probs.size(-1)), dim=-1)  # (N, k)
    originals: list[int | None] = [None] * pos.numel()
    if labels is not None:
        lab = labels.reshape(-1).to(pos.device)[pos]  # (N,)
        originals = [None if int(x) == IGNORE_INDEX else int(x) for x in lab]
    results = []
    for i, p in enumerate(pos.tolist()):  # N rows for display, not a loop over the sequence
        orig = originals[i]
        orig_prob = orig_rank = None
        if orig is not None and 0 <= orig < probs.size(-1):
            orig_prob = float(probs[i, orig])
            orig_rank = int((plain[i] > plain[i, orig]).sum()) + 1
        ids = top_i[i].tolist()
        results.append(Prediction(position=p, input_id=int(input_ids[0, p]), original_id=orig, ids=ids,
                                  tokens=tokenizer.convert_ids_to_tokens(ids), probs=top_p[i].tolist(),
                                  original_prob=orig_prob, original_rank=orig_rank))
    return results


def mask_token_positions(tokenizer, input_ids: torch.Tensor) -> list[int]:
    """Positions holding the tokenizer's [MASK] id (e.g. typed by the user); ``input_ids`` ``(1, T)`` or ``(T,)``."""
    return torch.nonzero(input_ids.reshape(-1) == tokenizer.mask_token_id).reshape(-1).tolist()


def accuracy(predictions: list[Prediction]) -> tuple[int, int]:
    """``(recovered, known)``: how many predictions with a known original got it at top-1."""
    known = [p for p in predictions if p.original_id is not None]
    return sum(bool(p.recovered) for p in known), len(known)


def normalise_mask_markers(text: str, tokenizer) -> str:
    """Write every case variant of the mask token (``[mask]``, ``[Mask]``) as the tokenizer's own
    ``[MASK]``: the tokenizer only recognises the exact spelling, and people type either. For a tokenizer whose
    mask is spelt otherwise (RoBERTa's ``<mask>``), BERT's ``[MASK]`` is written as that mask too."""
    import re

    marker = tokenizer.mask_token
    text = re.sub(re.escape(marker), marker, text, flags=re.IGNORECASE)
    if marker != "[MASK]":
        text = re.sub(re.escape("[MASK]"), marker, text, flags=re.IGNORECASE)
    return text
