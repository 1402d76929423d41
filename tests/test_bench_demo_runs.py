"""bench/bench_demo_runs.py's comparison at equal steps: the step is the last logged one that every run reached
before its own decay, and each recipe's medians are read from its runs' ``metrics.jsonl`` at that step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_demo_runs as B  # noqa: E402


def _run(root: Path, name: str, losses: dict[int, float]) -> None:
    (root / name).mkdir()
    lines = [{"step": s, "split": "val", "mlm_loss": v, "mlm_acc_mask": 1.0 / v} for s, v in losses.items()]
    lines.insert(1, {"step": 100, "split": "train", "mlm_loss": 99.0, "mlm_acc_mask": 0.0})  # not a held-out row
    (root / name / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_equal_steps_takes_the_last_step_before_every_runs_decay(tmp_path):
    steps = range(0, 1001, 100)
    _run(tmp_path, "a0", {s: 7.0 - s / 1000 for s in steps})
    _run(tmp_path, "a1", {s: 7.2 - s / 1000 for s in steps})
    _run(tmp_path, "b0", {s: 6.0 - s / 1000 for s in range(0, 601, 100)})
    _run(tmp_path, "busy", {s: 1.0 for s in steps})
    rows = [{"recipe": "scratch-fast", "run": "a0", "busy": False, "planned_steps": 1000, "steps_per_s_measured": 12.0},
            {"recipe": "scratch-fast", "run": "a1", "busy": False, "planned_steps": 1000, "steps_per_s_measured": 11.0},
            {"recipe": "modern", "run": "b0", "busy": False, "planned_steps": 600, "steps_per_s_measured": 10.0},
            {"recipe": "modern", "run": "busy", "busy": True, "planned_steps": 100},
            {"recipe": "modern", "run": "failed", "busy": False, "error": "boom"}]
    out = B.equal_steps(rows, ["scratch-fast", "modern"], tmp_path)
    # decay 0.2 of the shortest run's 600 planned steps starts at 480: the last logged step before it is 400
    assert "At step 400 " in out
    assert "| scratch-fast | 2 | 6.700 [6.600, 6.800] |" in out
    assert "| modern | 1 | 5.600 [5.600, 5.600] |" in out
    assert "11.50 [11.00, 12.00]" in out
