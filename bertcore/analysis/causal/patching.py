"""Activation patching: which activations *cause* a prediction (Meng et al. 2022, "Locating and Editing Factual
Associations in GPT", causal tracing; Wang et al. 2023, IOI; Heimersheim & Nanda 2024, "How to use and
interpret activation patching").

Run a clean and a corrupted input of the same length; then rerun the corrupted input with one activation
replaced by the clean run's, and measure how much of the clean behaviour comes back:

    patched effect = (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted))

so 0 = the corrupted run, 1 = the clean run. Sites ``(kind, layer)``, blocks numbered from 0 as HF's
``encoder.layer[i]``, each one of :mod:`bertcore.modeling.interventions`' named sites (:func:`site_name`):

- ``resid`` (0..L, position): the residual stream ``hidden_states[layer]`` (HF's index: 0 = the embedding output,
  k = block k-1's output) at one position;
- ``attn`` (block 0..L-1, position): ``blocks.{layer}.hook_attn_out``, the attention sub-layer's output projection,
  before it is added to the residual stream;
- ``mlp`` (block 0..L-1, position): ``blocks.{layer}.hook_mlp_out``, the feed-forward output, before the residual add;
- ``head`` (block 0..L-1, head 0..n-1): ``blocks.{layer}.attn.hook_z``, one head's context vectors at every position.

Every activation is read and replaced through the forward pass's ``interventions`` argument
(:class:`bertcore.modeling.interventions.Interventions`), never with hooks on the model: the model object is shared by
every session of the app, and a hook would act on every other session's forward pass while it was registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ...modeling.attention import additive_mask
from ...modeling.interventions import Interventions, hidden_state_site

KINDS = ("resid", "attn", "mlp", "head")


class PatchingError(ValueError):
    """Inputs that cannot be patched (the message says why)."""


def _encoder(model: torch.nn.Module):
    base = getattr(model, "base_model", model)
    if not hasattr(base, "encoder") or not hasattr(base, "embeddings"):
        raise PatchingError("activation patching needs a bertcore BERT (embeddings + encoder)")
    return base


def _check_site(base, kind: str, layer: int) -> None:
    n = len(base.encoder.layer)
    if kind not in KINDS:
        raise PatchingError(f"kind must be one of {KINDS}; got {kind!r}")
    high = n if kind == "resid" else n - 1
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= high:
        what = "hidden_states indices" if kind == "resid" else "blocks"
        raise PatchingError(f"{kind} {what} are 0..{high}; got {layer!r}")


_BLOCK_SITES = {"attn": "hook_attn_out", "mlp": "hook_mlp_out", "head": "attn.hook_z"}


def site_name(model: torch.nn.Module, kind: str, layer: int) -> str:
    """The :mod:`bertcore.modeling.interventions` site of ``(kind, layer)``: ``("resid", k)``, ``k`` a hidden_states
    index (0 = embeddings), ``0..L``, is :func:`~bertcore.modeling.interventions.hidden_state_site`; the other kinds
    take the 0-based block ``l``, ``0..L-1``: ``("attn", l)`` ``blocks.{l}.hook_attn_out``,
    ``("mlp", l)`` ``blocks.{l}.hook_mlp_out``, ``("head", l)`` ``blocks.{l}.attn.hook_z``.

    Raises:
        PatchingError: an unknown kind or a layer outside the model.
    """
    base = _encoder(model)
    _check_site(base, kind, layer)
    if kind == "resid":
        return hidden_state_site(base.config, layer)
    return f"blocks.{layer}.{_BLOCK_SITES[kind]}"


def sites(model: torch.nn.Module) -> list[tuple[str, int]]:
    """Every patchable site of ``model``: ``("resid", 0..L)``, then ``("attn" | "mlp" | "head", 0..L-1)``."""
    n = len(_encoder(model).encoder.layer)
    return [("resid", k) for k in range(n + 1)] + [(kind, k) for k in range(n) for kind in KINDS[1:]]


@torch.no_grad()
def record(model: torch.nn.Module,
           inputs: dict[str, torch.Tensor]) -> tuple[object, dict[tuple[str, int], torch.Tensor]]:
    """Run the encoder of ``model`` on ``inputs`` and keep every patchable activation.

    Returns:
        ``(output, cache)``: the encoder's :class:`~bertcore.modeling.model.BertModelOutput` and ``cache[(kind,
        layer)]`` of shape ``(1, T, H)`` (``head``: the context vectors ``(1, T, heads, head_size)``).
    """
    base = _encoder(model)
    names = {site: site_name(base, *site) for site in sites(base)}
    iv = Interventions(record=names.values())
    output = base(**inputs, interventions=iv)
    return output, {site: iv.recorded[name] for site, name in names.items()}


def patch(model: torch.nn.Module, kind: str, layer: int, clean: torch.Tensor, positions=None,
          head: int | None = None) -> Interventions:
    """The intervention that gives activation ``(kind, layer)`` (numbered as :func:`site_name`) the values of
    ``clean`` (its recorded ``(1, T, H)``) at ``positions`` (None: all; an empty list: none), or, for
    ``kind="head"``, head ``head``'s context vectors (``clean`` ``(1, T, heads, d)``) at every position. Pass it to
    one forward pass (``interventions=``, or :func:`measure`).

    Raises:
        PatchingError: an unknown kind, a layer or head out of range; during the forward pass, a shape that does
        not match the recorded one.
    """
    base = _encoder(model)
    name = site_name(base, kind, layer)
    cfg = base.config
    if kind == "head" and (isinstance(head, bool) or not isinstance(head, int)
                           or not 0 <= head < cfg.num_attention_heads):
        raise PatchingError(f"head must be in 0..{cfg.num_attention_heads - 1}; got {head!r}")
    idx = slice(None) if positions is None else torch.as_tensor(list(positions), dtype=torch.long,
                                                                device=clean.device)

    def edit(x: torch.Tensor) -> torch.Tensor:
        if x.shape != clean.shape:
            raise PatchingError(f"the clean run has shape {tuple(clean.shape)}, this one {tuple(x.shape)}")
        x = x.clone()
        if kind == "head":
            x[:, :, head] = clean[:, :, head]
        else:
            x[:, idx] = clean[:, idx]
        return x

    return Interventions({name: edit})


# ----------------------------------------------------------------------------- metrics
# A metric maps the encoder's last hidden state of a batch to one value per row: ``metric(model,
# last_hidden_state (B, T, H)) -> (B,)`` float. It applies only the head it reads (one position of the MLM head,
# or the pooler and the NSP / class head), so a scan never projects every position onto the vocabulary.
Metric = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]


def logit_diff(position: int, good_id: int, bad_id: int) -> Metric:
    """MLM logit of ``good_id`` minus that of ``bad_id`` at ``position`` (e.g. a [MASK]: "are" - "is"), from the
    model's ``cls.predictions`` head (HF ``BertLMPredictionHead``)."""
    def metric(model, last):
        logits = model.cls.predictions(last[:, position])  # (B, V)
        return (logits[:, good_id] - logits[:, bad_id]).detach()
    return metric


