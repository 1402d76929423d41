"""The run as a process: :func:`launch` (a detached ``python -m bertcore.training`` honouring the
per-device lock), :func:`cancel` (SIGTERM: the run saves a checkpoint and exits ``cancelled``),
:func:`resume` and :func:`wait`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from .layout import (
    FINAL_STATES,
    TASKS,
    RunDir,
    RunError,
    new_run_id,
    now_iso,
    pid_alive,
    read_json,
    read_status,
    runs_root,
    write_json,
)
from .lock import RunBusyError, busy_message, lock_holder, resolve_device
from .writer import RunWriter


def train_command(task: str, run_dir: Path, args: dict[str, Any] | Sequence[str],
                  nproc: int = 1) -> tuple[list[str], dict]:
    """The command line of a run and the ``args`` recorded in its first ``run.json``.

    ``args`` as a dict is read as :class:`bertcore.runs.config.TrainConfig` options (an unknown
    name raises :class:`RunError`); as a list it is passed on as CLI words.
    """
    from .config import OptionError, TrainConfig

    if isinstance(args, dict):
        try:
            config = TrainConfig.create(task, **args)
            config.check()
        except OptionError as exc:
            raise RunError(str(exc)) from exc
        words = config.to_argv()[1:]
        recorded = config.to_dict()
    else:
        words, recorded = list(args), {"argv": list(args)}
    if nproc > 1:
        head = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                "-m", "bertcore.training"]
    else:
        head = [sys.executable, "-m", "bertcore.training"]
    return head + [task, "--run-dir", str(run_dir)] + words, recorded


def _spawn(cmd: list[str], run_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(RunDir(run_dir).log_file, "ab")  # the child inherits the descriptor; ours is closed below
    try:
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        project_root = str(Path(__file__).resolve().parents[2])
        old = full_env.get("PYTHONPATH")
        full_env["PYTHONPATH"] = project_root + (os.pathsep + old if old else "")
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=full_env, cwd=os.getcwd())
    finally:
        log.close()


def launch(
    task: str,
    args: dict[str, Any] | Sequence[str] | None = None,
    *,
    root: str | Path | None = None,
    run_id: str | None = None,
    device: str = "auto",
    queue: bool = False,
    nproc: int = 1,
    env: dict[str, str] | None = None,
    owner: str | None = None,
) -> Path:
    """Start a training run as a detached process; returns its run directory at once.

    Args:
        task: ``"pretrain"`` or ``"finetune"``.
        args: TrainConfig options as a dict (``{"preset": "nano", "max_steps": 500, "pre_layer_norm": True}``)
            or a list of CLI words. ``run_dir``/``device``/``lock`` are set here, do not pass them.
        root: runs root (default :func:`runs_root`).
        run_id: default :func:`new_run_id`.
        device: ``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``.
        queue: if the device is busy, start anyway and wait for it (status ``queued``);
            otherwise raise :class:`RunBusyError`.
        nproc: >1 runs under ``torchrun --nproc_per_node nproc`` (DDP).
        owner: who may control the run, recorded as ``run.json`` ``owner`` (the app's shared mode writes a token
            of the browser session; None writes no ``owner``: anyone who can run this code controls it).
    Raises:
        RunBusyError: the device is busy and ``queue`` is False.
        RunError: unknown task or option, or the run directory exists already.
    """
    if task not in TASKS:
        raise RunError(f"unknown task {task!r}; use one of {TASKS}")
    root = runs_root(root)
    device = resolve_device(device)
    run_id = run_id or new_run_id(task)
    run_dir = root / run_id
    if run_dir.exists() and any(run_dir.iterdir()):
        raise RunError(f"run directory {run_dir} exists already; use resume() to continue it")
    holder = lock_holder(root, device)
    if holder is not None and not queue:
        raise RunBusyError(busy_message(device, holder))
    cmd, recorded = train_command(task, run_dir, args or {}, nproc)
    cmd += ["--device", device, "--lock", "wait" if queue else "fail"]
    if isinstance(args, dict) or args is None:
        recorded.update(run_dir=str(run_dir), device=device, lock="wait" if queue else "fail")
    writer = RunWriter(run_dir)
    # a first run.json at once (the UI lists the run with its task and options); the run completes
    # it (model_config, data statistics) once its model is built
    config = {"run_id": run_id, "task": task, "created": now_iso(), "argv": cmd[1:], "args": recorded,
              "model_config": None, "device": device}
    if owner is not None:
        config["owner"] = str(owner)
    writer.write_config(config)
    writer.set_status(state="queued", step=0, total_steps=None, error=None, started=None)
    proc = _spawn(cmd, run_dir, env)
    _fix_pid(run_dir, proc.pid)  # the child overwrites status.json as soon as it starts
    return run_dir


def _fix_pid(run_dir: Path, pid: int) -> None:
    """Record the child's pid in status.json unless the child has written its own already."""
    path = RunDir(run_dir).status_file
    status = read_json(path) or {}
    if status.get("pid") == os.getpid():
        status.update(pid=pid, pgid=pid)
        write_json(path, status)


