"""Forward pass with every attention and hidden state, per family: bertcore vs transformers (eager attention).

    nice -n 19 python bench/bench_families.py [--reps 30] [--threads 2] [--tokens 128] [--families bert,electra]

For each family (BERT, RoBERTa, DistilBERT, ELECTRA, ModernBERT) a random ``transformers`` model of a
tiny-but-not-trivial size (H=256, 4 layers, 4 heads, FFN 1024, ModernBERT 6 layers with a 64-token window so
both layer kinds run) is saved and loaded by ``bertcore.loading.sources.load``; both run float32 under ``no_grad`` with
``output_attentions=True, output_hidden_states=True`` on the same ids. Runs alternate between the two models so
machine noise hits both alike; prints the median milliseconds, the ratio of the medians and the median of the
per-pair ratios bertcore / transformers (lower is better; the paired one is what a loaded machine distorts
least) and the load average before and after.
"""

from __future__ import annotations

import harness

import os
import tempfile
from pathlib import Path

import torch
import transformers

from bertcore.loading import sources

V = 5000
SIZE = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
            max_position_embeddings=512)


def configs() -> dict[str, tuple[str, object]]:
    return {
        "bert": ("BertModel", transformers.BertConfig(vocab_size=V, **SIZE)),
        "roberta": ("RobertaModel", transformers.RobertaConfig(vocab_size=V, **{**SIZE, "max_position_embeddings": 514},
                                                               pad_token_id=1, type_vocab_size=1)),
        "distilbert": ("DistilBertModel", transformers.DistilBertConfig(vocab_size=V, dim=256, n_layers=4, n_heads=4,
                                                                        hidden_dim=1024)),
        "electra": ("ElectraModel", transformers.ElectraConfig(vocab_size=V, embedding_size=128, **SIZE)),
        "modernbert": ("ModernBertModel", transformers.ModernBertConfig(
            vocab_size=V, hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=512,
            local_attention=64, global_attn_every_n_layers=3, pad_token_id=0)),
    }


def main() -> None:
    def options(ap):
        ap.add_argument("--reps", type=int, default=30)
        ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
        ap.add_argument("--tokens", type=int, default=128)
        ap.add_argument("--batch", type=int, default=4)
        ap.add_argument("--families", default="bert,roberta,distilbert,electra,modernbert",
                        help="comma-separated families to run")

    args = harness.parse(__doc__, options)  # applies --threads (default 2 here)
    print(f"load average before: {harness.load_average():.2f} on {os.cpu_count()} CPUs; torch threads {args.threads}; "
          f"batch {args.batch} x {args.tokens} tokens, {args.reps} reps")
    root = Path(tempfile.mkdtemp())
    ids = torch.randint(5, V, (args.batch, args.tokens))
    mask = torch.ones_like(ids)
    rows = []
    for family, (cls_name, cfg) in configs().items():
        if family not in args.families.split(","):
            continue
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        hf = getattr(transformers, cls_name)(cfg).eval()
        hf.save_pretrained(root / family)
        ours = sources.HEAD_CLASSES["base"].from_pretrained(root / family).eval()
        kw = dict(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
        with torch.no_grad():  # 3 warm-ups of each, then the two alternately
            pair = harness.paired(f"{family}: bertcore", lambda: ours(**kw), "transformers eager", lambda: hf(**kw),
                                  args.reps, warmup=3)
        a, b, paired = pair.ms, pair.ref_ms, pair.ratio
        rows.append((family, a, b, paired))
        print(f"{family:11s} bertcore {a:8.1f} ms   transformers {b:8.1f} ms   ratio of medians {a / b:5.2f}   "
              f"median paired ratio {paired:5.2f}", flush=True)
    print(f"load average after: {harness.load_average():.2f}")
    worst = max(paired for *_, paired in rows)
    print(f"worst ratio {worst:.2f} ({'within' if worst <= 1.1 else 'ABOVE'} 1.1)")
    harness.save(args.json)


if __name__ == "__main__":
    main()
