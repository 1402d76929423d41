"""Which from-scratch pretraining recipe leaves the MLM plateau fastest on this machine's CPU?

Each recipe is a real run of the project's CLI (``python -m bertcore.training pretrain ... --max-time M``)
into a temporary run directory; the table reads its held-out evaluations (``metrics.jsonl``,
``split == "val"``) at 1, 2, 5 and 10 minutes of training: accuracy at [MASK] positions (the honest
number: no copying), MLM loss against the run's own unigram (frequency-only) loss, tokens/s, and the
probe's top-3 guesses at the end. A recipe "leaves the plateau" when its [MASK] accuracy is at least
twice the rate of the most frequent token of its data (what a model that knows only frequencies gets).

    python bench/bench_recipes.py --minutes 10 --threads 2                 # every recipe, one after another
    python bench/bench_recipes.py --minutes 5 --only default-bert,fast --write docs/measurements/recipes.md

Runs one recipe at a time (timings are only comparable when nothing else trains). Ratios in the table
(``x unigram rate``) are measured within each run, so machine speed partly cancels.
"""

from __future__ import annotations

import harness

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = harness.ROOT

# common options first: a recipe's own options (e.g. --eval-batches) win
COMMON = ["--lock", "none", "--log-every", "10", "--eval-batches", "4", "--keep-checkpoints", "1"]
#: name -> (what it tests, CLI options). From scratch, BBC News unless said otherwise.
RECIPES: dict[str, tuple[str, list[str]]] = {
    "default-bert": ("BERT's recipe on the nano preset: bert-base vocab (30k), seq 128, NSP on, 80/10/10, lr 1e-3",
                     ["--preset", "nano", "--max-seq-len", "128", "--batch-size", "32", "--lr", "1e-3",
                      "--eval-every", "20"]),
    "vocab8k": ("+ a corpus WordPiece vocabulary of 8k (smaller softmax, fewer rare pieces)",
                ["--preset", "nano", "--tokenizer", "corpus:8000", "--max-seq-len", "128", "--batch-size", "32",
                 "--lr", "1e-3", "--eval-every", "20"]),
    "vocab8k-nonsp-mask100": ("+ NSP off and 100% [MASK] corruption (no copying shortcut)",
                              ["--preset", "nano", "--tokenizer", "corpus:8000", "--max-seq-len", "128",
                               "--batch-size", "32", "--lr", "1e-3", "--no-nsp", "--mask-replace-prob", "1.0",
                               "--random-replace-prob", "0.0", "--eval-every", "20"]),
    "fast": ("+ seq 64, batch 64, lr 2e-3, dropout 0, pre-LN",
             ["--preset", "nano", "--tokenizer", "corpus:8000", "--max-seq-len", "64", "--batch-size", "64",
              "--lr", "2e-3", "--no-nsp", "--mask-replace-prob", "1.0", "--random-replace-prob", "0.0",
              "--dropout", "0", "--pre-layer-norm", "--eval-every", "20"]),
    "fast-mini": ("fast on the 4-layer mini preset",
                  ["--preset", "mini", "--tokenizer", "corpus:8000", "--max-seq-len", "64", "--batch-size", "64",
                   "--lr", "2e-3", "--no-nsp", "--mask-replace-prob", "1.0", "--random-replace-prob", "0.0",
                   "--dropout", "0", "--pre-layer-norm", "--eval-every", "20"]),
    "tiny-fast": ("fast on the tiny preset (2 layers x 128): about 8x fewer FLOPs per token, so many more steps",
                  ["--preset", "tiny", "--tokenizer", "corpus:8000", "--max-seq-len", "64", "--batch-size", "32",
                   "--lr", "3e-3", "--no-nsp", "--mask-replace-prob", "1.0", "--random-replace-prob", "0.0",
                   "--dropout", "0", "--pre-layer-norm", "--eval-every", "100"]),
    "tiny-seq32": ("tiny-fast with 32-token sequences and batches of 64",
                   ["--preset", "tiny", "--tokenizer", "corpus:8000", "--max-seq-len", "32", "--batch-size", "64",
                    "--lr", "3e-3", "--no-nsp", "--mask-replace-prob", "1.0", "--random-replace-prob", "0.0",
                    "--dropout", "0", "--pre-layer-norm", "--eval-every", "100"]),
    # the levers of docs/measurements/recipes.md's recipe search, one at a time on top of "tiny-2k-mask30"
    "tiny-2k-mask30": ("tiny, a corpus WordPiece vocabulary of 2k, seq 64, batch 32, lr 3e-3, 30% masking (Wettig et "
                       "al. 2023), all [MASK], pre-LN, dropout 0, no NSP",
                       ["--preset", "tiny", "--tokenizer", "corpus:2000", "--max-seq-len", "64", "--batch-size", "32",
                        "--lr", "3e-3", "--mlm-probability", "0.3", "--no-nsp", "--mask-replace-prob", "1.0",
                        "--random-replace-prob", "0.0", "--dropout", "0", "--pre-layer-norm", "--eval-every", "100"]),
    "tiny-1k-mask30": ("tiny-2k-mask30 with a 1k vocabulary (more, shorter pieces)",
                       ["--preset", "tiny", "--tokenizer", "corpus:1000", "--max-seq-len", "64", "--batch-size", "32",
                        "--lr", "3e-3", "--mlm-probability", "0.3", "--no-nsp", "--mask-replace-prob", "1.0",
                        "--random-replace-prob", "0.0", "--dropout", "0", "--pre-layer-norm", "--eval-every", "100"]),
    "tiny-2k-mask30-init": ("tiny-2k-mask30 + unigram-bias init (Karpathy 2019) + sinusoidal position init",
                            ["--preset", "tiny", "--tokenizer", "corpus:2000", "--max-seq-len", "64", "--batch-size",
                             "32", "--lr", "3e-3", "--mlm-probability", "0.3", "--no-nsp", "--mask-replace-prob",
                             "1.0", "--random-replace-prob", "0.0", "--dropout", "0", "--pre-layer-norm",
                             "--unigram-init", "--position-init", "sinusoidal", "--eval-every", "100"]),
    "tiny-2k-mask30-wiki": ("tiny-2k-mask30 on Wikipedia summaries (shorter, simpler sentences than 2004 news)",
                            ["--preset", "tiny", "--corpus", "wiki", "--tokenizer", "corpus:2000", "--max-seq-len",
                             "64", "--batch-size", "32", "--lr", "3e-3", "--mlm-probability", "0.3", "--no-nsp",
                             "--mask-replace-prob", "1.0", "--random-replace-prob", "0.0", "--dropout", "0",
                             "--pre-layer-norm", "--eval-every", "100"]),
    "tiny-seq32-wiki": ("tiny-seq32 on Wikipedia summaries (the Train page's default after the recipe search)",
                        ["--preset", "tiny", "--corpus", "wiki", "--tokenizer", "corpus:8000", "--max-seq-len", "32",
                         "--batch-size", "64", "--lr", "3e-3", "--warmup", "0.05", "--no-nsp", "--mask-replace-prob",
                         "1.0", "--random-replace-prob", "0.0", "--dropout", "0", "--pre-layer-norm", "--eval-every",
                         "100", "--eval-batches", "8"]),
}
MARKS = (1, 2, 5, 10)


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


