"""Time and peak memory of long attribution graphs (:func:`bertcore.circuits.attribution.build`) under a feature
budget (``max_feature_nodes``): the shipped MiniLM-MLM with its shipped transcoders up to its full 512 tokens, and a
tiny random ModernBERT (3 layers of 32, 2 heads, local attention every layer but the first) with random transcoders
up to 8,192 tokens.

    python bench/bench_graph_memory.py --threads 2 [--cases minilm-512 modernbert-8192] [--json out.json]

Each case runs in a process of its own, so that its peak resident memory (``ru_maxrss``: the model, its float64
copy, the recorded attention patterns, the rows on the CPU) is its alone; the parent prints one JSON line a case and
a table. Each graph's rows are checked as it is built: its edges, constant and what the features left out give sum
to every target's value (to 1e-8). The text is the first BBC articles of the packaged corpus, the [MASK] in its
middle.
"""

from __future__ import annotations

import harness

import json
import resource
import subprocess
import sys

#: name -> (model, tokens, max_feature_nodes, batch)
CASES = {
    "minilm-128": ("minilm", 128, 1024, 32),
    "minilm-512": ("minilm", 512, 1024, 32),
    "minilm-512-batch-8": ("minilm", 512, 1024, 8),
    "modernbert-2048": ("modernbert", 2048, 256, 1),
    "modernbert-8192": ("modernbert", 8192, 256, 1),
}


def _modernbert(tokens: int):
    """A tiny random ModernBERT reading ``tokens`` positions, with random transcoders (the graph's algebra holds for
    any weights), and the packaged WordPiece tokenizer."""
    import torch

    from bertcore.loading import sources
    from bertcore.modeling.config import BertConfig
    from bertcore.modeling.heads import BertForMaskedLM
    from bertcore.sae.transcoder import Transcoder
    from bertcore.tokenization.tokenizer import load_tokenizer
    from bertcore.training.models import MODERN_FIELDS

    tokenizer = load_tokenizer(sources.packaged_model_dir())
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=48, max_position_embeddings=tokens, local_attention=128, **MODERN_FIELDS)
    torch.manual_seed(0)
    model = BertForMaskedLM(config).eval()
    g = torch.Generator().manual_seed(0)
    transcoders = {}
    for layer in range(config.num_hidden_layers):
        tc = Transcoder(32, 32, 64, 4, seed=layer)
        with torch.no_grad():
            tc.W_enc.copy_(torch.randn(32, 64, generator=g) / 32 ** 0.5)
            tc.threshold.fill_(0.4)
        transcoders[layer] = tc.eval()
    return model, tokenizer, transcoders


def _minilm():
    from bertcore.loading import sources
    from bertcore.sae.catalog import shipped_transcoders
    from bertcore.sae.transcoder import load_set

    lm = sources.load(sources.PACKAGED_MLM)
    tcs = load_set(shipped_transcoders(lm.path), lm.config.hidden_size, lm.config.num_hidden_layers)
    return lm.model, lm.tokenizer, tcs


def run_case(name: str) -> dict:
    import torch

    from bertcore import data
    from bertcore.circuits import attribution

    kind, tokens, budget, batch = CASES[name]
    model, tokenizer, tcs = _minilm() if kind == "minilm" else _modernbert(tokens)
    files = sorted(data.bbc_dir().glob("*/*.txt"))
    words, i = [], 0
    while len(tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]) < tokens:
        words += data.read_text(files[i]).split()
        i += 1
    ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][:tokens - 3]
    text = tokenizer.decode(ids[:len(ids) // 2]) + " [MASK] " + tokenizer.decode(ids[len(ids) // 2:])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with harness.stopwatch(f"graph {name}") as sw:
        g = attribution.build(model, tokenizer, text, tcs, batch=batch, max_length=tokens, max_feature_nodes=budget)
    rebuilt = (g.edges.sum(1) + g.constants + g.dropped - g.values).abs().max()
    return {"case": name, "tokens": len(g.tokens), "max_feature_nodes": budget, "batch": batch,
            "active_features": g.n_active, "nodes": g.layout.size, "rows": int(g.edges.shape[0]),
            "seconds": round(sw.seconds, 1), "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                                                   / 1024), "rss_before_mib": round(before),
            "rebuild_error": float(rebuilt), "threads": torch.get_num_threads()}


def main() -> None:
    args = harness.parse(__doc__, lambda ap: (
        ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES)),
        ap.add_argument("--case", default=None,
                       help="run one case in this process (the parent's way of measuring each case alone)")))
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    rows = []
    for name in args.cases:
        cmd = [sys.executable, __file__, "--case", name] + (["--threads", str(args.threads)] if args.threads else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            rows.append({"case": name, "error": done.stderr.strip().splitlines()[-1:]})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print("\n| case | tokens | active features | kept | nodes | seconds | peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" not in r:
            print(f"| {r['case']} | {r['tokens']} | {r['active_features']:,} | {r['max_feature_nodes']} | "
                  f"{r['nodes']:,} | {r['seconds']} | {r['peak_rss_mib']:,} |")
    if args.json:
        harness.write_json(args.json, rows)


if __name__ == "__main__":
    main()
