"""One readable training loop for pretraining (MLM + NSP) and fine-tuning (classification).

    setup     device (auto: CUDA else CPU), DDP (torchrun), seeds, the per-device lock, data and
              model (the task object, :mod:`.tasks`), AdamW, resume from a checkpoint
    calibrate under ``--max-time`` alone: measure steps/s, fix the step count (:mod:`.calibrate`)
    loop      batch (collated and masked ahead in a thread, :mod:`.prefetch`; short sequences first if scheduled)
              -> forward (bf16 autocast on CUDA) -> loss -> backward -> clip -> lr (:mod:`.schedule`) -> optimizer
              step -> metrics every ``log_every`` (the only host reads) -> eval every ``eval_every`` -> checkpoint
              every ``save_every``, at the extra steps and on SIGTERM (then ``cancelled``); it ends at its step
              count or at its time limit
    end       a final evaluation and checkpoint; the task's finish (fine-tuning: test results, baseline)

Every metric record goes to the subscribers (``on_event``) and to ``metrics.jsonl`` (the UI and a
test see the same events). Reproducibility: the data order depends on (data seed, epoch), the masks
on (data seed, step, rank) (data seed = ``--data-seed``, else ``--seed``), and the RNG state (dropout) is
saved in each checkpoint, so a resumed run equals an uninterrupted one (calibration steps are thrown away).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from .. import data as D
from .. import runs as R
from .checkpoints import prune_checkpoints, restore_trainer, save_checkpoint
from ..runs.config import ExitCode, TrainConfig
from .dist import StopFlag, autocast, compile_encoder, init_distributed, pick_device
from .evaluate import evaluate
from .calibrate import Calibration, apply_calibration
from .models import TrainingError, build_model, load_tokenizer_for
from .optim import make_optimizer
from .events import tensorboard_writer
from .prefetch import Prefetcher, Prepared, StepWindow
from .run_record import run_record
from .schedule import RunLength, short_seq_len
from .tasks import make_task

Event = dict[str, Any]


class Cancelled(Exception):
    """Raised inside the loop when SIGTERM/SIGINT asked the run to stop."""


def as_config(args: TrainConfig | argparse.Namespace | dict[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from a config, a parsed CLI namespace or a dict of options."""
    if isinstance(args, TrainConfig):
        return args
    return TrainConfig.from_dict(vars(args) if isinstance(args, argparse.Namespace) else dict(args))


