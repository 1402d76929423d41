"""Where do runs of a recipe leave the unigram plateau? A distribution over seeds, run lengths and thread counts.

Why: the same recipe and seed left the plateau in one run and not in another, and the only visible
difference was the step count the calibration planned (5,400 against 6,000), through a learning-rate schedule tied
to the total. This benchmark measures the escape step as a distribution: for each thread count, total step count
and seed, one run of the recipe (``bertcore.training.recipes.RECIPES``, default ``scratch-fast``) with
``max_steps = total`` (no time budget, so the schedule is exactly the one a calibration to that total gives),
evaluated on its held-out split every ``--eval-every`` steps and stopped at ``--horizon`` steps (only the start
decides the escape). Each run is a subprocess at ``nice 19`` with ``--threads t``. Per run it records:

- ``escape``: the first evaluation whose held-out MLM loss is at least 1 nat below the run's unigram line
  (None if not by the horizon), and ``left``: the step from which it stays 0.3 nats
  below (:func:`bertcore.analysis.papers.emergence.left_unigram_line`, the run view's rule);
- the held-out losses, the unigram line, the wall time and the load average before and after;
- with ``--end``, the live-demo end condition: each run goes to its total with the recipe's probe, and its last
  checkpoint is scored loaded fresh in a new process (``bench_demo_runs.score_fresh``): held-out loss below the
  unigram line, accuracy at [MASK], the probe's top 3, and whether it meets the bar (at least 0.8 nats below the
  line and a content word in the top 3).

Results are appended to ``--out`` (JSON lines) as each run ends; a second call skips the runs already there, so
the benchmark resumes after an interruption. ``--table`` prints, per (threads, total): runs, escaped by 1,500 and by
the horizon, and the escape step's min / median / max; with ``--end`` rows, a second table: runs meeting the bar,
with a content word, and the nats below the line (min / median).

    nice -n 19 python bench/bench_escape.py --out ~/escape/base.jsonl                 # 20 seeds x 4 totals x 2 thr
    python bench/bench_escape.py --out ~/escape/wsd.jsonl --threads 1 --totals 3000 --jobs 2   # 2 runs at once
    python bench/bench_escape.py --out ~/escape/base.jsonl --table
    python bench/bench_escape.py --out ~/escape/wsd.jsonl --set warmup=300 --seeds 5   # a lever, fewer seeds
    python bench/bench_escape.py --out ~/escape/end.jsonl --end --threads 1 --totals 3000 --jobs 2  # the end condition
    python bench/bench_escape.py --out /tmp/e.jsonl --seeds 1 --totals 300 --threads 1 --horizon 200 --eval-every 50
                                                                                       # a quick check that it runs
Keep the machine otherwise idle: a busy core changes nothing in a step-bounded run but its wall time.
"""

from __future__ import annotations

import harness

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_demo_runs import BAR_MARGIN, load_avg, parse_set, score_fresh
from bertcore import runs as R
from bertcore.analysis.papers.emergence import left_unigram_line
from bertcore.runs.config import TrainConfig
from bertcore.training.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[1]

ESCAPE_NATS = 1.0  # the escape: held-out loss this far below the unigram line
LEFT_NATS = 0.3  # the run view's "left the plateau" margin (bench_demo_runs.PLATEAU_MARGIN)


def one_run(spec: dict) -> dict:
    """Run ``spec`` (recipe options + seed, total, threads, horizon) in this process; stop at the horizon."""
    from bertcore.training.loop import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cfg = TrainConfig.create("pretrain", **{
            **spec["options"], "max_steps": spec["total"], "threads": spec["threads"], "seed": spec["seed"],
            "lock": "none", "eval_every": spec["eval_every"], "save_every": 10**9, "save_early": False,
            "keep_checkpoints": 1, "run_dir": str(run_dir),
            **({} if spec.get("end") else {"probe": None})})
        holder: dict = {}

        def stop_at_horizon(record):
            if record.get("split") == "train" and record["step"] >= spec["horizon"]:
                holder["trainer"].stop.set = True

        trainer = Trainer(cfg, run_dir, on_event=[stop_at_horizon], install_signals=False)
        holder["trainer"] = trainer
        state = trainer.run()
        records = R.read_metrics(run_dir)
        ref = next(x for x in records if x.get("split") == "reference")
        unigram = ref["unigram_loss"]
        val = [(x["step"], x["mlm_loss"]) for x in records if x.get("split") == "val"]
        escape = next((s for s, v in val if v <= unigram - ESCAPE_NATS), None)
        left = left_unigram_line([s for s, _ in val], [v for _, v in val], unigram, LEFT_NATS)
        end = {}
        if spec.get("end"):  # the run's last checkpoint scored fresh in a new process, as bench_demo_runs does
            end = score_fresh(run_dir, spec["threads"])
            if "error" in end:  # the row gets "error", so the next call runs it again
                raise RuntimeError(end["error"])
            end = {k: end[k] for k in ("loss", "below_line", "acc_mask", "probe_top3", "content_word_in_top3",
                                       "meets_bar")}
    return {"state": state, "steps": trainer.step, "unigram_loss": round(unigram, 4), "escape": escape,
            "left": left, "val": [[s, round(v, 4)] for s, v in val], **end}


def key(row: dict) -> tuple:
    return row["threads"], row["total"], row["seed"], bool(row.get("end"))


