"""AdamW and the learning-rate schedule (BERT appendix A.2: linear warmup, then linear decay to 0)."""

from __future__ import annotations

import torch


def lr_at(step: int, peak: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warmup from peak/warmup to peak over
    ``warmup_steps``, then linear decay to 0 at ``total_steps``. Pure (BERT appendix A.2)."""
    if total_steps <= 0:
        return peak
    if warmup_steps > 0 and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    return peak * max(0.0, (total_steps - step) / span)


def warmup_steps_of(warmup: float, total_steps: int) -> int:
    """``warmup`` >= 1 is a number of steps; below 1 a fraction of ``total_steps``."""
    return int(warmup) if warmup >= 1 else int(round(warmup * total_steps))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, beta2: float = 0.999) -> torch.optim.Optimizer:
    """AdamW (betas 0.9/``beta2``, eps 1e-6 as BERT) with no weight decay on biases and LayerNorm
    weights; the fused kernel where available, else foreach, else plain.

    Raises:
        RuntimeError: no AdamW variant can be built.
    """
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    for kwargs in ({"fused": True}, {"foreach": True}, {}):
        try:
            return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), eps=1e-6, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            continue
    raise RuntimeError("cannot build AdamW")
