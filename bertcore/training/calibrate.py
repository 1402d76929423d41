"""Turn a time budget into a fixed step count: measure this machine's throughput, then plan the run.

A run under ``--max-time`` with ``--budget-schedule steps`` (the default) starts with a short
calibration: :data:`WARM_STEPS` untimed training steps (first-call kernel selection, allocator
warm-up), then timed steps for :func:`calibration_seconds` (2% of the budget, at most
:data:`MAX_SECONDS`, at least :data:`MIN_TIMED_STEPS` steps), and one timed held-out evaluation. Those
steps are thrown away: the weights, the optimizer and the RNG state are restored, so the run that
follows depends on the step count only. The step count fills the budget left (steps and evaluations
every ``eval_every`` steps) and is rounded to a coarse grid (:func:`round_steps`), so that equal
machines plan equal runs; the same seed, settings and step count give the same losses. The run then
follows a step schedule (warmup and linear decay to 0 at that count, BERT appendix A.2) and ends there,
unless the machine slows down: the budget x :data:`SAFETY` stays a time limit.

With ``--group-by-length`` (fine-tuning's default) batches differ in length several times over and come in random
order, so the few timed steps are converted by their padded tokens to steps of the epoch's average batch
(:func:`batch_tokens`, :func:`seconds_per_step`), for the plan and for the thread choice; time is taken as
proportional to the tokens, which ignores a step's fixed costs (measured: the last step of six fine-tuning runs came
between 4% before and 9% after the budget, docs/measurements/finetuning.md).

Throughput measured over a few seconds is not the whole run's (other processes, thermal limits): the
run ends at its step count whatever the clock says, earlier or later than the budget.

Threads: on a CPU, when ``--threads`` is not given and torch would use more than one, the calibration first
times :data:`TRIAL_STEPS` steps with torch's thread count and with one thread fewer
(:func:`thread_candidates`), and the run keeps the faster. On an idle machine that is torch's count; with another
process busy on one of 2 cores, 2 threads wait for each other at every parallel section (measured: a third of
the idle throughput, ``bench/bench_demo_runs.py``), and 1 thread is faster. The choice is recorded (``threads``) and a
resumed run keeps it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from typing import Any

WARM_STEPS = 3  # untimed first steps
MIN_TIMED_STEPS = 5
MAX_SECONDS = 5.0  # the longest calibration (timed steps), whatever the budget
FRACTION = 0.02  # share of the budget spent on timed steps (below MAX_SECONDS)
SAFETY = 1.5  # a calibrated run stops at budget x SAFETY seconds if its steps are not done by then
GRID = 0.05  # the step count is rounded to a 1-2-5 grid of at most this share of it
TRIAL_STEPS = 4  # timed steps per thread count tried (after one untimed step at that count)


@dataclass(frozen=True)
class Calibration:
    """What a calibration measured and planned (run.json ``calibration``).

    Attributes:
        steps_per_s: training steps per second over the timed steps.
        timed_steps, timed_s: the timed steps and their seconds (after :data:`WARM_STEPS` untimed ones).
        eval_s: seconds of one held-out evaluation (``--eval-batches``), 0 without a validation split.
        calibration_s: seconds the whole calibration took (spent from the budget).
        budget_s: the time budget (``--max-time`` x 60).
        estimate: the steps that fill the budget left at that throughput (before rounding).
        total_steps: the step count the run follows (``estimate`` rounded by :func:`round_steps`).
        time_limit_s: the run stops at this many seconds even before ``total_steps`` (budget x SAFETY).
        threads: torch CPU threads the run uses when the calibration chose them (None: not chosen here).
        thread_steps_per_s: steps/s of each thread count tried (``{"2": 6.1, "1": 4.0}``), None when none was.
        batch_tokens: with length-grouped batches (``--group-by-length``), the mean padded tokens (rows x longest
            row) of the run's batches over an epoch: every rate above is per batch of that size (the timed batches,
            a few of very unequal lengths, are converted by their tokens); None otherwise.
    """

    steps_per_s: float
    timed_steps: int
    timed_s: float
    eval_s: float
    calibration_s: float
    budget_s: float
    estimate: float
    total_steps: int
    time_limit_s: float
    threads: int | None = None
    thread_steps_per_s: dict[str, float] | None = None
    batch_tokens: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, rounded (as run.json stores it)."""
        d = asdict(self)
        for k in ("steps_per_s", "timed_s", "eval_s", "calibration_s", "estimate"):
            d[k] = round(float(d[k]), 4)
        return d

    @classmethod
    def from_dict(cls, data: Any) -> Calibration | None:
        """From run.json ``calibration``; None when missing or malformed (an older run)."""
        if not isinstance(data, dict):
            return None
        optional = ("threads", "thread_steps_per_s", "batch_tokens")  # not in runs calibrated before they were
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k not in optional},
                       **{k: data.get(k) for k in optional})
        except (KeyError, TypeError):
            return None

    def summary(self) -> str:
        """``'10 min ≈ 11,500 steps on this machine (18.9 steps/s measured over 95 steps)'``."""
        minutes = self.budget_s / 60
        tried = ""
        if self.thread_steps_per_s and len(self.thread_steps_per_s) > 1:
            tried = f"; {self.threads} thread(s), the faster of " + ", ".join(
                f"{k}: {v:.1f} steps/s" for k, v in self.thread_steps_per_s.items())
        size = f" of an average batch ({self.batch_tokens:,.0f} tokens)" if self.batch_tokens else ""
        return (f"{minutes:g} min ≈ {self.total_steps:,} steps on this machine ({self.steps_per_s:.1f} steps/s{size} "
                f"measured over {self.timed_steps} steps{tried})")


