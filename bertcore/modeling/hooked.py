"""TransformerLens's workflow on bertcore: ``run_with_cache`` and ``run_with_hooks``, with its site names.

::

    logits, cache = bertcore.run_with_cache(lm, "The keys to the cabinet [MASK] on the table.")
    cache["pattern", 3]                                # (1, n, T, T), as cache["blocks.3.attn.hook_pattern"]
    logits = bertcore.run_with_hooks(lm, text, fwd_hooks=[("blocks.3.attn.hook_pattern", zero_head_5)])

Both are one forward pass with an :class:`~bertcore.modeling.interventions.Interventions` argument, so they are
thread-safe as it is: no hook is registered on the model, and another thread's call on the same model sees nothing.
The names are TransformerLens's (``HookedEncoder``: ``hook_normalized`` before the LayerNorm's weight and bias,
``hook_normalized_resid_post`` a block's output); ``tests/test_transformer_lens.py`` compares every name both have
with TransformerLens's own ``HookedEncoder`` built from the same weights.

Source: TransformerLens 3.x ``HookedRootModule.run_with_cache`` / ``run_with_hooks`` (``hook_points.py``) and
``ActivationCache.__getitem__`` (``ActivationCache.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

import torch

from ..tokenization.tokenizer import Encoding, encode
from .interventions import Interventions, act_name, eval_mode, site_names

NamesFilter = Union[None, str, Sequence[str], Callable[[str], bool]]


@dataclass(frozen=True)
class HookPoint:
    """What a hook function gets as its second argument, as TransformerLens's ``HookPoint``: ``name`` (the full
    site name) and :meth:`layer` (its block, 0-based)."""

    name: str

    def layer(self) -> int:
        """The block of a ``blocks.{i}.*`` site.

        Raises:
            ValueError: a site outside the blocks (as TransformerLens's ``HookPoint.layer``).
        """
        parts = self.name.split(".")
        if parts[0] != "blocks":
            raise ValueError(f"{self.name!r} is not a site of a block")
        return int(parts[1])


class ActivationCache(Mapping[str, torch.Tensor]):
    """The activations one forward pass recorded, ``{site: tensor}``, indexed as TransformerLens's
    ``ActivationCache``: by full name (``cache["blocks.3.attn.hook_pattern"]``) or by ``act_name``'s arguments
    (``cache["pattern", 3]``, ``cache["scale", 2, "ln1"]``; a negative block counts from the last). Tensors are
    detached copies, on the model's device, in its dtype.

    Raises:
        KeyError: a name that was not recorded (the message lists what was).
    """

    def __init__(self, recorded: Mapping[str, torch.Tensor], num_layers: int) -> None:
        self._recorded, self._num_layers = dict(recorded), num_layers

    def _name(self, key: str | tuple) -> str:
        if isinstance(key, str):
            return key
        name, layer, *rest = key
        if layer is not None and layer < 0:
            layer += self._num_layers
        return act_name(name, layer, *rest)

    def __getitem__(self, key: str | tuple) -> torch.Tensor:
        name = self._name(key)
        if name not in self._recorded:
            raise KeyError(f"{name!r} was not recorded; the cache holds {len(self._recorded)} sites "
                           f"({', '.join(list(self._recorded)[:6])}...)")
        return self._recorded[name]

    def __contains__(self, key: object) -> bool:
        try:
            return self._name(key) in self._recorded  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._recorded)

    def __len__(self) -> int:
        return len(self._recorded)

    def __repr__(self) -> str:
        return f"ActivationCache({len(self)} sites)"


def _model_and_inputs(lm: Any, input: Any, max_length: int | None = None) -> tuple[torch.nn.Module, dict]:
    """The model of ``lm`` (a :class:`~bertcore.loading.sources.LoadedModel`, or a bertcore model) and ``input``
    (a text, a list of texts, an :class:`Encoding`, a ``{name: tensor}`` batch or an ``input_ids`` tensor) as the
    model's keyword arguments, on the model's device."""
    model = getattr(lm, "model", lm)
    tokenizer = getattr(lm, "tokenizer", None)
    device = next(model.parameters()).device
    texts = isinstance(input, list) and bool(input) and all(isinstance(t, str) for t in input)
    if isinstance(input, str) or texts:
        if tokenizer is None:
            raise TypeError("a text needs a tokenizer: pass a LoadedModel (bertcore.load(...)), not a bare model")
        max_length = max_length or getattr(lm, "max_length", None)
        if isinstance(input, str):
            return model, encode(tokenizer, input, max_length=max_length).tensors(device)
        from ..tokenization.tokenizer import encode_batch
        return model, {k: v.to(device) for k, v in encode_batch(tokenizer, input, max_length=max_length).items()}
    if isinstance(input, Encoding):
        return model, input.tensors(device)
    if isinstance(input, torch.Tensor):
        return model, {"input_ids": input.to(device)}
    if isinstance(input, Mapping):
        return model, {k: v.to(device) for k, v in input.items()}
    raise TypeError(f"the input is a text, a list of texts, an Encoding, a batch dict or input_ids; got "
                    f"{type(input).__name__}")


def _selected(config, names_filter: NamesFilter) -> list[str]:
    """The sites a filter selects (TransformerLens's ``names_filter``: None for all, a name, a list, a predicate)."""
    every = site_names(config)
    if names_filter is None:
        return every
    if isinstance(names_filter, str):
        return [act_name(names_filter)]
    if callable(names_filter):
        return [n for n in every if names_filter(n)]
    return [act_name(n) for n in names_filter]


def _logits(out: Any) -> torch.Tensor:
    for field in ("logits", "prediction_logits", "last_hidden_state"):
        value = getattr(out, field, None)
        if value is not None:
            return value
    raise TypeError(f"the model returned {type(out).__name__}, which has no logits")


@torch.no_grad()
def run_with_cache(lm: Any, input: Any, names_filter: NamesFilter = None,
                   interventions: Interventions | None = None) -> tuple[torch.Tensor, ActivationCache]:
    """One forward pass recording the sites ``names_filter`` selects, as TransformerLens's ``run_with_cache``.

    Args:
        lm: a :class:`~bertcore.loading.sources.LoadedModel` (``bertcore.load(...)``), or a bertcore model when
            ``input`` is already encoded.
        input: a text; a list of texts (padded to the longest); an :class:`~bertcore.tokenization.tokenizer.Encoding`;
            a ``{input_ids, token_type_ids, attention_mask}`` batch of ``(B, T)`` long tensors; or ``input_ids``.
        names_filter: None (every site the model has), a site name, a list of names (full or
            ``act_name``-style), or a predicate on the full name.
        interventions: edits to apply in the same pass (:class:`Interventions`; its own recordings are kept too).
    Returns:
        ``(logits, cache)``: the MLM logits ``(B, T, V)`` (a model without an MLM head: ``last_hidden_state``
        ``(B, T, H)``), and an :class:`ActivationCache` of the recorded sites (the site table:
        :mod:`bertcore.modeling.interventions`).
    Raises:
        ValueError: a name that is no site, or a site this model's family does not have.
        TextError: an empty or unreadable text.
    """
    model, inputs = _model_and_inputs(lm, input)
    names = _selected(model.config, names_filter)
    edits = {} if interventions is None else interventions.edits
    iv = Interventions(edits, record=set(names) | set(() if interventions is None else interventions.record))
    iv.check(model.config)
    with eval_mode(model):
        out = model(**inputs, interventions=iv)
    if interventions is not None:
        interventions.recorded.update({k: v for k, v in iv.recorded.items() if k in interventions.record})
    return _logits(out), ActivationCache({n: iv.recorded[n] for n in names if n in iv.recorded},
                                         model.config.num_hidden_layers)


HookFn = Callable[[torch.Tensor, HookPoint], Union[torch.Tensor, None]]


def _as_edit(fn: HookFn, name: str):
    point = HookPoint(name)

    def edit(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()  # a TransformerLens hook may edit its argument in place and return None
        y = fn(x, point)
        return x if y is None else y
    return edit


@torch.no_grad()
def run_with_hooks(lm: Any, input: Any, fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
                   return_type: str = "logits") -> Any:
    """One forward pass with each ``fwd_hooks`` function applied at its site, as TransformerLens's
    ``run_with_hooks``; the hooks last for this call only and are never attached to the model.

    Args:
        lm, input: as :func:`run_with_cache`.
        fwd_hooks: ``[(name, fn)]``: ``name`` a site (full or ``act_name``-style) or a predicate on full names;
            ``fn(activation, hook)`` gets a copy of the activation and a :class:`HookPoint` (``hook.name``), and
            returns the replacement (same shape), or None to keep what it edited in place. Several hooks at one
            site apply in order.
        return_type: ``"logits"`` (as :func:`run_with_cache`) or None for the model's whole output.
    Raises:
        ValueError: a name that is no site or that this family lacks; a hook returning another shape.
    """
    model, inputs = _model_and_inputs(lm, input)
    every = site_names(model.config)
    edits: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
    for name, fn in fwd_hooks:
        for site in ([n for n in every if name(n)] if callable(name) else [act_name(name)]):
            edit, before = _as_edit(fn, site), edits.get(site)
            edits[site] = edit if before is None else (lambda x, f=before, g=edit: g(f(x)))
    iv = Interventions(edits)
    iv.check(model.config)
    with eval_mode(model):
        out = model(**inputs, interventions=iv)
    return out if return_type is None else _logits(out)


