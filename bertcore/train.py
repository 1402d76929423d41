"""Command line of a training run: ``python -m bertcore.train {pretrain,finetune,resume} ...``.

Examples::

    # pretrain the nano preset from scratch on the packaged BBC News corpus (CPU is fine)
    python -m bertcore.train pretrain --preset nano --max-steps 600 --run-dir runs/nano-bbc

    # fine-tune the packaged MiniLM on the packaged tweets (positive vs negative)
    python -m bertcore.train finetune --init packaged --dataset tweets --max-seq-len 64 --max-steps 400

    # continue a stopped or killed run from its last checkpoint
    python -m bertcore.train resume --run-dir runs/nano-bbc

    # the same under DDP (gloo on CPU, NCCL on GPUs)
    torchrun --standalone --nproc_per_node 2 -m bertcore.train pretrain --preset nano --device cpu ...

Options can also come from a JSON file (``--config run.json``: either a file of option names,
e.g. ``{"preset": "nano", "max_steps": 600}``, or a ``run.json`` written by an earlier run);
options given on the command line win. The run directory follows ``docs/CONTRACTS.md``.
Exit codes: 0 done, 1 failed, 2 bad options, 3 device busy, 143 cancelled (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

EXIT_FAILED, EXIT_USAGE, EXIT_BUSY, EXIT_CANCELLED = 1, 2, 3, 143


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run")
    g.add_argument("--run-dir", type=Path, default=None,
                   help="run directory (default: <runs root>/<new id>; runs root = $BERT_EXPLORER_RUNS or ./runs)")
    g.add_argument("--config", type=Path, default=None,
                   help="JSON file of options (option names as keys, or an earlier run.json); flags win")
    g.add_argument("--device", default="auto", help="auto (CUDA if available, else CPU), cpu, cuda, cuda:N")
    g.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                   help="auto = bf16 autocast on CUDA, fp32 on CPU")
    g.add_argument("--lock", choices=("fail", "wait", "none"), default="fail",
                   help="one run per device: refuse (fail) or queue (wait) when the device is busy; none skips the lock")
    g.add_argument("--seed", type=int, default=0, help="seed of data split, pairs, masks, init and dropout")
    g.add_argument("--resume", action="store_true", help="continue from the run directory's last checkpoint")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")

    g = p.add_argument_group("optimisation (AdamW, linear warmup then linear decay to 0)")
    g.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default: from --epochs)")
    g.add_argument("--epochs", type=float, default=None, help="passes over the training split when --max-steps is not given")
    g.add_argument("--batch-size", type=int, default=32, help="sequences per step (over all DDP processes)")
    g.add_argument("--lr", type=float, default=None, help="peak learning rate (default: 1e-3 pretrain from scratch, 5e-5 fine-tune / continued)")
    g.add_argument("--warmup", type=float, default=0.1, help="warmup steps: an int >= 1, or a fraction of max steps")
    g.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (not on biases and LayerNorm)")
    g.add_argument("--beta2", type=float, default=0.999, help="AdamW beta2 (beta1 = 0.9)")
    g.add_argument("--grad-clip", type=float, default=1.0, help="clip the global gradient norm (0: off)")
    g.add_argument("--dropout", type=float, default=None, help="override hidden and attention dropout (0 is fastest)")
    g.add_argument("--max-seq-len", type=int, default=128, help="tokens per sequence, [CLS]/[SEP] included")
    g.add_argument("--model-overrides", default=None,
                   help='JSON of BertConfig fields to change, e.g. \'{"hidden_size": 32, "num_hidden_layers": 2}\'')

    g = p.add_argument_group("logging and checkpoints")
    g.add_argument("--log-every", type=int, default=10, help="steps between train metric lines")
    g.add_argument("--eval-every", type=int, default=100, help="steps between validation evaluations")
    g.add_argument("--eval-batches", type=int, default=20, help="validation batches per evaluation (0: all)")
    g.add_argument("--save-every", type=int, default=200, help="steps between checkpoints (one is always saved at the end)")
    g.add_argument("--keep-checkpoints", type=int, default=3, help="newest checkpoints kept (0: keep all)")
    g.add_argument("--save-every-s", type=float, default=0, help="also checkpoint after this many seconds (0: off)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bertcore.train",
        description="Train a small BERT: pretraining (masked LM + next sentence prediction) or fine-tuning "
                    "(sequence classification). Writes a run directory (run.json, status.json, metrics.jsonl, "
                    "checkpoints/step-N/ as HF folders, log.txt) that the BERT Explorer UI reads.",
        epilog="Examples:\n"
               "  python -m bertcore.train pretrain --preset nano --max-steps 600\n"
               "  python -m bertcore.train finetune --init packaged --dataset tweets --max-seq-len 64 --max-steps 400\n"
               "  python -m bertcore.train resume --run-dir runs/<id>\n"
               "  torchrun --standalone --nproc_per_node 2 -m bertcore.train pretrain --device cpu ...\n"
               "Use `python -m bertcore.train pretrain --help` for the options of a task.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="task", required=True, metavar="{pretrain,finetune,resume}")

    p = sub.add_parser("pretrain", help="masked LM + next sentence prediction on a text corpus",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Pretrain with MLM + NSP. From scratch (a preset) or continued from a model that "
                                   "has an encoder (its MLM/NSP heads are loaded if present, else fresh).")
    g = p.add_argument_group("model")
    g.add_argument("--preset", default="nano", help="architecture preset when training from scratch "
                   "(nano, tiny, mini, small, medium, base, large)")
    g.add_argument("--init", default=None,
                   help="continue from a model instead: 'packaged' (MiniLM), a local HF folder / run checkpoint, or a hub id")
    g.add_argument("--tokenizer", default="packaged",
                   help="WordPiece tokenizer for from-scratch runs: 'packaged' (bert-base-uncased vocab) or a folder")
    g.add_argument("--pre-layer-norm", action="store_true", help="pre-LN layers (LayerNorm before each sub-layer) instead of post-LN")
    g = p.add_argument_group("data")
    g.add_argument("--corpus", default="bbc",
                   help="'bbc' (packaged BBC News), a .txt file or a folder of .txt files (documents separated by "
                        "blank lines in a file), or 'hub:<name>[:<config>]' e.g. hub:wikitext:wikitext-2-raw-v1 (online)")
    g.add_argument("--max-docs", type=int, default=None, help="use at most this many documents")
    g.add_argument("--val-fraction", type=float, default=0.05, help="documents held out for validation")
    g.add_argument("--mlm-probability", type=float, default=0.15, help="fraction of tokens selected for MLM")
    g.add_argument("--whole-word-mask", action="store_true", help="select whole words (all their pieces) together")
    g.add_argument("--short-seq-prob", type=float, default=0.1, help="chance of a shorter target length (as BERT)")
    g.add_argument("--probe", default="The government said it would [MASK] the new law next [MASK].",
                   help="sentence whose [MASK] predictions are logged at each evaluation")
    _common(p)

    p = sub.add_parser("finetune", help="sequence classification (fine-tuning) on a labelled data set",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Fine-tune BertForSequenceClassification; at the end, test metrics, confusion "
                                   "matrix, classification report and a TF-IDF + logistic regression baseline.")
    g = p.add_argument_group("model")
    g.add_argument("--init", default="packaged",
                   help="'packaged' (MiniLM), a local HF folder / run checkpoint, a hub id, or 'scratch' (use --preset)")
    g.add_argument("--preset", default="nano", help="architecture when --init scratch")
    g.add_argument("--tokenizer", default="packaged", help="tokenizer for --init scratch")
    g.add_argument("--pre-layer-norm", action="store_true", help="pre-LN layers (only with --init scratch)")
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default="tweets",
                   help="'tweets' (packaged, positive vs negative), 'bbc-topics' (packaged, 5 classes), a .csv file "
                        "(text, optional text_pair, label columns), or 'hub:imdb', 'hub:sst2', 'hub:<name>[:<config>]' (online)")
    g.add_argument("--text-column", default="text", help="CSV / hub text column")
    g.add_argument("--text-pair-column", default=None, help="optional second text column (sentence pairs)")
    g.add_argument("--label-column", default="label", help="CSV / hub label column")
    g.add_argument("--max-train-examples", type=int, default=None, help="subsample the training split (seeded)")
    g.add_argument("--val-fraction", type=float, default=0.1, help="fraction of examples for validation")
    g.add_argument("--test-fraction", type=float, default=0.1, help="fraction of examples for test")
    g.add_argument("--group-by-length", action="store_true",
                   help="batch examples of similar length together (less padding, faster on a CPU)")
    g.add_argument("--no-baseline", action="store_true", help="skip the TF-IDF + logistic regression baseline")
    _common(p)
    p.set_defaults(lr=None)

    p = sub.add_parser("resume", help="continue a stopped or killed run from its last checkpoint",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--run-dir", type=Path, required=True, help="the run directory to continue")
    p.add_argument("--lock", choices=("fail", "wait", "none"), default="fail", help="as for pretrain/finetune")
    p.add_argument("--max-steps", type=int, default=None, help="extend (or shorten) the run to this many steps")
    p.add_argument("--device", default=None, help="override the device of the run")
    return parser


def _explicit_dests(parser: argparse.ArgumentParser, task: str, argv: Sequence[str]) -> set[str]:
    """Option names given on the command line (so that they win over --config)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[task]
    given = set()
    for action in sub._actions:
        if any(opt in argv or any(w.startswith(opt + "=") for w in argv) for opt in action.option_strings):
            given.add(action.dest)
    return given


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line and merge ``--config`` (flags on the command line win)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.task != "resume" and ns.config is not None:
        try:
            data = json.loads(Path(ns.config).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            parser.error(f"cannot read --config {ns.config}: {exc}")
        if isinstance(data, dict) and "args" in data and isinstance(data["args"], dict):
            data = data["args"]  # an earlier run.json
        given = _explicit_dests(parser, ns.task, argv)
        known = vars(ns)
        for key, value in data.items():
            key = key.replace("-", "_")
            if key not in known:
                parser.error(f"--config {ns.config}: unknown option {key!r}")
            if key not in given and key not in ("task", "run_dir", "config", "resume"):
                setattr(ns, key, Path(value) if key == "run_dir" and value else value)
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    from . import training  # heavy imports only after --help

    return training.main(ns, list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
