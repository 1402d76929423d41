"""bench/device_check.py on the CPU, every step small (``--device cpu --quick``): the check a lent GPU runs first
cannot rot between the sessions that have one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import device_check  # noqa: E402


def test_every_step_runs_on_the_cpu_and_writes_its_figures(tmp_path):
    assert device_check.main(["--device", "cpu", "--quick", "--out", str(tmp_path)]) == 0
    got = {step: json.loads((tmp_path / f"{step}.json").read_text()) for step in device_check.STEPS}
    assert all("error" not in r for r in got.values()), {s: r.get("error") for s, r in got.items()}
    assert got["parity"]["logits_max_abs_diff"] < 1e-4
    assert got["views"]["worst_max_abs_diff"] == 0.0 and not got["views"]["errors"]  # CPU against the CPU
    assert all(got["sae"][name]["tokens_per_s"] > 0 for name in ("sae", "transcoder", "sae_bf16_autocast"))
    assert got["graphs"]["8_tokens"]["nodes"] > 0
    assert all(r["exit"] == 0 for r in got["pretrain"].values() if isinstance(r, dict) and "exit" in r)
    assert len((tmp_path / "check.log").read_text().splitlines()) == len(device_check.STEPS)
