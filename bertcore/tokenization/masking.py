"""Masked-language-model input corruption (Devlin et al. 2019, section 3.1, "Task #1: Masked LM";
HF ``DataCollatorForLanguageModeling.torch_mask_tokens``), as tensor operations.

Select ``mlm_probability`` (15%) of the eligible positions (never special tokens or padding);
of those, ``mask_replace_prob`` (80%) become [MASK], ``random_replace_prob`` (10%) a random token and
the rest (10%) stay unchanged. ``labels`` hold the original id at selected positions and -100
elsewhere. Every position's decision is returned too, so the UI can show it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE_INDEX = -100  # label of positions that carry no MLM loss (HF / PyTorch cross-entropy convention)

NOT_SELECTED, MASKED, RANDOM, UNCHANGED = 0, 1, 2, 3
DECISION_NAMES = {NOT_SELECTED: "not selected", MASKED: "[MASK]", RANDOM: "random token", UNCHANGED: "unchanged"}


class MaskingError(ValueError):
    """Masking parameters out of range (the message names the parameter)."""


@dataclass
class MaskingResult:
    """Corrupted inputs and what happened at each position.

    Attributes:
        input_ids: ``(B, T)`` long, the corrupted ids fed to the model.
        labels: ``(B, T)`` long, the original id where selected, -100 elsewhere.
        decision: ``(B, T)`` uint8, one of NOT_SELECTED / MASKED / RANDOM / UNCHANGED.
        eligible: ``(B, T)`` bool, positions that could be selected.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    decision: torch.Tensor
    eligible: torch.Tensor

    def counts(self) -> dict[str, int]:
        """Numbers of eligible, selected, masked, random and unchanged positions."""
        d = self.decision
        return {"eligible": int(self.eligible.sum()), "selected": int((d != NOT_SELECTED).sum()),
                "masked": int((d == MASKED).sum()), "random": int((d == RANDOM).sum()),
                "unchanged": int((d == UNCHANGED).sum())}


def check_params(mlm_probability: float, mask_replace_prob: float, random_replace_prob: float) -> None:
    """Raise :class:`MaskingError` unless 0 <= p <= 1, fractions >= 0 and their sum <= 1."""
    if not 0.0 <= mlm_probability <= 1.0:
        raise MaskingError(f"mlm_probability must be in [0, 1], got {mlm_probability}")
    if mask_replace_prob < 0 or random_replace_prob < 0 or mask_replace_prob + random_replace_prob > 1.0 + 1e-9:
        raise MaskingError(f"mask_replace_prob ({mask_replace_prob}) and random_replace_prob ({random_replace_prob}) "
                           "must be >= 0 and add up to at most 1 (the rest is left unchanged)")


def mask_tokens(
    input_ids: torch.Tensor,
    eligible: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    word_ids: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    force: torch.Tensor | None = None,
) -> MaskingResult:
    """Corrupt a batch for MLM; no Python loop over positions.

    Args:
        input_ids: ``(B, T)`` long.
        eligible: ``(B, T)`` bool, True where a position may be selected (not special, not padding);
            see :func:`eligible_positions`.
        mask_token_id: id of [MASK] (read it from the tokenizer).
        vocab_size: random replacements are drawn uniformly from ``[0, vocab_size)`` (as HF).
        mlm_probability: chance that an eligible position (or word) is selected.
        mask_replace_prob / random_replace_prob: split of the selected positions; the rest stay unchanged.
        word_ids: ``(B, T)`` long word index per position (-1 for specials / padding): whole-word
            masking, where all pieces of a word are selected together (each piece then gets its own
            80/10/10 decision, as Google's ``create_pretraining_data.py``).
        generator: for reproducible draws (on the same device as ``input_ids``).
        force: ``(B, T)`` bool, eligible positions always selected and always replaced by [MASK] (selective
            masking of a chosen word, as Lil-Bevo's targeted masking, BabyLM 2023); the random draws are the same
            as without it, so every other position gets exactly the decision it would get without ``force``.
    Returns:
        :class:`MaskingResult`.
    Raises:
        MaskingError: parameters out of range or shapes that differ.
    """
    check_params(mlm_probability, mask_replace_prob, random_replace_prob)
    shape = input_ids.shape
    if eligible.shape != shape or (word_ids is not None and word_ids.shape != shape) or (
            force is not None and force.shape != shape):
        raise MaskingError(f"eligible / word_ids / force must have the shape of input_ids {tuple(input_ids.shape)}")
    device = input_ids.device
    eligible = eligible.to(torch.bool)
    if word_ids is None:
        chosen = torch.rand(input_ids.shape, generator=generator, device=device) < mlm_probability  # (B, T)
    else:
        n_words = int(word_ids.max().clamp(min=0)) + 1
        word_draw = torch.rand((input_ids.size(0), n_words), generator=generator, device=device)  # (B, W)
        chosen = word_draw.gather(1, word_ids.clamp(min=0)) < mlm_probability  # (B, T)
    selected = chosen & eligible  # (B, T)
    u = torch.rand(input_ids.shape, generator=generator, device=device)  # (B, T) decides 80/10/10
    to_mask = selected & (u < mask_replace_prob)
    to_random = selected & (u >= mask_replace_prob) & (u < mask_replace_prob + random_replace_prob)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device)  # (B, T)
    if force is not None:  # after every draw, so the other positions keep theirs
        force = force.to(device=device, dtype=torch.bool) & eligible  # never a special token or padding
        selected, to_mask, to_random = selected | force, to_mask | force, to_random & ~force
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    # decision code: UNCHANGED (3) where selected, minus 2 for [MASK], minus 1 for random
    decision = selected.to(torch.uint8) * UNCHANGED - to_mask.to(torch.uint8) * 2 - to_random.to(torch.uint8)
    return MaskingResult(corrupted, labels, decision, eligible)


