"""How long a run is and where it stands: a step count, a time budget, or both.

A run ends at ``max_steps``, at the step count a time budget was calibrated to, or after ``epochs``
passes over the training data; a time limit (if any) stops it earlier. Under a time budget alone
(``max_time``), with ``budget_schedule='steps'`` (the default) the trainer first measures this
machine's throughput (:mod:`.calibrate`) and fixes the step count, so the learning rate and the
sequence-length schedule follow the *step*, and the same seed and settings give the same run; the
budget x :data:`.calibrate.SAFETY` stays as a safety stop. With ``budget_schedule='time'`` both
follow the share of the budget spent (Geiping & Goldstein 2023, "Cramming"), and no two runs are
alike. Pure: the trainer passes the step and the elapsed seconds (:class:`bertcore.training.loop.Trainer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..runs.config import TrainConfig
from .optim import decay_steps_of, lr_at, lr_at_time, warmup_steps_of

UNBOUNDED = 10**12  # "no step limit": a run bounded by its time budget only, or not calibrated yet


@dataclass(frozen=True)
class RunLength:
    """The length of one run.

    Attributes:
        total_steps: the last optimizer step; :data:`UNBOUNDED` when only the time budget ends the run
            (``by_time``) or while the step count of a time budget is not calibrated yet.
        budget_s: the time budget in seconds as asked (``max_time`` x 60; None: none).
        warmup: warmup in optimizer steps (0 for a fractional warmup of a run bounded by time only:
            that warmup is a fraction of the budget, see :func:`.optim.lr_at_time`).
        warmup_option: the ``warmup`` option as given (>= 1 steps, below 1 a fraction of the run).
        decay_option: the ``decay`` option as given (the share of the steps the final decay spans; 1.0: all after
            the warmup, BERT's schedule).
        by_time: the learning rate (and the progress) follow elapsed time (``budget_schedule='time'``).
        limit_s: elapsed seconds at which the run stops whatever its step (None: no limit); the budget
            itself, or the budget x :data:`.calibrate.SAFETY` for a calibrated run.
    """

    total_steps: int
    budget_s: float | None
    warmup: int
    warmup_option: float
    by_time: bool = False
    limit_s: float | None = None
    decay_option: float = 1.0

    @classmethod
    def of(cls, cfg: TrainConfig, steps_per_epoch: int) -> RunLength:
        """The length of a run of ``cfg`` over data of ``steps_per_epoch`` batches: ``max_steps`` if set,
        else (under a time budget) unbounded until :meth:`calibrated` or, with ``budget_schedule='time'``,
        ended by the budget, else ``epochs`` (default 1) passes."""
        budget_s = cfg.max_time * 60.0 if cfg.max_time else None
        by_time = bool(budget_s) and cfg.budget_schedule == "time"
        if cfg.max_steps:
            total = cfg.max_steps
        elif budget_s:
            total = UNBOUNDED  # calibrated later, or the time budget ends the run
        else:
            total = max(1, int(math.ceil((cfg.epochs or 1.0) * steps_per_epoch)))
        warmup = warmup_steps_of(cfg.warmup, total) if total != UNBOUNDED or cfg.warmup >= 1 else 0
        return cls(total, budget_s, warmup, cfg.warmup, by_time, budget_s, cfg.decay)

    def calibrated(self, total_steps: int, limit_s: float | None) -> RunLength:
        """This length with the step count a calibration fixed (:mod:`.calibrate`): a step schedule over
        ``total_steps`` (the warmup option resolved against it) and a stop at ``limit_s`` seconds."""
        if total_steps < 1:
            raise ValueError(f"a calibrated run needs at least 1 step, got {total_steps}")
        return replace(self, total_steps=int(total_steps), warmup=warmup_steps_of(self.warmup_option, total_steps),
                       by_time=False, limit_s=limit_s)

    def as_time_schedule(self) -> RunLength:
        """This length with the learning rate by elapsed time and the budget as the stop (what runs of
        ``budget_schedule='time'``, and runs written before calibration existed, use)."""
        return replace(self, by_time=True, limit_s=self.budget_s)

    @property
    def bounded(self) -> bool:
        """Whether a step count ends the run (else only the time budget does, or it is not calibrated yet)."""
        return self.total_steps != UNBOUNDED

    @property
    def needs_calibration(self) -> bool:
        """A time budget with a step schedule whose step count is not fixed yet."""
        return bool(self.budget_s) and not self.bounded and not self.by_time

    def status_total(self) -> int | None:
        """``total_steps`` for status.json and run.json: None when no step count bounds the run (yet)."""
        return self.total_steps if self.bounded else None

    def progress(self, step: int, elapsed_s: float) -> float:
        """Share of the run done, in [0, 1]: by steps; under a time schedule by time too (whichever is
        further)."""
        p = step / self.total_steps if self.bounded else 0.0
        if self.by_time and self.budget_s:
            p = max(p, elapsed_s / self.budget_s)
        return min(1.0, p)

    def lr(self, step: int, elapsed_s: float, peak: float) -> float:
        """The learning rate of optimizer step ``step``: by elapsed time under a time schedule, else by
        step (:func:`.optim.lr_at`: warmup, then linear decay over ``decay_option`` of the steps). Before a
        calibration (its steps are thrown away) 1% of ``peak``."""
        if self.by_time and self.budget_s:
            return lr_at_time(elapsed_s, self.budget_s, peak, self.warmup_option, step)
        if not self.bounded:
            return 0.01 * peak
        return lr_at(step, peak, self.warmup, self.total_steps, decay_steps_of(self.decay_option, self.total_steps))

    def time_up(self, elapsed_s: float) -> bool:
        """Whether the time limit (if any) is reached."""
        return bool(self.limit_s) and elapsed_s >= self.limit_s

    def eta(self, step: int, elapsed_s: float, step_times: list[float]) -> float:
        """Seconds left: by steps (mean of the last step times) and/or by the time limit, the sooner."""
        left = []
        if self.bounded:
            left.append((self.total_steps - step) * (sum(step_times) / max(1, len(step_times))))
        if self.limit_s:
            left.append(max(0.0, self.limit_s - elapsed_s))
        return min(left) if left else 0.0


def short_seq_len(cfg: TrainConfig, progress: float) -> int | None:
    """The sequence-length schedule of pretraining: ``short_seq_len`` for the first ``short_seq_fraction``
    of the run, else None (the full ``max_seq_len``)."""
    short = cfg.pretrain and cfg.short_seq_len and cfg.short_seq_len < cfg.max_seq_len
    if short and progress < cfg.short_seq_fraction:
        return cfg.short_seq_len
    return None
