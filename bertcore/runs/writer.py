"""The writer of a run directory (the training process's side; :class:`~.layout.RunDir` owns the paths)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from ..modeling.checkpoint import atomic_write_text
from .layout import RunDir, _json_default, append_jsonl, now_iso, read_json, read_jsonl, write_json


class RunWriter:
    """Writes one run directory following the contract; used by the training process.

    Only rank 0 of a distributed run should write (``enabled=False`` elsewhere makes every
    method a no-op).
    """

    def __init__(self, run_dir: str | Path, enabled: bool = True) -> None:
        self.run = RunDir(run_dir)
        self.dir = self.run.path
        self.enabled = enabled
        self.status: dict[str, Any] = {}
        if enabled:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.run.checkpoints_dir.mkdir(exist_ok=True)
            self.status = read_json(self.run.status_file) or {}

    def write_config(self, config: dict[str, Any]) -> None:
        if self.enabled:
            write_json(self.run.config_file, config)

    def update_config(self, **fields: Any) -> None:
        """Merge ``fields`` into ``run.json`` (e.g. a time budget's ``calibration``, known after setup)."""
        if self.enabled:
            write_json(self.run.config_file, {**(read_json(self.run.config_file) or {}), **fields})

    def set_status(self, **fields: Any) -> None:
        """Merge ``fields`` into ``status.json`` (adds ``updated``, ``pid`` and ``host``)."""
        if not self.enabled:
            return
        base = {"state": "queued", "step": 0, "total_steps": None, "pid": os.getpid(), "error": None,
                "started": None, "updated": None, "eta_s": None, "tokens_per_s": None}
        self.status = {**base, **self.status, **fields, "pid": os.getpid(), "pgid": os.getpgid(0),
                       "host": socket.gethostname(), "updated": now_iso()}
        write_json(self.run.status_file, self.status)

    def log_metrics(self, record: dict[str, Any]) -> None:
        if self.enabled:
            append_jsonl(self.run.metrics_file, record)

    def log_probe(self, record: dict[str, Any]) -> None:
        if self.enabled:
            append_jsonl(self.run.probe_file, record)

    def write_results(self, results: dict[str, Any]) -> None:
        if self.enabled:
            write_json(self.run.results_file, results)

    def truncate_logs_after(self, step: int) -> None:
        """On resume: drop metric/probe lines logged after ``step`` (they will be logged again),
        and a partial last line. Rewritten atomically."""
        if not self.enabled:
            return
        for path in (self.run.metrics_file, self.run.probe_file):
            if path.exists():
                kept = [r for r in read_jsonl(path) if int(r.get("step", 0)) <= step]
                atomic_write_text(path, "".join(json.dumps(r, default=_json_default) + "\n" for r in kept))
