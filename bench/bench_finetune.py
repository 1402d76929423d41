"""Does the Train page's fine-tuning default beat its TF-IDF baseline on a busy laptop and at short budgets?

Runs the fine-tuning defaults (``TrainConfig.create("finetune")``: the packaged MiniLM, the packaged tweets,
positive vs negative; what the Train page launches) through the CLI for seeds 0..N-1 under each condition, one run
at a time: ``idle:5`` = a 5-minute budget on an otherwise idle machine, ``busy:10`` = the 10-minute default while a
second process keeps one core busy (a Python busy loop, as a browser or a video call does). Each run's last
checkpoint is scored fresh in a new process (``python -m bertcore.training evaluate --split test``: the project's
loader, the run's own test split) and set beside the TF-IDF + logistic regression baseline the run fitted on the
same split (``results.json``). Prints one JSON line per run, then a table: steps done (the calibration's plan),
threads, test accuracy and macro F1 of BERT and of the baseline, and the difference in F1 points. The
goal: BERT's macro F1 at least :data:`GOAL_POINTS` (3) points above the baseline's in every run.

Do not run this beside other work: a time budget's step count depends on the machine being otherwise idle (except
the busy condition's loop).

    python bench/bench_finetune.py --n 3                                # the full benchmark (about 50 min)
    python bench/bench_finetune.py --n 1 --condition idle:1             # a quick check that it works
    python bench/bench_finetune.py --report LOG1 --report LOG2          # one table from saved outputs
    python bench/bench_finetune.py --n 3 --condition idle:5 --set lr=5e-5 --set head_lr=5e-5 \
        --set group_by_length=false                                     # the defaults before head_lr
"""

from __future__ import annotations

import harness

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_demo_runs import ENV, launch, load_avg, parse_set
from bertcore import runs as R
from bertcore.runs.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]

GOAL_POINTS = 3.0  # the goal: test macro F1 at least this many points above the TF-IDF baseline's


def parse_condition(text: str) -> tuple[bool, float]:
    """``"busy:10"`` -> ``(True, 10.0)``; ``"idle:5"`` -> ``(False, 5.0)``.

    Raises:
        ValueError: not ``idle:<minutes>`` or ``busy:<minutes>`` with minutes > 0.
    """
    kind, _, minutes = text.partition(":")
    try:
        value = float(minutes)
    except ValueError:
        value = -1.0
    if kind not in ("idle", "busy") or value <= 0:
        raise ValueError(f"--condition {text!r}: give idle:<minutes> or busy:<minutes>")
    return kind == "busy", value


def run_one(seed: int, busy: bool, minutes: float, root: Path, threads: int | None, overrides: dict) -> dict:
    """One fine-tuning run with the defaults (and ``overrides``), its last checkpoint scored fresh on the test
    split; a dict of what the table shows."""
    name = f"finetune-seed{seed}-{'busy' if busy else 'idle'}-{minutes:g}min"
    run_dir = root / name
    cfg = TrainConfig.create("finetune", **overrides, max_time=minutes, threads=threads, lock="none", seed=seed,
                             run_dir=str(run_dir))
    row: dict = {"run": name, "seed": seed, "busy": busy, "minutes": minutes, "load_before": load_avg()}
    proc = launch(cfg, busy, row)
    if proc.returncode:
        return {**row, "error": (proc.stderr or proc.stdout)[-600:]}
    results = R.read_results(run_dir) or {}
    fresh = subprocess.run([sys.executable, "-m", "bertcore.training", "evaluate", "--split", "test", "--checkpoint",
                            str(R.last_checkpoint(run_dir))], cwd=ROOT, env=ENV, capture_output=True, text=True)
    if fresh.returncode:
        return {**row, "error": "evaluate: " + fresh.stderr[-600:]}
    got = json.loads(fresh.stdout.strip().splitlines()[-1])
    base = results.get("baseline") or {}
    cal = (R.read_config(run_dir) or {}).get("calibration") or {}
    return {**row, "steps": got["step"], "planned_steps": cal.get("total_steps"), "threads": cal.get("threads"),
            "acc": round(got["acc"], 4), "f1": round(got["f1"], 4),
            "f1_logged": round(results.get("test", {}).get("f1", float("nan")), 4),
            "baseline_acc": base.get("acc"), "baseline_f1": base.get("f1"),
            "points_above": round(100 * (got["f1"] - base["f1"]), 1) if "f1" in base else None,
            "test_n": results.get("test", {}).get("n")}


