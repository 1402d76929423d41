"""Fill-mask: what a model with an MLM head predicts at chosen positions (Devlin et al. 2019,
section 3.1, "Task #1: Masked LM"; HF ``BertForMaskedLM`` / ``FillMaskPipeline``).

The encoder runs once on the (corrupted) input; the MLM head (``cls.predictions``: dense, GELU,
LayerNorm, decoder tied to the word embeddings + bias) runs only on the positions asked for,
so the ``(T, H) x (H, V)`` projection of every other token is skipped. Logits are identical to
the head run on every position (``BertForMaskedLM(...).logits[0, positions]``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .heads import IGNORE_INDEX


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
    """``(encoder, cls.predictions)`` of a :class:`~bertcore.heads.BertForMaskedLM` or
    :class:`~bertcore.heads.BertForPreTraining`.

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
        bertcore.embeddings.InputError: ids out of range or a sequence longer than the model's positions.
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


def predict(
    model: torch.nn.Module,
    tokenizer,
    input_ids: torch.Tensor,
    positions: torch.Tensor | list[int],
    labels: torch.Tensor | None = None,
    k: int = 5,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
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
    Returns:
        N :class:`Prediction`, in the order of ``positions``.
    Raises:
        FillMaskError: no MLM head, bad positions, or k < 1.
    """
    if k < 1:
        raise FillMaskError(f"k must be at least 1, got {k}")
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    pos = torch.as_tensor(positions, dtype=torch.long).reshape(-1)  # (N,)
    if pos.numel() == 0:
        mlm_head_of(model)  # still say so when the model cannot predict at all
        return []
    logits = mlm_logits_at(model, input_ids, pos, attention_mask, token_type_ids)  # (N, V)
    probs = logits.float().softmax(-1)  # (N, V)
    top_p, top_i = probs.topk(min(k, probs.size(-1)), dim=-1)  # (N, k)
    originals: list[int | None] = [None] * pos.numel()
    if labels is not None:
        lab = labels.reshape(-1)[pos]  # (N,)
        originals = [None if int(x) == IGNORE_INDEX else int(x) for x in lab]
    results = []
    for i, p in enumerate(pos.tolist()):  # N rows for display, not a loop over the sequence
        orig = originals[i]
        orig_prob = orig_rank = None
        if orig is not None and 0 <= orig < probs.size(-1):
            orig_prob = float(probs[i, orig])
            orig_rank = int((probs[i] > probs[i, orig]).sum()) + 1
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
    ``[MASK]``: the tokenizer only recognises the exact spelling, and people type either."""
    import re

    marker = tokenizer.mask_token
    return re.sub(re.escape(marker), marker, text, flags=re.IGNORECASE)
