"""SAE training speed on the CPU: this checkout's ``python -m bertcore.sae train`` against another checkout's (the
reference, ``--root``), interleaved round after round in one run, so the two see the same machine load.

    git worktree add /tmp/base <commit>
    python bench/bench_sae_trainer.py --root /tmp/base [--rounds 3] [--steps 24] [--threads 2]

Each run trains SAEs of blocks 1 and 3 of the shipped MiniLM-MLM (6,144 latents, 1,024-token batches, the
``everyday`` corpus, evaluation off) on the CPU for ``--steps`` steps; its speed is the median of the tokens/s the
trainer logs (every 4 steps, the first window left out: it holds the start). Prints each round's pair and the median
of the per-round ratios this / reference (goal >= 0.95).
"""

from __future__ import annotations

import harness

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bertcore.runs import RunDir


def one_run(root: Path, steps: int, threads: int) -> float:
    run = Path(tempfile.mkdtemp(prefix="sae-speed-")) / "run"
    argv = [sys.executable, "-m", "bertcore.sae", "train", "--run-dir", str(run), "--layers", "1,3",
            "--batch-size", "1024", "--max-steps", str(steps), "--log-every", "4", "--eval-every", "0",
            "--save-every", "100000", "--threads", str(threads)]
    if (root / "bertcore" / "device.py").is_file():  # a checkout with the device option: the CPU, as the other
        argv += ["--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(root), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{root}: the run failed\n{proc.stderr[-2000:]}")
    rates = [r["tokens_per_s"] for r in RunDir(run).read_metrics(split="train") if "tokens_per_s" in r]
    return statistics.median(rates[1:] or rates)


def main() -> None:
    def options(ap):
        ap.add_argument("--root", type=Path, required=True, help="the reference checkout")
        ap.add_argument("--rounds", type=int, default=3)
        ap.add_argument("--steps", type=int, default=24)

    args = harness.parse(__doc__, options)
    threads = args.threads or 2
    here = harness.ROOT
    print(f"this: {here}  reference: {args.root}  threads {threads}, {args.steps} steps per run")
    print(f"{'round':>5} {'this tok/s':>11} {'ref tok/s':>10} {'ratio':>6} {'load':>5}")
    ratios = []
    for r in range(args.rounds):
        order = [(here, "this"), (args.root, "ref")] if r % 2 == 0 else [(args.root, "ref"), (here, "this")]
        got = {}
        for root, name in order:
            with harness.stopwatch(f"{name} run, round {r}"):
                got[name] = one_run(root, args.steps, threads)
        ratios.append(got["this"] / got["ref"])
        print(f"{r:>5} {got['this']:>11.0f} {got['ref']:>10.0f} {ratios[-1]:>6.3f} {harness.load_average():>5.2f}",
              flush=True)
    print(f"median ratio this / reference: {statistics.median(ratios):.3f} (goal >= 0.95)")
    harness.save(args.json)


if __name__ == "__main__":
    main()
