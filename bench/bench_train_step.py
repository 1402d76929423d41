"""Benchmark one pretraining step (MLM + NSP: masking, forward, backward, optimizer) of the nano
preset in bertcore and in ``transformers.BertForPreTraining`` with the same config, plus the
machine's measured matmul peak (in bf16 where the step runs under bf16 autocast), in one process.

    python bench/bench_train_step.py                 # nano, seq 64, batch 128, CPU
    python bench/bench_train_step.py --steps 10 --compile   # also bertcore under torch.compile
    python bench/bench_train_step.py --device cuda    # on a GPU (bf16 autocast)
    python bench/bench_train_step.py --config models/minilm-mlm --batch-size 16 --seq 128 --threads 2
                                                      # the shipped model's shape, as its training runs

A benchmark, not a test. Prints tokens/s (batch x seq / median step time), the ratio to HF,
the model FLOPs per token (counted, see ``flops_per_token``) and the fraction of the measured
matmul peak each step reaches. The step is the device's work alone: the batch and four maskings of it
are made ahead on the device (as a run's prefetched batches), the masked positions found on the host.
Both models get the same config: dropout 0 (``--dropout``), SDPA attention, 15% masking. Differences
in the bertcore step: MLM head on the selected positions only (``masked_only=True``, its positions
given), fused AdamW. HF gets its default AdamW (foreach) and computes MLM logits for every position
(that is what its API does).
"""

from __future__ import annotations

import harness

import itertools
import os
import statistics
from dataclasses import replace
from pathlib import Path

import torch

from bertcore.modeling.config import preset
from bertcore.modeling.hf_format import read_config_file
from bertcore.modeling.heads import BertForPreTraining
from bertcore.tokenization.masking import mask_tokens, selected_positions
from bertcore.training import autocast, make_optimizer
from bertcore.runs.config import COMPILE_MODES
from bertcore.training.dist import compile_encoder

MASK_ID, CLS_ID, SEP_ID = 103, 101, 102


def flops_per_token(cfg, seq: int, mlm_fraction: float) -> dict[str, float]:
    """Training FLOPs per input token (forward + backward = 3 x forward; 2 FLOPs per MAC).

    Per layer and token, forward MACs: QKV + output projection 4H^2, feed-forward 2HI, scores
    and weighted values 2TH. MLM head: (H^2 + HV) on the selected fraction of positions
    (bertcore) or on every position (HF). Embedding lookups, LayerNorm, GELU, softmax and the
    pooler/NSP head (per sequence) are left out (not matmuls, or < 0.1%).
    """
    H, inter, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    encoder = L * (4 * H * H + 2 * H * inter + 2 * seq * H)
    head = H * H + H * V
    return {"masked_only": 6.0 * (encoder + mlm_fraction * head), "all_positions": 6.0 * (encoder + head)}


def matmul_peak(device: torch.device, n: int = 2048, seconds: float = 3.0,
                dtype: torch.dtype = torch.float32) -> float:
    """Measured matmul FLOP/s in ``dtype`` (n x n @ n x n, best of repeated runs for about ``seconds``) on
    ``device``: 3 timed runs after 2 warm-ups, then as many more as fill ``seconds`` at their median."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    c = torch.empty(n, n, device=device, dtype=dtype)

    def mm():
        torch.mm(a, b, out=c)
        sync(device)

    name = f"matmul {n}^3 {str(dtype).removeprefix('torch.')} on {device.type}"
    values = list(harness.timed(name, mm, reps=3, warmup=2).get_values())
    more = int((seconds - sum(values)) / statistics.median(values))
    if more > 0:
        values += harness.timed(name, mm, reps=more).get_values()
    return 2 * n ** 3 / min(values)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def make_batch(batch: int, seq: int, vocab: int, gen: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Random ids shaped like NSP pairs: [CLS] A [SEP] B [SEP], no padding."""
    ids = torch.randint(1000, vocab, (batch, seq), generator=gen)
    half = seq // 2
    ids[:, 0], ids[:, half], ids[:, -1] = CLS_ID, SEP_ID, SEP_ID
    types = torch.zeros_like(ids)
    types[:, half + 1:] = 1
    return {"input_ids": ids.to(device), "token_type_ids": types.to(device),
            "attention_mask": torch.ones_like(ids).to(device),
            "next_sentence_label": torch.randint(0, 2, (batch,), generator=gen).to(device)}


