"""Batches: padding, the per-batch MLM collator, the classification collator, batch order.

Masks are drawn anew for every batch with a generator seeded by (seed, step, rank), and the order of
an epoch by (seed, epoch), so a resumed run sees exactly the batches and masks of an uninterrupted one.
"""

from __future__ import annotations

import hashlib
from itertools import chain
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from ..tokenization.masking import (IGNORE_INDEX, MASKED, continuation_table, eligible_positions, mask_tokens,
    selected_positions, special_ids, verb_rows, word_ids_from_pieces)
from .corpora import DataError

#: per-row columns of counterfactual agreement rows: the verb's position (-1: none), correct and other-number ids
AGREEMENT_COLUMNS = ("agreement_position", "agreement_good", "agreement_bad")
#: what the collator adds to them, found on the host (:func:`~bertcore.tokenization.masking.verb_rows`)
AGREEMENT_ROWS = ("agreement_rows", "agreement_logit_rows")


def batch_generator(seed: int, step: int, rank: int = 0, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded by (seed, step, rank): the masks of a batch depend only on these, so a
    resumed run draws exactly the masks an uninterrupted one would."""
    digest = hashlib.blake2b(f"{seed}/{step}/{rank}".encode(), digest_size=8).digest()
    g = torch.Generator(device=device)
    g.manual_seed(int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF)
    return g


def pad_batch(rows: Sequence[dict[str, Any]], pad_id: int, pad_to: int | None = None) -> dict[str, torch.Tensor]:
    """``input_ids``, ``token_type_ids``, ``attention_mask`` ``(B, T)`` long, padded to the longest
    row (or ``pad_to``), with ``next_sentence_label`` / ``label`` ``(B,)`` when present."""
    lengths = np.fromiter((len(r["input_ids"]) for r in rows), dtype=np.int64, count=len(rows))
    T = int(lengths.max())
    if pad_to is not None:
        T = max(T, pad_to)
    valid = np.arange(T) < lengths[:, None]  # (B, T): the rows' tokens, row-major as the lists are chained
    ids = np.full(valid.shape, pad_id, dtype=np.int64)
    types = np.zeros(valid.shape, dtype=np.int64)
    ids[valid] = np.fromiter(chain.from_iterable(r["input_ids"] for r in rows), dtype=np.int64)
    types[valid] = np.fromiter(chain.from_iterable(r["token_type_ids"] for r in rows), dtype=np.int64)
    out = {"input_ids": torch.from_numpy(ids), "token_type_ids": torch.from_numpy(types),
           "attention_mask": torch.from_numpy(valid.astype(np.int64))}
    for key in ("next_sentence_label", "label"):
        if key in rows[0]:
            out[key] = torch.as_tensor([r[key] for r in rows], dtype=torch.long)
    return out


class PretrainCollator:
    """Pad a list of NSP examples and mask them for MLM (new masks for every batch).

    Call ``collator(rows, generator)``; returns ``input_ids`` (corrupted), ``token_type_ids``,
    ``attention_mask`` (all ``(B, T)`` long), ``labels`` (original ids where selected, -100
    elsewhere), ``decision`` (``(B, T)`` uint8 :mod:`bertcore.tokenization.masking` codes NOT_SELECTED / MASKED /
    RANDOM / UNCHANGED, for per-corruption accuracy), ``mlm_positions`` ``(N,)`` long (the selected positions as
    flat indices into ``B*T``, row-major: the model's ``masked_positions``, found here on the host so that the step
    never waits for the device to find them) and ``next_sentence_label`` ``(B,)``.
    Rows of counterfactual agreement pairs (:mod:`bertcore.data.agreement_training`) carry
    ``agreement_position`` (the verb's index, -1 in other rows), ``agreement_good`` and ``agreement_bad`` (ids of
    the correct and the other-number verb): the verb is always [MASK]ed (``mask_tokens(force=...)``) and the three
    come back as ``(B,)`` long tensors, with :data:`AGREEMENT_ROWS` ``(n,)``
    (:func:`~bertcore.tokenization.masking.verb_rows`: the rows that have a verb and each verb's row in the
    masked-only logits, found on the host).
    Eligibility and whole words come from :mod:`bertcore.tokenization.masking` (the Masking page uses the same
    functions); special ids and the vocabulary size from the tokenizer.
    """

    def __init__(self, tokenizer, mlm_probability: float = 0.15, whole_word_mask: bool = False,
                 vocab_size: int | None = None, mask_replace_prob: float = 0.8,
                 random_replace_prob: float = 0.1) -> None:
        self.pad_id = tokenizer.pad_token_id
        self.mask_id = tokenizer.mask_token_id
        self.vocab_size = vocab_size or len(tokenizer)
        self.special = special_ids(tokenizer)
        self.mlm_probability = mlm_probability
        self.mask_replace_prob, self.random_replace_prob = mask_replace_prob, random_replace_prob
        self.continuation = continuation_table(tokenizer, self.vocab_size) if whole_word_mask else None

    def __call__(self, rows: Sequence[dict[str, Any]],
                 generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        batch = pad_batch(rows, self.pad_id)
        ids = batch["input_ids"]
        eligible = eligible_positions(self.special, ids, batch["attention_mask"])  # (B, T)
        wid = None if self.continuation is None else word_ids_from_pieces(ids, eligible, self.continuation)
        force = None
        if AGREEMENT_COLUMNS[0] in rows[0]:
            for key in AGREEMENT_COLUMNS:
                batch[key] = torch.as_tensor([r[key] for r in rows], dtype=torch.long)  # (B,)
            pos = batch[AGREEMENT_COLUMNS[0]]
            force = torch.zeros_like(eligible)  # (B, T)
            has = (pos >= 0).nonzero().flatten()
            force[has, pos[has]] = True
        m = mask_tokens(ids, eligible, mask_token_id=self.mask_id, vocab_size=self.vocab_size,
                        mlm_probability=self.mlm_probability, mask_replace_prob=self.mask_replace_prob,
                        random_replace_prob=self.random_replace_prob, word_ids=wid, generator=generator, force=force)
        ids, labels, decision = m.input_ids, m.labels, m.decision
        if not bool((labels != IGNORE_INDEX).any()) and bool(eligible.any()):
            # nothing selected (tiny batches): mask one eligible token so the MLM loss is defined
            r, c = eligible.nonzero()[0].tolist()
            labels, ids, decision = labels.clone(), ids.clone(), decision.clone()
            labels[r, c] = ids[r, c]
            ids[r, c] = self.mask_id
            decision[r, c] = MASKED
        batch["input_ids"] = ids
        batch["labels"] = labels
        batch["decision"] = decision
        batch["mlm_positions"] = selected_positions(labels)  # (N,) on the host
        if AGREEMENT_COLUMNS[0] in batch:  # the verbs' rows, on the host too
            rows, logit_rows = verb_rows(batch[AGREEMENT_COLUMNS[0]], labels)
            if bool((logit_rows < 0).any()):
                raise DataError("a verb position is not selected for MLM: the collator must force-mask it")
            batch.update(zip(AGREEMENT_ROWS, (rows, logit_rows)))
        return batch


class ClassificationCollator:
    """Pad tokenized classification rows: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``label``."""

    def __init__(self, tokenizer) -> None:
        self.pad_id = tokenizer.pad_token_id

    def __call__(self, rows: Sequence[dict[str, Any]],
                 generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        return pad_batch(rows, self.pad_id)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The example order of an epoch: a permutation seeded by (seed, epoch)."""
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(n, generator=g).tolist()


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, lengths: Sequence[int] | None = None,
                  drop_last: bool = True, group_size: int = 50) -> list[list[int]]:
    """The batches (lists of example indices) of an epoch, fixed by (seed, epoch).

    With ``lengths``, examples of similar length are batched together (as HF's
    ``group_by_length``): the permutation is cut into groups of ``group_size`` batches, each
    sorted by length, and the order of the batches is shuffled. Less padding, same examples.
    """
    order = epoch_order(n, seed, epoch)
    n_batches = n // batch_size if drop_last else -(-n // batch_size)
    if lengths is None:
        return [order[k * batch_size:(k + 1) * batch_size] for k in range(n_batches)]
    mega = batch_size * group_size
    order = [i for g in range(0, n, mega) for i in sorted(order[g:g + mega], key=lambda j: -lengths[j])]
    batches = [order[k * batch_size:(k + 1) * batch_size] for k in range(n_batches)]
    g = torch.Generator().manual_seed(seed * 100_003 + epoch + 7)
    return [batches[p] for p in torch.randperm(len(batches), generator=g).tolist()]


