"""Does the Train page's "Watch a phase change" recipe leave its plateau within its budget, on several seeds?

Runs the recipe (``bertcore.training.recipes.RECIPES["phase-change"]``, the options the page launches) through
the CLI once per seed, then recomputes the last checkpoint's held-out metrics in a fresh process
(``python -m bertcore.training evaluate``) and reads the run's own reference (unigram loss, most-frequent-token
rate). A seed "leaves the plateau" when, from the last checkpoint loaded fresh, the held-out MLM loss is at
least 1 nat below the unigram line and the accuracy at [MASK] is at least 3x the most-frequent-token rate.
Also reports when the logged held-out loss first went 1 nat below the line (step and seconds of training).

    python bench/bench_phase_change.py --seeds 0,1,2,3,4 --threads 2
"""

from __future__ import annotations

import harness

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bertcore import runs as R
from bertcore.runs.config import TrainConfig
from bertcore.training.recipes import RECIPES

ROOT = harness.ROOT

LOSS_MARGIN, ACC_FACTOR = 1.0, 3.0


def run_seed(recipe: str, seed: int, threads: int | None, minutes: float | None, root: Path) -> dict:
    r = RECIPES[recipe]
    run_dir = root / f"{recipe}-seed{seed}"
    cfg = TrainConfig.create("pretrain", **r.options, max_time=minutes or r.minutes, threads=threads, lock="none",
                             seed=seed, run_dir=str(run_dir))
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-m", "bertcore.training", *cfg.to_argv()], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        return {"seed": seed, "error": proc.stderr[-600:]}
    records = R.read_metrics(run_dir)
    ref = next(x for x in records if x.get("split") == "reference")
    unigram, rate = ref["unigram_loss"], ref["most_frequent_token_rate"]
    val = [x for x in records if x.get("split") == "val"]
    below = next((x for x in val if x["mlm_loss"] <= unigram - LOSS_MARGIN), None)
    fresh = subprocess.run([sys.executable, "-m", "bertcore.training", "evaluate", "--checkpoint",
                            str(R.last_checkpoint(run_dir))], cwd=ROOT, env=env, capture_output=True, text=True)
    got = json.loads(fresh.stdout.strip().splitlines()[-1])
    train = [x for x in records if x.get("split") == "train" and x.get("tokens_per_s")]
    return {"seed": seed, "steps": got["step"], "unigram_loss": unigram, "top_rate": rate,
            "loss": got["mlm_loss"], "acc_mask": got["mlm_acc_mask"],
            "left": got["mlm_loss"] <= unigram - LOSS_MARGIN and got["mlm_acc_mask"] >= ACC_FACTOR * rate,
            "first_below_step": below and below["step"], "first_below_s": below and below["time"],
            "tokens_per_s": round(sum(x["tokens_per_s"] for x in train) / max(1, len(train))),
            "probe": [[p[0] for p in preds[:3]] for preds in got["probe"]["predictions"]] if got.get("probe") else None,
            "load_avg_1min_at_end": round(harness.load_average(), 2)}


def main() -> None:
    def options(p):
        p.add_argument("--recipe", default="phase-change")
        p.add_argument("--seeds", default="0,1,2,3,4")
        p.add_argument("--minutes", type=float, default=None, help="budget per run (default: the recipe's)")
        p.add_argument("--keep", type=Path, default=None, help="keep the run directories here")

    a = harness.parse(__doc__, options)  # --threads: the training runs' torch threads (default: torch's)
    root = a.keep or Path(tempfile.mkdtemp(prefix="phase-"))
    rows = []
    for seed in (int(s) for s in a.seeds.split(",")):
        with harness.stopwatch(f"{a.recipe}, seed {seed}: run and fresh evaluation (wall)"):
            row = run_seed(a.recipe, seed, a.threads, a.minutes, root)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| seed | steps | tok/s | held-out loss (unigram) | [MASK] acc (top-token rate) | 1 nat below the line at "
          "| left the plateau | probe top-3 | load avg |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['seed']} | failed: {r['error'][-120:]} |")
            continue
        at = "never" if r["first_below_step"] is None else f"step {r['first_below_step']} ({r['first_below_s']:.0f} s)"
        probe = " ; ".join(", ".join(x) for x in r["probe"]) if r["probe"] else "-"
        print(f"| {r['seed']} | {r['steps']} | {r['tokens_per_s']} | {r['loss']:.2f} ({r['unigram_loss']:.2f}) | "
              f"{r['acc_mask']:.1%} ({r['top_rate']:.1%}) | {at} | {'yes' if r['left'] else 'no'} | {probe} | "
              f"{r['load_avg_1min_at_end']} |")
    print(f"\n{sum(bool(r.get('left')) for r in rows)} of {len(rows)} seeds left the plateau")
    harness.save(a.json)


if __name__ == "__main__":
    main()