def table(rows: list[dict], by: int = 1500) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in (r for r in rows if "error" not in r):
        groups.setdefault((r["threads"], r["total"]), []).append(r)
    print(f"{'threads':>7} {'total':>6} {'runs':>5} {f'escaped by {by}':>16} {'by horizon':>11} "
          f"{'escape min / median / max':>27}")
    for (t, total), rs in sorted(groups.items()):
        esc = sorted(r["escape"] for r in rs if r.get("escape") is not None)
        early = sum(e <= by for e in esc)
        spread = f"{esc[0]} / {statistics.median(esc):g} / {esc[-1]}" if esc else "-"
        print(f"{t:>7} {total:>6} {len(rs):>5} {early:>16} {len(esc):>11} {spread:>27}")
    ends = [r for r in rows if "below_line" in r]
    if not ends:
        return
    print(f"\nAt the end, the last checkpoint scored fresh (bar: >= {BAR_MARGIN} nats below the line and a content "
          "word in the probe's top 3):")
    print(f"{'threads':>7} {'total':>6} {'runs':>5} {'meet the bar':>13} {'content word':>13} "
          f"{'nats below min / median':>24} {'[MASK] acc median':>18}")
    groups = {}
    for r in ends:
        groups.setdefault((r["threads"], r["total"]), []).append(r)
    for (t, total), rs in sorted(groups.items()):
        below = sorted(r["below_line"] for r in rs)
        spread = f"{below[0]:.2f} / {statistics.median(below):.2f}"
        print(f"{t:>7} {total:>6} {len(rs):>5} {sum(r['meets_bar'] for r in rs):>13} "
              f"{sum(r['content_word_in_top3'] for r in rs):>13} {spread:>24} "
              f"{statistics.median(r['acc_mask'] for r in rs):>18.1%}")


class _ThreadCounts(argparse.Action):
    """``--threads 1 2``: the runs' thread counts, kept as ``thread_counts``. The option's own ``threads`` stays None,
    so the harness sets no thread count in this process (it only launches the runs, each with its own)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.thread_counts = values


def main(argv=None) -> None:
    p = None  # the parser, for its error messages

    def options(ap):
        nonlocal p
        p = ap
        ap.add_argument("--recipe", default="scratch-fast", choices=sorted(RECIPES))
        ap.add_argument("--seeds", type=int, default=20)
        ap.add_argument("--first-seed", type=int, default=0)
        ap.add_argument("--seed-list", type=int, nargs="+", help="these seeds instead of --first-seed/--seeds (a lever "
                        "tried on the seeds that stayed on the plateau)")
        ap.add_argument("--jobs", type=int, default=1, help="runs at once (jobs x threads <= the cores: steps are "
                        "bounded, so only the wall time changes)")
        ap.add_argument("--totals", type=int, nargs="+", default=[3000, 4500, 6000, 12000])
        ap.add_argument("--threads", type=int, nargs="+", default=None, action=_ThreadCounts, metavar="T",
                        help="the runs' thread counts (default 1 2)")
        ap.set_defaults(thread_counts=[1, 2])
        ap.add_argument("--horizon", type=int, default=2000, help="steps run of each (the escape is decided early)")
        ap.add_argument("--eval-every", type=int, default=100)
        ap.add_argument("--end", action="store_true", help="run each to its total (no horizon) with the recipe's probe "
                        "and score its last checkpoint loaded fresh: the live-demo end condition")
        ap.add_argument("--set", action="append", default=[], help="option=value overriding the recipe (repeatable)")
        ap.add_argument("--out", type=Path, help="JSON lines, appended; runs already there are skipped (required)")
        ap.add_argument("--table", action="store_true", help="print the table of --out and stop")
        ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one spec (JSON) and print its result

    a = harness.parse(__doc__, options, argv)
    if a.one:
        print(json.dumps(one_run(json.loads(a.one))))
        return
    if a.out is None:
        p.error("--out is required")
    rows = [json.loads(x) for x in a.out.read_text().splitlines() if x.strip()] if a.out.exists() else []
    if a.table:
        table(rows)
        return
    options = {**RECIPES[a.recipe].options, **parse_set(a.set)}
    done = {key(r) for r in rows if "error" not in r}  # a failed run is tried again
    a.out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    seeds = a.seed_list or range(a.first_seed, a.first_seed + a.seeds)
    # seeds outermost: a cut-short benchmark still covers every total and thread count
    todo = [(seed, total, threads) for seed in seeds for total in a.totals for threads in a.thread_counts
            if (threads, total, seed, a.end) not in done]
    lock = threading.Lock()

    def run(job: tuple[int, int, int]) -> None:
        seed, total, threads = job
        spec = {"options": options, "seed": seed, "total": total, "threads": threads,
                "horizon": total if a.end else min(a.horizon, total), "eval_every": a.eval_every, "end": a.end}
        row = {"recipe": a.recipe, "set": a.set, "seed": seed, "total": total, "threads": threads, "end": a.end,
               "horizon": spec["horizon"], "jobs": a.jobs, "load_before": load_avg()}
        with harness.stopwatch(f"run: seed {seed}, total {total}, {threads} thread(s)") as sw:
            proc = subprocess.run(["nice", "-n", "19", sys.executable, __file__, "--one", json.dumps(spec)],
                                  cwd=ROOT, env=env, capture_output=True, text=True)
        row.update(wall_s=round(sw.seconds, 1), load_after=load_avg())
        if proc.returncode:
            row["error"] = (proc.stderr or proc.stdout)[-600:]
        else:
            row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        with lock, a.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"seed {seed} total {total} threads {threads}: escape {row.get('escape')} left {row.get('left')}"
              + (f" end {row.get('below_line')} nats below, bar {row.get('meets_bar')}" if a.end else "")
              + f" ({row['wall_s']} s){' ERROR' if 'error' in row else ''}", flush=True)

    with ThreadPoolExecutor(a.jobs) as pool:  # each job is its own subprocess with --threads t
        list(pool.map(run, todo))
    table([json.loads(x) for x in a.out.read_text().splitlines() if x.strip()])
    harness.save(a.json)


if __name__ == "__main__":
    main()