def p_is_next() -> Metric:
    """P(IsNext) of the NSP head (``cls.seq_relationship`` on the pooled [CLS])."""
    def metric(model, last):
        return torch.softmax(model.cls.seq_relationship(_encoder(model).pooler(last)).float(), -1)[:, 0].detach()
    return metric


def class_logit(label: int) -> Metric:
    """The sequence classifier's logit of class ``label`` (``classifier`` on the pooled [CLS]; eval mode)."""
    def metric(model, last):
        return model.classifier(model.dropout(_encoder(model).pooler(last)))[:, label].detach()
    return metric


@torch.no_grad()
def measure(model: torch.nn.Module, inputs: dict[str, torch.Tensor], metric: Metric,
            interventions: Interventions | None = None) -> torch.Tensor:
    """``metric`` on ``model``'s encoder run on ``inputs`` with ``interventions`` (e.g. :func:`patch`'s):
    ``(B,)`` float."""
    return metric(model, _encoder(model)(**inputs, interventions=interventions).last_hidden_state).float()


@dataclass
class PatchingResult:
    """``effects[kind]``: ``(L + 1, T)`` for resid (row k: ``hidden_states[k]``), ``(L, T)`` for attn and mlp (row l:
    block l), ``(L, heads)`` for head; normalised (0 = corrupted, 1 = clean). ``clean`` / ``corrupted``: the metric
    of each run."""

    effects: dict[str, np.ndarray]
    clean: float
    corrupted: float


def _row_patch(kind: str, clean: torch.Tensor, first: int, n: int):
    """The edit that patches, in rows ``first .. first + n - 1`` of a batch, site ``b`` of ``kind`` in row
    ``first + b``: position b (attn / mlp) or head b (head); other rows pass unchanged."""
    rows, sites_ = torch.arange(first, first + n, device=clean.device), torch.arange(n, device=clean.device)
    if kind == "head":
        def edit_head(x):  # (B, T, heads, d)
            x = x.clone()
            x[rows, :, sites_] = clean[0].transpose(0, 1)[sites_]  # row first + b: head b at every position
            return x

        return edit_head

    def edit(x):
        x = x.clone()
        x[rows, sites_] = clean[0, sites_]  # row first + b, position b
        return x

    return edit


