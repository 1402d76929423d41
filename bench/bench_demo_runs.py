"""Does the Train page's default run leave the unigram plateau every time, on every seed and under load?

Runs a recipe (``bertcore.training.recipes.RECIPES``, default ``scratch-fast``: the options the Train page
launches) through the CLI for seeds 0..N-1, one run at a time, plus one more run of seed 0 while a second
process keeps one core busy (a Python busy loop), then scores each run's last checkpoint loaded fresh in a
new process (``python -m bertcore.training evaluate``: the project's loader, the run's own held-out split and
fixed masks, and its probe). Prints one JSON line per run, then a table:

- steps: done / planned (the calibration in run.json: what the time budget became on this machine);
- held-out MLM loss against the run's unigram line (the loss of a model that knows only frequencies);
- accuracy at [MASK] positions (``mlm_acc_mask``; the model's MLM head runs on masked rows only) against
  the rate of the most frequent token;
- left the plateau at: the first evaluation from which the logged held-out loss stays at least
  :data:`PLATEAU_MARGIN` (0.3) nats below the unigram line
  (:func:`bertcore.analysis.papers.emergence.left_unigram_line`), in steps and seconds; "never" if it does not;
- the probe's top 3 at each [MASK] (with ``--probe auto``, the held-out word in brackets);
- whether the run meets the bar: loss at least :data:`BAR_MARGIN` (0.8) nats below the unigram line
  and a content word (:func:`bertcore.analysis.papers.emergence.is_content_word`) in the top 3 of some probe mask.

The load average (1 minute) is printed before and after each run. Do not run this beside other work:
timings, and so the step counts, depend on the machine being otherwise idle (except the loaded run).

    python bench/bench_demo_runs.py --n 5                               # the full benchmark (about 70 min)
    python bench/bench_demo_runs.py --n 1 --minutes 1 --no-busy         # a quick check that it works
    python bench/bench_demo_runs.py --n 5 --set lr=3e-3 --set unigram_init=false --set beta2=0.999  # the old recipe
    python bench/bench_demo_runs.py --n 5 --no-busy --recipe scratch-fast --recipe modern  # classic vs ModernBERT

With several ``--recipe``, seed by seed the recipes take turns (so a slow hour of the machine hits both), and a
last table compares them: per recipe, the median and range over seeds of the accuracy at [MASK] and of the
held-out loss below the unigram line, and how many runs left the plateau.
"""

from __future__ import annotations

import harness

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bertcore import runs as R
from bertcore.analysis.papers.emergence import is_content_word, left_unigram_line
from bertcore.runs.config import TrainConfig
from bertcore.training.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[1]

PLATEAU_MARGIN = 0.3  # nats below the unigram line: "left the plateau"
BAR_MARGIN = 0.8  # nats below the unigram line: the bar for the final held-out loss
BUSY_LOOP = "while True:\n    pass\n"


def load_avg() -> float:
    return round(harness.load_average(), 2)


def parse_set(items: list[str]) -> dict:
    """``["lr=2e-3", "unigram_init=true", "probe=auto"]`` -> option overrides (JSON values, else strings).

    Raises:
        ValueError: an item without ``=`` or an unknown option name.
    """
    out = {}
    known = set(TrainConfig.__dataclass_fields__)
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in known:
            raise ValueError(f"--set {item!r}: give option=value with a TrainConfig option name")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}


def launch(cfg: TrainConfig, busy: bool, row: dict) -> subprocess.CompletedProcess:
    """Run ``cfg`` through the CLI (``python -m bertcore.training``), beside a busy loop on one core if ``busy``;
    ``row`` gets ``wall_s`` and ``load_after`` (the wall time is also kept as a harness timing named ``row["run"]``)."""
    hog = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if busy else None
    try:
        with harness.stopwatch(row.get("run", "run")) as sw:
            proc = subprocess.run([sys.executable, "-m", "bertcore.training", *cfg.to_argv()], cwd=ROOT, env=ENV,
                                  capture_output=True, text=True)
        row["wall_s"] = round(sw.seconds, 1)
        row["load_after"] = load_avg()
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return proc