def selected_positions(labels: torch.Tensor) -> torch.Tensor:
    """The positions selected for MLM (``labels != IGNORE_INDEX``) as flat row-major indices into ``labels``
    ``(B, T)``: ``(N,)`` long, the order of a boolean-mask selection. Found on the host by the collator, so the
    model's ``masked_positions`` gather needs no ``nonzero`` on the device (which waits for it)."""
    return (labels.reshape(-1) != IGNORE_INDEX).nonzero().squeeze(1)


def verb_rows(position: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rows (n,), logit_rows (n,))`` long: the sequences whose ``position (B,)`` names a verb (>= 0), in batch
    order, and the row of each verb in masked-only MLM logits (the selected positions of ``labels (B, T)``,
    row-major), or -1 for a verb that is not selected. Found on the host by the collator, so that the agreement loss
    needs no ``nonzero`` on the device (which waits for it)."""
    rows = (position >= 0).nonzero().flatten()
    selected = labels.reshape(-1) != IGNORE_INDEX
    index = torch.where(selected, torch.cumsum(selected.long(), 0) - 1, -1)  # (B*T,)
    return rows, index[rows * labels.size(1) + position[rows]]


def special_ids(tokenizer) -> torch.Tensor:
    """``(S,)`` long: ids that are never selected, the tokenizer's special tokens ([CLS], [SEP], [PAD],
    [MASK]); [UNK] stays eligible, as HF ``DataCollatorForLanguageModeling``."""
    return torch.tensor(sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}), dtype=torch.long)


def eligible_positions(tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` bool: True where the token may be selected for MLM: not a special token (see
    :func:`special_ids`; ``tokenizer`` may also be that tensor itself) and not padding."""
    special = tokenizer if torch.is_tensor(tokenizer) else special_ids(tokenizer)
    eligible = ~torch.isin(input_ids, special.to(input_ids.device))
    if attention_mask is not None:
        eligible &= attention_mask.to(torch.bool)
    return eligible


def continuation_table(tokenizer, size: int | None = None) -> torch.Tensor:
    """``(V,)`` bool: True for WordPiece continuation pieces (``##ing``), which join the word before them. For a
    byte-level BPE vocabulary (RoBERTa, ModernBERT) the marker is the other way round: a piece that starts a word
    after a space begins with ``Ġ``, so every other ordinary piece is a continuation (special tokens are not).

    ``size`` pads the table to a model's vocabulary (ids past the tokenizer's are never continuations).
    """
    vocab = tokenizer.get_vocab()
    table = torch.zeros(max(size or 0, len(tokenizer), max(vocab.values()) + 1), dtype=torch.bool)
    model = type(getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)).__name__
    specials = set(getattr(tokenizer, "all_special_tokens", []))
    for tok, i in vocab.items():
        if (not tok.startswith("Ġ") and tok not in specials) if model == "BPE" else tok.startswith("##"):
            table[i] = True
    return table


def word_ids_from_pieces(input_ids: torch.Tensor, eligible: torch.Tensor, continuation: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` long word index per position for whole-word masking, -1 where not eligible.

    A word starts at every eligible piece that is not a ``##`` continuation (``continuation`` from
    :func:`continuation_table`), as Google's ``create_pretraining_data.py``, and at the first piece after a
    special token (a BPE text's first word has no ``Ġ``; a WordPiece text never starts with ``##``, so this
    changes nothing there); the collator and the Masking page both use this, so a word is the same thing in
    training and in the UI.
    """
    after_gap = torch.ones_like(eligible)  # (B, T): the previous position is not eligible (or there is none)
    after_gap[:, 1:] = ~eligible[:, :-1]
    starts = eligible & (~continuation.to(input_ids.device)[input_ids] | after_gap)  # (B, T)
    wid = torch.cumsum(starts.long(), dim=1) - 1  # (B, T)
    return torch.where(eligible, wid.clamp(min=0), torch.full_like(wid, -1))


def whole_word_ids(tokenizer, input_ids: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """:func:`word_ids_from_pieces` with the continuation table read from ``tokenizer`` (``(B, T)`` long)."""
    return word_ids_from_pieces(input_ids, eligible, continuation_table(tokenizer))


def mask_for_tokenizer(tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                       **kwargs) -> MaskingResult:
    """:func:`mask_tokens` with [MASK], the vocabulary size and eligibility read from ``tokenizer``."""
    return mask_tokens(input_ids, eligible_positions(tokenizer, input_ids, attention_mask),
                       mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer), **kwargs)