def thread_candidates(trainer) -> list[int]:
    """Thread counts to try: ``[n, n - 1]`` with ``n`` torch's count, on a CPU run of one process whose
    ``--threads`` was not given and ``n > 1``; ``[]`` otherwise (a GPU, DDP, or threads set by the user)."""
    import torch

    n = torch.get_num_threads()
    if trainer.device.type != "cpu" or trainer.dist.enabled or trainer.cfg.threads or n < 2:
        return []
    return [n, n - 1]


def batch_tokens(trainer) -> float | None:
    """With ``--group-by-length`` (batches of very unequal lengths, in a random order), the mean padded tokens
    (rows x longest row) of this rank's batches over the first epoch; None otherwise (batches alike: a step is
    a step)."""
    from .. import data as D

    c = trainer.cfg
    if not c.group_by_length:
        return None
    dist = trainer.dist
    lengths = [len(x) for x in trainer.task.train_ds["input_ids"]]
    batches = [b[dist.rank::dist.world_size]
               for b in D.epoch_batches(len(lengths), c.batch_size, c.train_data_seed, 0, lengths)]
    sizes = [len(b) * max(lengths[i] for i in b) for b in batches if b]
    return sum(sizes) / len(sizes) if sizes else None


def seconds_per_step(seconds: float, steps: int, tokens: float, mean_tokens: float | None) -> float:
    """Seconds of a training step from ``steps`` timed ones of ``tokens`` padded tokens in all: with
    ``mean_tokens`` (:func:`batch_tokens`), of a batch of that many tokens (time taken as proportional to the
    tokens); else their mean. Pure."""
    per_step = max(seconds, 1e-9) / steps
    return per_step * mean_tokens / (tokens / steps) if mean_tokens and tokens else per_step


def _steps(trainer, batches, n: int, *, sync: bool = False) -> float:
    """Take ``n`` training steps; their padded tokens (rows x longest row), from the batches' shapes."""
    tokens = 0
    for _ in range(n):
        tokens += trainer.train_step(batches)[1]["input_ids"].numel()
        if sync:
            _sync(trainer)
    return float(tokens)