def table(rows: list[dict]) -> str:
    """Markdown: one row per run, then per condition the median and range of the points above the baseline."""
    out = ["| condition | seed | steps (planned) | threads | BERT acc / macro F1 | TF-IDF acc / macro F1 | F1 points "
           "above |", "|---|---:|---:|---:|---|---|---:|"]
    for r in rows:
        cond = f"{'busy' if r['busy'] else 'idle'}, {r['minutes']:g} min"
        if "error" in r:
            out.append(f"| {cond} | {r['seed']} | error: {r['error'][:80]!r} | | | | |")
            continue
        out.append(f"| {cond} | {r['seed']} | {r['steps']} ({r['planned_steps']}) | {r['threads']} | "
                   f"{r['acc']:.3f} / {r['f1']:.3f} | {r['baseline_acc']:.3f} / {r['baseline_f1']:.3f} | "
                   f"{r['points_above']:+.1f} |")
    out.append("")
    for key in dict.fromkeys((r["busy"], r["minutes"]) for r in rows):
        pts = [r["points_above"] for r in rows
               if (r["busy"], r["minutes"]) == key and r.get("points_above") is not None]
        if pts:
            met = sum(p >= GOAL_POINTS for p in pts)
            out.append(f"{'busy' if key[0] else 'idle'}, {key[1]:g} min: F1 points above the baseline median "
                       f"{statistics.median(pts):+.1f} [{min(pts):+.1f}, {max(pts):+.1f}]; >= {GOAL_POINTS:g} points "
                       f"in {met} of {len(pts)} runs")
    return "\n".join(out)


def main() -> None:
    p = None  # the parser, for its error messages

    def options(ap):
        nonlocal p
        p = ap
        ap.add_argument("--n", type=int, default=3, help="seeds 0..N-1 per condition (default 3)")
        ap.add_argument("--seed-list", type=int, nargs="+", help="these seeds instead of 0..N-1")
        ap.add_argument("--condition", action="append", default=None, metavar="idle:MIN|busy:MIN",
                        help="a load and a time budget (repeatable; default idle:5 and busy:10)")
        ap.add_argument("--threads", type=int, default=None,
                        help="torch threads per run (default: not set, as the Train page launches it: the calibration "
                             "chooses)")
        ap.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="change one of the defaults (repeatable), e.g. --set lr=5e-5")
        ap.add_argument("--keep", type=Path, default=None,
                        help="keep the run directories here (default: a temp folder)")
        ap.add_argument("--report", type=Path, action="append", default=None, metavar="LOG",
                        help="print the table again from this command's saved output (its JSON lines; repeatable)")

    a = harness.parse(__doc__, options)
    if a.report is not None:
        print(table([json.loads(line) for log in a.report for line in log.read_text().splitlines()
                     if line.startswith("{")]))
        return
    try:
        conditions = [parse_condition(c) for c in (a.condition or ["idle:5", "busy:10"])]
        overrides = parse_set(a.set)
        TrainConfig.create("finetune", **overrides).check()
    except (ValueError, TypeError) as exc:  # OptionError is a ValueError
        p.error(str(exc))
    if a.n < 1 or (a.threads is not None and a.threads < 1):
        p.error("--n and --threads must be >= 1")
    root = a.keep or Path(tempfile.mkdtemp(prefix="finetune-runs-"))
    print(f"load average (1 min) before: {load_avg()}; runs in {root}" + (f"; with {overrides}" if overrides else ""),
          flush=True)
    rows = []
    for seed in a.seed_list or range(a.n):
        for busy, minutes in conditions:
            row = run_one(seed, busy, minutes, root, a.threads, overrides)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(table(rows))
    harness.save(a.json)


if __name__ == "__main__":
    main()
