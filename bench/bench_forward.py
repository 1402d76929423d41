"""Forward pass of the packaged MiniLM returning all attentions and hidden states:
bertcore vs transformers (eager attention, output_attentions=True), in one run.

    python bench/bench_forward.py [--reps 200] [--threads N]

Prints median milliseconds per forward for 1x32 and 1x128 tokens, the ratio
bertcore / transformers (lower is better), and the floor: the same model's linear layers
alone (every matmul of the forward with its bias, nothing else), timed in the same run.
Runs alternate between the two models so that machine noise hits both alike.
"""

from __future__ import annotations

import harness

import torch
import transformers

from bertcore.loading import sources


def linears_only(model, t: int):
    """A function that runs each nn.Linear of ``model`` once on a (1, t, in_features) input."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = [torch.randn(1, t, m.in_features) for m in linears]
    return lambda: [m(x) for m, x in zip(linears, inputs)]


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("--reps", type=int, default=200))
    loaded = sources.load(sources.PACKAGED)
    ours = loaded.model.eval()
    hf = transformers.BertModel.from_pretrained(str(loaded.path), attn_implementation="eager").eval()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    print(f"{'input':>8} {'bertcore ms':>12} {'HF eager ms':>12} {'ratio':>7} {'matmul floor ms':>16}")
    g = torch.Generator().manual_seed(0)
    for t in (32, 128):
        ids = torch.randint(1000, 30000, (1, t), generator=g)
        ids[:, 0], ids[:, -1] = loaded.tokenizer.cls_token_id, loaded.tokenizer.sep_token_id
        kw = dict(attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                  output_attentions=True, output_hidden_states=True)
        with torch.inference_mode():
            a, b = ours(ids, **kw), hf(ids, **kw)
            err = max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions))
            for _ in range(10):
                ours(ids, **kw), hf(ids, **kw)
            floor_fn = linears_only(hf, t)
            got = harness.interleaved({f"bertcore, 1x{t}": lambda: ours(ids, **kw),
                                       f"transformers eager, 1x{t}": lambda: hf(ids, **kw),
                                       f"matmul floor, 1x{t}": floor_fn}, args.reps, warmup=0)  # warmed up above
        m, h, f = (b.median() * 1e3 for b in got.values())
        print(f"{'1x' + str(t):>8} {m:12.2f} {h:12.2f} {m / h:7.2f} {f:16.2f}   (max |attention diff| {err:.1e})")
    harness.save(args.json)


if __name__ == "__main__":
    main()
