"""A real training run's speed against its step's own speed, in one process (docs/gpu.md).

    python bench/bench_run_vs_step.py --threads 2          # the shipped model's shape, 2 threads, CPU
    python bench/bench_run_vs_step.py --prefetch 0 2       # the serial data path against the prefetched one
    python bench/bench_run_vs_step.py --device cuda --batch-size 256 --precision bf16 --replay DIR   # on a GPU
    python bench/bench_run_vs_step.py ... --compile default      # the encoder under torch.compile, step and runs

Measures, in this order: the matmul peak in the dtype the step runs in; the step alone
(``bench_train_step.bench_bertcore``: random NSP-shaped pairs, masking, forward, backward, clip, AdamW); a real
``Trainer`` run (``bertcore.training.loop``) of continued pretraining of ``--config``'s model on BBC News for each
``--prefetch`` depth (its data from ``--replay DIR``, made by ``bench/device_pretrain.py pack DIR -- pretrain
--init models/minilm-mlm --corpus bbc --max-seq-len 128``, on a machine without the corpora), evaluation and
checkpoints out of the way (``--eval-every``/``--save-every`` past the end, and
left out of the logged speed anyway); the step alone again. The run's speed is the median of its logged
``padded_tokens_per_s`` (every position computed, as the step-only figure counts them), its first window
(warm-up) left out; ``tokens_per_s`` (non-pad tokens) is printed beside it. Ratio = run / step-only (mean of the
two step-only measurements, so a load change during the benchmark shows as their difference). MFU = the
bertcore FLOPs per token (``bench_train_step.flops_per_token``, MLM head on the selected positions) x tokens/s
/ the measured peak. A benchmark, not a test.
"""

from __future__ import annotations

import harness

import contextlib
import os
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from device_pretrain import replaying
from bench_train_step import bench_bertcore, flops_per_token, make_batch, matmul_peak
from bertcore import runs as R
from bertcore.modeling.hf_format import read_config_file
from bertcore.runs.config import COMPILE_MODES
from bertcore.training import TrainConfig
from bertcore.training.loop import Trainer


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def real_run(a, prefetch: int, root: Path) -> dict[str, float]:
    """A continued-pretraining run of ``a.steps`` steps; medians of its logged speeds (first window left out)."""
    run_dir = root / f"prefetch-{prefetch}"
    cfg = TrainConfig(task="pretrain", init=a.config, corpus=a.corpus, max_steps=a.steps, batch_size=a.batch_size,
                      max_seq_len=a.seq, log_every=a.log_every, eval_every=10 * a.steps, save_every=10 * a.steps,
                      eval_batches=1, dropout=0.0, lock="none", device=a.device, threads=a.threads,
                      precision=a.precision, prefetch=prefetch, compile=a.compile, run_dir=str(run_dir), seed=0)
    with replaying(Path(a.replay)) if a.replay else contextlib.nullcontext(), \
            harness.stopwatch(f"real run, --prefetch {prefetch} (wall, with its setup)"):
        state = Trainer(cfg, run_dir, install_signals=False).run()
    if state != "done":
        raise SystemExit(f"the run with --prefetch {prefetch} ended {state}: {R.read_status(run_dir).get('error')}")
    rows = [r for r in R.read_metrics(run_dir, "train")][1:]
    return {k: statistics.median(r[k] for r in rows) for k in ("padded_tokens_per_s", "tokens_per_s")}


def main(argv=None) -> None:
    def options(p):
        p.add_argument("--config", default="models/minilm-mlm", help="a model folder: its shape and weights")
        p.add_argument("--corpus", default="bbc")
        p.add_argument("--batch-size", type=int, default=16)
        p.add_argument("--seq", type=int, default=128)
        p.add_argument("--steps", type=int, default=60, help="steps of each real run (and timed step-only steps / 2)")
        p.add_argument("--log-every", type=int, default=10)
        p.add_argument("--device", default="cpu")
        p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
        p.add_argument("--prefetch", type=int, nargs="+", default=[0, 2], help="prefetch depths of the real runs")
        p.add_argument("--compile", default="none", choices=COMPILE_MODES,
                       help="the encoder under torch.compile (the training loop's --compile), in the step and the runs")
        p.add_argument("--replay", default=None, help="a folder of bench/device_pretrain.py pack: the runs' data")

    a = harness.parse(__doc__, options, argv)  # --threads: the step's and the runs' torch threads
    device = torch.device(a.device)
    cfg = read_config_file(Path(a.config) / "config.json")
    cfg = replace(cfg, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    bf16 = a.precision == "bf16" or (device.type == "cuda" and a.precision == "auto")
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)}, driver CUDA {torch.version.cuda})" if device.type == "cuda"
             else "") + f", threads {torch.get_num_threads()}, cpu count {os.cpu_count()}, "
          f"load average {load_average()}")
    n = 8192 if device.type == "cuda" else 2048
    peak = matmul_peak(device, n, dtype=torch.bfloat16 if bf16 else torch.float32)
    tokens = a.batch_size * a.seq
    fpt = flops_per_token(cfg, a.seq, 0.15 * (a.seq - 3) / a.seq)["masked_only"]
    print(f"{a.config}: L={cfg.num_hidden_layers} H={cfg.hidden_size}; batch {a.batch_size} x seq {a.seq}; "
          f"compile {a.compile}; {'bf16' if bf16 else 'fp32'} matmul peak {peak / 1e9:.1f} GFLOP/s; "
          f"{fpt / 1e6:.2f} MFLOP per token")
    batch = make_batch(a.batch_size, a.seq, cfg.vocab_size, torch.Generator().manual_seed(0), device)

    def step_only() -> float:
        times, _ = bench_bertcore(cfg, batch, device, a.precision, a.compile, max(5, a.steps // 2), 3)
        return tokens / statistics.median(times)

    before = step_only()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {d: real_run(a, d, Path(tmp)) for d in a.prefetch}
    after = step_only()
    step = (before + after) / 2
    print(f"load average after: {load_average()}")
    print(f"\n{'':<28} {'tokens/s':>10} {'non-pad/s':>10} {'ratio':>6} {'MFU':>6}")
    print(f"{'step only (before, after)':<28} {step:10.0f} {'':>10} {'':>6} {100 * step * fpt / peak:5.1f}%"
          f"   ({before:.0f}, {after:.0f})")
    for d, r in runs.items():
        tps = r["padded_tokens_per_s"]
        print(f"{f'real run, --prefetch {d}':<28} {tps:10.0f} {r['tokens_per_s']:10.0f} {tps / step:6.2f} "
              f"{100 * tps * fpt / peak:5.1f}%")
    harness.save(a.json)


if __name__ == "__main__":
    main()