def run_one(recipe: str, seed: int, threads: int | None, minutes: float | None, root: Path, busy: bool,
            overrides: dict | None = None) -> dict:
    """One run of ``recipe`` (with ``overrides``) and its last checkpoint scored fresh; a dict of what the
    table shows."""
    r = RECIPES[recipe]
    name = f"{recipe}-seed{seed}" + ("-busy" if busy else "")
    run_dir = root / name
    cfg = TrainConfig.create("pretrain", **{**r.options, **(overrides or {})}, max_time=minutes or r.minutes,
                             threads=threads, lock="none", seed=seed, run_dir=str(run_dir))
    row: dict = {"run": name, "seed": seed, "busy": busy, "load_before": load_avg()}
    proc = launch(cfg, busy, row)
    if proc.returncode:
        return {**row, "error": (proc.stderr or proc.stdout)[-600:]}
    scored = score_fresh(run_dir, threads)
    if "error" in scored:
        return {**row, **scored}
    cal = (R.read_config(run_dir) or {}).get("calibration") or {}
    return {**row, "steps": scored.pop("step"), "planned_steps": cal.get("total_steps"),
            "steps_per_s_measured": cal.get("steps_per_s"), "threads": cal.get("threads") or threads,
            "stopped_early_at": (R.read_status(run_dir) or {}).get("stopped_early_at"), **scored}


def score_fresh(run_dir: Path, threads: int | None = None) -> dict:
    """Score a pretraining run's last checkpoint loaded fresh in a new process (``python -m bertcore.training
    evaluate``: the project's loader, the run's own held-out split, fixed masks and probe) against the unigram line
    its metrics log; a dict with ``step``, ``loss``, ``below_line`` (nats), ``acc_mask``, ``left_at_step`` and
    ``left_at_s`` (the run view's rule on the logged held-out losses), the probe's top 3 per [MASK],
    ``content_word_in_top3`` and ``meets_bar`` (the bar: at least :data:`BAR_MARGIN` nats below the line and
    a content word in the top 3); or ``{"error": ...}`` when the evaluation fails."""
    records = R.read_metrics(run_dir)
    ref = next(x for x in records if x.get("split") == "reference")
    unigram, rate = ref["unigram_loss"], ref["most_frequent_token_rate"]
    val = [x for x in records if x.get("split") == "val"]
    left = left_unigram_line([x["step"] for x in val], [x["mlm_loss"] for x in val], unigram, PLATEAU_MARGIN)
    left_s = next((x["time"] for x in val if x["step"] == left), None)
    fresh = subprocess.run([sys.executable, "-m", "bertcore.training", "evaluate", "--checkpoint",
                            str(R.last_checkpoint(run_dir)), *(["--threads", str(threads)] if threads else [])],
                           cwd=ROOT, env=ENV, capture_output=True, text=True)
    if fresh.returncode:
        return {"error": "evaluate: " + fresh.stderr[-600:]}
    got = json.loads(fresh.stdout.strip().splitlines()[-1])
    probe = got.get("probe") or {}
    top3 = [[t for t, _ in preds[:3]] for preds in probe.get("predictions", [])]
    content = any(is_content_word(t) for top in top3 for t in top)
    return {"step": got["step"], "unigram_loss": round(unigram, 3), "top_rate": round(rate, 4),
            "top_token": ref.get("most_frequent_token"), "loss": round(got["mlm_loss"], 3),
            "below_line": round(unigram - got["mlm_loss"], 3), "acc_mask": round(got["mlm_acc_mask"], 4),
            "left_at_step": left, "left_at_s": left_s, "probe_top3": top3, "probe_answers": probe.get("answers"),
            "probe_labels": probe.get("labels"), "content_word_in_top3": content,
            "meets_bar": unigram - got["mlm_loss"] >= BAR_MARGIN and content}


def probe_cell(row: dict) -> str:
    answers = row.get("probe_answers") or [None] * len(row["probe_top3"])
    return " ; ".join((f"[{a}] " if a else "") + ", ".join(top) for a, top in zip(answers, row["probe_top3"]))