class Trainer:
    """Runs one task of a :class:`TrainConfig` in a run directory; :meth:`run` returns the final state
    (``done`` / ``failed`` / ``cancelled``) and sets :attr:`exit_code`."""

    def __init__(self, config: TrainConfig | argparse.Namespace | dict[str, Any], run_dir: str | Path | None = None,
                 argv: list[str] | None = None, on_event: list[Callable[[Event], None]] | None = None,
                 install_signals: bool = True) -> None:
        self.cfg = as_config(config)
        if run_dir is None:
            run_dir = self.cfg.run_dir or R.runs_root() / R.new_run_id(self.cfg.task)
        self.run_dir = Path(run_dir)
        self.cfg = self.cfg.replace(run_dir=str(self.run_dir))
        self.argv = argv or []
        self.subscribers = list(on_event or [])
        self.stop = StopFlag()
        if install_signals:
            self.stop.install()
        self.dist = init_distributed(self.cfg.device)
        self.writer = R.RunWriter(self.run_dir, enabled=self.dist.main)
        self.lock: R.DeviceLock | None = None
        self.task = make_task(self.cfg)
        self.clock = time.perf_counter  # the one clock of the loop (a test may replace it)
        self.calibration: Calibration | None = None
        self.t0 = self.clock()
        self.time_offset = 0.0  # seconds of earlier sessions of a resumed run
        self.step = 0
        self.exit_code = ExitCode.FAILED

    # -- events
    def emit(self, record: Event) -> None:
        if not self.dist.main:
            return
        self.writer.log_metrics(record)
        for fn in self.subscribers:
            fn(record)

    def log(self, msg: str) -> None:
        if self.dist.main:
            print(f"[{R.now_iso()}] {msg}", flush=True)

    # -- setup
    def _acquire_lock(self) -> None:
        mode = self.cfg.lock
        if mode == "none" or not self.dist.main and self.device.type != "cuda":
            return
        self.lock = R.DeviceLock(self.run_dir.parent, str(self.device), self.run_dir.name)

        def on_wait(holder):
            self.log(R.busy_message(str(self.device), holder) + " -- queued")
            self.writer.set_status(state="queued", error=None)

        if not self.lock.acquire(wait=(mode == "wait"), on_wait=on_wait, should_stop=lambda: self.stop.set):
            raise Cancelled()

    def setup(self) -> None:
        c, task = self.cfg, self.task
        self.device = pick_device(c.device, self.dist)
        if c.threads and not self.dist.enabled:
            torch.set_num_threads(c.threads)
        self._acquire_lock()
        torch.manual_seed(c.seed)
        resume_from = R.last_checkpoint(self.run_dir) if c.resume else None
        if c.resume and resume_from is None:
            self.log("no checkpoint to resume from: starting from the beginning")
        self.writer.set_status(state="running", started=R.now_iso(), error=None)
        self.log(f"task {c.task} on {self.device} (world size {self.dist.world_size}); run dir {self.run_dir}")
        task.load_data(self.log)  # data first (the classification labels size the model's head)
        if resume_from is not None:  # weights (and config) of the checkpoint
            model = task.model_class.from_pretrained(resume_from)
            tok = load_tokenizer_for(str(resume_from))
            origin = f"resumed from {resume_from.name}"
            model.train()
        else:
            model, tok, origin = build_model(c, task.labels)
        self.tokenizer, self.origin = tok, origin
        task.prepare(tok, model)
        if resume_from is None:
            task.init_model(model)  # data-dependent init of a new from-scratch model (--unigram-init, ...)
        self.model = model.to(self.device)
        compile_encoder(self.model, c.compile)
        self.ddp_model = self.model
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.ddp_model = DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if c.batch_size % self.dist.world_size:
            raise TrainingError(f"--batch-size {c.batch_size} must be divisible by the "
                                f"{self.dist.world_size} processes")
        per_epoch = len(task.train_ds) // c.batch_size
        if per_epoch == 0:
            raise TrainingError(f"{len(task.train_ds)} training examples: fewer than one batch of {c.batch_size}")
        self.length = RunLength.of(c, per_epoch)
        self.lr = c.peak_lr
        self.reset_optimizer()
        if resume_from is not None:
            restore_trainer(self, resume_from)
        self.extra_saves = c.extra_save_steps(self.total_steps)
        n_params = self.model.num_parameters()
        length = f"{self.total_steps} steps" if self.length.bounded else ""
        if self.length.budget_s:
            length += (" or " if length else "") + f"{c.max_time:g} min"
        head = f" (head {c.head_lr:g})" if c.head_lr is not None else ""
        self.log(f"model: {origin}; {n_params:,} parameters; {length}, warmup {c.warmup:g}, decay {c.decay:g}, "
                 f"peak lr {self.lr}{head}, batch {c.batch_size}, seq {c.max_seq_len}")
        self.writer.write_config(run_record(self, n_params))
        self.writer.set_status(state="running", step=self.step, total_steps=self.status_total(),
                               time_budget_s=self.length.budget_s, elapsed_s=round(self.elapsed(), 1))
        if c.tensorboard and self.dist.main:
            self.subscribers.append(tensorboard_writer(R.RunDir(self.run_dir).tensorboard_dir))

    # -- where the run stands (:class:`.schedule.RunLength`, set up in :meth:`setup`)
    @property
    def total_steps(self) -> int:
        """The last step (:data:`.schedule.UNBOUNDED` when only the time budget ends the run)."""
        return self.length.total_steps

    def status_total(self) -> int | None:
        return self.length.status_total()

    def reset_optimizer(self) -> None:
        """A new AdamW on the model (no moments yet): at setup, and after a calibration."""
        c = self.cfg  # head_lr: fine-tuning only (None when pretraining)
        self.optimizer = make_optimizer(self.model, self.lr, c.weight_decay, c.beta2, head_lr=c.head_lr,
                                        layer_decay=c.layer_lr_decay)

    def batch_iterator(self, start_step: int):
        """The training batches from ``start_step`` (:func:`bertcore.data.iterate_batches`): ``(step, epoch,
        rows)``; the order depends on (data seed, epoch) only."""
        c, task = self.cfg, self.task
        lengths = [len(x) for x in task.train_ds["input_ids"]] if c.group_by_length else None
        return D.iterate_batches(task.train_ds, c.batch_size, seed=c.train_data_seed, start_step=start_step,
                                 rank=self.dist.rank, world_size=self.dist.world_size, lengths=lengths)

    def prepare(self, item: tuple[int, int, list], max_len: int | None) -> Prepared:
        """Collate and mask the rows of ``item = (step, epoch, rows)`` (masks seeded by (data seed, step, rank)),
        pinned for a non-blocking copy on CUDA. Runs in the prefetch thread (:mod:`.prefetch`)."""
        step, epoch, rows = item
        batch = self.task.collate_train(rows, D.batch_generator(self.cfg.train_data_seed, step, self.dist.rank),
                                        max_len)
        if self.device.type != "cpu":  # the model checks ids only on the host (no device wait): check them here
            self.model.bert.embeddings.check_inputs(batch["input_ids"], batch.get("token_type_ids"), None)
        if self.device.type == "cuda":
            batch = {k: v.pin_memory() for k, v in batch.items()}
        return Prepared(step, epoch, batch, max_len)

    def training_batches(self, start_step: int, depth: int | None = None, schedule: bool = True) -> Prefetcher:
        """The run's batches from ``start_step``, prepared ``depth`` (default ``--prefetch``) ahead in a
        background thread; the sequence-length schedule's length is taken when a batch is prepared (``schedule``
        False: always ``--max-seq-len``). Close it."""
        def prepare(item):
            progress = self.length.progress(item[0], self.elapsed())
            return self.prepare(item, short_seq_len(self.cfg, progress) if schedule else None)

        return Prefetcher(self.batch_iterator(start_step), prepare, self.cfg.prefetch if depth is None else depth)

    def train_step(self, batches, max_len: int | None = None):
        """One optimizer step on the next batch of ``batches`` (:meth:`training_batches`, or the raw ``(step,
        epoch, rows)`` of :meth:`batch_iterator`, prepared here with ``max_len``): returns ``(out, batch,
        grad_norm, epoch, lr)``; ``grad_norm`` is a 0-dim tensor on the device (read it when logging: a read
        waits for the device), None without clipping. Nothing in a step reads a tensor on the host."""
        c, opt = self.cfg, self.optimizer
        item = next(batches)
        if not isinstance(item, Prepared):
            item = self.prepare(item, max_len)
        self.seq_len = item.max_len or c.max_seq_len
        batch = self.to_device(item.batch)
        lr = self.lr_now()
        for group in opt.param_groups:
            group["lr"] = lr * group["lr_scale"]  # make_optimizer's: the new head's own peak (--head-lr)
        out = self.forward(self.ddp_model, batch)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        grad_norm = None
        if c.grad_clip and c.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip)
        opt.step()
        return out, batch, grad_norm, item.epoch, lr

    def lr_now(self) -> float:
        """The learning rate of the next step: by elapsed time under a budget, else by step."""
        return self.length.lr(self.step, self.elapsed(), self.lr)

    def to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}  # pinned on CUDA: async

    def forward(self, model, batch: dict[str, torch.Tensor]):
        with autocast(self.device, self.cfg.precision):
            return self.task.forward(model, batch)

    # -- evaluation (rank 0, unwrapped model)
    def evaluate(self, ds, max_batches: int, store: dict[str, list] | None = None) -> dict[str, Any]:
        """Metrics of the task on ``ds`` (the first ``max_batches`` batches, 0 = all) with fixed masks, on
        the live model (:func:`.evaluate.evaluate`, the same code a checkpoint is re-evaluated with)."""
        return evaluate(self.task, self.model, ds, self.cfg, self.device, max_batches, store)

    # -- checkpoint
    def checkpoint(self) -> None:
        if self.dist.main:
            path = save_checkpoint(self.run_dir, self.step, self.model, self.tokenizer, self.optimizer,
                                   {"elapsed_s": self.elapsed(), "seed": self.cfg.seed})
            prune_checkpoints(self.run_dir, self.cfg.keep_checkpoints, protect=self.extra_saves)
            self.log(f"checkpoint {path.name}")
        self.last_save_t = self.clock()
        self.dist.barrier()

    def elapsed(self) -> float:
        """Seconds of training since the loop started (setup excluded), earlier sessions of a resumed
        run included."""
        return self.time_offset + self.clock() - self.t0

    # -- the loop
    def fit(self) -> None:
        self.t0 = self.clock()  # the clock (metrics "time", the time budget) counts training, not setup
        if self.length.needs_calibration:
            apply_calibration(self)  # its seconds count: they are spent from the budget
        self.last_save_t = self.clock()
        if self.step == 0:
            if self.dist.main:
                if self.task.reference:
                    self.emit({"step": 0, "time": 0.0, "split": "reference", **self.task.reference})
                self._eval_and_log()
            self.dist.barrier()
            if 0 in self.extra_saves:
                self.checkpoint()
        with self.training_batches(self.step) as batches:
            self._steps(batches)

    def _steps(self, batches: Prefetcher) -> None:
        """The steps until the run's end. Host reads (metrics, grad norm, and under DDP the stop flag and the time
        limit, agreed by all ranks) happen every ``log_every`` steps only, so the device never waits for Python
        in between; a DDP run may thus pass its time limit or a stop signal by up to ``log_every - 1`` steps."""
        c, task = self.cfg, self.task
        window = StepWindow(self.clock)
        step_times: list[float] = []
        while self.step < self.total_steps:
            t_step = self.clock()
            out, batch, grad_norm, epoch, lr = self.train_step(batches)
            self.step += 1
            window.add(task.batch_stats(out, batch), batch["input_ids"].numel())
            step_times = (step_times + [self.clock() - t_step])[-50:]
            due = self.step % c.log_every == 0 or self.step >= self.total_steps
            stop, time_up = self.stop.set, self.length.time_up(self.elapsed())
            if self.dist.enabled:  # every rank stops at the same step; an all-reduce waits for the device
                stop = due and self.dist.any_flag(stop, self.device)
                time_up = due and self.dist.any_flag(time_up, self.device)
            last = self.step >= self.total_steps or time_up
            if time_up and self.length.bounded and self.step < self.total_steps:
                self.log(f"time limit reached at step {self.step:,} of {self.total_steps:,}: stopping early")
                self.writer.set_status(stopped_early_at=self.step)
            if due or last or stop:
                self._log_window(window, epoch, lr, grad_norm, step_times)
            if stop:
                raise Cancelled()
            window.pause()  # evaluation and checkpoints are not training speed
            if self.step % c.eval_every == 0 or last:
                if self.dist.main:
                    self._eval_and_log()
                self.dist.barrier()
            if last:
                break
            due_time = c.save_every_s and self.clock() - self.last_save_t >= c.save_every_s
            if self.step % c.save_every == 0 or due_time or self.step in self.extra_saves:
                self.checkpoint()
            window.resume()

    def _log_window(self, window: StepWindow, epoch: int, lr: float, grad_norm, step_times: list[float]) -> None:
        """One ``train`` metric line of the steps in ``window`` (then emptied): ``tokens_per_s`` counts non-pad
        tokens (the useful ones), ``padded_tokens_per_s`` every position computed (batch x padded length)."""
        sums, padded = window.reduced(self.dist.all_reduce_sum)
        dt = window.seconds()
        tps = float(sums[self.task.STATS.index("tokens")]) / dt
        rec = {"step": self.step, "time": round(self.elapsed(), 3), "split": "train", "epoch": epoch, "lr": lr,
               "tokens_per_s": round(tps, 1), "padded_tokens_per_s": round(padded / dt, 1),
               "steps_per_s": round(window.steps / dt, 4), "seq_len": self.seq_len,
               **{k: round(v, 6) for k, v in self.task.summarize(sums).items()}}
        if grad_norm is not None:
            rec["grad_norm"] = round(float(grad_norm), 4)
        self.emit(rec)
        self.writer.set_status(state="running", step=self.step, total_steps=self.status_total(),
                               eta_s=round(self.length.eta(self.step, self.elapsed(), step_times), 1),
                               tokens_per_s=round(tps, 1), time_budget_s=self.length.budget_s,
                               elapsed_s=round(self.elapsed(), 1))
        window.reset()
        if not math.isfinite(rec["loss"]):
            raise TrainingError(f"the loss became {rec['loss']} at step {self.step}: lower --lr")

    def _eval_and_log(self) -> None:
        val = self.task.val_ds
        if val is not None and len(val):
            res = self.evaluate(val, self.cfg.eval_batches)
            if res:
                self.emit({"step": self.step, "time": round(self.elapsed(), 3), "split": "val",
                           "lr": self.lr_now(),
                           "tokens_per_s": None, **{k: round(v, 6) for k, v in res.items()}})
        self.task.after_eval(self)

    def finish(self) -> None:
        """The final checkpoint, then the task's end (fine-tuning: test metrics and the baseline)."""
        self.checkpoint()
        if self.dist.main:
            self.task.finish(self)
            R.RunDir(self.run_dir).remove_litter(keep_pid=None)

    def run(self) -> str:
        """Set up, train, finish. Returns the final state (done / failed / cancelled) and sets
        :attr:`exit_code`; never raises for training errors (they go to status.json and the log)."""
        state, error = "done", None
        threads = torch.get_num_threads()  # --threads and the calibration's choice hold for this run only
        try:
            self.setup()
            self.fit()
            self.finish()
            self.exit_code = ExitCode.DONE
        except Cancelled:
            state, self.exit_code = "cancelled", ExitCode.CANCELLED
            self.log(f"signal {self.stop.signal}: saving a checkpoint and stopping")
            try:
                if hasattr(self, "optimizer"):  # else it stopped before training started
                    self.checkpoint()
            except Exception as exc:  # noqa: BLE001
                self.log(f"could not save the checkpoint: {exc}")
        except R.RunBusyError as exc:
            state, error, self.exit_code = "failed", str(exc), ExitCode.BUSY
            self.log(error)
        except Exception as exc:  # noqa: BLE001 - every failure is reported in status.json
            state, error, self.exit_code = "failed", f"{type(exc).__name__}: {exc}", ExitCode.FAILED
            if self.dist.main:
                traceback.print_exc()
        finally:
            if self.lock is not None:
                self.lock.release()
            torch.set_num_threads(threads)
        self.writer.set_status(state=state, error=error, step=self.step, eta_s=None if state != "done" else 0.0,
                               elapsed_s=round(self.elapsed(), 1))
        self.log(f"run {state}" + (f": {error}" if error else ""))
        if self.dist.enabled and torch.distributed.is_initialized():
            with contextlib.suppress(Exception):
                torch.distributed.destroy_process_group()
        return state
