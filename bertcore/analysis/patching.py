"""Activation patching: which activations *cause* a prediction (Meng et al. 2022, "Locating and Editing Factual
Associations in GPT", causal tracing; Wang et al. 2023, IOI; Heimersheim & Nanda 2024, "How to use and
interpret activation patching").

Run a clean and a corrupted input of the same length; then rerun the corrupted input with one activation
replaced by the clean run's, and measure how much of the clean behaviour comes back:

    patched effect = (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted))

so 0 = the corrupted run, 1 = the clean run. Sites (layers numbered from 1; 0 = the embedding output):

- ``resid`` (layer 0..L, position): the residual stream, i.e. ``hidden_states[layer]`` at one position;
- ``attn`` (layer 1..L, position): the attention sub-layer's output projection (``attention.output.dense``),
  before it is added to the residual stream;
- ``mlp`` (layer 1..L, position): the feed-forward output (``output.dense``), before the residual add;
- ``head`` (layer 1..L, head): one head's context vectors (its slice of the input of ``attention.output.dense``)
  at every position.

Implemented with forward hooks on the modules of :class:`bertcore.model.BertModel` (removed afterwards, so the
model is left exactly as it was), not with a copy of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

KINDS = ("resid", "attn", "mlp", "head")


class PatchingError(ValueError):
    """Inputs that cannot be patched (the message says why)."""


def _encoder(model: torch.nn.Module):
    base = getattr(model, "base_model", model)
    if not hasattr(base, "encoder") or not hasattr(base, "embeddings"):
        raise PatchingError("activation patching needs a bertcore BERT (embeddings + encoder)")
    return base


def _module(base, kind: str, layer: int) -> torch.nn.Module:
    n = len(base.encoder.layer)
    if kind == "resid":
        if not 0 <= layer <= n:
            raise PatchingError(f"resid layers are 0..{n}; got {layer}")
        return base.embeddings if layer == 0 else base.encoder.layer[layer - 1]
    if not 1 <= layer <= n:
        raise PatchingError(f"{kind} layers are 1..{n}; got {layer}")
    lay = base.encoder.layer[layer - 1]
    return {"attn": lay.attention.output.dense, "mlp": lay.output.dense, "head": lay.attention.output.dense}[kind]


def _out(x):
    return x[0] if isinstance(x, tuple) else x


@torch.no_grad()
def record(model: torch.nn.Module,
           inputs: dict[str, torch.Tensor]) -> tuple[object, dict[tuple[str, int], torch.Tensor]]:
    """Run ``model(**inputs)`` and keep every patchable activation.

    Returns:
        ``(output, cache)`` with ``cache[(kind, layer)]`` of shape ``(1, T, H)`` (``head``: the context vectors
        ``(1, T, heads * head_size)``).
    """
    base = _encoder(model)
    cache: dict[tuple[str, int], torch.Tensor] = {}
    hooks = []
    n = len(base.encoder.layer)

    def keep(key):
        return lambda mod, args, out: cache.__setitem__(key, _out(out).detach().clone())

    def keep_input(key):
        return lambda mod, args: cache.__setitem__(key, args[0].detach().clone())

    try:
        for layer in range(n + 1):
            hooks.append(_module(base, "resid", layer).register_forward_hook(keep(("resid", layer))))
        for layer in range(1, n + 1):
            hooks.append(_module(base, "attn", layer).register_forward_hook(keep(("attn", layer))))
            hooks.append(_module(base, "mlp", layer).register_forward_hook(keep(("mlp", layer))))
            hooks.append(_module(base, "head", layer).register_forward_pre_hook(keep_input(("head", layer))))
        output = model(**inputs)
    finally:
        for h in hooks:
            h.remove()
    return output, cache


@contextmanager
def patch(model: torch.nn.Module, kind: str, layer: int, clean: torch.Tensor, positions=None,
          head: int | None = None) -> Iterator[None]:
    """Within the ``with`` block, the activation ``(kind, layer)`` takes the values of ``clean`` (its recorded
    ``(1, T, H)``) at ``positions`` (None: all; an empty list: none), or, for ``kind="head"``, head ``head``'s
    slice at every position.

    Raises:
        PatchingError: an unknown kind, a layer or head out of range, or a shape that does not match.
    """
    if kind not in KINDS:
        raise PatchingError(f"kind must be one of {KINDS}; got {kind!r}")
    base = _encoder(model)
    module = _module(base, kind, layer)
    cfg = base.config
    if kind == "head":
        if head is None or not 0 <= head < cfg.num_attention_heads:
            raise PatchingError(f"head must be in 0..{cfg.num_attention_heads - 1}; got {head}")
        size = cfg.hidden_size // cfg.num_attention_heads
        cols = slice(head * size, (head + 1) * size)

        def pre(mod, args):
            x = args[0].clone()
            if x.shape != clean.shape:
                raise PatchingError(f"the clean run has shape {tuple(clean.shape)}, this one {tuple(x.shape)}")
            x[..., cols] = clean[..., cols]
            return (x, *args[1:])

        handle = module.register_forward_pre_hook(pre)
    else:
        def post(mod, args, out):
            x = _out(out)
            if x.shape != clean.shape:
                raise PatchingError(f"the clean run has shape {tuple(clean.shape)}, this one {tuple(x.shape)}")
            x = x.clone()
            idx = slice(None) if positions is None else torch.as_tensor(list(positions), dtype=torch.long)
            x[:, idx] = clean[:, idx]
            return (x, *out[1:]) if isinstance(out, tuple) else x

        handle = module.register_forward_hook(post)
    try:
        yield
    finally:
        handle.remove()


# ----------------------------------------------------------------------------- metrics
# A metric maps a model output of a batch to one value per row: ``(B,)`` float tensor.
def logit_diff(position: int, good_id: int, bad_id: int) -> Callable[[object], torch.Tensor]:
    """MLM logit of ``good_id`` minus that of ``bad_id`` at ``position`` (e.g. a [MASK]: "are" - "is")."""
    return lambda out: (out.prediction_logits[:, position, good_id]
                        - out.prediction_logits[:, position, bad_id]).detach()


def p_is_next() -> Callable[[object], torch.Tensor]:
    """P(IsNext) of the NSP head."""
    return lambda out: torch.softmax(out.seq_relationship_logits.detach(), -1)[:, 0]


def class_logit(label: int) -> Callable[[object], torch.Tensor]:
    """The sequence classifier's logit of class ``label``."""
    return lambda out: out.logits[:, label].detach()


