"""One run at a time per device: the lock file, the queue of runs waiting for it, the devices of this
machine, who uses which.

The lock is ``<runs root>/.locks/<device>.lock``, a ``filelock.FileLock`` (``flock``: the system releases it when its
process ends, so a killed run leaves no stale lock); who holds it is written beside it in ``<device>.json``. A run
that waits for it (``--lock wait``) takes a ticket in
``<runs root>/.locks/<device>.queue/`` (one JSON file a waiting process, named by the time it joined) and
only the first ticket tries the lock: first come, first served, for every process of the runs root (the
tickets of dead processes are dropped). The Train page asks :func:`device_user` before a launch,
:func:`waiting_for` to explain a queued run and :func:`queue_position` for its place in the queue.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import filelock

from .layout import RunError, RunInfo, list_runs, now_iso, pid_alive, read_config, read_json, runs_root, write_json

LOCK_DIR = ".locks"


class RunBusyError(RunError):
    """The device is used by another run (the message names it); launch with ``queue=True`` to wait."""


def resolve_device(device: str | None = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` if available else ``"cpu"``; anything else unchanged."""
    if device in (None, "", "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def devices() -> list[str]:
    """Devices this machine can train on, best first (CPU always last): ``cuda`` (or ``cuda:N`` with
    several GPUs), ``mps``, ``cpu``."""
    import torch

    n = torch.cuda.device_count()
    found = [f"cuda:{i}" if n > 1 else "cuda" for i in range(n)]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    return found + ["cpu"]


def device_key(device: str) -> str:
    """Lock name of a device: ``cpu``, ``cuda-0`` (``cuda`` means ``cuda:0``), ``mps``."""
    device = str(device)
    if device.startswith("cuda"):
        index = device.split(":", 1)[1] if ":" in device else "0"
        return f"cuda-{index}"
    return device.split(":", 1)[0]


def lock_path(root: str | Path, device: str) -> Path:
    """The file a device's ``filelock.FileLock`` locks: ``<root>/.locks/<device>.lock``."""
    return Path(root) / LOCK_DIR / f"{device_key(device)}.lock"


def holder_path(root: str | Path, device: str) -> Path:
    """Who holds a device's lock, written by the holder: ``<root>/.locks/<device>.json``."""
    return Path(root) / LOCK_DIR / f"{device_key(device)}.json"


def _file_lock(root: str | Path, device: str) -> filelock.FileLock:
    # not thread-local: a run's trainer thread takes it and its main thread releases it
    return filelock.FileLock(lock_path(root, device), timeout=0, thread_local=False)


def lock_holder(root: str | Path, device: str) -> dict[str, Any] | None:
    """Who holds a device's lock: ``{"pid", "run_id", "host", "since", "device"}``, or None if it is free (a holder
    that died released it). Asks by taking the lock for an instant when nobody holds it."""
    if not lock_path(root, device).exists():
        return None
    probe = _file_lock(root, device)
    try:
        probe.acquire()
    except filelock.Timeout:
        return read_json(holder_path(root, device)) or {"pid": None, "run_id": "?"}
    probe.release()
    return None


def queue_dir(root: str | Path, device: str) -> Path:
    """The folder of a device's queue: ``<root>/.locks/<device>.queue``."""
    return Path(root) / LOCK_DIR / f"{device_key(device)}.queue"


def _alive(info: dict[str, Any]) -> bool:
    """Whether the process of a ticket may still be waiting (a ticket of another host is taken as alive)."""
    return not (info.get("host") == socket.gethostname() and not pid_alive(info.get("pid")))


def lock_queue(root: str | Path, device: str) -> list[dict[str, Any]]:
    """The runs waiting for a device's lock, first first: ``{"pid", "run_id", "host", "since", "ticket"}`` each.
    Tickets of processes that died (on this host) are removed, not listed."""
    folder = queue_dir(root, device)
    try:
        names = sorted(p.name for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except OSError:
        return []
    out = []
    for name in names:
        info = read_json(folder / name)
        if info is None:
            continue
        if not _alive(info):
            (folder / name).unlink(missing_ok=True)
            continue
        out.append({**info, "ticket": name})
    return out


def queue_position(root: str | Path, device: str, run_id: str) -> tuple[int, int] | None:
    """``(place, length)`` of run ``run_id`` in the device's queue (place 1 takes the lock next), or None when
    it is not waiting there."""
    queue = lock_queue(root, device)
    ids = [q.get("run_id") for q in queue]
    return (ids.index(run_id) + 1, len(ids)) if run_id in ids else None


def busy_message(device: str, holder: dict[str, Any]) -> str:
    return (f"the {device} device is busy with run {holder.get('run_id')} (pid {holder.get('pid')}, since "
            f"{holder.get('since')}); wait for it, cancel it, queue this run, or pick another device")


class DeviceLock:
    """One run at a time per device: a ``filelock.FileLock`` on ``<runs root>/.locks/<device>.lock``.

    The system releases it when the holding process ends. Waiting for it goes through the device's queue
    (:func:`lock_queue`): first come, first served. Released on exit (``with DeviceLock(...)``), by :meth:`release`,
    or when the object is collected: keep it for as long as the run holds the device.
    ``pid`` is the process the holder file and the queue ticket name (default: this one).
    """

    def __init__(self, root: str | Path, device: str, run_id: str, pid: int | None = None) -> None:
        self.root = Path(root)
        self.path = lock_path(root, device)
        self.device = device
        self.run_id = run_id
        self.pid = pid or os.getpid()
        self._lock = _file_lock(root, device)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def try_acquire(self) -> dict[str, Any] | None:
        """Take the lock; returns None on success (or when this object holds it), else the holder's info."""
        if self.held:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except filelock.Timeout:
            return read_json(holder_path(self.root, self.device)) or {"pid": None, "run_id": "?"}
        write_json(holder_path(self.root, self.device), {"pid": self.pid, "run_id": self.run_id,
                                                         "host": socket.gethostname(), "since": now_iso(),
                                                         "device": self.device})
        return None

    def acquire(self, wait: bool = False, poll_s: float = 1.0, on_wait=None, should_stop=None) -> bool:
        """Take the lock, or raise :class:`RunBusyError` (``wait=False``) / wait until it is free.

        Without ``wait``, a device whose queue holds another process's ticket is busy too. With ``wait``, the
        process takes a ticket in the device's queue and tries the lock only while its ticket is the first
        (first come, first served); the ticket is removed when it returns. ``on_wait(holder)`` is called once
        when waiting starts (e.g. to write status ``queued``); ``should_stop()`` is polled while waiting: when it
        returns True, give up and return False.
        """
        if not wait:
            ahead = [q for q in lock_queue(self.root, self.device) if q.get("pid") != self.pid]
            holder = self.try_acquire() if not ahead else (lock_holder(self.root, self.device) or ahead[0])
            if holder is None:
                return True
            raise RunBusyError(busy_message(self.device, holder))
        ticket = self._enqueue()
        try:
            waiting = False
            while True:
                queue = lock_queue(self.root, self.device)
                if not queue or queue[0]["ticket"] == ticket.name:
                    holder = self.try_acquire()
                    if holder is None:
                        return True
                else:
                    holder = lock_holder(self.root, self.device) or queue[0]
                if not waiting:
                    waiting = True
                    if on_wait is not None:
                        on_wait(holder)
                if should_stop is not None and should_stop():
                    return False
                time.sleep(poll_s)
        finally:
            ticket.unlink(missing_ok=True)

    def _enqueue(self) -> Path:
        """Join the device's queue: a ticket named by the time (ns) and pid, written atomically."""
        folder = queue_dir(self.root, self.device)
        folder.mkdir(parents=True, exist_ok=True)
        ticket = folder / f"{time.time_ns():020d}-{self.pid}.json"
        write_json(ticket, {"pid": self.pid, "run_id": self.run_id, "host": socket.gethostname(), "since": now_iso(),
                            "device": self.device})
        return ticket

    def release(self) -> None:
        if self.held:
            holder_path(self.root, self.device).unlink(missing_ok=True)
            self._lock.release()

    def __enter__(self) -> "DeviceLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# ----------------------------------------------------------------------------- who uses a device
def run_device(info: RunInfo) -> str | None:
    """The device a run was started on (``run.json``), or None when unknown / ``auto``."""
    config = read_config(info.path) or {}
    device = config.get("device") or (config.get("args") or {}).get("device")
    return None if device in (None, "", "auto") else str(device)


def active_runs(device: str | None = None, root: str | Path | None = None) -> list[RunInfo]:
    """Runs queued or running (their process alive) on ``device``, or on an unknown device (a run
    launched with ``device="auto"`` before it resolved it)."""
    out = []
    for info in list_runs(root):
        if info.state in ("queued", "running"):
            dev = run_device(info)
            if device is None or dev is None or device_key(dev) == device_key(device):
                out.append(info)
    return out


def device_user(device: str, root: str | Path | None = None) -> str | None:
    """The run using ``device`` (holding its lock, or queued / running there), or None if it is free."""
    holder = lock_holder(runs_root(root), device)
    if holder is not None:
        return str(holder.get("run_id"))
    busy = active_runs(device, root)
    return f"{busy[0].run_id} ({busy[0].state})" if busy else None


def waiting_for(run_dir: str | Path) -> dict[str, Any] | None:
    """The lock holder a queued run waits for (another run on one of this machine's devices), or None."""
    run_dir = Path(run_dir)
    for device in devices():
        holder = lock_holder(run_dir.parent, device)
        if holder is not None and holder.get("run_id") != run_dir.name:
            return {**holder, "device": device}
    return None