def run_recipe(name: str, options: list[str], minutes: float, threads: int | None, root: Path, label: str) -> dict:
    run_dir = root / label.replace(" ", "_").replace("(", "").replace(")", "")
    cmd = [sys.executable, "-m", "bertcore.training", "pretrain", *COMMON, *options, "--max-time", str(minutes),
           *(["--threads", str(threads)] if threads else []), "--run-dir", str(run_dir)]
    with harness.stopwatch(f"{label}: training run (wall)") as sw:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    wall = sw.seconds
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    val = [r for r in metrics if r.get("split") == "val"]
    train = [r for r in metrics if r.get("split") == "train" and r.get("tokens_per_s")]
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    probes = read_jsonl(run_dir / "probe.jsonl")
    data = run.get("data", {})
    res = {"name": label, "recipe": name, "cmd": " ".join(cmd[1:]), "rc": proc.returncode, "wall_s": round(wall, 1),
           "unigram_loss": data.get("unigram_loss") or run.get("unigram_loss"),
           "top_rate": data.get("most_frequent_token_rate") or run.get("most_frequent_token_rate"),
           "tokens_per_s": round(sum(r["tokens_per_s"] for r in train) / len(train)) if train else None,
           "steps": max((r["step"] for r in metrics), default=0), "marks": {},
           "probe": [[p[0] for p in preds[:3]] for preds in probes[-1]["predictions"]] if probes else None,
           "stderr_tail": proc.stderr[-800:] if proc.returncode else "",
           "load_avg_1min_at_end": round(harness.load_average(), 2)}
    res["fresh"] = fresh_evaluation(run_dir)
    for m in MARKS:
        before = [r for r in val if r.get("time", 0) <= m * 60 + 5]
        if before and m <= minutes:
            r = before[-1]
            res["marks"][m] = {"acc_mask": r.get("mlm_acc_mask"), "top5_mask": r.get("mlm_top5_mask"),
                               "loss": r.get("mlm_loss"), "step": r.get("step")}
    return res


