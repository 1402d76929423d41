"""Held-out evaluation of a task, one function for the training loop and for a saved checkpoint.

:func:`evaluate` is what the loop logs as ``split: "val"`` (and fine-tuning's test results);
:func:`evaluate_checkpoint` recomputes the same numbers from a checkpoint folder loaded fresh in a new
process (``python -m bertcore.training evaluate --checkpoint runs/<id>/checkpoints/step-N``), so a user can
check what the live charts said. Both use the run's own options (``run.json``), its data split (from
``--seed``) and the fixed evaluation masks (generator seeded ``seed + 7919`` per batch), so the two agree
to float rounding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .. import data as D
from .. import runs as R
from ..runs.config import OptionError, TrainConfig
from .dist import autocast
from .tasks import make_task

#: the offset of the evaluation-mask seed from ``--seed`` (the masks are the same at every evaluation)
EVAL_SEED_OFFSET = 7919


@torch.no_grad()
def evaluate(task, model, ds, cfg: TrainConfig, device: torch.device, max_batches: int,
             store: dict[str, list] | None = None) -> dict[str, Any]:
    """Metrics of ``task`` on ``ds`` with fixed masks (pretraining) in eval mode; the mode is restored.

    Args:
        task: a :class:`~.tasks.PretrainTask` or :class:`~.tasks.ClassifyTask` after ``prepare``.
        model: its model (unwrapped, not DDP), on ``device``.
        ds: a tokenized split (``task.val_ds``, ``task.test_ds``, ``task.train_ds``).
        max_batches: the first ``max_batches`` batches of ``cfg.batch_size`` rows; 0 = all.
        store: collects what the task keeps per example (fine-tuning: predictions and gold labels).
    Returns:
        ``task.summarize`` of the summed batch statistics plus ``task.eval_extra`` (e.g. ``mlm_acc_mask``,
        ``mlm_top5_mask``, ``mlm_loss``; fine-tuning ``acc``, ``loss``, ``f1``); ``{}`` for an empty split.
    """
    was_training = model.training
    model.eval()
    sums = None
    store = {} if store is None else store
    try:
        for b, rows in D.eval_batches(ds, max(1, cfg.batch_size), max_batches, by_length=task.eval_by_length):
            batch = task.collate(rows, D.batch_generator(cfg.seed + EVAL_SEED_OFFSET, b))  # fixed val masks
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            with autocast(device, cfg.precision):
                out = task.forward(model, batch)
            st = task.batch_stats(out, batch)
            sums = st if sums is None else sums + st
            task.eval_collect(out, batch, store)
    finally:
        model.train(was_training)
    if sums is None:
        return {}
    return {**task.summarize(sums), **task.eval_extra(store)}


def run_dir_of(checkpoint: str | Path) -> Path:
    """The run directory of a checkpoint folder (``<run>/checkpoints/step-N``).

    Raises:
        OptionError: the folder is not a checkpoint of a run (no ``run.json`` two levels up).
    """
    ckpt = Path(checkpoint)
    run = ckpt.parent.parent
    if R.checkpoint_step(ckpt) is None or R.read_config(run) is None:
        raise OptionError(f"{ckpt} is not a run checkpoint: expected <run>/checkpoints/step-N with <run>/run.json")
    return run


def evaluate_checkpoint(checkpoint: str | Path, split: str = "val", max_batches: int | None = None,
                        device: str = "cpu", threads: int | None = None) -> dict[str, Any]:
    """Recompute a run's held-out metrics (and its probe) from a checkpoint loaded fresh.

    Args:
        checkpoint: ``<run>/checkpoints/step-N`` (its ``run.json`` gives the task, data and options).
        split: ``"val"`` (what the run logs as ``split: "val"``), ``"test"`` (fine-tuning's test set, as in
            ``results.json``) or ``"train"``.
        max_batches: batches to evaluate; None = what the run used (``--eval-batches`` for val, all for test).
        device: where to run (``"cpu"``, ``"cuda"``).
        threads: torch CPU threads (None: torch's default).
    Returns:
        ``{"step", "split", **metrics, "probe": {...} | None}``; the probe (pretraining) is the top-5 at each
        [MASK] of the run's probe sentence, as ``probe.jsonl`` records it.
    Raises:
        OptionError: not a run checkpoint, unknown split, or a split the task does not have.
    """
    from ..modeling.checkpoint import CheckpointError
    from .models import TrainingError, load_tokenizer_for

    if threads:
        torch.set_num_threads(threads)
    run = run_dir_of(checkpoint)
    config = R.read_config(run)
    if not isinstance(config.get("args"), dict):
        raise OptionError(f"{run}/run.json has no options: the run never started")
    cfg = TrainConfig.from_dict(config["args"], task=config.get("task"))
    task = make_task(cfg)
    try:  # the checkpoint first (a bad folder fails in a second, before the data is read)
        model = task.model_class.from_pretrained(checkpoint)
    except CheckpointError as exc:
        raise OptionError(f"cannot load {checkpoint}: {exc}") from exc
    try:
        tokenizer = load_tokenizer_for(str(checkpoint))
    except TrainingError as exc:
        raise OptionError(f"cannot load the tokenizer of {checkpoint}: {exc.__cause__ or exc}") from exc
    task.load_data(lambda _msg: None, tokenizer=tokenizer)
    dev = torch.device(device)
    model = model.to(dev).eval()
    task.prepare(tokenizer, model)
    sets = {"val": task.val_ds, "test": task.test_ds, "train": task.train_ds}
    if split not in sets:
        raise OptionError(f"unknown split {split!r}: choose val, test or train")
    if sets[split] is None:
        raise OptionError(f"a {cfg.task} run has no {split} split")
    if max_batches is None:
        max_batches = cfg.eval_batches if split in ("val", "train") else 0
    metrics = evaluate(task, model, sets[split], cfg, dev, max_batches)
    step = R.checkpoint_step(checkpoint)
    return {"step": step, "split": split, **metrics, "probe": task.probe(model, tokenizer, dev, step)}