def choose_threads(trainer, batches, candidates: list[int], mean_tokens: float | None = None) -> dict[str, float]:
    """Time :data:`TRIAL_STEPS` steps at each thread count of ``candidates`` (after one untimed step), leave torch
    at the fastest, and return the steps/s of each (keys: the counts as strings, for run.json); with
    ``mean_tokens`` (:func:`batch_tokens`), tokens/s over that: steps/s of an average batch, whatever the length
    of the few that were timed."""
    import torch

    rates: dict[str, float] = {}
    for n in candidates:
        torch.set_num_threads(n)
        trainer.train_step(batches)
        t0 = trainer.clock()
        tokens = _steps(trainer, batches, TRIAL_STEPS)
        rates[str(n)] = 1.0 / seconds_per_step(trainer.clock() - t0, TRIAL_STEPS, tokens, mean_tokens)
    torch.set_num_threads(int(max(rates, key=rates.get)))
    return rates


def calibration_seconds(budget_s: float) -> float:
    """Seconds of timed steps for a budget: :data:`FRACTION` of it, at most :data:`MAX_SECONDS`."""
    return min(MAX_SECONDS, FRACTION * budget_s)


def round_steps(estimate: float) -> int:
    """``estimate`` rounded to the nearest multiple of the largest 1, 2 or 5 x 10^k that is at most
    :data:`GRID` of it (11,347 -> 11,500 on a grid of 500; 5,826 -> 5,800; 52 -> 52), at least 1, so that
    machines within a few percent of each other plan the same run."""
    if not math.isfinite(estimate) or estimate < 1:
        return 1
    limit = GRID * estimate
    grid = 1
    for k in range(0, 12):
        for m in (1, 2, 5):
            if m * 10**k <= limit:
                grid = m * 10**k
    return max(1, int(round(estimate / grid)) * grid)


def plan(step_s: float, eval_s: float, eval_every: int, remaining_s: float) -> tuple[float, int]:
    """``(estimate, total_steps)``: the steps that fit in ``remaining_s`` seconds when each takes ``step_s``
    and an evaluation of ``eval_s`` follows every ``eval_every`` steps (and one at the end); pure.

    Raises:
        ValueError: ``step_s`` is not positive.
    """
    if not step_s > 0:
        raise ValueError(f"seconds per step must be > 0, got {step_s}")
    per_step = step_s + eval_s / max(1, eval_every)
    estimate = max(0.0, remaining_s - eval_s) / per_step
    return estimate, round_steps(estimate)


def _sync(trainer) -> None:
    """Wait for the device (CUDA runs asynchronously: a clock read alone would time the launches)."""
    import torch

    if trainer.device.type == "cuda":
        torch.cuda.synchronize(trainer.device)


def _time_steps(trainer, batches, budget_s: float,
                mean_tokens: float | None) -> tuple[float, int, float, dict[str, float] | None]:
    """Choose the thread count, warm up, then time steps for :func:`calibration_seconds`: ``(seconds, steps,
    padded tokens, steps/s per thread count or None)``."""
    candidates = thread_candidates(trainer)
    rates = choose_threads(trainer, batches, candidates, mean_tokens) if candidates else None
    _steps(trainer, batches, WARM_STEPS)
    _sync(trainer)
    target, t0, n, tokens = calibration_seconds(budget_s), trainer.clock(), 0, 0.0
    # every DDP rank takes the same number of steps (each step all-reduces the gradients): the ranks go on
    # while any of them has not timed enough
    while trainer.dist.any_flag(n < MIN_TIMED_STEPS or trainer.clock() - t0 < target, trainer.device):
        tokens += _steps(trainer, batches, 1, sync=True)
        n += 1
    return trainer.clock() - t0, n, tokens, rates


