"""The model card (``README.md``) of a run checkpoint: what trained it, on what, how well, and how to load it.

:func:`model_card` reads the run's own files (``run.json``, ``metrics.jsonl``), so the training loop writes it
with each checkpoint and the app can write it for an older checkpoint it re-exports. The code in it is
:func:`bertcore.loading.hf_export.usage_code`: transformers where transformers computes the model exactly, bertcore
otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..loading import hf_export
from .. import runs as R
from ..modeling import families, hf_format
from ..runs.config import TrainConfig
from . import recipes
from .recipes import RECIPES

#: metrics shown first, in this order, when a record has them (the rest follow alphabetically)
FIRST = ("loss", "mlm_loss", "mlm_acc", "mlm_acc_mask", "mlm_top5_mask", "nsp_loss", "nsp_acc", "acc", "f1")
NOT_METRICS = {"step", "time", "split", "lr", "tokens_per_s", "steps_per_s", "epoch", "seq_len", "grad_norm"}


def recipe_of(task: str | None, args: dict[str, Any]) -> str | None:
    """The name of the one-click recipe whose options the run used (its time budget aside), or None (custom)."""
    return recipes.recipe_of(args) if task == "pretrain" else None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if value is None:
        return "-"
    text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def held_out_at(run_dir: Path, step: int) -> tuple[int | None, dict[str, Any]]:
    """``(step of the record, metrics)`` of the run's held-out (``val``) evaluation at ``step``, or else the last
    one before it; ``(None, {})`` when there is none."""
    records = [r for r in R.read_metrics(run_dir, "val") if isinstance(r.get("step"), int) and r["step"] <= step]
    if not records:
        return None, {}
    rec = records[-1]
    metrics = {k: v for k, v in rec.items() if k not in NOT_METRICS and isinstance(v, (int, float))}
    return rec["step"], metrics


def model_card(checkpoint: str | Path, run_dir: str | Path | None = None, code_folder: str | Path | None = None) -> str:
    """The ``README.md`` of ``checkpoint`` (``<run>/checkpoints/step-N``; its weights and config must be there).

    Args:
        checkpoint: the folder whose config.json / weights say the format (may be a temp folder being written).
        run_dir: the run (default: two levels up).
        code_folder: the path the loading code names (default: ``checkpoint``; the final path of a folder written
            under a temporary name).
    """
    checkpoint = Path(checkpoint)
    run_dir = Path(run_dir) if run_dir is not None else checkpoint.parent.parent
    code_folder = Path(code_folder) if code_folder is not None else checkpoint
    step = R.checkpoint_step(code_folder)
    step = step if step is not None else R.checkpoint_step(checkpoint)
    config = R.read_config(run_dir) or {}
    task = config.get("task")
    args = config.get("args") if isinstance(config.get("args"), dict) else {}
    try:
        cfg = TrainConfig.from_dict(args, task=task)
    except Exception:  # noqa: BLE001 - an old or hand-edited run.json: show what it has
        cfg = None
    fmt = hf_format.folder_format(checkpoint) or "?"
    from ..loading.sources import detect_head

    head = detect_head(checkpoint)
    code = hf_export.usage_code(checkpoint, args.get("probe")).replace(
        repr(str(checkpoint.resolve())), repr(str(code_folder.resolve())))
    classes = {**hf_format.HF_CLASSES, **families.HF_CLASSES}
    lines = [f"# {run_dir.name} @ step {step}", "",
             f"A BERT checkpoint written by BERT Explorer (`python -m bertcore.training {task or ''}`): step {step} of "
             f"run `{run_dir.name}`. Model class: `{classes.get(fmt, {}).get(head, head)}` "
             f"(format: {fmt}).", "",
             "## Use it in Python", "", hf_export.usage_note(fmt, head, checkpoint), "", "```python", code.rstrip(),
             "```", ""]
    if fmt in (hf_format.BERTCORE_ONLY, hf_format.LEGACY_PRELN):
        lines += ["With bertcore: " + f"`{hf_format.bertcore_line(head)}`", ""]
    lines += ["## Training", ""]
    recipe = recipe_of(task, args)
    lines.append(f"- Recipe: {recipe} ({RECIPES[recipe].label})" if recipe else
                 "- Recipe: custom options (every value below)")
    mc = config.get("model_config") or {}
    if mc:
        n = config.get("num_parameters")
        lines.append(f"- Model: {mc.get('num_hidden_layers')} layers, hidden {mc.get('hidden_size')}, "
                     f"{mc.get('num_attention_heads')} heads, vocabulary {mc.get('vocab_size')}, "
                     f"{'pre' if mc.get('pre_layer_norm') else 'post'}-LayerNorm"
                     + (f", {mc['family']} design" if mc.get("family", "bert") != "bert" else "")
                     + (f", {n:,} parameters" if isinstance(n, int) else "")
                     + f"; started from {config.get('origin', '?')}")
    data = config.get("data") or {}
    if task == "finetune":
        source = args.get("dataset")
        split = (f"{data.get('train', '?')} training / {data.get('val', '?')} held-out (val) / "
                 f"{data.get('test', '?')} test examples")
    else:
        source = args.get("corpus")
        split = (f"{data.get('train_documents', '?')} training / {data.get('val_documents', '?')} held-out (val) "
                 f"documents ({data.get('train_pairs', '?')} / {data.get('val_pairs', '?')} sequences)")
    lines += [f"- Data: `{source}`; held-out split: {_fmt(args.get('val_fraction'))} of it, drawn with seed "
              f"{args.get('seed')}: {split}",
              f"- Run length: {config.get('total_steps') or '?'} steps planned"
              + (f", time budget {config['time_budget_s']:.0f} s" if config.get("time_budget_s") else ""), ""]
    at, metrics = held_out_at(run_dir, step if step is not None else 0)
    lines += [f"## Held-out metrics at step {step}", ""]
    if not metrics:
        lines += ["No held-out evaluation was logged up to this step.", ""]
    else:
        if at != step:
            lines += [f"No evaluation at step {step}; the last one before it, at step {at}:", ""]
        order = [k for k in FIRST if k in metrics] + sorted(k for k in metrics if k not in FIRST)
        lines += ["| metric | value |", "| --- | --- |"] + [f"| {k} | {_fmt(metrics[k])} |" for k in order]
        lines += ["", f"Recompute them from this folder: `python -m bertcore.training evaluate --checkpoint "
                      f"{code_folder}`", ""]
    lines += ["## Every option of the run (TrainConfig)", "", "| option | value |", "| --- | --- |"]
    if cfg is not None:
        from ..runs.config import fields_for

        values = {"task": cfg.task, **{f.name: getattr(cfg, f.name) for f in fields_for(cfg.task)}}
    else:
        values = args
    lines += [f"| {k} | {_fmt(v)} |" for k, v in values.items()]
    return "\n".join(lines) + "\n"
