"""How long a run is and where it stands: a step count, a time budget, or both.

A run ends at ``max_steps``, when its time budget (``max_time`` minutes) is spent, or after ``epochs``
passes over the training data. Under a time budget the learning rate and the sequence-length schedule
follow the share of the budget spent (Geiping & Goldstein 2023, "Cramming"), else the step. Pure: the
trainer passes the step and the elapsed seconds (:class:`bertcore.training.loop.Trainer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import TrainConfig
from .optim import lr_at, lr_at_time, warmup_steps_of

UNBOUNDED = 10**12  # "no step limit": a run bounded by its time budget only


@dataclass(frozen=True)
class RunLength:
    """The length of one run.

    Attributes:
        total_steps: the last optimizer step; :data:`UNBOUNDED` when only the time budget ends the run.
        budget_s: the time budget in seconds (None: none).
        warmup: warmup in optimizer steps (0 for a fractional warmup of a run bounded by time only:
            that warmup is a fraction of the budget, see :func:`.optim.lr_at_time`).
        warmup_option: the ``warmup`` option as given (>= 1 steps, below 1 a fraction of the run).
    """

    total_steps: int
    budget_s: float | None
    warmup: int
    warmup_option: float

    @classmethod
    def of(cls, cfg: TrainConfig, steps_per_epoch: int) -> RunLength:
        """The length of a run of ``cfg`` over data of ``steps_per_epoch`` batches: ``max_steps`` if set,
        else unbounded under a time budget, else ``epochs`` (default 1) passes."""
        budget_s = cfg.max_time * 60.0 if cfg.max_time else None
        if cfg.max_steps:
            total = cfg.max_steps
        elif budget_s:
            total = UNBOUNDED  # the time budget ends the run
        else:
            total = max(1, int(math.ceil((cfg.epochs or 1.0) * steps_per_epoch)))
        warmup = warmup_steps_of(cfg.warmup, total) if total != UNBOUNDED or cfg.warmup >= 1 else 0
        return cls(total, budget_s, warmup, cfg.warmup)

    @property
    def bounded(self) -> bool:
        """Whether a step count ends the run (else only the time budget does)."""
        return self.total_steps != UNBOUNDED

    def status_total(self) -> int | None:
        """``total_steps`` for status.json and run.json: None when only the time budget bounds the run."""
        return self.total_steps if self.bounded else None

    def progress(self, step: int, elapsed_s: float) -> float:
        """Share of the run done, in [0, 1]: by time under a budget (or steps, whichever is further)."""
        p = step / self.total_steps if self.bounded else 0.0
        if self.budget_s:
            p = max(p, elapsed_s / self.budget_s)
        return min(1.0, p)

    def lr(self, step: int, elapsed_s: float, peak: float) -> float:
        """The learning rate of optimizer step ``step``: by elapsed time under a budget, else by step."""
        if self.budget_s:
            return lr_at_time(elapsed_s, self.budget_s, peak, self.warmup_option, step)
        return lr_at(step, peak, self.warmup, self.total_steps)

    def time_up(self, elapsed_s: float) -> bool:
        """Whether the time budget (if any) is spent."""
        return bool(self.budget_s) and elapsed_s >= self.budget_s

    def eta(self, step: int, elapsed_s: float, step_times: list[float]) -> float:
        """Seconds left: by steps (mean of the last step times) and/or by the time budget, the sooner."""
        left = []
        if self.bounded:
            left.append((self.total_steps - step) * (sum(step_times) / max(1, len(step_times))))
        if self.budget_s:
            left.append(max(0.0, self.budget_s - elapsed_s))
        return min(left)


def short_seq_len(cfg: TrainConfig, progress: float) -> int | None:
    """The sequence-length schedule of pretraining: ``short_seq_len`` for the first ``short_seq_fraction``
    of the run, else None (the full ``max_seq_len``)."""
    short = cfg.pretrain and cfg.short_seq_len and cfg.short_seq_len < cfg.max_seq_len
    if short and progress < cfg.short_seq_fraction:
        return cfg.short_seq_len
    return None
