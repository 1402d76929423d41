"""SAEs on disk in SAELens's layout (``sae_lens`` 6.x ``SAE.save_model`` / ``SAE.load_from_disk``), so a SAELens
user loads what the app trained, and the reverse.

A folder holds ``cfg.json`` and ``sae_weights.safetensors`` (``W_enc (d_in, d_sae)``, ``b_enc (d_sae,)``,
``W_dec (d_sae, d_in)``, ``b_dec (d_in,)``), plus ``metrics.json`` (what :mod:`bertcore.sae.metrics` measured, if
any). ``cfg.json`` has SAELens's fields: ``architecture: "topk"``, ``d_in``, ``d_sae``, ``k``, ``dtype`` (the
compute dtype: fp16 weights are loaded as float32), ``apply_b_dec_to_input: true``, ``normalize_activations:
"none"``, ``rescale_acts_by_decoder_norm: false``, and ``metadata`` with ``hook_name`` (the transformers module
whose output the SAE reads, 0-based: ``bert.encoder.layer.3`` is the output of block 3, bertcore's site
:func:`site` gives: ``blocks.3.hook_normalized_resid_post`` for a post-LN BERT), ``model_name`` and
``norm_scaling_factor``.

Numbering: an SAE's ``layer`` is the 0-based BLOCK whose output it reads (``encoder.layer[layer]``, ``0..L-1``, as
``hook_name``'s number). What is written for people and kept on disk names it by :func:`label`, ``layer + 1`` (the
``hidden_states`` index of that output, the UI's "layer 2" for block 1): the folders ``layer-<label>/``
(:func:`folder_name`; the shipped ``layer-2``, ``layer-4``, ``layer-6`` are blocks 1, 3, 5), ``metrics.json``'s
``"layer"``, a training run's ``L<label>/...`` measures and its checkpoints' optimizer states.

The input normalisation (:class:`~bertcore.sae.model.TopKSAE`'s ``norm_scale`` ``c``) is *folded* into the
weights on saving, exactly as SAELens's ``fold_activation_norm_scaling_factor`` does (``W_enc * c``, ``W_dec / c``,
``b_dec / c``, then ``normalize_activations: "none"``): any loader that reads the two files computes the same
feature activations and reconstruction on the raw hidden states, with no extra step. The factor is also written
under ``metadata.norm_scaling_factor`` (the name of SAELens's pretrained-SAE directory) so that :func:`load`
unfolds it again and gets unit-norm decoder rows back; a SAELens file without it loads with ``c = 1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..modeling.checkpoint import CheckpointError, atomic_write_text, read_state_dict, save_safetensors
from .model import TopKSAE

CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"
METRICS_FILE = "metrics.json"
WEIGHT_NAMES = ("W_enc", "b_enc", "W_dec", "b_dec")
SAE_LENS_VERSION = "6.54.12"
DTYPES = {"float32": torch.float32, "float16": torch.float16}


class SAEError(ValueError):
    """An SAE folder that cannot be read or does not fit the model (the message says which and why)."""


def _check_block(layer: int, num_layers: int | None) -> None:
    if not (0 <= int(layer) and (num_layers is None or int(layer) < num_layers)):
        valid = "0..L-1" if num_layers is None else f"0..{num_layers - 1}"
        raise SAEError(f"an SAE's layer is the 0-based block whose output it reads, {valid}; got {layer}")


def site(config, layer: int) -> str:
    """The :mod:`bertcore.modeling.interventions` site an SAE of block ``layer`` (0-based, ``0..L-1``) reads: the
    output of block ``layer`` as the next block reads it (``blocks.{layer}.hook_normalized_resid_post`` post-LN,
    ``blocks.{layer}.hook_resid_post`` pre-LN, before a final LayerNorm): ``hidden_states[layer + 1]``.

    Raises:
        SAEError: a block outside ``0..L-1`` (a ``ValueError``; the message names the range).
    """
    from ..modeling.interventions import block_output_site
    _check_block(layer, config.num_hidden_layers)
    return block_output_site(config, int(layer))


def hook_name(layer: int, num_layers: int | None = None) -> str:
    """The transformers module whose output an SAE of block ``layer`` (0-based) reads: ``bert.encoder.layer.{layer}``
    (:func:`site` is bertcore's name of it).

    Raises:
        SAEError: a negative block, or one outside ``0..num_layers-1`` when ``num_layers`` is given.
    """
    _check_block(layer, num_layers)
    return f"bert.encoder.layer.{int(layer)}"


def label(layer: int) -> int:
    """The number people and files name the SAE of block ``layer`` by: ``layer + 1``, the ``hidden_states`` index it
    reads (block 1 is "layer 2", its folder ``layer-2``). Raises :class:`SAEError` for a negative block."""
    _check_block(layer, None)
    return int(layer) + 1


def folder_name(layer: int) -> str:
    """The folder of the SAE of block ``layer`` in a run or beside a model: ``layer-<label>`` (block 1: ``layer-2``)."""
    return f"layer-{label(layer)}"


def layer_of(name: str) -> int:
    """The inverse of :func:`hook_name`: ``bert.encoder.layer.3`` (or ``encoder.layer.3``) -> block 3.

    Raises:
        SAEError: a hook name that is not a BERT layer's output.
    """
    parts = str(name).split(".")
    if len(parts) >= 3 and parts[-3] == "encoder" and parts[-2] == "layer" and parts[-1].isdigit():
        return int(parts[-1])
    raise SAEError(f"the SAE reads {name!r}, which is not the output of a BERT layer "
                   "(bert.encoder.layer.<i>, as transformers names it)")


def save(sae: TopKSAE, folder: str | Path, layer: int, *, model_name: str = "", dtype: str = "float32",
         metadata: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
         num_layers: int | None = None) -> Path:
    """Write ``sae`` in SAELens's layout (the normalisation folded in; weights stored in ``dtype``).

    Args:
        layer: the 0-based block whose output the SAE reads (``hook_name`` is ``bert.encoder.layer.{layer}``);
            checked against ``0..num_layers-1`` when ``num_layers`` (the model's) is given, else only ``>= 0``.
        dtype: ``"float32"`` or ``"float16"`` (storage; ``cfg.json`` says float32, the dtype to compute in).
        metadata: more ``metadata`` fields (how it was trained); metrics: written to ``metrics.json``.
    Returns:
        the folder.
    """
    if dtype not in DTYPES:
        raise SAEError(f"dtype must be one of {sorted(DTYPES)}; got {dtype!r}")
    name = hook_name(layer, num_layers)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    c = float(sae.norm_scale)
    with torch.no_grad():
        folded = {"W_enc": sae.W_enc * c, "b_enc": sae.b_enc, "W_dec": sae.W_dec / c, "b_dec": sae.b_dec / c}
    save_safetensors({k: v.detach().to("cpu", DTYPES[dtype]) for k, v in folded.items()}, folder / WEIGHTS_FILE)
    cfg = {"architecture": "topk", "d_in": sae.d_in, "d_sae": sae.d_sae, "k": sae.k, "dtype": "float32",
           "device": "cpu", "apply_b_dec_to_input": True, "normalize_activations": "none",
           "reshape_activations": "none", "rescale_acts_by_decoder_norm": False,
           "metadata": {"sae_lens_version": SAE_LENS_VERSION, "sae_lens_training_version": None,
                        "model_name": model_name, "hook_name": name, "hook_head_index": None,
                        "prepend_bos": True, "norm_scaling_factor": c, "weights_dtype": dtype,
                        **(metadata or {})}}
    atomic_write_text(folder / CFG_FILE, json.dumps(cfg, indent=1))
    if metrics is not None:
        atomic_write_text(folder / METRICS_FILE, json.dumps(metrics, indent=1))
    return folder


def read_json_object(path: Path, what: str = "an SAE folder") -> dict[str, Any]:
    """The JSON object in ``path`` (a ``cfg.json`` of ``what``).

    Raises:
        SAEError: a missing or unreadable file, or one that holds no JSON object.
    """
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SAEError(f"{path} not found: {what} holds cfg.json and {WEIGHTS_FILE} (SAELens's layout)") from exc
    except (OSError, ValueError) as exc:
        raise SAEError(f"{path} is not readable JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise SAEError(f"{path} does not hold a JSON object")
    return cfg


def read_weights(folder: Path, shapes: dict[str, tuple[int, ...]], what: str = "SAE") -> dict[str, torch.Tensor]:
    """The tensors of ``folder``'s weights file, each checked against ``shapes`` (what ``cfg.json`` says).

    Raises:
        SAEError: a missing, truncated or corrupt file; a tensor missing or of another shape.
    """
    try:
        state = read_state_dict(folder / WEIGHTS_FILE)
    except CheckpointError as exc:
        raise SAEError(f"the {what}'s weights cannot be read: {exc}") from exc
    for name, shape in shapes.items():
        if name not in state:
            raise SAEError(f"{folder / WEIGHTS_FILE} has no tensor {name!r} (it holds {sorted(state)})")
        if tuple(state[name].shape) != shape:
            raise SAEError(f"{folder / WEIGHTS_FILE}: {name} has shape {tuple(state[name].shape)}, cfg.json says "
                           f"{shape}")
    return state


def read_cfg(folder: str | Path) -> dict[str, Any]:
    """``cfg.json`` of an SAE folder, checked (architecture topk, sizes, k, hook name).

    Raises:
        SAEError: missing or unreadable file, another architecture, a field missing or out of range.
    """
    path = Path(folder) / CFG_FILE
    cfg = read_json_object(path)
    if cfg.get("architecture") != "topk":
        raise SAEError(f"{path}: only TopK SAEs are supported (architecture 'topk'); got {cfg.get('architecture')!r}")
    for name in ("d_in", "d_sae", "k"):
        if not isinstance(cfg.get(name), int) or cfg[name] < 1:
            raise SAEError(f"{path}: field {name!r} must be a positive integer; got {cfg.get(name)!r}")
    if cfg["k"] > cfg["d_sae"]:
        raise SAEError(f"{path}: k ({cfg['k']}) is larger than the number of latents ({cfg['d_sae']})")
    if cfg.get("normalize_activations", "none") != "none":
        raise SAEError(f"{path}: normalize_activations {cfg['normalize_activations']!r} is not supported "
                       "(fold the factor into the weights: SAELens's fold_activation_norm_scaling_factor)")
    hook = (cfg.get("metadata") or {}).get("hook_name") or cfg.get("hook_name")
    layer_of(hook)
    return cfg


def load(folder: str | Path) -> tuple[TopKSAE, dict[str, Any]]:
    """Read an SAE folder: ``(sae, cfg)``; ``cfg["layer"]`` is the 0-based block it reads (from ``hook_name``).

    Raises:
        SAEError: any problem of :func:`read_cfg`; a missing, truncated or corrupt weights file; weights missing or
            of the wrong shape.
    """
    folder = Path(folder)
    cfg = read_cfg(folder)
    d_in, d_sae = cfg["d_in"], cfg["d_sae"]
    state = read_weights(folder, {"W_enc": (d_in, d_sae), "b_enc": (d_sae,), "W_dec": (d_sae, d_in), "b_dec": (d_in,)})
    metadata = cfg.get("metadata") or {}
    c = float(metadata.get("norm_scaling_factor") or 1.0)
    sae = TopKSAE(d_in, d_sae, cfg["k"], norm_scale=c)
    with torch.no_grad():
        sae.W_enc.copy_(state["W_enc"].float() / c)
        sae.b_enc.copy_(state["b_enc"].float())
        sae.W_dec.copy_(state["W_dec"].float() * c)
        sae.b_dec.copy_(state["b_dec"].float() * c)
    sae.eval()
    cfg["layer"] = layer_of(metadata.get("hook_name") or cfg.get("hook_name"))
    return sae, cfg


def read_metrics(folder: str | Path) -> dict[str, Any] | None:
    """``metrics.json`` beside the weights, or None."""
    try:
        return json.loads((Path(folder) / METRICS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_fits(cfg: dict[str, Any], hidden_size: int, num_layers: int) -> None:
    """Raise :class:`SAEError` when an SAE cannot read this model: ``d_in`` is not the hidden size, or its block
    (``cfg["layer"]``, 0-based) is not one of the model's ``0..num_layers-1``."""
    if cfg["d_in"] != hidden_size:
        raise SAEError(f"this SAE reads vectors of size {cfg['d_in']} (d_in) but the model's hidden size is "
                       f"{hidden_size}: it was trained on another model")
    if not 0 <= cfg["layer"] < num_layers:
        raise SAEError(f"this SAE reads block {cfg['layer']} (bert.encoder.layer.{cfg['layer']}) but the model has "
                       f"{num_layers} layers (blocks 0..{num_layers - 1})")


def write_metrics(folder: str | Path, metrics: dict[str, Any]) -> None:
    """Write ``metrics.json`` beside the weights (atomically)."""
    atomic_write_text(Path(folder) / METRICS_FILE, json.dumps(metrics, indent=1))