def cancel(run_dir: str | Path, timeout_s: float = 0.0) -> bool:
    """Ask a run to stop: SIGTERM to its process group (it saves a checkpoint and writes
    status ``cancelled``). Returns False if it was not running.

    With ``timeout_s > 0``, waits that long for the process to end.
    """
    rd = RunDir(run_dir)
    status = read_json(rd.status_file) or {}
    pid, pgid = status.get("pid"), status.get("pgid")
    if status.get("state") not in ("running", "queued") or not pid_alive(pid):
        return False
    # said before the signal: a process still starting up dies of it without writing ``cancelled``, and
    # :meth:`RunDir.read_status` then reads this file instead of calling the run killed
    write_json(rd.cancel_file, {"pid": pid, "pgid": pgid, "requested": now_iso()})
    try:
        if pgid and pgid != os.getpgid(0):
            os.killpg(pgid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while timeout_s > 0 and time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    return True


def resume(run_dir: str | Path, *, queue: bool = False, nproc: int = 1, env: dict[str, str] | None = None) -> Path:
    """Continue a stopped run (cancelled, failed, killed) from its last checkpoint, as a new
    detached process with the same options (``python -m bertcore.training resume --run-dir ...``).

    Raises:
        RunError: not a run, or still running.
        RunBusyError: the device is busy and ``queue`` is False.
    """
    rd = RunDir(run_dir)
    config = rd.read_config()
    if config is None:
        raise RunError(f"{rd.path} has no run.json: not a run directory")
    status = rd.read_status() or {}
    if status.get("state") in ("running", "queued"):
        raise RunError(f"run {rd.name} is still {status['state']} (pid {status.get('pid')})")
    device = config.get("device") or resolve_device((config.get("args") or {}).get("device"))
    holder = lock_holder(rd.path.parent, device)
    if holder is not None and not queue:
        raise RunBusyError(busy_message(device, holder))
    head = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
            if nproc > 1 else [sys.executable])
    cmd = head + ["-m", "bertcore.training", "resume", "--run-dir", str(rd.path), "--lock", "wait" if queue else "fail"]
    RunWriter(rd.path).set_status(state="queued", error=None)
    proc = _spawn(cmd, rd.path, env)
    _fix_pid(rd.path, proc.pid)
    return rd.path


def wait(run_dir: str | Path, timeout_s: float | None = None, poll_s: float = 0.5) -> dict[str, Any] | None:
    """Block until the run reaches a final state (or the timeout); returns its status."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = read_status(run_dir)
        if status is not None and status.get("state") in FINAL_STATES:
            return status
        if deadline is not None and time.monotonic() > deadline:
            return status
        time.sleep(poll_s)
