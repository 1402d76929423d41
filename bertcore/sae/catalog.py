"""Which SAEs the app knows: the shipped ones beside the packaged fill-mask model (``models/minilm-mlm/sae/``) and
those that SAE training runs wrote (``<runs root>/<run>/sae/layer-<l>/``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..loading.precomputed import model_hash
from . import io as sae_io

SHIPPED_DIR = "sae"


@dataclass
class Entry:
    """One SAE folder: ``label`` for a picker, ``folder``, its checked ``cfg`` (``cfg["layer"]``: the 0-based block
    it reads; ``label`` names it by its folder, ``layer-<block + 1>``, as
    "layer 2" for block 1),
    ``same_model``: whether it was trained on exactly these model files (None: it does not say)."""

    label: str
    folder: Path
    cfg: dict[str, Any]
    same_model: bool | None


def _folders(model_folder: Path, runs_root: Path | None) -> list[tuple[str, Path]]:
    shipped = sorted((model_folder / SHIPPED_DIR).glob("layer-*"))
    found = [(f"shipped, layer {p.name.split('-')[-1]}", p) for p in shipped]
    if runs_root is not None and Path(runs_root).is_dir():
        for run in sorted(Path(runs_root).iterdir(), reverse=True):
            for p in sorted((run / "sae").glob("layer-*")) if (run / "sae").is_dir() else []:
                found.append((f"run {run.name}, layer {p.name.split('-')[-1]}", p))
    return found


def available(model_folder: str | Path, hidden_size: int, num_layers: int, runs_root: str | Path | None = None,
              problems: list[tuple[str, str]] | None = None) -> list[Entry]:
    """The readable SAE folders that fit this model (``d_in`` = its hidden size, a layer it has), shipped first.
    The others are left out; ``problems``, if given, receives ``(label, why)`` for each of them."""
    model_folder = Path(model_folder)
    try:
        here = model_hash(model_folder)
    except OSError:
        here = None
    out = []
    for label, folder in _folders(model_folder, Path(runs_root) if runs_root else None):
        try:
            cfg = sae_io.read_cfg(folder)
            cfg["layer"] = sae_io.layer_of((cfg.get("metadata") or {}).get("hook_name") or cfg.get("hook_name"))
            sae_io.check_fits(cfg, hidden_size, num_layers)
        except sae_io.SAEError as exc:
            if problems is not None:
                problems.append((label, str(exc)))
            continue
        trained_on = ((cfg.get("metadata") or {}).get("bert_explorer") or {}).get("model_hash")
        out.append(Entry(label, folder, cfg, None if trained_on is None or here is None else trained_on == here))
    return out


TRANSCODERS_DIR = "transcoders"


def _holds_transcoders(folder: Path) -> bool:
    """Whether ``folder``'s first ``layer-*/cfg.json`` names SAELens's transcoder architecture."""
    import json

    from .transcoder import ARCHITECTURE

    for cfg in sorted(folder.glob("layer-*/cfg.json"))[:1]:
        try:
            return json.loads(cfg.read_text(encoding="utf-8")).get("architecture") == ARCHITECTURE
        except (OSError, ValueError):
            return False
    return False


def transcoder_sets(model_folder: str | Path | None, runs_root: str | Path | None = None) -> list[tuple[str, Path]]:
    """The folders that hold a transcoder set (``layer-<n>/`` folders of transcoders), shipped first: ``(label,
    folder)`` for ``<model folder>/transcoders/``, then, newest run first, each run's final ``sae/`` folder (a
    finished transcoder run) or else its newest checkpoint (a run in progress). Readability and fit are checked when
    a set is loaded (:func:`bertcore.sae.transcoder.load_set`)."""
    found: list[tuple[str, Path]] = []
    if model_folder is not None and _holds_transcoders(Path(model_folder) / TRANSCODERS_DIR):
        found.append(("shipped transcoders", Path(model_folder) / TRANSCODERS_DIR))
    if runs_root is not None and Path(runs_root).is_dir():
        for run in sorted(Path(runs_root).iterdir(), reverse=True):
            if _holds_transcoders(run / SHIPPED_DIR):
                found.append((f"run {run.name}", run / SHIPPED_DIR))
                continue
            steps = sorted(p for p in (run / "checkpoints").glob("step-*") if _holds_transcoders(p)) \
                if (run / "checkpoints").is_dir() else []
            if steps:
                found.append((f"run {run.name}, {steps[-1].name} (in progress)", steps[-1]))
    return found