def table(rows: list[dict]) -> str:
    out = ["| run | load avg before -> after | steps (planned) | held-out loss (unigram) | below the line | "
           "[MASK] acc (top-token rate) | left the plateau at | probe top-3 per [MASK] ([held-out word]) | "
           "meets the bar |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['run']} | {r['load_before']} | failed: {r['error'][-150:]!r} |")
            continue
        at = "never" if r["left_at_step"] is None else f"step {r['left_at_step']:,} ({r['left_at_s']:.0f} s)"
        early = f", time limit at {r['stopped_early_at']:,}" if r.get("stopped_early_at") else ""
        threads = f"; {r['threads']} thread(s)" if r.get("threads") else ""
        out.append(f"| {r['run']} | {r['load_before']} -> {r['load_after']} | {r['steps']:,} "
                   f"({r['planned_steps'] or '-'}{early}{threads}) | {r['loss']:.2f} ({r['unigram_loss']:.2f}) | "
                   f"{r['below_line']:.2f} | {r['acc_mask']:.1%} ({r['top_rate']:.1%} '{r['top_token']}') | {at} | "
                   f"{probe_cell(r)} | {'yes' if r['meets_bar'] else 'no'} |")
    return "\n".join(out)


def comparison(rows: list[dict], recipes: list[str]) -> str:
    """Per recipe over its idle runs: median [min, max] of the accuracy at [MASK] and of the held-out loss below
    the unigram line, the runs that left the plateau (and the median step and second they did), steps done."""
    out = ["| recipe | runs | [MASK] acc, median [range] | below the unigram line (nats), median [range] | "
           "left the plateau (median step, s) | steps done, median |", "|---|---|---|---|---|---|"]
    for recipe in recipes:
        ok = [r for r in rows if r["recipe"] == recipe and not r["busy"] and "error" not in r]
        failed = sum(r["recipe"] == recipe and "error" in r for r in rows)
        if not ok:
            out.append(f"| {recipe} | 0 ({failed} failed) | - | - | - | - |")
            continue
        acc, below = [r["acc_mask"] for r in ok], [r["below_line"] for r in ok]
        left = [r for r in ok if r["left_at_step"] is not None]
        at = (f"{len(left)} of {len(ok)} (step {statistics.median(r['left_at_step'] for r in left):,.0f}, "
              f"{statistics.median(r['left_at_s'] for r in left):.0f} s)" if left else f"0 of {len(ok)}")
        out.append(f"| {recipe} | {len(ok)}" + (f" ({failed} failed)" if failed else "")
                   + f" | {statistics.median(acc):.1%} [{min(acc):.1%}, {max(acc):.1%}] | "
                   f"{statistics.median(below):.2f} [{min(below):.2f}, {max(below):.2f}] | {at} | "
                   f"{statistics.median(r['steps'] for r in ok):,.0f} |")
    return "\n".join(out)



def equal_steps(rows: list[dict], recipes: list[str], root: Path) -> str:
    """Per recipe over its idle runs: the live held-out MLM loss and [MASK] accuracy (``metrics.jsonl``'s ``val``
    rows) at one step that every run reached before its own decay began (with the recipes' ``decay`` option the
    schedule is the same for every planned total until the last ``decay`` share of the steps:
    ``bertcore.training.optim``), so the calibration's step counts, which follow the machine's load, do not enter;
    and the steps a second the calibration measured. Empty when no such step exists (a recipe without ``decay``)."""
    ok = [r for r in rows if r["recipe"] in recipes and not r["busy"] and "error" not in r]
    if not ok:
        return ""
    vals = {}
    for r in ok:
        records = R.read_metrics(root / r["run"])
        vals[r["run"]] = {x["step"]: x for x in records if x.get("split") == "val"}
    limit = min(int(r["planned_steps"] * (1 - (RECIPES[r["recipe"]].options.get("decay") or 1.0))) for r in ok)
    common = set.intersection(*(set(v) for v in vals.values()))
    at = max((s for s in common if s <= limit), default=None)
    if at is None:
        return ""
    out = [f"At step {at:,} (every run's lr schedule identical up to here):", "",
           "| recipe | runs | held-out MLM loss, median [range] | [MASK] acc, median [range] | "
           "steps a second (calibration), median [range] |", "|---|---|---|---|---|"]
    for recipe in recipes:
        mine = [r for r in ok if r["recipe"] == recipe]
        if not mine:
            continue
        loss = [vals[r["run"]][at]["mlm_loss"] for r in mine]
        acc = [vals[r["run"]][at]["mlm_acc_mask"] for r in mine]
        sps = [r["steps_per_s_measured"] for r in mine if r.get("steps_per_s_measured")]
        speed = f"{statistics.median(sps):.2f} [{min(sps):.2f}, {max(sps):.2f}]" if sps else "-"
        out.append(f"| {recipe} | {len(mine)} | {statistics.median(loss):.3f} [{min(loss):.3f}, {max(loss):.3f}] | "
                   f"{statistics.median(acc):.1%} [{min(acc):.1%}, {max(acc):.1%}] | {speed} |")
    return "\n".join(out)