def iterate_batches(
    dataset, batch_size: int, *, seed: int, start_step: int = 0, rank: int = 0, world_size: int = 1,
    drop_last: bool = True, lengths: Sequence[int] | None = None,
) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """Endless training batches: yields ``(step, epoch, rows)`` from ``start_step`` on.

    Global batch ``step`` holds ``batch_size`` examples of the epoch's permutation (grouped by
    ``lengths`` if given, see :func:`epoch_batches`); rank ``r`` of ``world_size`` takes every
    ``world_size``-th of them. Resuming at ``start_step`` gives the batches an uninterrupted run
    would have seen.
    """
    n = len(dataset)
    per_epoch = n // batch_size if drop_last else -(-n // batch_size)
    if per_epoch == 0:
        raise DataError(f"the training split has {n} examples, fewer than one batch of {batch_size}")
    step = start_step
    while True:
        epoch, k = divmod(step, per_epoch)
        batches = epoch_batches(n, batch_size, seed, epoch, lengths, drop_last)
        while k < per_epoch:
            idx = batches[k][rank::world_size]
            rows = dataset[idx] if idx else {}
            yield step, epoch, _rows(rows, len(idx))
            step += 1
            k += 1


def _rows(columns: dict[str, list], n: int) -> list[dict[str, Any]]:
    """``Dataset[list]`` gives columns; turn them into rows."""
    keys = list(columns)
    return [{k: columns[k][i] for k in keys} for i in range(n)]


def eval_batches(dataset, batch_size: int, max_batches: int = 0, rank: int = 0, world_size: int = 1,
                 by_length: bool = False):
    """Fixed-order evaluation batches (the first ``max_batches``, 0 = all), split over ranks.
    ``by_length``: examples sorted by length (less padding; the set evaluated is the same)."""
    n = len(dataset)
    n_batches = -(-n // batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    order = list(range(n))
    if by_length:
        lengths = [len(x) for x in dataset["input_ids"]]
        order = sorted(order[:n_batches * batch_size], key=lambda i: lengths[i])
    for b in range(n_batches):
        idx = order[b * batch_size:min(n, (b + 1) * batch_size)][rank::world_size]
        if idx:
            yield b, _rows(dataset[idx], len(idx))
