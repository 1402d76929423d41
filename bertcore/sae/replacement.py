"""Transcoders spliced into the model: how well they stand in for the feed-forward blocks, on held-out text.

- FVU, L0 and dead latents of each transcoder's prediction of ``blocks.{l}.hook_mlp_out`` from its input
  (:func:`bertcore.sae.transcoder.sites`): :func:`bertcore.sae.metrics.reconstruction`, as for an SAE;
- the spliced MLM loss: block l's feed-forward output replaced by the transcoder's prediction from the real input
  (one forward call, :class:`~bertcore.modeling.interventions.Interventions` edits: no hook), cross-entropy at
  [MASK] positions against the clean model's;
- the *replacement model*: every transcoder spliced in at once, each reading what the transcoders below it let
  through (Ameisen et al. 2025, "Circuit tracing", section 2.2); its cross-entropy and how often its top-1 fill at a
  [MASK] is the real model's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..readouts.fill_mask import mlm_head_of
from ..modeling.interventions import Interventions, eval_mode
from .metrics import masked_batch
from .transcoder import Transcoder, sites


def splice_edits(config, transcoders: dict[int, Transcoder]) -> dict[str, Callable]:
    """Edits that replace each block's ``hook_mlp_out`` by its transcoder's prediction from that block's feed-forward
    input in the same forward call (the input is passed on unchanged and kept for the output site)."""
    edits: dict[str, Callable] = {}
    for layer, tc in transcoders.items():
        site_in, site_out = sites(config, layer)
        seen: dict[str, torch.Tensor] = {}

        def keep(x: torch.Tensor, seen=seen) -> torch.Tensor:
            seen["x"] = x
            return x

        def replace(y: torch.Tensor, seen=seen, tc=tc) -> torch.Tensor:
            return tc.reconstruct(seen.pop("x"))

        edits[site_in], edits[site_out] = keep, replace
    return edits


@dataclass
class Replacement:
    """MLM cross-entropy at [MASK] (nats per masked token) on held-out text: ``clean``; ``delta[l]`` its increase with
    block l's transcoder spliced in alone; ``delta_all`` with every transcoder at once (the replacement model);
    ``top1_all``: the share of [MASK] positions where the replacement model's top-1 fill is the real model's;
    ``masked``: how many positions were scored."""

    clean: float
    delta: dict[int, float]
    delta_all: float
    top1_all: float
    masked: int


@torch.no_grad()
def spliced(model, tokenizer, transcoders: dict[int, Transcoder], chunks: Sequence[np.ndarray], n_chunks: int = 256,
            batch_chunks: int = 16, seed: int = 0) -> Replacement:
    """:class:`Replacement` on the first ``n_chunks`` chunks, 15% of their eligible tokens replaced by [MASK]
    (:func:`bertcore.sae.metrics.masked_batch`, seeded per batch).

    Raises:
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    encoder, head = mlm_head_of(model)
    config = encoder.config
    runs = {"clean": {}, "all": splice_edits(config, transcoders)}
    runs.update({layer: splice_edits(config, {layer: tc}) for layer, tc in transcoders.items()})
    totals = {name: 0.0 for name in runs}
    agree = count = 0
    chunks = list(chunks[:n_chunks])
    with eval_mode(model):
        for i in range(0, len(chunks), batch_chunks):
            batch = masked_batch(tokenizer, chunks[i:i + batch_chunks], seed=seed + i)
            labels = batch.pop("labels")
            selected = labels != -100
            top1 = {}
            for name, edits in runs.items():
                hidden = encoder(**batch, interventions=Interventions(edits)).last_hidden_state
                logits = head(hidden[selected]).float()  # (N, V)
                totals[name] += float(F.cross_entropy(logits, labels[selected], reduction="sum"))
                if name in ("clean", "all"):
                    top1[name] = logits.argmax(-1)
            agree += int((top1["clean"] == top1["all"]).sum())
            count += int(selected.sum())
    n = max(count, 1)
    clean = totals["clean"] / n
    return Replacement(clean, {layer: totals[layer] / n - clean for layer in transcoders}, totals["all"] / n - clean,
                       agree / n, count)