def masked_batches(batch: dict[str, torch.Tensor], vocab: int, gen: torch.Generator, n: int = 4) -> list[tuple]:
    """``n`` maskings of ``batch`` made ahead, on its device: ``(input_ids, labels, mlm_positions)`` each (the
    positions as the training collator finds them, on the host), so a timed step is the device's work alone, as
    in a run whose batches are prepared ahead (``--prefetch``)."""
    ids = batch["input_ids"].cpu()
    eligible = ~torch.isin(ids, torch.tensor([CLS_ID, SEP_ID]))
    out = []
    for _ in range(n):
        m = mask_tokens(ids, eligible, mask_token_id=MASK_ID, vocab_size=vocab, generator=gen)
        out.append(tuple(t.to(batch["input_ids"].device)
                         for t in (m.input_ids, m.labels, selected_positions(m.labels))))
    return out


def time_steps(step_fn, steps: int, warmup: int, device: torch.device, name: str = "train step") -> list[float]:
    """Seconds of each of ``steps`` calls of ``step_fn`` (the device synchronised after each), after ``warmup``
    untimed ones: a pyperf benchmark ``name`` of the harness."""

    def step():
        step_fn()
        sync(device)

    return list(harness.timed(name, step, steps, warmup).get_values())


def bench_bertcore(cfg, batch, device, precision, compile_mode: str, steps: int, warmup: int):
    """Step times (s) of bertcore; ``compile_mode`` as the training loop's ``--compile`` (the encoder only)."""
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).to(device).train()
    opt = make_optimizer(model, 1e-4, 0.01)
    compile_encoder(model, compile_mode)
    masks = itertools.cycle(masked_batches(batch, cfg.vocab_size, torch.Generator().manual_seed(0)))

    def step():
        ids, labels, positions = next(masks)
        with autocast(device, precision):
            out = model(ids, batch["attention_mask"], batch["token_type_ids"], labels=labels,
                        next_sentence_label=batch["next_sentence_label"], masked_only=True,
                        masked_positions=positions)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return out.loss

    name = "bertcore train step" + ("" if compile_mode == "none" else f", torch.compile {compile_mode}")
    return time_steps(step, steps, warmup + (0 if compile_mode == "none" else 2), device, name), type(opt).__name__ + (
        " fused" if opt.defaults.get("fused") else "")