@dataclass
class PatchingResult:
    """``effects[kind]``: ``(layers, T)`` for resid (layers 0..L), attn and mlp (1..L); ``(L, heads)`` for head;
    normalised (0 = corrupted, 1 = clean). ``clean`` / ``corrupted``: the metric of each run."""

    effects: dict[str, np.ndarray]
    clean: float
    corrupted: float


def _batched_patch(base, kind: str, layer: int, clean: torch.Tensor, n: int):
    """A hook that patches, in row ``b`` of a batch of ``n`` copies of the corrupted input, site ``b`` of
    ``(kind, layer)``: position b (resid / attn / mlp) or head b (head). Returns the hook handle."""
    module = _module(base, kind, layer)
    rows = torch.arange(n)
    if kind == "head":
        cfg = base.config
        size = cfg.hidden_size // cfg.num_attention_heads
        # (n, H) mask: row b is head b's columns
        cols = (torch.arange(cfg.hidden_size)[None, :] // size == rows[:, None])

        def pre(mod, args):
            x = args[0]
            x = torch.where(cols[:, None, :], clean.expand_as(x), x)
            return (x, *args[1:])

        return module.register_forward_pre_hook(pre)

    def post(mod, args, out):
        x = _out(out).clone()
        x[rows, rows] = clean[0, rows]  # row b, position b
        return (x, *out[1:]) if isinstance(out, tuple) else x

    return module.register_forward_hook(post)


@torch.no_grad()
def scan(model: torch.nn.Module, clean_inputs: dict[str, torch.Tensor], corrupted_inputs: dict[str, torch.Tensor],
         metric: Callable[[object], torch.Tensor], kinds=KINDS, progress=None) -> PatchingResult:
    """Patch every site of ``kinds``, one site per run, and measure ``metric``. The runs of one (kind, layer) go
    through the model as one batch: row b patches position b (or head b), so a scan is 4L + 1 forwards of
    batches of T (or heads) copies, not one forward per site.

    Args:
        model: a bertcore model in eval mode (with the head ``metric`` reads).
        clean_inputs / corrupted_inputs: ``{"input_ids", "attention_mask", "token_type_ids"}`` of shape (1, T),
            the same T.
        metric: a batch metric (:func:`logit_diff`, :func:`p_is_next`, :func:`class_logit`).
        progress: optional ``callable(done, total)`` over the (kind, layer) batches.
    Raises:
        PatchingError: inputs of different lengths, or clean and corrupted give the same metric (nothing to
        explain: the normalisation would divide by zero).
    """
    t_clean, t_corr = clean_inputs["input_ids"].shape[-1], corrupted_inputs["input_ids"].shape[-1]
    if t_clean != t_corr:
        raise PatchingError(f"the clean input has {t_clean} tokens and the corrupted one {t_corr}: patching needs "
                            "inputs of the same length (align them, e.g. by padding the shorter with a neutral word)")
    base = _encoder(model)
    n, heads = len(base.encoder.layer), base.config.num_attention_heads
    out_clean, cache = record(model, clean_inputs)
    m_clean, m_corr = float(metric(out_clean)[0]), float(metric(model(**corrupted_inputs))[0])
    if abs(m_clean - m_corr) < 1e-9:
        raise PatchingError(f"the metric is the same on both inputs ({m_clean:.4g}): nothing to restore")
    jobs = [(kind, layer) for kind in kinds for layer in range(0 if kind == "resid" else 1, n + 1)]
    effects = {k: np.zeros((n + 1 if k == "resid" else n, heads if k == "head" else t_clean)) for k in kinds}
    for i, (kind, layer) in enumerate(jobs):
        width = heads if kind == "head" else t_clean
        batch = {k: v.expand(width, -1) for k, v in corrupted_inputs.items()}
        handle = _batched_patch(base, kind, layer, cache[(kind, layer)], width)
        try:
            values = metric(model(**batch)).float().numpy()
        finally:
            handle.remove()
        effects[kind][layer - (0 if kind == "resid" else 1)] = (values - m_corr) / (m_clean - m_corr)
        if progress is not None:
            progress(i + 1, len(jobs))
    return PatchingResult(effects, m_clean, m_corr)
