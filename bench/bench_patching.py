"""Time activation patching of a 32-token pair on the packaged MiniLM-MLM (goal:
each heatmap <= 2 s on a 2-core machine).

    python bench/bench_patching.py --threads 2

Measured in the same run, so machine noise cancels: one forward pass of the model on the pair's input (the
unit), and the reference implementation, one whole forward pass per patched site with :func:`patching.patch`
(what a scan would cost without batching). Prints the median seconds of the batched :func:`patching.scan` (all
four heatmaps, and the residual stream alone), their ratios to the unit and to the reference, and the load
average (time nothing else while this runs).
"""

from __future__ import annotations

import harness

import json

import torch

from bertcore import encode
from bertcore.loading import sources
from bertcore.analysis.causal import patching

CLEAN = ("The old keys that the tired farmer left near the red doors of the small white house on the hill last "
         "night [MASK] still on the wooden kitchen table .")


@torch.no_grad()
def one_site_at_a_time(model, clean, corrupt, metric) -> int:
    """The unbatched reference: a whole forward pass per site. Returns the number of sites."""
    _, cache = patching.record(model, clean)
    layers, heads, t = model.config.num_hidden_layers, model.config.num_attention_heads, clean["input_ids"].shape[1]
    sites = [("resid", k, {"positions": [p]}) for k in range(layers + 1) for p in range(t)]
    # resid: hidden_states indices 0..L; attn / mlp / head: blocks 0..L-1
    sites += [(kind, k, {"positions": [p]}) for kind in ("attn", "mlp") for k in range(layers) for p in range(t)]
    sites += [("head", k, {"head": h}) for k in range(layers) for h in range(heads)]
    for kind, k, kw in sites:
        patching.measure(model, corrupt, metric, patching.patch(model, kind, k, cache[(kind, k)], **kw))
    return len(sites)


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("--reps", type=int, default=5))
    load_before = harness.load_average()

    lm = sources.load(sources.PACKAGED_MLM)
    model, tok = lm.model, lm.tokenizer
    clean = encode(tok, CLEAN).tensors()
    corrupt = encode(tok, CLEAN.replace("The old keys", "The old key")).tensors()
    pos = int((clean["input_ids"][0] == tok.mask_token_id).nonzero())
    metric = patching.logit_diff(pos, *tok.convert_tokens_to_ids(["are", "is"]))

    unit = harness.median_ms(lambda: model(**corrupt), args.reps, warmup=2, name="one forward")
    every = harness.median_ms(lambda: patching.scan(model, clean, corrupt, metric), args.reps, warmup=1,
                              name="scan, all four heatmaps")
    resid = harness.median_ms(lambda: patching.scan(model, clean, corrupt, metric, kinds=("resid",)), args.reps,
                              warmup=1, name="scan, residual stream only")
    sites = one_site_at_a_time(model, clean, corrupt, metric)  # (also the reference's warm-up)
    reference = harness.median_ms(lambda: one_site_at_a_time(model, clean, corrupt, metric), max(1, args.reps // 3),
                                  name="reference: one forward per site")
    print(json.dumps({
        "tokens": int(clean["input_ids"].shape[1]), "sites": sites, "threads": torch.get_num_threads(),
        "one_forward_ms": round(unit, 1),
        "scan_all_four_heatmaps_s": round(every / 1000, 3), "per_heatmap_s": round(every / 4000, 3),
        "scan_resid_only_s": round(resid / 1000, 3),
        "reference_one_forward_per_site_s": round(reference / 1000, 2),
        "ratio_scan_to_one_forward": round(every / unit, 1),
        "ratio_scan_to_reference": round(every / reference, 3),
        "load_average_before_after": [round(load_before, 2), round(harness.load_average(), 2)],
    }, indent=1))
    harness.save(args.json)


if __name__ == "__main__":
    main()
