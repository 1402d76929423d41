"""SAE training as a run of the Train page: a detached process in a run directory under the runs root, with the
same status, cancel (SIGTERM: a checkpoint, then ``cancelled``), resume and listing as every other run
(:mod:`bertcore.runs`); the process is ``python -m bertcore.sae train`` (:mod:`bertcore.sae.train`)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..runs import RunDir, RunError, RunWriter, new_run_id, now_iso, resolve_device, runs_root
from ..runs.process import _fix_pid, _spawn
from .config import SAETrainConfig

TASK = "sae"


def launch(cfg: SAETrainConfig, root: str | Path | None = None, run_id: str | None = None,
           owner: str | None = None) -> Path:
    """Start an SAE training run as a detached process; returns its run directory at once.

    Raises:
        RunError: bad options (the sentences of :meth:`SAETrainConfig.check`) or an existing run directory.
    """
    problems = cfg.check()
    if problems:
        raise RunError("; ".join(problems))
    run_dir = runs_root(root) / (run_id or new_run_id(TASK))
    if run_dir.exists() and any(run_dir.iterdir()):
        raise RunError(f"run directory {run_dir} exists already; resume it instead")
    cmd = [sys.executable, "-m", "bertcore.sae", "train", "--run-dir", str(run_dir), *cfg.to_argv()]
    writer = RunWriter(run_dir)
    config = {"run_id": run_dir.name, "task": TASK, "created": now_iso(), "argv": cmd[1:], "args": cfg.to_dict(),
              "model_config": None, "device": resolve_device(cfg.device)}
    if owner is not None:
        config["owner"] = str(owner)
    writer.write_config(config)
    writer.set_status(state="queued", step=0, total_steps=cfg.max_steps, error=None, started=None)
    proc = _spawn(cmd, run_dir)
    _fix_pid(run_dir, proc.pid)
    return run_dir


def resume(run_dir: str | Path) -> Path:
    """Continue a stopped SAE run from its last checkpoint (``python -m bertcore.sae resume``).

    Raises:
        RunError: not an SAE run, or still running.
    """
    rd = RunDir(run_dir)
    config = rd.read_config() or {}
    if config.get("task") != TASK:
        raise RunError(f"{rd.path} is not an SAE run")
    if (rd.read_status() or {}).get("state") in ("running", "queued"):
        raise RunError(f"run {rd.name} is still running")
    RunWriter(rd.path).set_status(state="queued", error=None)
    proc = _spawn([sys.executable, "-m", "bertcore.sae", "resume", "--run-dir", str(rd.path)], rd.path)
    _fix_pid(rd.path, proc.pid)
    return rd.path