def fresh_evaluation(run_dir: Path) -> dict | None:
    """The last checkpoint's held-out [MASK] accuracy and loss recomputed in a new process
    (``python -m bertcore.training evaluate``), to set beside what the run logged."""
    ckpts = sorted((run_dir / "checkpoints").glob("step-*"))
    if not ckpts:
        return None
    proc = subprocess.run([sys.executable, "-m", "bertcore.training", "evaluate", "--checkpoint", str(ckpts[-1])],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        return {"error": proc.stderr[-400:]}
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    from bertcore.analysis.papers.emergence import is_content_word

    probe = [[p[0] for p in preds[:3]] for preds in got["probe"]["predictions"]] if got.get("probe") else []
    return {"step": got["step"], "acc_mask": got.get("mlm_acc_mask"), "top5_mask": got.get("mlm_top5_mask"),
            "content_word_in_top3": any(is_content_word(t) for top in probe for t in top),
            "loss": got.get("mlm_loss"),
            "probe": [[p[0] for p in preds[:3]] for preds in got["probe"]["predictions"]] if got.get("probe") else None}


def fmt(v, pct=True) -> str:
    if v is None:
        return "-"
    return f"{v:.1%}" if pct else f"{v:.2f}"


def fresh_cell(f: dict | None) -> str:
    if not f or "error" in f:
        return "-"
    content = "content word in probe top 3" if f.get("content_word_in_top3") else "no content word in probe top 3"
    return f"{fmt(f['acc_mask'])} / {fmt(f['top5_mask'])} / {fmt(f['loss'], False)} (step {f['step']}; {content})"


def table(results: list[dict], minutes: float, threads: int | None) -> str:
    marks = [m for m in MARKS if m <= minutes]
    head = ("| recipe | tok/s | " + " | ".join(f"[MASK] acc / loss @{m} min" for m in marks)
            + " | top token rate | unigram loss | x top rate at end | probe top-3 at end "
            "| last checkpoint loaded fresh: [MASK] acc / top-5 / loss | load avg |")
    lines = [head, "|" + "---|" * (8 + len(marks))]
    for r in results:
        cells = []
        for m in marks:
            x = r["marks"].get(m)
            cells.append(f"{fmt(x['acc_mask'])} / {fmt(x['loss'], False)}" if x else "-")
        last = r["marks"].get(marks[-1]) if marks else None
        ratio = (last["acc_mask"] / r["top_rate"]) if last and last.get("acc_mask") and r["top_rate"] else None
        probe = " ; ".join(", ".join(p) for p in r["probe"]) if r["probe"] else "-"
        lines.append(f"| {r['name']} | {r['tokens_per_s'] or '-'} | " + " | ".join(cells)
                     + f" | {fmt(r['top_rate'])} | {fmt(r['unigram_loss'], False)} | "
                     + (f"{ratio:.1f}x" if ratio else "-") + f" | {probe} | {fresh_cell(r.get('fresh'))} "
                     f"| {r.get('load_avg_1min_at_end', '-')} |")
    legend = "\n".join(f"- **{n}**: {RECIPES[n][0]}" for n in dict.fromkeys(r["recipe"] for r in results))
    threads_text = f"{threads} CPU thread(s)" if threads else "torch's default CPU threads"
    return (f"{minutes:g}-minute runs, {threads_text}, one at a time; held-out BBC documents "
            f"(4 batches per evaluation).\n\n" + "\n".join(lines) + "\n\n" + legend + "\n")


def main() -> None:
    def options(p):
        p.add_argument("--minutes", type=float, default=10.0)
        p.add_argument("--only", default=None, help="comma-separated recipe names")
        p.add_argument("--write", type=Path, default=None, help="also append the table to this Markdown file")
        p.add_argument("--keep", type=Path, default=None, help="keep the run directories here")
        p.add_argument("--seeds", default="0", help="comma-separated --seed values: each recipe once per seed")

    a = harness.parse(__doc__, options)  # --threads: the training runs' torch threads (default: torch's)
    names = a.only.split(",") if a.only else list(RECIPES)
    root = a.keep or Path(tempfile.mkdtemp(prefix="recipes-"))
    root.mkdir(parents=True, exist_ok=True)
    results = []
    seeds = [int(x) for x in a.seeds.split(",")]
    for n, seed in [(n, seed) for n in names for seed in seeds]:
        label = n if len(seeds) == 1 else f"{n} (seed {seed})"
        print(f"== {label}: {RECIPES[n][0]}", flush=True)
        r = run_recipe(n, RECIPES[n][1] + ["--seed", str(seed)], a.minutes, a.threads, root, label)
        print(json.dumps(r, indent=1), flush=True)
        results.append(r)
    out = table(results, a.minutes, a.threads)
    print(out)
    if a.write:
        with a.write.open("a", encoding="utf-8") as fh:
            fh.write(f"\n## {time.strftime('%Y-%m-%d %H:%M')} `python bench/bench_recipes.py "
                     f"{' '.join(sys.argv[1:])}`\n\n{out}")
    harness.save(a.json)


if __name__ == "__main__":
    main()
