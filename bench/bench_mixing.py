"""Context mixing (docs/context-mixing.md): what each method of ``bertcore.analysis.attention.mixing`` costs next to
one plain forward pass of the same model on the same input, measured in the same run.

    python bench/bench_mixing.py [--reps 5] [--threads N] [--tokens 32 128]

On the shipped MiniLM-MLM (6 layers, 12 heads, H 384) and inputs of 32 and 128 tokens of BBC News text, prints the
median milliseconds of each method and of the reference (``model.base_model(**inputs)``: the encoder, no attentions
kept, the fused attention kernel), timed in pairs one after the other, the median of the pairs' ratios, the
goal (3x for the norm family and ALTI, T/4 for value zeroing) and the 1-minute load average after the row (the
machine may be shared). DecompX (one fill-mask position, two candidates) is timed too; it has no goal.
"""
# ruff: noqa: B023  (each lambda runs inside its own loop iteration)

from __future__ import annotations

import harness

import os

import torch

from bertcore import data
from bertcore.loading import sources
from bertcore.analysis.attention import decompx, mixing
from bertcore.tokenization.tokenizer import encode


def long_text() -> str:
    files = sorted(data.bbc_dir().glob("*/*.txt"))
    return " ".join(data.read_text(f) for f in files[:3])


def main() -> None:
    def options(ap):
        ap.add_argument("--reps", type=int, default=7)
        ap.add_argument("--tokens", type=int, nargs="+", default=[32, 128])

    args = harness.parse(__doc__, options)
    lm = sources.load(sources.PACKAGED_MLM)
    model = lm.model
    text = long_text()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {os.cpu_count()} CPUs, reps {args.reps} "
          f"(medians; each method timed in pairs with the forward), model {lm.source.label}")
    print(f"{'tokens':>6} {'method':<32} {'ms':>9} {'fwd ms':>7} {'x forward':>10} {'goal':>6} {'load':>5}")
    for t in args.tokens:
        enc = encode(lm.tokenizer, text, max_length=t)
        inputs = enc.tensors()

        def forward():
            with torch.no_grad():
                return model.base_model(**inputs)

        rows = [(m, lambda m=m: mixing.mixing(model, inputs, m)) for m in mixing.METHODS]
        rows.append(("alti + rollout", lambda: mixing.mixing(model, inputs, "alti", rollout=True)))
        rows.append(("DecompX fill-mask, 1 position", lambda: decompx.fill_mask(model, inputs, t // 2, [2024, 2003])))
        for name, fn in rows:
            pair = harness.paired(f"{name}, {t} tokens", fn, "forward", forward, args.reps)
            ms, ref, ratio = pair.ms, pair.ref_ms, pair.ratio
            goal = f"{t / 4:g}" if name == "value_zeroing" else "3" if name in GOAL_3X else ""
            print(f"{len(enc.tokens):>6} {name:<32} {ms:>9.1f} {ref:>7.1f} {ratio:>10.2f} {goal:>6} "
                  f"{harness.load_average():>5.2f}")
    harness.save(args.json)


GOAL_3X = ("norm", "norm_res_ln", "globenc", "alti")

if __name__ == "__main__":
    main()
