"""What an SAE run starts from: the model a spec names (``"shipped"`` or a folder), the check of its blocks, and the
SAEs of ``--init-from`` (:class:`bertcore.sae.train.Trainer`)."""

from __future__ import annotations

from pathlib import Path

from . import io as sae_io
from .config import SAETrainConfig
from .model import TopKSAE


def model_folder(spec: str) -> Path:
    """``"shipped"`` -> ``models/minilm-mlm``; anything else a folder (a run's checkpoint too)."""
    from ..loading.sources import shipped_mlm_dir

    return shipped_mlm_dir() if spec in ("shipped", "packaged-mlm") else Path(spec).expanduser()


def load_model(spec: str, device: str | None = None):
    """``(model, tokenizer, folder)`` of a model spec, in eval mode on ``device`` (None: the CPU; bertcore's
    loader: any head)."""
    from ..loading.sources import ModelSource, load

    folder = model_folder(spec)
    loaded = load(ModelSource("local", str(folder), folder.name), device=device)
    loaded.model.eval()
    return loaded.model, loaded.tokenizer, folder


def check_layers(layers, num_layers: int) -> None:
    """Raise ``ValueError`` for a block outside ``0..num_layers-1`` (an SAE reads the output of a 0-based block)."""
    bad = [layer for layer in layers if not 0 <= int(layer) < num_layers]
    if bad:
        raise ValueError(f"the model has {num_layers} layers (blocks 0..{num_layers - 1}, the output of each); "
                         f"block {bad[0]} does not exist")


def start_from(folder: Path, layer: int, d_in: int, cfg: SAETrainConfig) -> TopKSAE:
    """The SAE of block ``layer`` (0-based) in ``folder`` (its ``layer-<layer + 1>/``,
    :func:`bertcore.sae.io.folder_name`) as a run's starting point (``--init-from``): its weights and input scale
    (``norm_scale``), this run's ``k``, float32, in training mode. It may have fewer latents than ``cfg.d_sae``:
    the run then widens it (:meth:`bertcore.sae.model.TopKSAE.widened`).

    Raises:
        ValueError: a negative block; no SAE for that block there (one past the model's last block has none), one
            of another block or size, with more latents than ``cfg.d_sae``, or unreadable.
    """
    if int(layer) < 0:
        raise ValueError(f"--init-from: an SAE's layer is a 0-based block, 0..L-1; got {layer}")
    path = folder / sae_io.folder_name(layer)
    try:
        sae, meta = sae_io.load(path)
    except sae_io.SAEError as exc:
        raise ValueError(f"--init-from: {exc}") from exc
    if meta["layer"] != layer or sae.d_in != d_in or sae.d_sae > cfg.d_sae:
        raise ValueError(f"--init-from: {path} reads block {meta['layer']} with d_in {sae.d_in} and {sae.d_sae} "
                         f"latents; this run needs block {layer}, d_in {d_in} and at most {cfg.d_sae} latents")
    if not 1 <= cfg.k <= cfg.d_sae:
        raise ValueError(f"k must be between 1 and {cfg.d_sae}; got {cfg.k}")
    sae.k = cfg.k
    sae.train()
    return sae
