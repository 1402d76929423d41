"""bench/bench_finetune.py's conditions and table: the goal (macro F1 >= 3 points above the TF-IDF baseline's) is
counted per condition, over the runs of that condition only, and a failed run is shown, not counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_finetune as B  # noqa: E402


def test_conditions_parse_and_bad_ones_are_refused():
    assert B.parse_condition("busy:10") == (True, 10.0) and B.parse_condition("idle:2.5") == (False, 2.5)
    for bad in ("busy", "idle:0", "loaded:5", "idle:x"):
        with pytest.raises(ValueError, match="idle:<minutes>"):
            B.parse_condition(bad)


def _row(seed, busy, minutes, points):
    return {"run": f"r{seed}{busy}", "seed": seed, "busy": busy, "minutes": minutes, "steps": 400, "planned_steps": 400,
            "threads": 1 if busy else 2, "acc": 0.9, "f1": 0.858 + points / 100, "baseline_acc": 0.88,
            "baseline_f1": 0.858, "points_above": points}


def test_the_goal_is_counted_per_condition():
    rows = [_row(0, False, 5, 3.3), _row(1, False, 5, 2.9), _row(0, True, 10, 4.0), _row(1, True, 10, 3.0),
            {"run": "bad", "seed": 2, "busy": True, "minutes": 10, "error": "boom"}]
    out = B.table(rows)
    assert "idle, 5 min: F1 points above the baseline median +3.1 [+2.9, +3.3]; >= 3 points in 1 of 2 runs" in out
    assert "busy, 10 min: F1 points above the baseline median +3.5 [+3.0, +4.0]; >= 3 points in 2 of 2 runs" in out
    assert "| busy, 10 min | 2 | error: 'boom'" in out
