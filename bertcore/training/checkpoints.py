"""Checkpoints of a run: ``checkpoints/step-<N>/`` is an HF model folder (config.json,
model.safetensors, tokenizer files; the format of :mod:`bertcore.modeling.hf_format`: plain BERT for post-LN models,
RobertaPreLayerNorm plus ``nsp_head.safetensors`` for pre-LN ones), a model card ``README.md``
(:mod:`.card`) and ``trainer_state.pt`` (optimizer, step, RNG), written into a
dot-named temp folder and renamed into place, so a listed checkpoint is always complete
(:class:`bertcore.runs.RunDir` owns the names and the completeness rule).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

from ..modeling.checkpoint import atomic_write, atomic_write_text
from .. import runs as R
from ..runs import RunDir
from ..tokenization.tokenizer import save_tokenizer
from .calibrate import resumed_length


def save_checkpoint(run_dir: str | Path, step: int, model, tokenizer, optimizer, extra: dict[str, Any]) -> Path:
    """Write ``checkpoints/step-<N>/`` atomically (temp folder, fsync, rename); returns its path.

    ``trainer_state.pt`` holds ``step``, ``optimizer`` (state dict), ``rng`` (``torch``: the CPU RNG
    state, ``cuda``: every GPU's) and ``extra`` (e.g. ``elapsed_s``, ``seed``); it is readable with
    ``torch.load(weights_only=True)``. ``README.md`` is the model card (:func:`.card.model_card`), written after
    the weights from the run's ``run.json`` and ``metrics.jsonl`` (a card that cannot be made is left out: the
    checkpoint matters more).
    """
    rd = RunDir(run_dir)
    rd.checkpoints_dir.mkdir(parents=True, exist_ok=True)
    final, tmp = rd.checkpoint_dir(step), rd.temp_checkpoint_dir(step)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp)
    save_tokenizer(tokenizer, tmp)  # tokenizer.json, tokenizer_config.json, vocab.txt, special_tokens_map.json
    state = {"step": step, "optimizer": optimizer.state_dict(), "rng": {"torch": torch.get_rng_state()}, **extra}
    if torch.cuda.is_available():
        state["rng"]["cuda"] = torch.cuda.get_rng_state_all()
    atomic_write(tmp / "trainer_state.pt", lambda p: torch.save(state, p))
    try:
        from .card import model_card

        atomic_write_text(tmp / "README.md", model_card(tmp, rd.path, code_folder=final))
    except Exception as exc:  # noqa: BLE001 - the card is documentation; never lose a checkpoint over it
        print(f"model card of step {step} not written: {type(exc).__name__}: {exc}", file=sys.stderr)
    _fsync_dir(tmp)
    if final.exists():  # re-saving a step after a resume: swap the old one out first
        old = rd.checkpoints_dir / f".{final.name}.old-{os.getpid()}"
        os.replace(final, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, final)
    _fsync_dir(rd.checkpoints_dir)
    return final


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def prune_checkpoints(run_dir: str | Path, keep: int, protect: tuple[int, ...] = ()) -> None:
    """Keep the ``keep`` newest complete checkpoints (0: keep all) plus the steps in ``protect``;
    remove temp folders left by dead processes (:meth:`RunDir.remove_litter`)."""
    rd = RunDir(run_dir)
    rd.remove_litter(keep_pid=os.getpid())
    if keep > 0:
        for p in rd.checkpoints()[:-keep]:
            if int(p.name.split("-")[-1]) not in protect:
                shutil.rmtree(p, ignore_errors=True)


def load_trainer_state(ckpt: str | Path) -> dict[str, Any]:
    """``trainer_state.pt`` of a checkpoint folder (``weights_only=True``, on the CPU)."""
    return torch.load(Path(ckpt) / "trainer_state.pt", map_location="cpu", weights_only=True)


def restore_trainer(trainer, resume_from: Path) -> None:
    """Put a set-up :class:`.loop.Trainer` where its checkpoint ``resume_from`` was: optimizer, step, RNG state
    (CPU and CUDA), elapsed time and run length; the logs after the checkpoint's step and the interrupted
    session's incomplete checkpoint folders are removed."""
    state = load_trainer_state(resume_from)
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.step = int(state["step"])
    torch.set_rng_state(state["rng"]["torch"])
    if "cuda" in state["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    trainer.time_offset = float(state.get("elapsed_s", 0.0))
    trainer.writer.truncate_logs_after(trainer.step)
    if trainer.dist.main:
        n = R.RunDir(trainer.run_dir).remove_litter()
        if n:
            trainer.log(f"removed {n} incomplete checkpoint folder(s) left by the interrupted session")
    trainer.log(f"resumed at step {trainer.step} from {resume_from}")
    run_config = R.read_config(trainer.run_dir)
    trainer.length, trainer.calibration, note = resumed_length(trainer.length, run_config, trainer.step)
    if note:
        trainer.log(note)
    if trainer.calibration is not None and trainer.calibration.threads and not trainer.cfg.threads:
        torch.set_num_threads(trainer.calibration.threads)  # the count its calibration chose