def _patched_resid(corrupted: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
    """``(T, T, H)``: T copies of the corrupted ``(1, T, H)`` residual stream, row b with position b clean."""
    t = corrupted.shape[1]
    x = corrupted.expand(t, -1, -1).clone()
    diag = torch.arange(t, device=x.device)
    x[diag, diag] = clean[0]
    return x


@torch.no_grad()
def scan(model: torch.nn.Module, clean_inputs: dict[str, torch.Tensor], corrupted_inputs: dict[str, torch.Tensor],
         metric: Metric, kinds=KINDS, progress=None) -> PatchingResult:
    """Patch every site of ``kinds``, one site per run, and measure ``metric``.

    How the patched runs are batched: every site of block l (its attn and mlp outputs at each position, each
    head, and the residual stream entering it at each position) leaves blocks 0..l-1 exactly as in the
    corrupted run, so their runs start at block l from the corrupted run's recorded residual stream
    (:meth:`bertcore.modeling.encoder.BertEncoder.forward`'s ``start_layer``) as one batch of up to 3T + heads rows,
    row r patching one site. A scan is L batches through on average (L + 1) / 2 layers, plus the last residual stream,
    which only the head reads; and a metric applies only the head it reads, at one position.

    Args:
        model: a bertcore model in eval mode (with the head ``metric`` reads).
        clean_inputs / corrupted_inputs: ``{"input_ids", "attention_mask", "token_type_ids"}`` of shape (1, T),
            the same T.
        metric: :func:`logit_diff`, :func:`p_is_next`, :func:`class_logit` (or any :data:`Metric`).
        progress: optional ``callable(done, total)`` over the L + 1 batches.
    Returns:
        :class:`PatchingResult` with ``effects`` for each kind in ``kinds``.
    Raises:
        PatchingError: inputs of different lengths, an unknown kind, or clean and corrupted give the same metric
        (nothing to explain: the normalisation would divide by zero).
    """
    t_clean, t_corr = clean_inputs["input_ids"].shape[-1], corrupted_inputs["input_ids"].shape[-1]
    if t_clean != t_corr:
        raise PatchingError(f"the clean input has {t_clean} tokens and the corrupted one {t_corr}: patching needs "
                            "inputs of the same length (align them, e.g. by padding the shorter with a neutral word)")
    if unknown := set(kinds) - set(KINDS):
        raise PatchingError(f"kinds must be among {KINDS}; got {sorted(unknown)}")
    base = _encoder(model)
    n, heads, t = len(base.encoder.layer), base.config.num_attention_heads, t_clean
    out_clean, clean = record(base, clean_inputs)
    out_corr, corr = record(base, corrupted_inputs)
    m_clean = float(metric(model, out_clean.last_hidden_state)[0])
    m_corr = float(metric(model, out_corr.last_hidden_state)[0])
    if abs(m_clean - m_corr) < 1e-9:
        raise PatchingError(f"the metric is the same on both inputs ({m_clean:.4g}): nothing to restore")
    mask = additive_mask(corrupted_inputs.get("attention_mask"), out_corr.last_hidden_state.dtype)

    def normalise(values: torch.Tensor) -> np.ndarray:
        return ((values.float() - m_corr) / (m_clean - m_corr)).cpu().numpy()

    effects = {k: np.zeros((n + 1 if k == "resid" else n, heads if k == "head" else t)) for k in kinds}
    for layer in range(n):  # the sites of block `layer` and the residual stream entering it
        parts, edits = [], {}
        if "resid" in kinds:
            parts.append(("resid", _patched_resid(corr[("resid", layer)], clean[("resid", layer)])))
        for kind in ("attn", "mlp", "head"):
            if kind in kinds:
                width = heads if kind == "head" else t
                first = sum(len(x) for _, x in parts)
                edits[site_name(base, kind, layer)] = _row_patch(kind, clean[(kind, layer)], first, width)
                parts.append((kind, corr[("resid", layer)].expand(width, -1, -1)))
        last = base.encoder(torch.cat([x for _, x in parts]), mask, start_layer=layer,
                            interventions=Interventions(edits))[0]
        values = normalise(metric(model, last))
        first = 0
        for kind, x in parts:  # row `layer`: resid's is the stream entering the block, the others' the block itself
            effects[kind][layer] = values[first:first + len(x)]
            first += len(x)
        if progress is not None:
            progress(layer + 1, n + 1)
    if "resid" in kinds:  # the last block's output (after a pre-LN stack's final LayerNorm): only the head reads it
        effects["resid"][n] = normalise(metric(model, _patched_resid(corr[("resid", n)], clean[("resid", n)])))
    if progress is not None:
        progress(n + 1, n + 1)
    return PatchingResult(effects, m_clean, m_corr)
