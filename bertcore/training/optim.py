"""AdamW and the learning-rate schedule (BERT appendix A.2: linear warmup, then linear decay to 0; or
warmup-stable-decay, Hu et al. 2024 "MiniCPM" section 4: the decay only over the run's last steps)."""

from __future__ import annotations

import torch

from ..readouts.anatomy import group_of


def lr_at(step: int, peak: float, warmup_steps: int, total_steps: int, decay_steps: int | None = None) -> float:
    """Learning rate of optimizer step ``step`` (0-based). Pure.

    Linear warmup from peak/warmup to ``peak`` over ``warmup_steps``; then, with ``decay_steps`` None, linear
    decay to 0 at ``total_steps`` (BERT appendix A.2), so every step's rate depends on the total. With
    ``decay_steps`` set, ``peak`` holds until ``total_steps - decay_steps`` and decays linearly to 0 over the last
    ``decay_steps`` (warmup-stable-decay, Hu et al. 2024 section 4): the rate of any step before the decay is the
    same whatever the total (whether a from-scratch run leaves the unigram plateau must not depend on the step count
    a calibration planned)."""
    if total_steps <= 0:
        return peak
    if warmup_steps > 0 and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if decay_steps is not None:
        span = max(1, min(decay_steps, total_steps - warmup_steps))
        return peak * min(1.0, max(0.0, (total_steps - step) / span))
    span = max(1, total_steps - warmup_steps)
    return peak * max(0.0, (total_steps - step) / span)


def warmup_steps_of(warmup: float, total_steps: int) -> int:
    """``warmup`` >= 1 is a number of steps, at most half of ``total_steps`` (a run shorter than twice its warmup,
    a short time budget on a slow machine, still reaches its peak and decays); below 1 a fraction of
    ``total_steps``."""
    if warmup >= 1:
        return max(1, min(int(warmup), total_steps // 2))
    return int(round(warmup * total_steps))


def decay_steps_of(decay: float, total_steps: int) -> int | None:
    """The ``decay`` option as :func:`lr_at`'s ``decay_steps``: 1.0 (the default) is None, BERT's decay from the
    warmup's end; below 1 the last fraction of ``total_steps`` (at least 1 step)."""
    return None if decay >= 1.0 else max(1, int(round(decay * total_steps)))


HEAD_PREFIX = "classifier."  # the new head of BertForSequenceClassification (HF's name)


def layer_scale(name: str, num_layers: int, layer_decay: float) -> float:
    """The layer-wise lr factor of parameter ``name`` (Sun et al. 2019, "How to Fine-Tune BERT for Text
    Classification", section 5.3.3; ELECTRA's fine-tuning, Clark et al. 2020 appendix A): encoder layer ``i``
    (0-based) of ``num_layers`` gets ``layer_decay ** (num_layers - 1 - i)``, the embeddings
    ``layer_decay ** num_layers``; what sits above the encoder (pooler, heads) 1. Groups as
    :func:`bertcore.readouts.anatomy.group_of` names them. Pure."""
    if layer_decay == 1.0:
        return 1.0
    group, _ = group_of(name)
    if group.startswith("encoder layer "):
        return layer_decay ** (num_layers - 1 - int(group.rsplit(" ", 1)[1]))
    return layer_decay ** num_layers if group == "embeddings" else 1.0


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                   beta2: float = 0.999, head_lr: float | None = None,
                   layer_decay: float = 1.0) -> torch.optim.Optimizer:
    """AdamW (betas 0.9/``beta2``, eps 1e-6 as BERT) with no weight decay on biases and LayerNorm
    weights; the fused kernel where available, else foreach, else plain.

    Each parameter group carries ``lr_scale``: the loop sets a group's rate to the schedule's rate times it. With
    ``head_lr``, the parameters named ``classifier.*`` (a fine-tuning run's new head) get ``head_lr / lr``, so the
    head follows the same warmup and decay at its own peak (the usual discriminative rates of fine-tuning: Howard &
    Ruder 2018, ULMFiT section 3.2); with ``layer_decay`` < 1 each encoder layer and the embeddings get
    :func:`layer_scale`'s factor (the model's ``config.num_hidden_layers``); every other group 1.

    Raises:
        RuntimeError: no AdamW variant can be built.
    """
    scale = 1.0 if head_lr is None or lr <= 0 else head_lr / lr
    num_layers = getattr(getattr(model, "config", None), "num_hidden_layers", 0)
    buckets: dict[tuple[bool, float, bool], list] = {}  # (head, factor, no decay): the groups' order as before
    seen = set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        no_decay = p.ndim < 2 or "LayerNorm" in name
        head = name.startswith(HEAD_PREFIX) and scale != 1.0
        factor = scale if head else layer_scale(name, num_layers, layer_decay)
        buckets.setdefault((head, factor, no_decay), []).append(p)
    groups = [{"params": ps, "weight_decay": 0.0 if no_decay else weight_decay, "lr_scale": factor}
              for (_, factor, no_decay), ps in sorted(buckets.items())]
    for kwargs in ({"fused": True}, {"foreach": True}, {}):
        try:
            return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), eps=1e-6, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            continue
    raise RuntimeError("cannot build AdamW")


def lr_at_time(elapsed_s: float, budget_s: float, peak: float, warmup: float, step: int = 0) -> float:
    """Learning rate under a time budget (Geiping & Goldstein 2023, "Cramming": the schedule is a
    function of the budget spent, progress = elapsed / budget). Pure.

    ``warmup`` < 1 is a fraction of the budget: linear warmup in time to ``peak``, then linear decay to
    0 when the budget is spent. ``warmup`` >= 1 is a number of optimizer steps (``step`` is 0-based):
    the step warmup multiplies a linear decay in time, ``peak * min(1, (step+1)/warmup) * (1 - progress)``.

    Args:
        elapsed_s: seconds of training so far (earlier sessions of a resumed run included).
        budget_s: the run's time budget in seconds (> 0).
    """
    if budget_s <= 0:
        return peak
    p = min(1.0, max(0.0, elapsed_s / budget_s))
    if warmup >= 1:
        return peak * min(1.0, (step + 1) / warmup) * (1.0 - p)
    if warmup > 0 and p < warmup:
        return peak * max(p / warmup, 1e-3)
    return peak * max(0.0, (1.0 - p) / max(1e-9, 1.0 - warmup))
