"""The run directory: one owner of its layout (:class:`RunDir`), tolerant readers, the writer.

A run directory (``docs/CONTRACTS.md``)::

    run.json          run_id, task, created, argv, args (a TrainConfig dict), model_config, device, ...
    status.json       state (queued/running/done/failed/cancelled), step, total_steps, pid, error, ...
    metrics.jsonl     one JSON object per logged step (train and val)
    probe.jsonl       pretraining: the top predictions for a fixed masked probe sentence
    results.json      fine-tuning, at the end: test metrics, confusion matrix, report, TF-IDF baseline
    checkpoints/step-000200/   HF model folder + tokenizer files + trainer_state.pt
    checkpoints/.step-000200.tmp-<pid>/   a checkpoint being written (renamed into place when complete)
    log.txt           the process's stdout/stderr
    cancel.json       pid and pgid of the process a Cancel was sent to (:func:`bertcore.runs.process.cancel`)

Readers never raise on a file being written: a JSON file is replaced atomically and a ``.jsonl``
line without its newline is ignored. No Streamlit here.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..modeling.checkpoint import atomic_write_text
from ..settings import settings

STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL_STATES = ("done", "failed", "cancelled")
TASKS = ("pretrain", "finetune")
CHECKPOINT_PREFIX = "step-"
CHECKPOINT_FILES = ("config.json", "model.safetensors", "trainer_state.pt")  # what makes a checkpoint complete


class RunError(RuntimeError):
    """A run that cannot be created, launched, resumed or read (the message says why)."""


# ----------------------------------------------------------------------------- small helpers
def now_iso() -> str:
    """Current UTC time, ISO 8601 with seconds (``2026-11-22T10:51:41Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def runs_root(root: str | Path | None = None) -> Path:
    """``root`` if given, else ``$BERT_EXPLORER_RUNS`` or ``./runs`` (the one definition of the runs root)."""
    if root is not None:
        return Path(root).expanduser()
    return settings().runs.expanduser()


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


def checkpoint_step(path: str | Path) -> int | None:
    """The step of a checkpoint folder ``step-000200`` (None if the name does not fit)."""
    name = Path(path).name
    if not name.startswith(CHECKPOINT_PREFIX):
        return None
    try:
        return int(name[len(CHECKPOINT_PREFIX):])
    except ValueError:
        return None


# ----------------------------------------------------------------------------- the layout
class RunDir:
    """Every path of a run directory, and the rule for a complete checkpoint (one place).

    ``RunDir(path)`` does not touch the disk; readers return None / [] for missing files.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def name(self) -> str:
        return self.path.name

    config_file = property(lambda self: self.path / "run.json")
    status_file = property(lambda self: self.path / "status.json")
    metrics_file = property(lambda self: self.path / "metrics.jsonl")
    probe_file = property(lambda self: self.path / "probe.jsonl")
    results_file = property(lambda self: self.path / "results.json")
    log_file = property(lambda self: self.path / "log.txt")
    cancel_file = property(lambda self: self.path / "cancel.json")
    checkpoints_dir = property(lambda self: self.path / "checkpoints")
    tensorboard_dir = property(lambda self: self.path / "tensorboard")

    def checkpoint_dir(self, step: int) -> Path:
        """``checkpoints/step-<N:06d>`` (may not exist)."""
        return self.checkpoints_dir / f"{CHECKPOINT_PREFIX}{step:06d}"

    def temp_checkpoint_dir(self, step: int, pid: int | None = None) -> Path:
        """The dot-named folder a checkpoint is written into before its rename: ``.step-<N>.tmp-<pid>``."""
        return self.checkpoints_dir / f".{self.checkpoint_dir(step).name}.tmp-{pid or os.getpid()}"

    @staticmethod
    def is_complete(folder: Path) -> bool:
        """A checkpoint folder named ``step-<N>`` holding config.json, model.safetensors and trainer_state.pt."""
        return (checkpoint_step(folder) is not None and folder.is_dir()
                and all((folder / f).is_file() for f in CHECKPOINT_FILES))

    def checkpoints(self) -> list[Path]:
        """Complete checkpoint folders, oldest first (folders being written start with '.')."""
        folder = self.checkpoints_dir
        if not folder.is_dir():
            return []
        found = [(checkpoint_step(p), p) for p in folder.iterdir() if self.is_complete(p)]
        return [p for _, p in sorted(found)]

    def last_checkpoint(self) -> Path | None:
        found = self.checkpoints()
        return found[-1] if found else None

    def litter(self, keep_pid: int | None = None) -> list[Path]:
        """What a process killed while writing leaves behind: dot-named checkpoint folders under
        ``checkpoints/`` (``.step-N.tmp-<pid>``; those of ``keep_pid``, the live writer, excepted) and
        atomic-write temp files (``.<name>.<random>.tmp``) in the run directory and ``checkpoints/``.
        Readers ignore all of it."""
        found: list[Path] = []
        mine = f"-{keep_pid}" if keep_pid else None
        for folder in (self.path, self.checkpoints_dir):
            if not folder.is_dir():
                continue
            for p in folder.iterdir():
                if not p.name.startswith("."):
                    continue
                if p.is_dir() and folder == self.checkpoints_dir and not (mine and p.name.endswith(mine)):
                    found.append(p)
                elif p.is_file() and p.name.endswith(".tmp"):
                    found.append(p)
        return found

    def remove_litter(self, keep_pid: int | None = None) -> int:
        """Delete :meth:`litter` (a resumed or finished run calls this); returns how many were removed."""
        stale = self.litter(keep_pid)
        for p in stale:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        return len(stale)

    # -- readers
    def read_config(self) -> dict[str, Any] | None:
        return read_json(self.config_file)

    def read_status(self) -> dict[str, Any] | None:
        """``status.json``; a ``running``/``queued`` run whose process is gone (SIGKILL, reboot) reads as
        ``failed`` with ``"stale": True`` and an error saying it can be resumed, unless a Cancel was sent to that
        process (``cancel.json`` names its pid or process group): then it reads ``cancelled`` (a process still
        starting up, before its SIGTERM handler, dies of the signal without writing its status)."""
        status = read_json(self.status_file)
        if status is None:
            return None
        here = socket.gethostname()
        if status.get("state") in ("running", "queued") and status.get("host", here) == here:
            if not pid_alive(status.get("pid")):
                if self._cancel_was_sent_to(status):
                    return dict(status, state="cancelled", stale=True, error=None)
                status = dict(status, state="failed", stale=True,
                              error=status.get("error") or "the training process ended without saying why "
                              "(killed?); resume it to continue from its last checkpoint")
        return status

    def _cancel_was_sent_to(self, status: dict[str, Any]) -> bool:
        sent = read_json(self.cancel_file) or {}
        return any(sent.get(k) is not None and sent.get(k) == status.get(k) for k in ("pid", "pgid"))

    def read_metrics(self, split: str | None = None, start: int = 0) -> list[dict[str, Any]]:
        rows = read_jsonl(self.metrics_file, start)
        return rows if split is None else [r for r in rows if r.get("split") == split]


def read_config(run_dir: str | Path) -> dict[str, Any] | None:
    """``run.json`` (run_id, task, created, argv, args, model_config, device) or None."""
    return RunDir(run_dir).read_config()


def read_status(run_dir: str | Path) -> dict[str, Any] | None:
    """``status.json`` or None; see :meth:`RunDir.read_status` (a dead process reads as ``failed``)."""
    return RunDir(run_dir).read_status()


def read_metrics(run_dir: str | Path, split: str | None = None, start: int = 0) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl`` (optionally only ``split`` ``"train"`` / ``"val"``); ``start``
    skips that many lines (filtering by split happens after skipping)."""
    return RunDir(run_dir).read_metrics(split, start)


def read_probe(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``probe.jsonl``: ``{"step", "text", "predictions": [[[token, prob], ...] per [MASK]]}``."""
    return read_jsonl(RunDir(run_dir).probe_file)


def read_results(run_dir: str | Path) -> dict[str, Any] | None:
    """``results.json`` of a finished fine-tuning run, or None."""
    return read_json(RunDir(run_dir).results_file)


def read_log(run_dir: str | Path, max_chars: int = 20_000) -> str:
    """The last ``max_chars`` characters of ``log.txt`` ('' if none)."""
    path = RunDir(run_dir).log_file
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(0, size - max_chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoint folders of a run, oldest first (:meth:`RunDir.checkpoints`)."""
    return RunDir(run_dir).checkpoints()


def last_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    return RunDir(run_dir).last_checkpoint()


def iter_new_metrics(run_dir: str | Path, seen: int) -> tuple[list[dict[str, Any]], int]:
    """For tailing: the metric records after the first ``seen`` complete lines, and the new
    number of complete lines (pass it back next time)."""
    try:
        raw = RunDir(run_dir).metrics_file.read_bytes()
    except OSError:
        return [], seen
    lines = raw.split(b"\n")[:-1]
    if len(lines) < seen:  # rewritten (a resume dropped lines logged after its checkpoint)
        seen = 0
    return _parse_lines(lines[seen:]), len(lines)


# ----------------------------------------------------------------------------- lists of runs
@dataclass
class RunInfo:
    """A summary of one run for lists: ids, task, state and progress."""

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
    owner: str | None = None  # run.json "owner": who may control the run (None: whoever runs the code)

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def progress(self) -> float:
        """Fraction of steps done, in [0, 1]."""
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0


def task_of(info: RunInfo) -> str:
    """A run's task: from run.json, else from its id (``...-pretrain-...``), else ``"?"``."""
    if info.task:
        return info.task
    return next((t for t in TASKS if f"-{t}-" in info.run_id), "?")


def run_info(run_dir: str | Path) -> RunInfo | None:
    """:class:`RunInfo` of a run folder, or None if it is not a run (no ``run.json``/``status.json``)."""
    rd = RunDir(run_dir)
    config, status = rd.read_config(), rd.read_status()
    if config is None and status is None:
        return None
    config, status = config or {}, status or {}
    return RunInfo(
        run_id=config.get("run_id", rd.name), path=rd.path, task=config.get("task"),
        state=status.get("state", "queued"), step=int(status.get("step") or 0),
        total_steps=status.get("total_steps"), created=config.get("created"), updated=status.get("updated"),
        error=status.get("error"), args=config.get("args") or {}, n_checkpoints=len(rd.checkpoints()),
        owner=config.get("owner"))


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
