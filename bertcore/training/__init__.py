"""Training: the loop (:class:`Trainer`) and its parts; the options (:class:`TrainConfig`) are
:mod:`bertcore.runs.config` (a foundation: ``runs`` and the UI read them without this package).

    models.py       the model and tokenizer a run starts from; the page's pre-launch checks
    tasks.py        PretrainTask (MLM + NSP) and ClassifyTask: data, forward, metrics, end
    loop.py         Trainer: setup, the loop, evaluation, checkpoints, resume
    evaluate.py     held-out metrics of the live model, and recomputed from a checkpoint loaded fresh
    schedule.py     RunLength: how long a run is (steps, time budget, epochs), its progress, lr and ETA
    optim.py        AdamW and the learning-rate schedule
    dist.py         devices, DDP, autocast, the SIGTERM flag
    checkpoints.py  writing / pruning / reading checkpoints
    baseline.py     macro F1 and the TF-IDF + logistic regression baseline

``bertcore.training.cli`` is the command line. Names are imported lazily, so ``bertcore.runs.config``
stays cheap for the UI (no torch import).
"""

from __future__ import annotations

import importlib

_NAMES = {
    "..runs.config": ("TrainConfig", "ExitCode", "OptionError", "default_lr", "fields_for", "field_info"),
    ".models": ("TrainingError", "build_model", "resolve_init", "load_tokenizer_for", "start_model_config", "validate"),
    ".tasks": ("PretrainTask", "ClassifyTask", "make_task"),
    ".loop": ("Trainer", "Cancelled", "as_config"),
    ".evaluate": ("evaluate", "evaluate_checkpoint"),
    ".schedule": ("RunLength", "short_seq_len"),
    ".optim": ("lr_at", "warmup_steps_of", "make_optimizer"),
    ".dist": ("Dist", "autocast", "pick_device", "init_distributed", "StopFlag"),
    ".checkpoints": ("save_checkpoint", "prune_checkpoints", "load_trainer_state"),
    ".baseline": ("macro_f1", "tfidf_baseline"),
}
_WHERE = {name: module for module, names in _NAMES.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
