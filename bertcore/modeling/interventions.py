"""Interventions as an argument of one forward pass: edit activations and record them, without hooks.

A cached model is shared by every session of the app, each in its own thread, so nothing may be attached to the
model object: a forward hook registered by one thread runs on every other thread's forward pass while it is there
(PyTorch keeps hooks on the module, not on the call). Instead, an analysis builds an :class:`Interventions` and
passes it to that one call, ``model(**inputs, interventions=iv)``, the way ``head_mask`` is passed; the model
calls it at each *site* and the object keeps what it was asked to record. Another thread's call, without it, takes
the plain path. This is TransformerLens's ``run_with_hooks`` made thread-safe: the edits travel with the call.

Sites ``(kind, layer)``, layers numbered from 1 (0 = the embedding output), every tensor as the model computes it:

- ``("resid", 0..L)``: the residual stream, ``(B, T, H)``: the embedding output, then each layer's output
  (``hidden_states[layer]``; for a pre-LN model the last one is *before* the final LayerNorm);
- ``("attn", l)``: the attention sub-layer's output projection ``attention.output.dense``, ``(B, T, H)``, before
  dropout and the residual add;
- ``("mlp", l)``: the feed-forward down-projection ``output.dense``, ``(B, T, H)``, before the residual add;
- ``("head", l)``: the heads' context vectors, the input of ``attention.output.dense``, ``(B, T, heads * d)``
  (head h is columns ``h*d .. (h+1)*d - 1``);
- ``("query", l)``, ``("key", l)``, ``("value", l)``: the projections, ``(B, heads, T, d)``, before the
  ``1/sqrt(d)`` scaling.

At each site the edit (if any) is applied first, then the result is recorded (if asked), so a recording shows
what flows on. Everything runs in the caller's thread on the caller's tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager

import torch

Site = tuple[str, int]
Edit = Callable[[torch.Tensor], torch.Tensor]
LAYER_KINDS: tuple[str, ...] = ("attn", "mlp", "head", "query", "key", "value")
KINDS: tuple[str, ...] = ("resid", *LAYER_KINDS)


class Interventions:
    """What to change and what to keep during one forward pass (see the module docstring for the sites).

    Args:
        edits: ``{site: fn}``; ``fn`` takes the activation and returns a tensor of the same shape that replaces it
            (it must not modify its argument in place).
        record: sites whose activation (after any edit) is kept, detached and cloned, in :attr:`recorded`.
    Attributes:
        recorded: ``{site: tensor}``, filled by the forward pass.
    Raises:
        ValueError: an unknown kind or a negative layer (layers beyond the model raise in :meth:`check`).
    Use one object for one call in one thread; it is not meant to be shared.
    """

    def __init__(self, edits: Mapping[Site, Edit] | None = None, record: Collection[Site] = ()) -> None:
        self.edits: dict[Site, Edit] = dict(edits or {})
        self.record: frozenset[Site] = frozenset(record)
        self.recorded: dict[Site, torch.Tensor] = {}
        for kind, layer in (*self.edits, *self.record):
            if kind not in KINDS:
                raise ValueError(f"an intervention site's kind must be one of {KINDS}; got {kind!r}")
            if layer < (0 if kind == "resid" else 1):
                raise ValueError(f"{kind} sites are numbered from {0 if kind == 'resid' else 1}; got {layer}")

    def check(self, num_layers: int) -> None:
        """Raise ``ValueError`` for a site beyond the model's ``num_layers`` layers."""
        for kind, layer in (*self.edits, *self.record):
            if layer > num_layers:
                raise ValueError(f"the model has {num_layers} layers; the site ({kind!r}, {layer}) does not exist")

    def __call__(self, kind: str, layer: int, x: torch.Tensor) -> torch.Tensor:
        """The model calls this at site ``(kind, layer)`` with the activation ``x``; returns what flows on."""
        edit = self.edits.get((kind, layer))
        if edit is not None:
            y = edit(x)
            if y.shape != x.shape:
                raise ValueError(f"the edit of ({kind!r}, {layer}) returned shape {tuple(y.shape)} for an activation "
                                 f"of shape {tuple(x.shape)}")
            x = y
        if (kind, layer) in self.record:
            self.recorded[(kind, layer)] = x.detach().clone()
        return x

    def tap(self, layer: int) -> "Tap":
        """The sites of one layer as ``tap(kind, x) -> x`` (what the modules of that layer call)."""
        return lambda kind, x: self(kind, layer, x)


Tap = Callable[[str, torch.Tensor], torch.Tensor]


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run the block with ``model`` in eval mode (dropout off), changing nothing on a model already in eval.

    A model shared between sessions is loaded in eval mode and stays so: this leaves it untouched (no attribute
    of it is set, so another thread's forward pass cannot see a change). A model in training mode belongs to its
    caller (the training loop evaluating its own model): it is switched to eval for the block and back after.
    """
    was_training = model.training
    if was_training:
        model.eval()
    try:
        yield model
    finally:
        if was_training:
            model.train()
