"""Reading and writing weights: HF checkpoint folders in, HF-loadable folders out.

- Weights are read with ``safetensors`` or ``torch.load(weights_only=True)`` only: a
  checkpoint never runs code (no arbitrary unpickling).
- HF state dicts are matched to our module tree with a strict key check and a
  :class:`LoadReport` (renamed / missing / unexpected / tied / ignored), as
  ``transformers.PreTrainedModel.from_pretrained`` does (``modeling_utils.py``).
- Every file is written atomically (temporary file in the same folder, fsync, ``os.replace``),
  so a process killed mid-write leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

from .config import BertConfig, ConfigError, read_json_object

# The models import this module (from_pretrained / save_pretrained), so it never imports them: a model
# here is any ``torch.nn.Module`` with a ``config`` and ``tied_keys`` (``bertcore.modeling.model.BertPreTrainedModel``).

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
SHARD_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# buffers that old checkpoints carry and that are rebuilt from the config
IGNORED_KEYS = re.compile(r"(^|\.)embeddings\.(position_ids|token_type_ids)$")
BACKBONE = re.compile(r"^(embeddings|encoder)\.")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the model (the message says which file and why)."""


@dataclass
class LoadReport:
    """How a checkpoint's keys were matched to a model's parameters.

    Attributes:
        renamed: ``(checkpoint key, model key)`` pairs (``gamma``->``weight``, prefix changes).
        missing: model keys absent from the checkpoint; they keep their fresh initialisation.
        unexpected: checkpoint keys the model has no place for; ignored.
        tied: model keys filled from the tensor they are tied to.
        ignored: buffers rebuilt from the config (``embeddings.position_ids``).
    """

    renamed: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    tied: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for people, e.g. ``"loaded; 4 missing (newly initialised): classifier.weight, ..."``."""
        parts = []
        for name, keys in (("missing (newly initialised)", self.missing), ("unexpected (ignored)", self.unexpected)):
            if keys:
                shown = ", ".join(keys[:4]) + (", ..." if len(keys) > 4 else "")
                parts.append(f"{len(keys)} {name}: {shown}")
        if self.renamed:
            parts.append(f"{len(self.renamed)} renamed")
        return "all weights matched" if not parts else "; ".join(parts)


# ----------------------------------------------------------------------------- atomic writes
def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)`` then move the result onto ``path`` atomically.

    The temporary file lives in the same folder (so ``os.replace`` is atomic), is fsynced
    before the rename, and is removed if ``write`` raises.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 text atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def save_safetensors(tensors: dict[str, torch.Tensor], path: str | Path,
                     metadata: dict[str, str] | None = None) -> None:
    """Write a safetensors file atomically; tensors are made contiguous and moved to the CPU."""
    data = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    atomic_write(path, lambda p: save_file(data, str(p), metadata={"format": "pt", **(metadata or {})}))


# ----------------------------------------------------------------------------- reading
def find_weights(folder: str | Path) -> list[Path]:
    """The weight files of an HF checkpoint folder (one file, or the shards its index lists).

    Raises:
        CheckpointError: the folder does not exist or holds no weights file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a folder")
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return [folder / name]
    for name in SHARD_INDEXES:
        index = folder / name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
            except (OSError, ValueError, KeyError, AttributeError) as exc:
                raise CheckpointError(f"cannot read shard index {index}: {exc}") from exc
            return [folder / s for s in shards]
    raise CheckpointError(f"no weights in {folder}: expected one of {', '.join(WEIGHT_FILES + SHARD_INDEXES)}")


def weights_error(path: Path, exc: BaseException) -> CheckpointError:
    """The error for a weights file that cannot be read: says "truncated" when the file is shorter than its header
    says (an interrupted copy, download or save), else gives the reader's own message."""
    detail = f"{type(exc).__name__}: {exc}".strip()
    text = str(exc).lower()
    if any(s in text for s in ("incomplete metadata", "not fully covered", "unexpected eof", "truncated",
                               "failed finding central directory", "header too small", "invalid header")):
        return CheckpointError(f"cannot read weights {path.name} in {path.parent}: the file is truncated or corrupt "
                               f"(an interrupted copy, download or save?); copy it again or pick another checkpoint "
                               f"({detail})")
    return CheckpointError(f"cannot read weights {path.name}: {detail}")


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Read tensors from a ``.safetensors`` file or a PyTorch ``.bin`` (weights only) to the CPU.

    Raises:
        CheckpointError: missing, truncated, corrupt, or not a mapping of tensors.
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path), device="cpu")
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch.load and safetensors raise many types on bad files
        raise weights_error(path, exc) from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path.name} is not a state dict (a mapping of names to tensors)")
    return state


def _rename(key: str) -> str:
    """Old TF-era names -> current ones (HF ``_fix_state_dict_key_on_load``)."""
    key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", key)
    return re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key)


