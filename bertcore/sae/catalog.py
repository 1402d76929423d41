"""Which SAEs and transcoders the app knows, and how to read either from its folder.

SAEs: the shipped ones beside the packaged fill-mask model (``models/minilm-mlm/sae/``) and those that SAE training
runs wrote (``<runs root>/<run>/sae/layer-<l>/``). Transcoders: a shipped set beside a model
(``<model folder>/transcoders/layer-<l>/``) and those that transcoder training runs wrote (in the same ``sae/``
folder of a run). :func:`available` lists single folders of either kind (the Features page; the Projector asks for
SAEs only), :func:`transcoder_sets` whole sets (the Circuits page), :func:`load` reads one folder of either kind."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..loading.shipped_file import model_hash
from . import io as sae_io

SHIPPED_DIR = "sae"
TRANSCODERS_DIR = "transcoders"


@dataclass
class Entry:
    """One SAE or transcoder folder: ``label`` for a picker, ``folder``, its checked ``cfg`` (``cfg["layer"]``: the
    0-based block it reads; ``label`` names an SAE by its folder, ``layer-<block + 1>``, as "SAE, layer 2" for block
    1, and a transcoder by its block, "transcoder, block 1 (layer 2)"), ``kind`` (``"sae"`` or ``"transcoder"``),
    ``same_model``: whether it was trained on exactly these model files (None: it does not say)."""

    label: str
    folder: Path
    cfg: dict[str, Any]
    same_model: bool | None
    kind: str = "sae"


def kind_of(folder: str | Path) -> str:
    """``"transcoder"`` when ``folder``'s ``cfg.json`` names SAELens's ``jumprelu_skip_transcoder``, else ``"sae"``
    (which :func:`bertcore.sae.io.read_cfg` then checks).

    Raises:
        bertcore.sae.io.SAEError: a missing or unreadable ``cfg.json``.
    """
    from .transcoder import ARCHITECTURE

    cfg = sae_io.read_json_object(Path(folder) / sae_io.CFG_FILE)
    return "transcoder" if cfg.get("architecture") == ARCHITECTURE else "sae"


def load(folder: str | Path, hidden_size: int | None = None, num_layers: int | None = None):
    """Read an SAE or a transcoder folder, whichever it holds: ``(dictionary, cfg)``, the dictionary a
    :class:`~bertcore.sae.model.TopKSAE` or a :class:`~bertcore.sae.transcoder.Transcoder` (its ``kind`` says
    which), ``cfg["layer"]`` the 0-based block it reads.

    Args:
        hidden_size, num_layers: the model's; when given, the folder must fit it (``d_in``, and a transcoder's
            ``d_out``, equal to ``hidden_size``; the block one of ``0..num_layers - 1``).
    Raises:
        bertcore.sae.io.SAEError: an unreadable folder (:func:`bertcore.sae.io.load`'s or
            :func:`bertcore.sae.transcoder.load`'s reasons), or one that does not fit the model.
    """
    from . import transcoder

    if kind_of(folder) == "transcoder":
        dictionary, cfg = transcoder.load(folder)
    else:
        dictionary, cfg = sae_io.load(folder)
    if hidden_size is not None and num_layers is not None:
        check_fits(cfg, hidden_size, num_layers)
    return dictionary, cfg


def check_fits(cfg: dict[str, Any], hidden_size: int, num_layers: int) -> None:
    """:func:`bertcore.sae.io.check_fits` for either kind (a transcoder's ``d_out`` too).

    Raises:
        bertcore.sae.io.SAEError: a size that is not the model's hidden size, a block the model lacks.
    """
    sae_io.check_fits(cfg, hidden_size, num_layers)
    if cfg.get("d_out", hidden_size) != hidden_size:
        raise sae_io.SAEError(f"this transcoder writes vectors of size {cfg['d_out']} (d_out) but the model's "
                              f"hidden size is {hidden_size}: it was trained on another model")


def label(kind: str, block: int) -> str:
    """How a picker names a dictionary of block ``block`` (0-based): ``"SAE, layer <block + 1>"`` (the layer whose
    output it reads) or ``"transcoder, block <block> (layer <block + 1>)"`` (the block whose feed-forward sub-layer it
    replaces)."""
    shown = sae_io.label(block)
    return f"SAE, layer {shown}" if kind == "sae" else f"transcoder, block {int(block)} (layer {shown})"


def _folders(model_folder: Path, runs_root: Path | None) -> list[tuple[str, Path]]:
    """``(where, folder)`` of every ``layer-*`` folder: shipped SAEs, shipped transcoders, then each run's, newest
    first."""
    found = [("shipped", p) for d in (SHIPPED_DIR, TRANSCODERS_DIR)
             for p in sorted((model_folder / d).glob("layer-*"))]
    if runs_root is not None and Path(runs_root).is_dir():
        for run in sorted(Path(runs_root).iterdir(), reverse=True):
            for p in sorted((run / SHIPPED_DIR).glob("layer-*")) if (run / SHIPPED_DIR).is_dir() else []:
                found.append((f"run {run.name}", p))
    return found


def available(model_folder: str | Path, hidden_size: int, num_layers: int, runs_root: str | Path | None = None,
              problems: list[tuple[str, str]] | None = None, kinds: tuple[str, ...] = ("sae",)) -> list[Entry]:
    """The readable folders of ``kinds`` (of :data:`bertcore.sae.config.KINDS`; SAEs only by default) that fit this
    model (``d_in`` = its hidden size, a block it has), shipped first, each labelled ``"<where>, <label(kind, block)>"``
    (:func:`label`). The others are left out; ``problems``, if given, receives ``(label, why)`` for each of them."""
    model_folder = Path(model_folder)
    try:
        here = model_hash(model_folder)
    except OSError:
        here = None
    out = []
    for where, folder in _folders(model_folder, Path(runs_root) if runs_root else None):
        name = f"{where}, {folder.name}"
        try:
            kind = kind_of(folder)
            if kind not in kinds:
                continue
            cfg = _checked_cfg(folder, kind)
            name = f"{where}, {label(kind, cfg['layer'])}"
            check_fits(cfg, hidden_size, num_layers)
        except sae_io.SAEError as exc:
            if problems is not None:
                problems.append((name, str(exc)))
            continue
        trained_on = ((cfg.get("metadata") or {}).get("bert_explorer") or {}).get("model_hash")
        out.append(Entry(name, folder, cfg, None if trained_on is None or here is None else trained_on == here, kind))
    return out


def _checked_cfg(folder: Path, kind: str) -> dict[str, Any]:
    """The folder's ``cfg.json`` with ``cfg["layer"]`` its 0-based block, checked as far as the file goes without
    reading the weights (:func:`load` reads and checks them).

    Raises:
        bertcore.sae.io.SAEError: an SAE's :func:`bertcore.sae.io.read_cfg` reasons; a transcoder's size or
            ``metadata.layer`` missing.
    """
    if kind == "sae":
        cfg = sae_io.read_cfg(folder)
        cfg["layer"] = sae_io.layer_of((cfg.get("metadata") or {}).get("hook_name") or cfg.get("hook_name"))
        return cfg
    path = Path(folder) / sae_io.CFG_FILE
    cfg = sae_io.read_json_object(path, "a transcoder folder")
    for field in ("d_in", "d_out", "d_sae"):
        if not isinstance(cfg.get(field), int) or cfg[field] < 1:
            raise sae_io.SAEError(f"{path}: field {field!r} must be a positive integer; got {cfg.get(field)!r}")
    block = (cfg.get("metadata") or {}).get("layer")
    if isinstance(block, bool) or not isinstance(block, int) or block < 0:
        raise sae_io.SAEError(f"{path}: metadata.layer (the block it replaces) is missing")
    cfg["layer"] = block
    return cfg


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


def shipped_transcoders(model_folder: str | Path | None) -> Path | None:
    """The transcoder set shipped in a model's folder (``<model folder>/transcoders/``, one ``layer-<n>/`` per block),
    or None."""
    if model_folder is None:
        return None
    folder = Path(model_folder) / TRANSCODERS_DIR
    return folder if _holds_transcoders(folder) else None


def transcoder_sets(model_folder: str | Path | None, runs_root: str | Path | None = None) -> list[tuple[str, Path]]:
    """The folders that hold a transcoder set (``layer-<n>/`` folders of transcoders), shipped first: ``(label,
    folder)`` for ``<model folder>/transcoders/``, then, newest run first, each run's final ``sae/`` folder (a
    finished transcoder run) or else its newest checkpoint (a run in progress). Readability and fit are checked when
    a set is loaded (:func:`bertcore.sae.transcoder.load_set`)."""
    found: list[tuple[str, Path]] = []
    if (shipped := shipped_transcoders(model_folder)) is not None:
        found.append(("shipped transcoders", shipped))
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
