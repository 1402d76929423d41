"""``python -m bertcore.sae``: train, resume and evaluate SAEs (see :mod:`bertcore.sae`).

    python -m bertcore.sae train --run-dir RUN --layers 1,3,5 --max-time 45 [--model FOLDER] [--corpus everyday]
    python -m bertcore.sae train --kind transcoder --run-dir RUN --layers 0,1,2,3,4,5 --k 32 --max-time 600
    python -m bertcore.sae resume --run-dir RUN
    torchrun --nproc_per_node 2 -m bertcore.sae train --run-dir RUN ...   # each rank its shard, DDP (resume too)
    python -m bertcore.sae replacement --transcoders RUN/checkpoints/step-N [--chunks 48]
    python -m bertcore.sae transcoders --transcoders RUN/checkpoints/step-N --out FOLDER [--prune-tokens 1000000]
    python -m bertcore.sae evaluate --sae RUN/sae/layer-2 [--sae ...] [--out FOLDER --dtype float16]
    python -m bertcore.sae features --sae FOLDER [--sae ...] [--sentences 3000]
    python -m bertcore.sae labels --sae FOLDER [--sae ...] [--score-sentences 1000]

Exit codes: 0 done, 1 failed, 2 bad options or input (a message, no traceback), 143 stopped by SIGTERM.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from ..runs.options import add_options, blocks
from .config import SAETrainConfig


def _train_parser(sub) -> None:
    p = sub.add_parser("train", help="train SAEs on one model's layers")
    p.add_argument("--run-dir", required=True)
    add_options(p, SAETrainConfig, kinds={"layers": blocks})


def _config(args) -> SAETrainConfig:
    return SAETrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SAETrainConfig)
                             if f.name != "extra"})


def _evaluate(args) -> int:
    from .report import evaluate_folders

    out = Path(args.out) if args.out else None
    result = evaluate_folders([Path(s) for s in args.sae], args.model, n_tokens=args.tokens,
                              spliced_chunks=args.spliced_chunks, out=out, dtype=args.dtype,
                              progress=lambda what: print(what, flush=True))
    print(json.dumps(result, indent=1))
    return 0


def _replacement(args) -> int:
    """The spliced MLM loss of each transcoder in a folder and of all at once (bertcore.sae.replacement)."""
    import time

    from . import replacement, transcoder
    from .stream import corpus_chunks
    from .start import load_model

    model, tokenizer, _ = load_model(args.model)
    folders = sorted(Path(args.transcoders).glob("layer-*"))
    if not folders:
        raise ValueError(f"{args.transcoders} holds no transcoder folders (layer-<n>/)")
    tcs = {}
    for folder in folders:
        tc, cfg = transcoder.load(folder)
        tcs[cfg["layer"]] = tc
    held = corpus_chunks(args.heldout, tokenizer, 128, allow_held_out=True)
    start = time.monotonic()
    r = replacement.spliced(model, tokenizer, tcs, held, n_chunks=args.chunks, batch_chunks=8)
    print(json.dumps({"transcoders": str(args.transcoders), "clean": r.clean, "delta": r.delta,
                      "delta_all": r.delta_all, "top1_all": r.top1_all, "masked": r.masked,
                      "seconds": round(time.monotonic() - start)}, indent=1))
    return 0


def _transcoders(args) -> int:
    """Measure a transcoder set, write each folder's metrics.json and the set's README (bertcore.sae.replacement)."""
    import time

    from . import replacement

    start = time.monotonic()
    result = replacement.evaluate_set(args.transcoders, args.model, out=args.out, dtype=args.dtype,
                                      n_tokens=args.tokens, prune_tokens=args.prune_tokens,
                                      prune_below=args.prune_below, train_counts=args.train_counts,
                                      spliced_chunks=args.chunks, progress=lambda what: print(what, flush=True))
    folder = Path(args.out or args.transcoders)
    text = replacement.card(sorted(folder.glob("layer-*")), args.commands, args.tried)
    (folder / "README.md").write_text(text, encoding="utf-8")
    print(json.dumps({"seconds": round(time.monotonic() - start), **{str(k): v for k, v in result.items()}}, indent=1))
    return 0


def _features(args) -> int:
    from .report import index_features
    from .start import load_model

    from .features import heldout_sentences, labelled_text

    model, tokenizer, folder = load_model(args.model)
    text = labelled_text(tokenizer, heldout_sentences(args.sentences))  # parsed once for every SAE
    for sae in args.sae:
        index = index_features(Path(sae), model, tokenizer, folder, args.sentences, text=text)
        print(json.dumps({"sae": sae, "purity": index.purity}, indent=1), flush=True)
    return 0


def _labels(args) -> int:
    from .features import heldout_sentences, labelled_text
    from .report import SHIPPED_SENTENCES, label_features
    from .start import load_model

    model, tokenizer, folder = load_model(args.model)
    score_text = None
    if args.score_sentences:  # held-out sentences the indexes (seed 0) did not draw
        indexed = set(heldout_sentences(SHIPPED_SENTENCES, seed=0))
        fresh = [s for s in heldout_sentences(args.score_sentences + SHIPPED_SENTENCES, seed=1) if s not in indexed]
        score_text = labelled_text(tokenizer, fresh[:args.score_sentences])
    for sae in args.sae:
        print(json.dumps({"sae": sae, **label_features(Path(sae), model, tokenizer, folder, score_text)}, indent=1),
              flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertcore.sae", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    r = sub.add_parser("resume", help="continue a stopped run from its last checkpoint")
    r.add_argument("--run-dir", required=True)
    r.add_argument("--max-time", type=float, help="a new time budget, minutes (earlier parts included)")
    r.add_argument("--max-steps", type=int, help="a new step limit")
    e = sub.add_parser("evaluate", help="held-out FVU, L0, dead latents and spliced MLM loss of SAE folders")
    e.add_argument("--sae", action="append", required=True, help="an SAE folder (cfg.json + sae_weights.safetensors)")
    e.add_argument("--model", default="shipped")
    e.add_argument("--tokens", type=int, default=1_000_000, help="held-out tokens for FVU, L0 and dead latents")
    e.add_argument("--spliced-chunks", type=int, default=256, help="held-out sequences for the spliced MLM loss")
    e.add_argument("--out", help="write each SAE here (layer-<l>/) in --dtype first and measure the written files")
    e.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    rp = sub.add_parser("replacement", help="transcoders spliced in: MLM loss per block, all at once, top-1 agreement")
    rp.add_argument("--transcoders", required=True, help="a folder of transcoder folders (layer-<n>/)")
    rp.add_argument("--model", default="shipped")
    rp.add_argument("--heldout", default="sotu")
    rp.add_argument("--chunks", type=int, default=48, help="held-out sequences (15%% of their tokens masked)")
    t = sub.add_parser("transcoders", help="measure a transcoder set on held-out text; write metrics.json and a card")
    t.add_argument("--transcoders", required=True, help="a folder of transcoder folders (layer-<n>/)")
    t.add_argument("--out", help="write the set here first (in --dtype) and measure the written files")
    t.add_argument("--model", default="shipped")
    t.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    t.add_argument("--tokens", type=int, default=1_000_000, help="held-out tokens for FVU, L0 and dead latents")
    t.add_argument("--prune-tokens", type=int, default=0,
                   help="first drop the latents never active on this many training tokens (0: keep all)")
    t.add_argument("--prune-below", type=int, default=1,
                   help="with --prune-tokens: drop the latents active on fewer than this many of them (1: never)")
    t.add_argument("--train-counts", help="the fired.npz of an earlier evaluation of the same set: its training "
                                          "counts instead of counting again")
    t.add_argument("--chunks", type=int, default=256, help="held-out sequences for the spliced MLM loss")
    t.add_argument("--command", action="append", default=[], dest="commands",
                   help="a command that made them, for the card (repeatable)")
    t.add_argument("--tried", action="append", default=[], help="a Markdown line of what was tried (repeatable)")
    f = sub.add_parser("features", help="index held-out text for SAE folders: top tokens, spaCy label purity")
    f.add_argument("--sae", action="append", required=True)
    f.add_argument("--model", default="shipped")
    f.add_argument("--sentences", type=int, default=3000)
    lb = sub.add_parser("labels", help="label every feature of indexed SAE or transcoder folders from measured "
                                       "statistics; score the labels as detectors on other held-out sentences")
    lb.add_argument("--sae", action="append", required=True)
    lb.add_argument("--model", default="shipped")
    lb.add_argument("--score-sentences", type=int, default=1000, help="held-out sentences to score on (0: none)")
    c = sub.add_parser("card", help="write the README of SAE folders from their measured files")
    c.add_argument("--sae", action="append", required=True)
    c.add_argument("--model", default="shipped")
    c.add_argument("--out", required=True, help="the README.md to write")
    c.add_argument("--command", action="append", default=[], dest="commands",
                   help="a command that made them (repeatable)")
    c.add_argument("--tried", action="append", default=[], help="a Markdown line of what was tried (repeatable)")
    args = parser.parse_args(argv)

    from ..data import DataError
    from ..loading.sources import SourceError
    from .io import SAEError
    from .stream import CorpusError
    from .train import Trainer, read_args

    try:
        if args.command == "evaluate":
            return _evaluate(args)
        if args.command == "features":
            return _features(args)
        if args.command == "labels":
            return _labels(args)
        if args.command == "replacement":
            return _replacement(args)
        if args.command == "transcoders":
            return _transcoders(args)
        if args.command == "card":
            from .report import card
            from .start import model_folder

            text = card([Path(f) for f in args.sae], model_folder(args.model), args.commands, args.tried)
            Path(args.out).write_text(text, encoding="utf-8")
            print(text)
            return 0
        if args.command == "train":
            cfg = _config(args)
            problems = cfg.check()
            if problems:
                print("error: " + "; ".join(problems), file=sys.stderr)
                return 2
            # under torchrun rank 0 alone asks (the others would see the folder it has just begun to write)
            first = int(os.environ.get("RANK", "0")) == 0
            if first and Path(args.run_dir).exists() and any(Path(args.run_dir).iterdir()):
                print(f"error: {args.run_dir} exists already; use resume to continue it", file=sys.stderr)
                return 2
        else:
            cfg = read_args(args.run_dir)
            for name in ("max_time", "max_steps"):
                if getattr(args, name) is not None:
                    setattr(cfg, name, getattr(args, name))
        return Trainer(cfg, args.run_dir).run()
    except (SAEError, CorpusError, DataError, SourceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