def match_state_dict(model: torch.nn.Module,
                     state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], LoadReport]:
    """Map a checkpoint's keys onto ``model.state_dict()`` keys.

    Returns the tensors keyed as the model names them (complete only for keys the checkpoint
    had, plus tied keys) and the report. Shapes are checked.

    Raises:
        CheckpointError: a tensor of the wrong shape, or backbone (embeddings/encoder) weights missing.
    """
    report = LoadReport()
    own = model.state_dict()
    prefix = model.base_model_prefix
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        new = _rename(key)
        if IGNORED_KEYS.search(new):
            report.ignored.append(key)
            continue
        if new not in own:  # try adding / removing the base-model prefix
            if prefix and f"{prefix}.{new}" in own:
                new = f"{prefix}.{new}"
            elif new.startswith("bert.") and new[5:] in own:
                new = new[5:]
        if new not in own:
            report.unexpected.append(key)
            continue
        if new != key:
            report.renamed.append((key, new))
        if tuple(tensor.shape) != tuple(own[new].shape):
            raise CheckpointError(
                f"{key} has shape {tuple(tensor.shape)} but the model expects {tuple(own[new].shape)}: "
                "config.json does not describe these weights")
        out[new] = tensor
    for key, source in model.tied_keys.items():
        if key in own and key not in out and source in out:
            out[key] = out[source]
            report.tied.append(key)
    report.missing = [k for k in own if k not in out]
    strip = f"{prefix}." if prefix else ""
    backbone_missing = [k for k in report.missing if BACKBONE.match(k[len(strip):] if k.startswith(strip) else k)]
    if backbone_missing:
        raise CheckpointError(
            f"the checkpoint lacks {len(backbone_missing)} encoder weights (e.g. {backbone_missing[0]}); "
            "is it a BERT checkpoint?")
    return out, report


def read_config_json(folder: str | Path) -> dict:
    """The ``config.json`` of a folder as a dict.

    Raises:
        CheckpointError: missing, unreadable or not a JSON object.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"no config.json in {Path(folder)}: is this an HF BERT checkpoint folder?")
    try:
        return read_json_object(path)
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from exc


def read_folder_state(folder: str | Path, data: dict | None) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder in bertcore's names, whatever its format (``data``: its config.json
    dict, None when there is none): a RobertaPreLayerNorm folder is renamed back and its NSP file read too.

    Raises:
        CheckpointError: no weights, an unreadable file, or weights that bertcore cannot represent.
    """
    from . import families, hf_format

    folder = Path(folder)
    state: dict[str, torch.Tensor] = {}
    for file in find_weights(folder):
        state.update(read_state_dict(file))
    family = data.get("model_type") if data is not None else None
    if family in families.OTHER_FAMILIES:
        try:
            return families.state_from_hf(family, state)
        except ValueError as exc:
            raise CheckpointError(f"{folder}: {exc}") from exc
    if data is not None and hf_format.read_format(data) == hf_format.PRELN:
        try:
            state = hf_format.from_preln_state(state, hf_format.position_offset(data))
        except ValueError as exc:
            raise CheckpointError(f"{folder}: {exc}") from exc
        if (folder / hf_format.NSP_FILE).is_file():
            state.update(read_state_dict(folder / hf_format.NSP_FILE))
    return state


def load_pretrained(cls: type, path: str | Path, config: BertConfig | None = None, **config_changes):
    """Build ``cls`` from an HF folder; see :meth:`BertPreTrainedModel.from_pretrained`."""
    folder = Path(path)
    data = read_config_json(folder) if config is None or (folder / "config.json").is_file() else None
    if config is None:
        from .hf_format import config_from_dict

        try:
            config = config_from_dict(data)
        except ConfigError as exc:
            raise CheckpointError(f"{folder / 'config.json'}: {exc}") from exc
    if config_changes:
        config = config.replace(**config_changes)
    state = read_folder_state(folder, data)
    model = cls(config)
    matched, report = match_state_dict(model, state)
    full = model.state_dict()
    full.update(matched)
    model.load_state_dict(full, strict=True)
    model.tie_weights()
    model.load_report = report
    model.eval()
    return model


# ----------------------------------------------------------------------------- writing
def model_state_for_saving(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` without tied aliases (HF saves one copy of a tied tensor)."""
    return {k: v for k, v in model.state_dict().items() if k not in model.tied_keys}


def save_pretrained(model: torch.nn.Module, path: str | Path) -> None:
    """Write ``config.json`` (with ``architectures``) and ``model.safetensors`` into ``path``, in the format
    :func:`bertcore.modeling.hf_format.format_for` picks: plain BERT (post-LN), RobertaPreLayerNorm (pre-LN; the NSP
    head in :data:`bertcore.modeling.hf_format.NSP_FILE`), or bertcore's own (a model no transformers class computes;
    its config.json makes transformers refuse it). Whatever transformers loads from the folder computes this model's
    logits, or it raises. Each file is written atomically, the weights before the config.
    """
    from . import families, hf_format

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    name = type(model).__name__
    head = hf_format.OUR_CLASSES.get(name, "base")
    fmt = hf_format.format_for(model.config)
    state = model_state_for_saving(model)
    if fmt in families.OTHER_FAMILIES:  # RoBERTa, DistilBERT, ELECTRA, ModernBERT: the family's own names
        try:
            data = families.config_to_hf(model.config, head)
        except ValueError as exc:
            raise CheckpointError(f"cannot save a {name} as {fmt}: {exc}") from exc
        data[hf_format.GUARD_KEY] = hf_format.family_guard(fmt, head)  # transformers' Bert classes refuse it
        save_safetensors(families.state_to_hf(fmt, state, head), folder / "model.safetensors")
        (folder / hf_format.NSP_FILE).unlink(missing_ok=True)
        atomic_write_text(folder / "config.json", json.dumps(data, indent=2, sort_keys=True) + "\n")
        return
    nsp: dict[str, torch.Tensor] = {}
    if fmt == hf_format.PRELN:
        state, nsp = hf_format.to_preln_state(state, model.config, head)
    save_safetensors(state, folder / "model.safetensors")
    if nsp:
        save_safetensors(nsp, folder / hf_format.NSP_FILE, metadata={"bertcore": "NSP head (cls.seq_relationship)"})
    else:
        (folder / hf_format.NSP_FILE).unlink(missing_ok=True)
    data = hf_format.config_dict(model.config, head, name)
    atomic_write_text(folder / "config.json", json.dumps(data, indent=2, sort_keys=True) + "\n")
