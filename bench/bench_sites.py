"""What recording every named site costs: a forward pass of the shipped model (MiniLM-MLM, 6 blocks) on one
128-token input that records every site of :mod:`bertcore.modeling.interventions` (embeddings, q/k/v, scores,
pattern, z, every residual, LayerNorm scale and output, mlp pre/post, the MLM head), against a plain forward
measured in the same run (the ratio cancels the machine's noise; goal <= 1.5x).

    python bench/bench_sites.py --threads 2 [--plain-only]

``--plain-only`` prints only the plain forward's median, for comparing two checkouts of the code run one after
the other (``python <checkout>/bench/bench_sites.py --plain-only``, from each checkout): the plain path's cost
before and after a change to the model.
"""

from __future__ import annotations

import harness

import json

import torch

from bertcore import encode
from bertcore.loading import sources

TEXT = ("The keys to the cabinet that the old man in the grey coat had left by the door of the house are on the "
        "table, and the children who live next door know it. ") * 6


def main() -> None:
    def options(ap):
        ap.add_argument("--reps", type=int, default=30)
        ap.add_argument("--tokens", type=int, default=128)
        ap.add_argument("--plain-only", action="store_true")

    args = harness.parse(__doc__, options)
    lm = sources.load(sources.PACKAGED_MLM)
    model = lm.model
    inputs = encode(lm.tokenizer, TEXT, max_length=args.tokens).tensors()
    assert inputs["input_ids"].shape[1] == args.tokens, inputs["input_ids"].shape

    def plain():
        with torch.no_grad():
            return model(**inputs).prediction_logits

    result = {"tokens": args.tokens, "threads": torch.get_num_threads()}
    if args.plain_only:
        result["plain_ms"] = harness.median_ms(plain, args.reps, warmup=3, name=f"plain forward, {args.tokens} tokens")
        print(json.dumps(result))
        harness.save(args.json)
        return
    from bertcore.modeling.interventions import (BLOCK_SITES, EMBED_SITES, FINAL_SITES, MLM_HEAD_SITES,
                                                 Interventions, missing_reason)
    cfg = model.config
    names = [n for n in (*EMBED_SITES, *FINAL_SITES) if missing_reason(cfg, n) is None] + list(MLM_HEAD_SITES)
    names += [f"blocks.{i}.{s}" for i in range(cfg.num_hidden_layers) for s in BLOCK_SITES
              if missing_reason(cfg, f"blocks.{i}.{s}") is None]

    def record_all():
        with torch.no_grad():
            return model(**inputs, interventions=Interventions(record=names)).prediction_logits

    plains, records = [], []
    for _ in range(3):  # interleaved, so that a slow spell of the machine hits both
        plains.append(harness.median_ms(plain, args.reps // 3, warmup=2, name=f"plain forward, {args.tokens} tokens"))
        records.append(harness.median_ms(record_all, args.reps // 3, warmup=2,
                                         name=f"record every site, {args.tokens} tokens"))
    p, r = sorted(plains)[1], sorted(records)[1]
    result.update(sites=len(names), plain_ms=round(p, 2), record_all_ms=round(r, 2), ratio=round(r / p, 3))
    print(json.dumps(result))
    harness.save(args.json)


if __name__ == "__main__":
    main()