def calibrate(trainer) -> Calibration:
    """Measure ``trainer``'s steps/s and one evaluation, restore its state, and plan its step count.

    Runs real training steps (:meth:`~.loop.Trainer.train_step`, the same batches, masks and forward as
    the run's first steps, at 1% of the peak learning rate) on the trainer's model, then puts back the
    weights, a fresh optimizer and the RNG state (CPU and CUDA), so the run starts as if this had not
    happened. Under DDP every rank takes the step count of rank 0. The clock is ``trainer.clock``.
    """
    import torch  # here, so that the page reads a Calibration without importing torch

    length, cfg = trainer.length, trainer.cfg
    budget_s = float(length.budget_s)
    t_start = trainer.clock()
    weights = copy.deepcopy(trainer.model.state_dict())
    rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    mean_tokens = batch_tokens(trainer)
    with trainer.training_batches(0, schedule=False) as batches:  # prepared ahead, as the run's will be
        timed_s, n, tokens, rates = _time_steps(trainer, batches, budget_s, mean_tokens)
    eval_s = 0.0
    if trainer.dist.main and trainer.task.val_ds is not None and len(trainer.task.val_ds):
        t_eval = trainer.clock()
        trainer.evaluate(trainer.task.val_ds, cfg.eval_batches)
        _sync(trainer)
        eval_s = trainer.clock() - t_eval
    trainer.model.load_state_dict(weights)
    trainer.reset_optimizer()
    torch.set_rng_state(rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)
    step_s = seconds_per_step(timed_s, n, tokens, mean_tokens)
    calibration_s = trainer.clock() - t_start
    estimate, total = plan(step_s, eval_s, cfg.eval_every, budget_s - trainer.elapsed())
    total = trainer.dist.value_of_main(total, trainer.device)
    return Calibration(steps_per_s=1.0 / step_s, timed_steps=n, timed_s=timed_s, eval_s=eval_s,
                       calibration_s=calibration_s, budget_s=budget_s, estimate=estimate, total_steps=total,
                       time_limit_s=SAFETY * budget_s, threads=torch.get_num_threads() if rates else None,
                       thread_steps_per_s={k: round(v, 4) for k, v in rates.items()} if rates else None,
                       batch_tokens=None if mean_tokens is None else round(mean_tokens, 1))


def apply_calibration(trainer) -> Calibration:
    """Calibrate ``trainer`` (:func:`calibrate`), fix its run length and extra checkpoints, and record the plan in
    run.json and status.json."""
    trainer.calibration = cal = calibrate(trainer)
    trainer.length = trainer.length.calibrated(cal.total_steps, cal.time_limit_s)
    trainer.extra_saves = trainer.cfg.extra_save_steps(trainer.total_steps)
    trainer.log(f"calibration: {cal.summary()}; the run ends there, or at {cal.time_limit_s:g} s (time limit)")
    trainer.writer.update_config(calibration=cal.to_dict(), total_steps=trainer.status_total(),
                                 warmup_steps=trainer.length.warmup, time_limit_s=trainer.length.limit_s)
    trainer.writer.set_status(total_steps=trainer.status_total(), elapsed_s=round(trainer.elapsed(), 1))
    return cal


def resumed_length(length, run_config: dict | None, step: int):
    """``(length, calibration, note)`` of a resumed run (:class:`.schedule.RunLength`): the step count its
    calibration fixed (run.json ``calibration``); a run under a time budget without one (written before
    calibration existed) keeps its schedule by elapsed time (``note`` says so); unchanged otherwise, and
    a run cancelled before its calibration ended (step 0) calibrates again."""
    if not length.needs_calibration:
        return length, None, None
    cal = Calibration.from_dict((run_config or {}).get("calibration"))
    if cal is not None:
        return length.calibrated(cal.total_steps, cal.time_limit_s), cal, None
    if step > 0:
        note = "this run has no calibration in run.json: its learning rate follows elapsed time"
        return length.as_time_schedule(), None, note
    return length, None, None
