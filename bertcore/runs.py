"""Training runs as directories and processes (the contract is ``docs/CONTRACTS.md``).

A run is the process ``python -m bertcore.train {pretrain,finetune} --run-dir runs/<run_id> ...``
writing into ``runs/<run_id>/``::

    run.json          config: run_id, task, created, argv, args (every CLI option), model_config, device
    status.json       state (queued/running/done/failed/cancelled), step, total_steps, pid, error, ...
    metrics.jsonl     one JSON object per logged step (train and val)
    probe.jsonl       pretraining: the top predictions for a fixed masked probe sentence
    results.json      fine-tuning, at the end: test metrics, confusion matrix, report, TF-IDF baseline
    checkpoints/step-000200/   HF model folder + tokenizer files + trainer_state.pt
    log.txt           the process's stdout/stderr

This module has both sides:

- the **read side** for the UI (:func:`list_runs`, :func:`read_status`, :func:`read_metrics`,
  :func:`read_probe`, :func:`read_results`, :func:`checkpoints`, ...), tolerant of files being
  written (a JSON file is replaced atomically; a ``.jsonl`` line without its newline is ignored);
- the **process side**: :func:`launch` (a detached subprocess honouring the per-device lock),
  :func:`cancel` (SIGTERM: the run saves a checkpoint and exits as ``cancelled``),
  :func:`resume`;
- the **writer** used by the training process: :class:`RunWriter` and :class:`DeviceLock`.

No Streamlit here; ``bertcore`` never imports the UI.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .checkpoint import atomic_write_text

STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL_STATES = ("done", "failed", "cancelled")
TASKS = ("pretrain", "finetune")
CHECKPOINT_PREFIX = "step-"
LOCK_DIR = ".locks"


class RunError(RuntimeError):
    """A run that cannot be created, launched, resumed or read (the message says why)."""


class RunBusyError(RunError):
    """The device is used by another run (the message names it); launch with ``queue=True`` to wait."""


# ----------------------------------------------------------------------------- small helpers
def now_iso() -> str:
    """Current UTC time, ISO 8601 with seconds (``2026-11-22T10:51:41Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def runs_root(root: str | Path | None = None) -> Path:
    """``root`` if given, else ``$BERT_EXPLORER_RUNS`` or ``./runs`` (same rule as ``sources.runs_root``)."""
    if root is not None:
        return Path(root).expanduser()
    return Path(os.environ.get("BERT_EXPLORER_RUNS", "runs")).expanduser()


def new_run_id(task: str) -> str:
    """A sortable, unique id: ``20261122-105141-pretrain-3fa2``."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{task}-{secrets.token_hex(2)}"


def pid_alive(pid: int | None) -> bool:
    """True if a process with this pid exists on this machine (zombies count as dead)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is dead for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def read_json(path: str | Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None if it is missing or unreadable (never raises)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_jsonl(path: str | Path, start: int = 0) -> list[dict[str, Any]]:
    """The complete lines of a ``.jsonl`` file as dicts, from line ``start`` on.

    A last line without its newline (being written) and lines that do not parse are skipped.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return []
    lines = raw.split(b"\n")[:-1]  # the part after the last newline is incomplete (or empty)
    return _parse_lines(lines[start:])


def _parse_lines(lines: list[bytes]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """Write a JSON object atomically (``atomic_write_text``)."""
    atomic_write_text(path, json.dumps(data, indent=2, default=_json_default) + "\n")


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    """Append one JSON line in a single ``write`` call, then flush and fsync."""
    line = (json.dumps(record, default=_json_default) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# ----------------------------------------------------------------------------- read side
def read_config(run_dir: str | Path) -> dict[str, Any] | None:
    """``run.json`` (run_id, task, created, argv, args, model_config, device) or None."""
    return read_json(Path(run_dir) / "run.json")


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """``status.json``, or None if the run has none yet.

    A run whose status says ``running`` or ``queued`` but whose process is gone (killed with
    SIGKILL, machine restarted) is reported as ``failed`` with an error saying so, and
    ``"stale": True``; it can be resumed from its last checkpoint.
    """
    status = read_json(Path(run_dir) / "status.json")
    if status is None:
        return None
    if status.get("state") in ("running", "queued") and status.get("host", socket.gethostname()) == socket.gethostname():
        if not pid_alive(status.get("pid")):
            status = dict(status, state="failed", stale=True,
                          error=status.get("error") or "the training process ended without saying why "
                          "(killed?); resume it to continue from its last checkpoint")
    return status


def read_metrics(run_dir: str | Path, split: str | None = None, start: int = 0) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl`` (optionally only ``split`` ``"train"`` / ``"val"``).

    ``start`` skips that many lines (for tailing: pass the number of lines already read;
    note that filtering by split happens after skipping).
    """
    rows = read_jsonl(Path(run_dir) / "metrics.jsonl", start)
    return rows if split is None else [r for r in rows if r.get("split") == split]


def read_probe(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``probe.jsonl``: ``{"step", "text", "predictions": [[[token, prob], ...] per [MASK]]}``."""
    return read_jsonl(Path(run_dir) / "probe.jsonl")


def read_results(run_dir: str | Path) -> dict[str, Any] | None:
    """``results.json`` of a finished fine-tuning run, or None."""
    return read_json(Path(run_dir) / "results.json")


def read_log(run_dir: str | Path, max_chars: int = 20_000) -> str:
    """The last ``max_chars`` characters of ``log.txt`` ('' if none)."""
    path = Path(run_dir) / "log.txt"
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(0, size - max_chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def checkpoint_step(path: str | Path) -> int | None:
    """The step of a checkpoint folder ``step-000200`` (None if the name does not fit)."""
    name = Path(path).name
    if not name.startswith(CHECKPOINT_PREFIX):
        return None
    try:
        return int(name[len(CHECKPOINT_PREFIX):])
    except ValueError:
        return None


def checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoint folders of a run, oldest first.

    Complete means: named ``step-<N>`` (folders being written start with '.') and holding
    ``config.json``, ``model.safetensors`` and ``trainer_state.pt``.
    """
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        step = checkpoint_step(p)
        if step is None or not p.is_dir():
            continue
        if all((p / f).is_file() for f in ("config.json", "model.safetensors", "trainer_state.pt")):
            found.append((step, p))
    return [p for _, p in sorted(found)]


def last_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    found = checkpoints(run_dir)
    return found[-1] if found else None


@dataclass
class RunInfo:
    """A summary of one run for lists: ids, task, state and progress, last metrics."""

    run_id: str
    path: Path
    task: str | None
    state: str
    step: int
    total_steps: int | None
    created: str | None
    updated: str | None
    error: str | None
    args: dict[str, Any] = field(default_factory=dict)
    n_checkpoints: int = 0

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def progress(self) -> float:
        """Fraction of steps done, in [0, 1]."""
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0


def run_info(run_dir: str | Path) -> RunInfo | None:
    """:class:`RunInfo` of a run folder, or None if it is not a run (no ``run.json``/``status.json``)."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    status = read_status(run_dir)
    if config is None and status is None:
        return None
    config = config or {}
    status = status or {}
    return RunInfo(
        run_id=config.get("run_id", run_dir.name), path=run_dir, task=config.get("task"),
        state=status.get("state", "queued"), step=int(status.get("step") or 0),
        total_steps=status.get("total_steps"), created=config.get("created"), updated=status.get("updated"),
        error=status.get("error"), args=config.get("args") or {}, n_checkpoints=len(checkpoints(run_dir)))


def list_runs(root: str | Path | None = None, task: str | None = None) -> list[RunInfo]:
    """Every run under the runs root, newest first (by ``created``, then folder name)."""
    root = runs_root(root)
    if not root.is_dir():
        return []
    infos = []
    for p in root.iterdir():
        if p.is_dir() and not p.name.startswith("."):
            info = run_info(p)
            if info is not None and (task is None or info.task == task):
                infos.append(info)
    return sorted(infos, key=lambda i: (i.created or "", i.run_id), reverse=True)


# ----------------------------------------------------------------------------- device lock
def device_key(device: str) -> str:
    """Lock name of a device: ``cpu``, ``cuda-0`` (``cuda`` means ``cuda:0``), ``mps``."""
    device = str(device)
    if device.startswith("cuda"):
        index = device.split(":", 1)[1] if ":" in device else "0"
        return f"cuda-{index}"
    return device.split(":", 1)[0]


def lock_path(root: str | Path, device: str) -> Path:
    return Path(root) / LOCK_DIR / f"{device_key(device)}.lock"


def lock_holder(root: str | Path, device: str) -> dict[str, Any] | None:
    """Who holds a device's lock: ``{"pid", "run_id", "host", "since"}``, or None if it is free
    (no lock file, or the holder's process is dead: a stale lock)."""
    info = read_json(lock_path(root, device))
    if info is None:
        return None
    if info.get("host") == socket.gethostname() and not pid_alive(info.get("pid")):
        return None
    return info


class DeviceLock:
    """One run at a time per device: a lock file ``<runs root>/.locks/<device>.lock``.

    Created with ``O_EXCL``; a lock whose process is dead is taken over. Released on exit
    (``with DeviceLock(...)``) or :meth:`release`.
    """

    def __init__(self, root: str | Path, device: str, run_id: str, pid: int | None = None) -> None:
        self.path = lock_path(root, device)
        self.device = device
        self.run_id = run_id
        self.pid = pid or os.getpid()
        self.held = False

    def try_acquire(self) -> dict[str, Any] | None:
        """Take the lock; returns None on success, else the live holder's info."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = {"pid": self.pid, "run_id": self.run_id, "host": socket.gethostname(), "since": now_iso(),
                  "device": self.device}
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = read_json(self.path)
                if holder is None:  # being written this instant, or garbage: look again shortly
                    time.sleep(0.05)
                    holder = read_json(self.path)
                if holder is not None and holder.get("pid") == self.pid:
                    self.held = True
                    return None
                if holder is None or (holder.get("host") == socket.gethostname() and not pid_alive(holder.get("pid"))):
                    self.path.unlink(missing_ok=True)  # stale: take it over
                    continue
                return holder
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
            self.held = True
            return None
        return read_json(self.path) or {"pid": None, "run_id": "?"}

    def acquire(self, wait: bool = False, poll_s: float = 1.0, on_wait=None, should_stop=None) -> bool:
        """Take the lock, or raise :class:`RunBusyError` (``wait=False``) / wait until it is free.

        ``on_wait(holder)`` is called once when waiting starts (e.g. to write status ``queued``);
        ``should_stop()`` is polled while waiting: when it returns True, give up and return False.
        """
        holder = self.try_acquire()
        if holder is None:
            return True
        if not wait:
            raise RunBusyError(busy_message(self.device, holder))
        if on_wait is not None:
            on_wait(holder)
        while holder is not None:
            if should_stop is not None and should_stop():
                return False
            time.sleep(poll_s)
            holder = self.try_acquire()
        return True

    def release(self) -> None:
        if self.held:
            holder = read_json(self.path)
            if holder is None or holder.get("pid") == self.pid:
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> "DeviceLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def busy_message(device: str, holder: dict[str, Any]) -> str:
    return (f"the {device} device is busy with run {holder.get('run_id')} (pid {holder.get('pid')}, since "
            f"{holder.get('since')}); wait for it, cancel it, queue this run, or pick another device")


# ----------------------------------------------------------------------------- writer (training side)
class RunWriter:
    """Writes one run directory following the contract; used by the training process.

    Only rank 0 of a distributed run should write (``enabled=False`` elsewhere makes every
    method a no-op).
    """

    def __init__(self, run_dir: str | Path, enabled: bool = True) -> None:
        self.dir = Path(run_dir)
        self.enabled = enabled
        self.status: dict[str, Any] = {}
        if enabled:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "checkpoints").mkdir(exist_ok=True)
            self.status = read_json(self.dir / "status.json") or {}

    @property
    def checkpoints_dir(self) -> Path:
        return self.dir / "checkpoints"

    def write_config(self, config: dict[str, Any]) -> None:
        if self.enabled:
            write_json(self.dir / "run.json", config)

    def set_status(self, **fields: Any) -> None:
        """Merge ``fields`` into ``status.json`` (adds ``updated``, ``pid`` and ``host``)."""
        if not self.enabled:
            return
        base = {"state": "queued", "step": 0, "total_steps": None, "pid": os.getpid(), "error": None,
                "started": None, "updated": None, "eta_s": None, "tokens_per_s": None}
        self.status = {**base, **self.status, **fields, "pid": os.getpid(), "pgid": os.getpgid(0),
                       "host": socket.gethostname(), "updated": now_iso()}
        write_json(self.dir / "status.json", self.status)

    def log_metrics(self, record: dict[str, Any]) -> None:
        if self.enabled:
            append_jsonl(self.dir / "metrics.jsonl", record)

    def log_probe(self, record: dict[str, Any]) -> None:
        if self.enabled:
            append_jsonl(self.dir / "probe.jsonl", record)

    def write_results(self, results: dict[str, Any]) -> None:
        if self.enabled:
            write_json(self.dir / "results.json", results)

    def truncate_logs_after(self, step: int) -> None:
        """On resume: drop metric/probe lines logged after ``step`` (they will be logged again),
        and a partial last line. Rewritten atomically."""
        if not self.enabled:
            return
        for name in ("metrics.jsonl", "probe.jsonl"):
            path = self.dir / name
            if path.exists():
                kept = [r for r in read_jsonl(path) if int(r.get("step", 0)) <= step]
                atomic_write_text(path, "".join(json.dumps(r, default=_json_default) + "\n" for r in kept))


# ----------------------------------------------------------------------------- process side
def _train_command(task: str, run_dir: Path, args: dict[str, Any] | Sequence[str], nproc: int = 1) -> list[str]:
    if isinstance(args, dict):
        flags: list[str] = []
        for key, value in args.items():
            if value is None or value is False:
                continue
            flag = "--" + key.replace("_", "-")
            if value is True:
                flags.append(flag)
            else:
                flags += [flag, str(value)]
    else:
        flags = list(args)
    if nproc > 1:
        head = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                "-m", "bertcore.train"]
    else:
        head = [sys.executable, "-m", "bertcore.train"]
    return head + [task, "--run-dir", str(run_dir)] + flags


def _spawn(cmd: list[str], run_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(run_dir / "log.txt", "ab")  # the child inherits the descriptor; ours is closed below
    try:
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        project_root = str(Path(__file__).resolve().parents[1])
        full_env["PYTHONPATH"] = project_root + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=full_env, cwd=os.getcwd())
    finally:
        log.close()


def resolve_device(device: str | None = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` if available else ``"cpu"``; anything else unchanged."""
    if device in (None, "", "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


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
) -> Path:
    """Start a training run as a detached process; returns its run directory at once.

    Args:
        task: ``"pretrain"`` or ``"finetune"``.
        args: CLI options as a dict (``{"preset": "nano", "max_steps": 500, "pre_layer_norm": True}``;
            ``True`` -> a bare flag, ``None``/``False`` -> left out) or a list of CLI words.
            ``run_dir``/``device``/``lock`` are set here, do not pass them.
        root: runs root (default :func:`runs_root`).
        run_id: default :func:`new_run_id`.
        device: ``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``.
        queue: if the device is busy, start anyway and wait for it (status ``queued``);
            otherwise raise :class:`RunBusyError`.
        nproc: >1 runs under ``torchrun --nproc_per_node nproc`` (DDP).
    Raises:
        RunBusyError: the device is busy and ``queue`` is False.
        RunError: unknown task, or the run directory exists already.
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
    extra = ["--device", device, "--lock", "wait" if queue else "fail"]
    cmd = _train_command(task, run_dir, args or {}, nproc) + extra
    writer = RunWriter(run_dir)
    # a first run.json at once (the UI lists the run with its task); the run completes it
    # (model_config, data statistics) once its model is built
    writer.write_config({"run_id": run_id, "task": task, "created": now_iso(), "argv": cmd[1:],
                         "args": dict(args) if isinstance(args, dict) else {"argv": list(args or [])},
                         "model_config": None, "device": device})
    writer.set_status(state="queued", step=0, total_steps=None, error=None, started=None)
    proc = _spawn(cmd, run_dir, env)
    _fix_pid(run_dir, proc.pid)  # the child overwrites status.json as soon as it starts
    return run_dir


def _fix_pid(run_dir: Path, pid: int) -> None:
    """Record the child's pid in status.json unless the child has written its own already."""
    status = read_json(run_dir / "status.json") or {}
    if status.get("pid") == os.getpid():
        status.update(pid=pid, pgid=pid)
        write_json(run_dir / "status.json", status)


def cancel(run_dir: str | Path, timeout_s: float = 0.0) -> bool:
    """Ask a run to stop: SIGTERM to its process group (it saves a checkpoint and writes
    status ``cancelled``). Returns False if it was not running.

    With ``timeout_s > 0``, waits that long for the process to end.
    """
    run_dir = Path(run_dir)
    status = read_json(run_dir / "status.json") or {}
    pid, pgid = status.get("pid"), status.get("pgid")
    if status.get("state") not in ("running", "queued") or not pid_alive(pid):
        return False
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
    detached process with the same options (``python -m bertcore.train resume --run-dir ...``).

    Raises:
        RunError: not a run, still running, or no checkpoint to resume from.
        RunBusyError: the device is busy and ``queue`` is False.
    """
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    if config is None:
        raise RunError(f"{run_dir} has no run.json: not a run directory")
    status = read_status(run_dir) or {}
    if status.get("state") in ("running", "queued"):
        raise RunError(f"run {run_dir.name} is still {status['state']} (pid {status.get('pid')})")
    device = config.get("device") or resolve_device((config.get("args") or {}).get("device"))
    holder = lock_holder(run_dir.parent, device)
    if holder is not None and not queue:
        raise RunBusyError(busy_message(device, holder))
    head = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
            if nproc > 1 else [sys.executable])
    cmd = head + ["-m", "bertcore.train", "resume", "--run-dir", str(run_dir), "--lock", "wait" if queue else "fail"]
    writer = RunWriter(run_dir)
    writer.set_status(state="queued", error=None)
    proc = _spawn(cmd, run_dir, env)
    _fix_pid(run_dir, proc.pid)
    return run_dir


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


def iter_new_metrics(run_dir: str | Path, seen: int) -> tuple[list[dict[str, Any]], int]:
    """For tailing: the metric records after the first ``seen`` complete lines, and the new
    number of complete lines (pass it back next time)."""
    try:
        raw = Path(run_dir, "metrics.jsonl").read_bytes()
    except OSError:
        return [], seen
    lines = raw.split(b"\n")[:-1]
    if len(lines) < seen:  # rewritten (a resume dropped lines logged after its checkpoint)
        seen = 0
    return _parse_lines(lines[seen:]), len(lines)


__all__: Iterable[str] = [
    "RunError", "RunBusyError", "RunInfo", "RunWriter", "DeviceLock", "STATES", "FINAL_STATES", "TASKS",
    "list_runs", "run_info", "read_config", "read_status", "read_metrics", "read_probe", "read_results",
    "read_log", "checkpoints", "last_checkpoint", "checkpoint_step", "launch", "cancel", "resume", "wait",
    "lock_holder", "runs_root", "new_run_id", "now_iso", "read_jsonl", "append_jsonl", "write_json",
]
