"""Transcoders: a wider, sparse stand-in for one feed-forward block (Dunefsky et al. 2024, "Transcoders find
interpretable LLM feature circuits"; the per-layer transcoders of Ameisen et al. 2025, "Circuit tracing").

A transcoder reads what block ``l``'s feed-forward sub-layer reads, :func:`sites`' input (post-LN:
``blocks.{l}.ln1.hook_out``; pre-LN: ``blocks.{l}.ln2.hook_out``), and predicts what it writes,
``blocks.{l}.hook_mlp_out``. With the input scaled by ``c_in`` and the output by ``c_out`` (each to mean norm
``sqrt(d)`` on the training data, as the SAEs' inputs)::

    pre   = (c_in x) @ W_enc + b_enc                                   (..., d_sae)
    z     = ReLU(pre) * (pre > threshold)                               JumpReLU: at most the latents above it
    y_hat = (z @ W_dec + b_dec + (c_in x) @ W_skip^T) / c_out           (..., d_out) in the model's units

``W_skip`` (``(d_out, d_in)``, zero at the start) carries the block's linear part, so the latents spend themselves
on the rest (SAELens's ``SkipTranscoder``). Training selects latents by BatchTopK (Bussmann et al. 2024, "BatchTopK
sparse autoencoders", section 3): the ``k x N`` largest positive pre-activations of a batch of N tokens are kept,
so a token may have more or fewer than ``k``; ``threshold`` is the running mean of the smallest kept value, and at
inference it replaces the batch's choice: the trained transcoder is a JumpReLU transcoder with one threshold, the
``jumprelu_skip_transcoder`` that SAELens loads (:func:`save`, :func:`load`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..modeling.checkpoint import atomic_write_text, save_safetensors
from .io import CFG_FILE, DTYPES, METRICS_FILE, SAE_LENS_VERSION, WEIGHTS_FILE, SAEError, read_json_object, read_weights

ARCHITECTURE = "jumprelu_skip_transcoder"
THRESHOLD_MOMENTUM = 0.99  #: the running mean's weight on its past (about the last 100 batches)


def sites(config, layer: int) -> tuple[str, str]:
    """``(input site, output site)`` of block ``layer``'s feed-forward sub-layer, the names of
    :mod:`bertcore.modeling.interventions`.

    Raises:
        ValueError: ``layer`` outside ``0..num_hidden_layers - 1``.
    """
    n = config.num_hidden_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ValueError(f"the model has {n} blocks, numbered 0..{n - 1}; got {layer!r}")
    norm = "ln2" if config.pre_layer_norm else "ln1"
    return f"blocks.{layer}.{norm}.hook_out", f"blocks.{layer}.hook_mlp_out"


def hook_names(layer: int, pre_layer_norm: bool = False) -> tuple[str, str]:
    """The transformers modules whose outputs are :func:`sites` of a BERT (``hook_name``, ``hook_name_out`` of the
    SAELens file): post-LN ``bert.encoder.layer.{l}.attention.output`` (its LayerNorm's output) and
    ``bert.encoder.layer.{l}.output.dense``; pre-LN (transformers' RobertaPreLayerNorm)
    ``...intermediate.LayerNorm`` and ``...output.dense``."""
    base = f"bert.encoder.layer.{int(layer)}"
    return (f"{base}.intermediate.LayerNorm" if pre_layer_norm else f"{base}.attention.output",
            f"{base}.output.dense")


@dataclass
class TranscoderOutput:
    """One training forward pass of :class:`Transcoder`, in the scaled units. ``x (N, d_in)`` the scaled input;
    ``target (N, d_out)`` the scaled output to predict and ``x_hat`` its prediction; ``pre (N, d_sae)``; the kept
    latents as ``rows`` / ``cols`` (token, latent) long and ``values`` (> 0)."""

    x: torch.Tensor
    target: torch.Tensor
    x_hat: torch.Tensor
    pre: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor
    values: torch.Tensor

    def fired(self) -> torch.Tensor:
        """The latents active on some token, ``(M,)`` long."""
        return self.cols.unique()

    def l0(self) -> float:
        """Mean number of active latents per token."""
        return len(self.values) / max(1, self.x.shape[0])


class BatchTopK:
    """How a training batch's latents are chosen (Bussmann et al. 2024, BatchTopK): the ``k x N`` largest positive
    activations of the batch's ``N`` rows together, and the lowest of them (the threshold's running mean follows
    it). This one sees the rows of one process."""

    def select(self, activations: torch.Tensor, k: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(values, flat indices)`` of the chosen entries of ``activations (N * d_sae,)`` (after the ReLU): every
        positive one at least the ``k x N``-th largest (ties at that cut all kept: a token served twice in a batch
        gives equal values, and a choice among them would depend on how the batch is split)."""
        cut = activations.detach().topk(min(k * rows, activations.numel()), sorted=False).values.min()
        return self.above(activations, cut)

    @staticmethod
    def above(activations: torch.Tensor, cut: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = ((activations >= cut) & (activations > 0)).nonzero().flatten()
        return activations[flat], flat

    def lowest(self, values: torch.Tensor) -> torch.Tensor | None:
        """The smallest chosen value, ``()``; None when nothing was chosen."""
        return values.min() if len(values) else None


class Transcoder(nn.Module):
    """A JumpReLU skip transcoder trained by BatchTopK (module docstring), float32 parameters.

    Args:
        d_in, d_out: the sizes it reads and writes (384 and 384 for MiniLM); d_sae: latents; k: the latents kept per
            token on average during training.
        in_scale, out_scale: ``c_in``, ``c_out``. skip: learn ``W_skip`` (else it stays 0). seed: initialisation.
    Raises:
        ValueError: a size or k out of range, a scale not positive.
    """

    def __init__(self, d_in: int, d_out: int, d_sae: int, k: int, in_scale: float = 1.0, out_scale: float = 1.0,
                 skip: bool = True, seed: int = 0) -> None:
        super().__init__()
        if min(d_in, d_out, d_sae) < 1:
            raise ValueError(f"a transcoder needs positive sizes; got d_in {d_in}, d_out {d_out}, d_sae {d_sae}")
        if not 1 <= k <= d_sae:
            raise ValueError(f"k must be between 1 and the number of latents ({d_sae}); got {k}")
        for name, value in (("in_scale", in_scale), ("out_scale", out_scale)):
            if not value > 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be a positive number; got {value}")
        self.d_in, self.d_out, self.d_sae, self.k = d_in, d_out, d_sae, k
        gen = torch.Generator().manual_seed(seed)
        w_dec = torch.randn(d_sae, d_out, generator=gen)
        self.W_dec = nn.Parameter(w_dec / w_dec.norm(dim=1, keepdim=True))  # (d_sae, d_out), unit rows
        w_enc = torch.randn(d_in, d_sae, generator=gen)
        self.W_enc = nn.Parameter(w_enc / w_enc.norm(dim=0, keepdim=True) / math.sqrt(k))  # (d_in, d_sae)
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.b_dec = nn.Parameter(torch.zeros(d_out))
        self.W_skip = nn.Parameter(torch.zeros(d_out, d_in), requires_grad=skip)
        self.register_buffer("in_scale", torch.tensor(float(in_scale)))
        self.register_buffer("out_scale", torch.tensor(float(out_scale)))
        self.register_buffer("threshold", torch.tensor(0.0))

    def pre_acts(self, x_scaled: torch.Tensor) -> torch.Tensor:
        """``(..., d_in)`` scaled input -> ``(..., d_sae)`` pre-activations."""
        return x_scaled @ self.W_enc + self.b_enc

    def _decode(self, x_scaled: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
                values: torch.Tensor) -> torch.Tensor:
        """``sum of values x W_dec[cols]`` into each row, plus ``b_dec`` and the skip path: ``(N, d_out)`` scaled."""
        out = x_scaled @ self.W_skip.T + self.b_dec  # (N, d_out)
        return out.index_add(0, rows, values[:, None] * self.W_dec[cols])

    def forward(self, x: torch.Tensor, y: torch.Tensor, batch_topk: "BatchTopK | None" = None) -> TranscoderOutput:
        """``x (N, d_in)``, ``y (N, d_out)`` in the model's units -> :class:`TranscoderOutput`. In training mode the
        latents are chosen by BatchTopK over the batch (``batch_topk``: over this process's rows, the default, or
        over every rank's, :class:`bertcore.sae.distributed.GlobalBatchTopK`) and the threshold's running mean moves; in
        eval mode by the threshold."""
        xs, ys = x * self.in_scale, y * self.out_scale
        pre = self.pre_acts(xs)  # (N, d_sae)
        if self.training:
            choose = batch_topk or BatchTopK()
            values, flat = choose.select(pre.relu().flatten(), self.k, len(x))
            rows, cols = flat // self.d_sae, flat % self.d_sae
            low = choose.lowest(values.detach())
            if low is not None:
                with torch.no_grad():
                    first = float(self.threshold) == 0.0
                    self.threshold.copy_(low if first else THRESHOLD_MOMENTUM * self.threshold
                                         + (1 - THRESHOLD_MOMENTUM) * low)
        else:
            rows, cols = ((pre > self.threshold) & (pre > 0)).nonzero(as_tuple=True)
            values = pre[rows, cols]
        return TranscoderOutput(xs, ys, self._decode(xs, rows, cols, values), pre, rows, cols, values)

    # -- the public views, in the model's units (JumpReLU: what SAELens computes from the saved file)
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent activations ``(..., d_sae)`` of feed-forward inputs ``(..., d_in)``."""
        pre = self.pre_acts(x * self.in_scale)
        return pre.relu() * (pre > self.threshold)

    def decode(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Latent activations ``(..., d_sae)`` and the inputs ``(..., d_in)`` (for the skip path) -> the predicted
        feed-forward output ``(..., d_out)``."""
        return (z @ self.W_dec + self.b_dec + (x * self.in_scale) @ self.W_skip.T) / self.out_scale

    kind = "transcoder"  #: what it reads (:data:`bertcore.sae.stream.READERS`)

    def measure(self, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(target, z, prediction)`` of ``(N, d_in + d_out)`` input / output pairs
        (:func:`bertcore.sae.stream.feed_forward_pairs`), in the model's units."""
        x, y = pairs[:, :self.d_in], pairs[:, self.d_in:]
        z = self.encode(x)
        return y, z, self.decode(z, x)

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """``x (..., d_in)`` -> the predicted ``hook_mlp_out`` ``(..., d_out)``, the input's dtype: what is spliced
        into the model in place of the block's feed-forward output."""
        xf = x.to(self.W_enc.dtype)
        return self.decode(self.encode(xf), xf).to(x.dtype)

    # -- training helpers, as :class:`bertcore.sae.model.TopKSAE`'s
    @torch.no_grad()
    def normalise_decoder(self) -> None:
        self.W_dec /= self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        if self.W_dec.grad is not None:
            self.W_dec.grad -= (self.W_dec.grad * self.W_dec).sum(dim=1, keepdim=True) * self.W_dec


@torch.no_grad()
def keep_latents(tc: Transcoder, latents: torch.Tensor) -> Transcoder:
    """A copy of ``tc`` with only ``latents`` (``(M,)`` long indices or a ``(d_sae,)`` bool mask): ``W_enc``'s
    columns, ``b_enc`` and ``W_dec``'s rows of those latents, the rest (skip path, biases, threshold, scales) as is.
    On an input where none of the dropped latents is active its output is ``tc``'s exactly; used to drop the latents
    never active on training text (the dictionary they leave behind is what a smaller one would be).

    Raises:
        ValueError: no latent kept, or an index outside ``0..d_sae - 1``.
    """
    index = torch.as_tensor(latents, device=tc.W_enc.device)
    if index.dtype == torch.bool:
        index = index.nonzero().flatten()
    index = index.long()
    if index.numel() == 0:
        raise ValueError("keep_latents needs at least one latent to keep")
    if int(index.min()) < 0 or int(index.max()) >= tc.d_sae:
        raise ValueError(f"latent indices must be in 0..{tc.d_sae - 1}")
    out = Transcoder(tc.d_in, tc.d_out, len(index), min(tc.k, len(index)), float(tc.in_scale), float(tc.out_scale),
                     skip=bool(tc.W_skip.requires_grad))
    out.W_enc.copy_(tc.W_enc[:, index])
    out.b_enc.copy_(tc.b_enc[index])
    out.W_dec.copy_(tc.W_dec[index])
    out.b_dec.copy_(tc.b_dec)
    out.W_skip.copy_(tc.W_skip)
    out.threshold.copy_(tc.threshold)
    return out.train(tc.training)


def aux_k_loss(tc: Transcoder, out: TranscoderOutput, dead: torch.Tensor, k_aux: int) -> torch.Tensor:
    """AuxK (Gao et al. 2024, section A.2) for a transcoder: the residual error ``target - x_hat`` reconstructed by the
    ``k_aux`` largest pre-activations of the dead latents, decoded without ``b_dec``; 0 when none is dead."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return out.x_hat.new_zeros(())
    residual = (out.target - out.x_hat).detach()
    values, indices = out.pre.masked_fill(~dead, float("-inf")).topk(min(k_aux, n_dead), dim=-1, sorted=False)
    e_hat = torch.nn.functional.embedding_bag(indices, tc.W_dec, per_sample_weights=values.relu(), mode="sum")
    return (e_hat - residual).pow(2).sum(-1).mean()


# ----------------------------------------------------------------------------- files (SAELens's layout)
def save(tc: Transcoder, folder: str | Path, layer: int, *, pre_layer_norm: bool = False, model_name: str = "",
         dtype: str = "float32", metadata: dict[str, Any] | None = None,
         metrics: dict[str, Any] | None = None) -> Path:
    """Write ``tc`` as SAELens's ``jumprelu_skip_transcoder``: ``cfg.json`` (``d_in``, ``d_out``, ``d_sae``,
    ``hook_name``, ``hook_name_out``) and ``sae_weights.safetensors`` (``W_enc``, ``b_enc``, ``W_dec``, ``b_dec``,
    ``W_skip``, ``threshold`` per latent), the scales folded into the weights (so the file computes on the raw
    activations) and kept in ``metadata`` (``norm_scaling_factor_in`` / ``_out``) for :func:`load`.

    Raises:
        SAEError: an unknown ``dtype``.
    """
    if dtype not in DTYPES:
        raise SAEError(f"dtype must be one of {sorted(DTYPES)}; got {dtype!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    c_in, c_out = float(tc.in_scale), float(tc.out_scale)
    with torch.no_grad():
        folded = {"W_enc": tc.W_enc * c_in, "b_enc": tc.b_enc, "W_dec": tc.W_dec / c_out, "b_dec": tc.b_dec / c_out,
                  "W_skip": tc.W_skip * (c_in / c_out), "threshold": tc.threshold.expand(tc.d_sae).clone()}
    save_safetensors({k: v.detach().to("cpu", DTYPES[dtype]) for k, v in folded.items()}, folder / WEIGHTS_FILE)
    hook_in, hook_out = hook_names(layer, pre_layer_norm)
    cfg = {"architecture": ARCHITECTURE, "d_in": tc.d_in, "d_out": tc.d_out, "d_sae": tc.d_sae, "dtype": "float32",
           "device": "cpu", "apply_b_dec_to_input": False, "normalize_activations": "none",
           "reshape_activations": "none",
           "metadata": {"sae_lens_version": SAE_LENS_VERSION, "sae_lens_training_version": None,
                        "model_name": model_name, "hook_name": hook_in, "hook_name_out": hook_out,
                        "hook_head_index": None, "prepend_bos": True, "layer": int(layer), "k": tc.k,
                        "skip": bool(tc.W_skip.requires_grad),
                        "norm_scaling_factor_in": c_in, "norm_scaling_factor_out": c_out, "weights_dtype": dtype,
                        **(metadata or {})}}
    atomic_write_text(folder / CFG_FILE, json.dumps(cfg, indent=1))
    if metrics is not None:
        atomic_write_text(folder / METRICS_FILE, json.dumps(metrics, indent=1))
    return folder


def load(folder: str | Path) -> tuple[Transcoder, dict[str, Any]]:
    """Read a transcoder folder written by :func:`save`: ``(transcoder, cfg)``, ``cfg["layer"]`` its block.

    Raises:
        SAEError: a missing or unreadable ``cfg.json``, another architecture, a size missing; a missing, truncated
            or corrupt weights file; a tensor missing or of the wrong shape.
    """
    folder = Path(folder)
    path = folder / CFG_FILE
    cfg = read_json_object(path, "a transcoder folder")
    if cfg.get("architecture") != ARCHITECTURE:
        raise SAEError(f"{path}: not a {ARCHITECTURE} (architecture {cfg.get('architecture')!r})")
    for name in ("d_in", "d_out", "d_sae"):
        if not isinstance(cfg.get(name), int) or cfg[name] < 1:
            raise SAEError(f"{path}: field {name!r} must be a positive integer; got {cfg.get(name)!r}")
    meta = cfg.get("metadata") or {}
    if not isinstance(meta.get("layer"), int):
        raise SAEError(f"{path}: metadata.layer (the block it replaces) is missing")
    d_in, d_out, d_sae = cfg["d_in"], cfg["d_out"], cfg["d_sae"]
    state = read_weights(folder, {"W_enc": (d_in, d_sae), "b_enc": (d_sae,), "W_dec": (d_sae, d_out),
                                  "b_dec": (d_out,), "W_skip": (d_out, d_in), "threshold": (d_sae,)}, "transcoder")
    c_in, c_out = float(meta.get("norm_scaling_factor_in", 1.0)), float(meta.get("norm_scaling_factor_out", 1.0))
    tc = Transcoder(d_in, d_out, d_sae, int(meta.get("k", 1)), in_scale=c_in, out_scale=c_out,
                    skip=bool(meta.get("skip", True)))
    with torch.no_grad():
        tc.W_enc.copy_(state["W_enc"].float() / c_in)
        tc.b_enc.copy_(state["b_enc"].float())
        tc.W_dec.copy_(state["W_dec"].float() * c_out)
        tc.b_dec.copy_(state["b_dec"].float() * c_out)
        tc.W_skip.copy_(state["W_skip"].float() * (c_out / c_in))
        tc.threshold.copy_(state["threshold"].float().max())
    tc.eval()
    cfg["layer"] = meta["layer"]
    return tc, cfg


def set_folders(folder: str | Path) -> dict[int, Path]:
    """``{block: folder}`` of a transcoder set, without loading weights: each ``layer-<n>/`` folder's ``cfg.json``
    names its 0-based block in ``metadata.layer``. Folders whose ``cfg.json`` cannot be read are left out
    (:func:`load_set` says why)."""
    from .io import SAEError, read_json_object

    out = {}
    for sub in sorted(Path(folder).glob("layer-*")):
        try:
            out[int(read_json_object(sub / "cfg.json")["metadata"]["layer"])] = sub
        except (SAEError, KeyError, TypeError, ValueError):
            continue
    return out


def load_set(folder: str | Path, hidden_size: int | None = None,
             num_layers: int | None = None) -> dict[int, Transcoder]:
    """Every transcoder of a set folder (one ``layer-<n>/`` folder per block, as a training run's checkpoint or a
    shipped set holds them): ``{block: Transcoder}``, blocks from 0.

    Args:
        hidden_size, num_layers: the model's; when given, each transcoder's ``d_in`` / ``d_out`` must equal
            ``hidden_size`` and the set must hold every block ``0 .. num_layers - 1`` once.
    Raises:
        SAEError: no ``layer-*`` folder, an unreadable one (:func:`load`'s reasons, with the folder named), a
            ``d_in`` or ``d_out`` that is not the model's hidden size, a block the model lacks, missing or twice.
    """
    folder = Path(folder)
    subfolders = sorted(folder.glob("layer-*")) if folder.is_dir() else []
    if not subfolders:
        raise SAEError(f"{folder} holds no transcoder folders (layer-<n>/): train them with `python -m bertcore.sae "
                       "train --kind transcoder`")
    out: dict[int, Transcoder] = {}
    for sub in subfolders:
        tc, cfg = load(sub)
        block = int(cfg["layer"])
        if hidden_size is not None and (tc.d_in != hidden_size or tc.d_out != hidden_size):
            raise SAEError(f"{sub}: d_in {tc.d_in} / d_out {tc.d_out} do not match the model's hidden size "
                           f"{hidden_size}: these transcoders were trained on another model")
        if block in out:
            raise SAEError(f"{folder}: two transcoders replace block {block}")
        if num_layers is not None and not 0 <= block < num_layers:
            raise SAEError(f"{sub}: block {block} does not exist in a model of {num_layers} blocks")
        out[block] = tc
    if num_layers is not None and sorted(out) != list(range(num_layers)):
        missing = sorted(set(range(num_layers)) - set(out))
        raise SAEError(f"{folder}: no transcoder for block(s) {missing}; an attribution graph needs one per block")
    return out