def bench_hf(cfg, batch, device, precision, steps: int, warmup: int):
    import transformers

    hf_cfg = transformers.BertConfig(**cfg.to_hf_dict())
    hf_cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(hf_cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    masks = itertools.cycle(masked_batches(batch, cfg.vocab_size, torch.Generator().manual_seed(0)))

    def step():
        ids, labels, _ = next(masks)
        with autocast(device, precision):
            out = model(input_ids=ids, attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"],
                        labels=labels, next_sentence_label=batch["next_sentence_label"])
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return out.loss

    return time_steps(step, steps, warmup, device, "transformers train step")


def main(argv=None) -> None:
    def options(p):
        p.add_argument("--preset", default="nano")
        p.add_argument("--config", default=None, help="a model folder or config.json: its shape instead of --preset")
        p.add_argument("--batch-size", type=int, default=128)
        p.add_argument("--seq", type=int, default=64)
        p.add_argument("--steps", type=int, default=5, help="timed steps per model (median reported)")
        p.add_argument("--warmup", type=int, default=2)
        p.add_argument("--dropout", type=float, default=0.0)
        p.add_argument("--device", default="cpu")
        p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
        p.add_argument("--compile", nargs="?", const="default", default="none",
                       choices=COMPILE_MODES,
                       help="also time bertcore with its encoder under torch.compile (the training loop's --compile)")
        p.add_argument("--skip-hf", action="store_true")

    a = harness.parse(__doc__, options, argv=argv)
    device = torch.device(a.device)
    if a.config:
        path = Path(a.config)
        cfg = read_config_file(path / "config.json" if path.is_dir() else path)
        cfg = replace(cfg, hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout,
                      max_position_embeddings=max(cfg.max_position_embeddings, a.seq))
        a.preset = str(path)
    else:
        cfg = preset(a.preset, hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout,
                     max_position_embeddings=max(512, a.seq))
    gen = torch.Generator().manual_seed(0)
    batch = make_batch(a.batch_size, a.seq, cfg.vocab_size, gen, device)
    tokens = a.batch_size * a.seq
    mlm_fraction = 0.15 * (a.seq - 3) / a.seq  # eligible positions exclude [CLS] and 2 x [SEP]
    fpt = flops_per_token(cfg, a.seq, mlm_fraction)

    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, cpu count {os.cpu_count()}")
    try:
        print(f"load average {harness.load_average():.2f} (other processes share the cores when > {os.cpu_count()})")
    except OSError:
        pass
    print(f"preset {a.preset}: L={cfg.num_hidden_layers} H={cfg.hidden_size} heads={cfg.num_attention_heads} "
          f"I={cfg.intermediate_size} V={cfg.vocab_size}; batch {a.batch_size} x seq {a.seq} = {tokens} tokens/step; "
          f"dropout {a.dropout}")
    # the peak in the dtype the step's matmuls run in (bf16 under autocast: an fp32 peak on a GPU made MFU read
    # 235% on an H200); large matrices on a GPU, whose small ones do not reach its peak
    bf16 = a.precision == "bf16" or (device.type == "cuda" and a.precision == "auto")
    n = 8192 if device.type == "cuda" else 2048
    peak = matmul_peak(device, n, dtype=torch.bfloat16 if bf16 else torch.float32)
    print(f"measured {'bf16' if bf16 else 'fp32'} matmul peak ({n}^3): {peak / 1e9:.1f} GFLOP/s")
    print(f"model training FLOPs per token: {fpt['masked_only'] / 1e6:.2f} M (MLM head on the ~{mlm_fraction:.1%} "
          f"selected positions), {fpt['all_positions'] / 1e6:.2f} M (MLM head on every position, as HF)")

    rows = []
    t_ours, opt_name = bench_bertcore(cfg, batch, device, a.precision, "none", a.steps, a.warmup)
    rows.append(("bertcore (masked-only MLM, SDPA, " + opt_name + ")", t_ours, fpt["masked_only"]))
    if a.compile != "none":
        t_comp, _ = bench_bertcore(cfg, batch, device, a.precision, a.compile, a.steps, a.warmup)
        rows.append((f"bertcore + torch.compile (encoder, {a.compile})", t_comp, fpt["masked_only"]))
    if not a.skip_hf:
        t_hf = bench_hf(cfg, batch, device, a.precision, a.steps, a.warmup)
        rows.append(("transformers.BertForPreTraining (sdpa, AdamW)", t_hf, fpt["all_positions"]))

    print()
    print(f"{'step':<52} {'median s':>9} {'min s':>7} {'tokens/s':>9} {'best tok/s':>10} {'GFLOP/s':>8} {'% peak':>7}")
    base = None
    for name, times, f in rows:
        med = statistics.median(times)
        tps = tokens / med
        gflops = tps * f / 1e9
        print(f"{name:<52} {med:9.3f} {min(times):7.3f} {tps:9.0f} {tokens / min(times):10.0f} {gflops:8.1f} "
              f"{100 * gflops * 1e9 / peak:6.1f}%")
        if name.startswith("transformers"):
            base = tps
    if base:
        ours = tokens / statistics.median(rows[0][1])
        print(f"\nratio bertcore / transformers: {ours / base:.2f}x tokens/s "
              "(HF's %peak counts its MLM head on every position: useful work is the bertcore FLOPs)")
    harness.save(a.json)


if __name__ == "__main__":
    main()
