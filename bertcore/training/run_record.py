"""What ``run.json`` says about a run (:mod:`bertcore.runs` owns the file; the UI and the model card read it)."""

from __future__ import annotations

from typing import Any

from .. import runs as R


def run_record(trainer, n_params: int) -> dict[str, Any]:
    """The ``run.json`` record of a set-up :class:`.loop.Trainer`: its options, model config, data, length and
    calibration; ``created``, ``argv`` and ``owner`` are kept from an existing record (a resume), which gets one more
    entry in ``resumes``."""
    t = trainer
    existing = R.read_config(t.run_dir) if t.dist.main else None
    record = {
        "run_id": t.run_dir.name, "task": t.cfg.task,
        "created": (existing or {}).get("created") or R.now_iso(),
        "argv": (existing or {}).get("argv") or t.argv, "args": t.cfg.replace(lr=t.lr).to_dict(),
        "model_config": t.model.config.to_dict(), "device": str(t.device),
        "world_size": t.dist.world_size, "origin": t.origin, "num_parameters": n_params,
        "data": t.task.data.stats, "labels": t.task.labels,
        "total_steps": t.status_total(), "warmup_steps": t.length.warmup,
        "time_budget_s": t.length.budget_s, "time_limit_s": t.length.limit_s,
        "budget_schedule": ("time" if t.length.by_time else "steps") if t.length.budget_s else None,
        "reference": t.task.reference or None,
    }
    if t.calibration is not None:
        record["calibration"] = t.calibration.to_dict()
    if (existing or {}).get("owner") is not None:
        record["owner"] = existing["owner"]  # who may control the run (bertcore.runs.launch); kept
    if existing is not None:
        record["resumes"] = (existing.get("resumes") or []) + ([{"at": R.now_iso(), "step": t.step}]
                                                              if t.cfg.resume else [])
    return record