def report(rows: list[dict], recipes: list[str], root: Path, live: bool = True) -> None:
    """Print the per-run table, and with several recipes their comparison at the end and at equal steps (``live``:
    after the runs, so the load average now is worth printing)."""
    print()
    print(table(rows))
    if len(recipes) > 1:
        print()
        print(comparison(rows, recipes))
        print()
        print(equal_steps(rows, recipes, root))
    ok = sum(bool(r.get("meets_bar")) for r in rows)
    print(f"\n{ok} of {len(rows)} runs meet the bar (held-out loss >= {BAR_MARGIN} nats below the unigram line and a "
          f"content word in the probe's top 3)" + (f"; load average (1 min) after: {load_avg()}" if live else ""))

def main() -> None:
    p = None  # the parser, for its error messages

    def options(ap):
        nonlocal p
        p = ap
        ap.add_argument("--n", type=int, default=5, help="runs of seeds 0..N-1 (default 5)")
        ap.add_argument("--minutes", type=float, default=None, help="time budget per run (default: the recipe's)")
        ap.add_argument("--threads", type=int, default=None,
                        help="torch threads per run (default: not set, as the Train page launches it: the calibration "
                             "chooses)")
        ap.add_argument("--recipe", action="append", choices=sorted(RECIPES),
                        help="the recipe to run (default scratch-fast); repeat it to compare recipes seed by seed")
        ap.add_argument("--no-busy", action="store_true", help="skip the extra run of seed 0 beside a busy process")
        ap.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="change one of the recipe's options (repeatable), e.g. --set lr=3e-3")
        ap.add_argument("--keep", type=Path, default=None,
                        help="keep the run directories here (default: a temp folder)")
        ap.add_argument("--report", type=Path, default=None, metavar="LOG",
                        help="print the tables again from this command's saved output (its JSON lines; the run "
                             "directories in --keep), without running anything")

    a = harness.parse(__doc__, options)
    if a.report is not None:
        rows = [json.loads(line) for line in a.report.read_text().splitlines() if line.startswith("{")]
        return report(rows, list(dict.fromkeys(r["recipe"] for r in rows)), a.keep or Path("."), live=False)
    if a.n < 0 or (a.threads is not None and a.threads < 1) or (a.minutes is not None and a.minutes <= 0):
        p.error("--n must be >= 0, --threads >= 1 and --minutes > 0")
    recipes = list(dict.fromkeys(a.recipe or ["scratch-fast"]))
    try:
        overrides = parse_set(a.set)
        for recipe in recipes:
            TrainConfig.create("pretrain", **{**RECIPES[recipe].options, **overrides}).check()
    except (ValueError, TypeError) as exc:  # OptionError is a ValueError
        p.error(str(exc))
    root = a.keep or Path(tempfile.mkdtemp(prefix="demo-runs-"))
    print(f"load average (1 min) before: {load_avg()}; runs in {root}; recipe(s) {', '.join(recipes)}"
          + (f" with {overrides}" if overrides else ""), flush=True)
    plan = [(seed, False) for seed in range(a.n)] + ([] if a.no_busy else [(0, True)])
    rows = []
    for seed, busy in plan:
        for recipe in recipes:
            row = {"recipe": recipe, **run_one(recipe, seed, a.threads, a.minutes, root, busy, overrides)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    report(rows, recipes, root)
    harness.save(a.json)


if __name__ == "__main__":
    main()
