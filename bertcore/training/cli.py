"""Command line of a training run: ``python -m bertcore.training {pretrain,finetune,resume} ...``.

The parser is built from :class:`bertcore.runs.config.TrainConfig` (one flag per field, its
help, default, range and choices); the loop is :class:`bertcore.training.loop.Trainer`.

Examples::

    # pretrain the nano preset from scratch on the packaged BBC News corpus (CPU is fine)
    python -m bertcore.training pretrain --preset nano --max-steps 600 --run-dir runs/nano-bbc

    # fine-tune the packaged MiniLM on the packaged tweets (positive vs negative)
    python -m bertcore.training finetune --init packaged --dataset tweets --max-seq-len 64 --max-steps 400

    # ten minutes of CPU (the first seconds measure steps/s and fix the step count), MLM only, 100% [MASK]
    python -m bertcore.training pretrain --preset nano --max-time 10 --no-nsp --mask-replace-prob 1 \
        --random-replace-prob 0 --save-early --run-dir runs/nano-10min

    # continue a stopped or killed run from its last checkpoint
    python -m bertcore.training resume --run-dir runs/nano-bbc

    # recompute a checkpoint's held-out metrics and probe (what the live charts showed at that step)
    python -m bertcore.training evaluate --checkpoint runs/nano-bbc/checkpoints/step-000600

    # rewrite an older pre-LN checkpoint in the format transformers loads exactly (RobertaPreLayerNorm)
    python -m bertcore.training export --checkpoint runs/old-pre-ln/checkpoints/step-000600

    # the same under DDP (gloo on CPU, NCCL on GPUs)
    torchrun --standalone --nproc_per_node 2 -m bertcore.training.cli pretrain --preset nano --device cpu ...

Options can also come from a JSON file (``--config run.json``: either a file of option names,
e.g. ``{"preset": "nano", "max_steps": 600}``, or a ``run.json`` written by an earlier run);
options given on the command line win. The run directory follows ``docs/CONTRACTS.md``.
Exit codes (:class:`~bertcore.runs.config.ExitCode`): 0 done, 1 failed, 2 bad options,
3 device busy, 143 cancelled (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from ..runs import read_config
from ..runs.options import add_options
from ..runs.config import GROUPS, ExitCode, OptionError, TrainConfig, field_info, fields_for

DESCRIPTIONS = {
    "pretrain": ("masked LM + next sentence prediction on a text corpus",
                 "Pretrain with MLM + NSP. From scratch (a preset) or continued from a model that has an encoder "
                 "(its MLM/NSP heads are loaded if present, else fresh)."),
    "finetune": ("sequence classification (fine-tuning) on a labelled data set",
                 "Fine-tune BertForSequenceClassification; at the end, test metrics, confusion matrix, classification "
                 "report and a TF-IDF + logistic regression baseline."),
}


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: x)`` only where there is a default to show."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def _add_options(p: argparse.ArgumentParser, task: str) -> None:
    """One argument per TrainConfig field of ``task``, grouped as the dataclass groups them."""
    fields = fields_for(task)
    defaults = {f.name: field_info(f.name, task)["default"] if f.default is not None or f.metadata["by_task"] else None
                for f in fields}
    groups = add_options(p, TrainConfig, fields, defaults=defaults, groups=GROUPS)
    groups["run"].add_argument("--config", type=Path, default=None,
                               help="JSON file of options (option names as keys, or an earlier run.json); flags win")


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m bertcore.training`` parser: subcommands pretrain, finetune (from TrainConfig) and resume."""
    parser = argparse.ArgumentParser(
        prog="python -m bertcore.training",
        description="Train a small BERT: pretraining (masked LM + next sentence prediction) or fine-tuning "
                    "(sequence classification). Writes a run directory (run.json, status.json, metrics.jsonl, "
                    "checkpoints/step-N/ as HF folders, log.txt) that the BERT Explorer UI reads.",
        epilog="Examples:\n"
               "  python -m bertcore.training pretrain --preset nano --max-steps 600\n"
               "  python -m bertcore.training finetune --init packaged --dataset tweets --max-seq-len 64 "
               "--max-steps 400\n"
               "  python -m bertcore.training resume --run-dir runs/<id>\n"
               "  torchrun --standalone --nproc_per_node 2 -m bertcore.training.cli pretrain --device cpu ...\n"
               "Use `python -m bertcore.training pretrain --help` for the options of a task.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="task", required=True, metavar="{pretrain,finetune,resume,evaluate,export}")
    for task, (short, long) in DESCRIPTIONS.items():
        p = sub.add_parser(task, help=short, description=long, formatter_class=_HelpFormatter)
        _add_options(p, task)
    p = sub.add_parser("resume", help="continue a stopped or killed run from its last checkpoint",
                       formatter_class=_HelpFormatter)
    p.add_argument("--run-dir", type=Path, required=True, help="the run directory to continue")
    p.add_argument("--lock", choices=("fail", "wait", "none"), default="fail", help="as for pretrain/finetune")
    p.add_argument("--max-steps", type=int, default=None, help="extend (or shorten) the run to this many steps")
    p.add_argument("--device", default=None, help="override the device of the run")
    p = sub.add_parser("evaluate", help="recompute a checkpoint's held-out metrics and probe, loaded fresh",
                       description="Load a run checkpoint in this process and recompute what the run logged for "
                                   "that step: its held-out metrics (same split, batches and fixed masks) and its "
                                   "probe. Prints one JSON object.", formatter_class=_HelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint folder: runs/<id>/checkpoints/step-N")
    p.add_argument("--split", choices=("val", "test", "train"), default="val",
                   help="val (the run's 'val' records), test (fine-tuning's results.json) or train")
    p.add_argument("--eval-batches", type=int, default=None,
                   help="batches to evaluate (default: the run's --eval-batches for val/train, all for test; 0 = all)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p = sub.add_parser("export", help="rewrite a checkpoint in the format transformers loads exactly (and its card)",
                       description="Rewrite a checkpoint folder in the current format: an older pre-LayerNorm "
                                   "checkpoint (model_type bert with pre_layer_norm: true, which transformers loads "
                                   "silently wrong) becomes RobertaPreLayerNorm, which transformers computes exactly; "
                                   "the model card README.md is rewritten. Atomic: the folder is the old one or the "
                                   "new one.", formatter_class=_HelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint folder: runs/<id>/checkpoints/step-N")
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
    """Parse the command line and merge ``--config`` (flags on the command line win); ranges are
    checked against TrainConfig (``parser.error``, exit code 2, when one is out of range)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.task in ("resume", "evaluate", "export"):
        return ns
    if ns.config is not None:
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
                setattr(ns, key, value)
    try:
        to_config(ns).check()
    except OptionError as exc:
        parser.error(str(exc))
    return ns


def to_config(ns: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of a parsed ``pretrain`` / ``finetune`` command line."""
    values = {k: v for k, v in vars(ns).items() if k not in ("task", "config")}
    if values.get("run_dir") is not None:
        values["run_dir"] = str(values["run_dir"])
    return TrainConfig.create(ns.task, **values)


def resume_config(ns: argparse.Namespace) -> TrainConfig:
    """The options of an earlier run (its ``run.json``), set to resume; ``--max-steps`` / ``--device``
    override. Reads run.json files of earlier versions too (missing options get today's defaults).

    Raises:
        OptionError: no readable run.json, or options that cannot be re-read.
    """
    config = read_config(ns.run_dir)
    if config is None or not isinstance(config.get("args"), dict):
        raise OptionError(f"{ns.run_dir} has no readable run.json: not a run directory")
    args = config["args"]
    if set(args) == {"argv"}:  # launched with CLI words and never set up: parse them again
        argv = [w for w in config.get("argv", []) if w]
        if "bertcore.training.cli" in argv:
            argv = argv[argv.index("bertcore.training.cli") + 1:]
        try:
            cfg = to_config(build_parser().parse_args(argv))
        except SystemExit as exc:
            raise OptionError(f"cannot re-read the options of {ns.run_dir}: {argv}") from exc
    else:
        cfg = TrainConfig.from_dict(args, task=config.get("task"))
    changes = {"resume": True, "run_dir": str(ns.run_dir), "lock": ns.lock}
    if ns.max_steps is not None:
        changes["max_steps"] = ns.max_steps
    if ns.device is not None:
        changes["device"] = ns.device
    return cfg.replace(**changes)


def evaluate_command(ns: argparse.Namespace) -> int:
    """``evaluate``: print :func:`bertcore.training.evaluate.evaluate_checkpoint` as one JSON object."""
    from ..modeling.hf_format import LEGACY_PRELN, folder_format
    from .evaluate import evaluate_checkpoint
    from .models import TrainingError

    if folder_format(ns.checkpoint) == LEGACY_PRELN:
        print(f"note: {ns.checkpoint} is an older pre-LayerNorm checkpoint: bertcore loads it exactly, transformers "
              f"loads it WITHOUT an error but computes a different model. Rewrite it with: python -m bertcore.training "
              f"export --checkpoint {ns.checkpoint}", file=sys.stderr)
    try:
        result = evaluate_checkpoint(ns.checkpoint, ns.split, ns.eval_batches, ns.device, ns.threads)
    except (OptionError, TrainingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(json.dumps(result))
    return ExitCode.DONE


def export_command(ns: argparse.Namespace) -> int:
    """``export``: rewrite a checkpoint in the current format (:func:`bertcore.loading.hf_export.reexport_checkpoint`)
    with a new model card; prints the folder's format afterwards."""
    from ..modeling.checkpoint import CheckpointError
    from ..loading.hf_export import reexport_checkpoint
    from ..modeling.hf_format import folder_format
    from .card import model_card

    folder = Path(ns.checkpoint)
    if not (folder / "config.json").is_file():
        print(f"error: {folder} is not a checkpoint folder (no config.json)", file=sys.stderr)
        return ExitCode.USAGE
    run = folder.parent.parent
    card = (lambda tmp: model_card(tmp, run, code_folder=folder)) if read_config(run) is not None else None
    try:
        reexport_checkpoint(folder, card)
    except (CheckpointError, OSError) as exc:
        print(f"error: cannot rewrite {folder}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(json.dumps({"checkpoint": str(folder), "format": folder_format(folder)}))
    return ExitCode.DONE


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, build the config and run it. Returns the process exit code (:class:`ExitCode`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ns = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import datasets

        datasets.disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass
    if ns.task == "evaluate":
        return evaluate_command(ns)
    if ns.task == "export":
        return export_command(ns)
    try:
        cfg = resume_config(ns) if ns.task == "resume" else to_config(ns)
    except OptionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if ns.task != "resume":
        from .models import tokenizer_problem

        if (problem := tokenizer_problem(cfg)) is not None:  # refused at launch, before a run directory exists
            print(f"error: {problem}", file=sys.stderr)
            return ExitCode.USAGE
    from .loop import Trainer  # heavy imports only after --help and option checks

    trainer = Trainer(cfg, cfg.run_dir, argv)
    trainer.run()
    return int(trainer.exit_code)


if __name__ == "__main__":
    sys.exit(main())
