"""Training batches prepared ahead of the step, and the metric window that the loop logs.

The loop's data path (docs/gpu.md): a batch is collated and masked on the host (the task's ``collate_train``,
its masks drawn from a generator seeded by (data seed, step, rank), :func:`bertcore.data.batch_generator`),
then copied to the device. Done in line, the device waits for it every step. :class:`Prefetcher` does it in one
background thread, ``depth`` batches ahead, in step order, with pinned memory on CUDA (the copy is then
``non_blocking``); the batches are the same tensors as in line, so a run and its resume are unchanged.
This is what ``torch.utils.data.DataLoader(..., num_workers=0, pin_memory=True)`` with a prefetch thread does;
a DataLoader with worker *processes* would copy the dataset and the tokenizer into each worker, for a collate
that costs milliseconds.

:class:`StepWindow` keeps the sums of ``log_every`` steps on the device (no host read in a step) and their
seconds, with evaluation and checkpoint time left out, so ``tokens_per_s`` is the training steps' speed.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch


@dataclass
class Prepared:
    """One training batch ready for the step.

    Attributes:
        step: the global step (0-based) it belongs to; its masks depend on (data seed, step, rank) only.
        epoch: the epoch of the data order.
        batch: column name -> tensor on the host (``(B, T)`` long ``input_ids`` ...), pinned on CUDA.
        max_len: the sequence-length schedule's length for this step (None: the configured maximum).
    """

    step: int
    epoch: int
    batch: dict[str, torch.Tensor]
    max_len: int | None


_END = object()


class Prefetcher:
    """Iterates ``prepare(item)`` for each item of ``source`` in order, computed ``depth`` items ahead in a
    daemon thread (``depth=0``: in line, on ``next``). An exception of ``prepare`` or ``source`` is raised by
    the ``next`` that would have returned its item. :meth:`close` stops the thread (also on ``with`` exit).

    Args:
        source: an iterator (for the loop, :func:`bertcore.data.iterate_batches`; endless).
        prepare: item -> :class:`Prepared` (collate, mask, pin).
        depth: batches prepared ahead (>= 0).
    """

    def __init__(self, source: Iterator[Any], prepare: Callable[[Any], Prepared], depth: int = 1) -> None:
        if depth < 0:
            raise ValueError(f"prefetch depth must be >= 0, not {depth}")
        self.source, self.prepare, self.depth = source, prepare, depth
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if depth:
            self._queue: queue.Queue = queue.Queue(maxsize=depth)
            self._thread = threading.Thread(target=self._produce, name="batch-prefetch", daemon=True)
            self._thread.start()

    def _put(self, value) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self.source:
                if not self._put(self.prepare(item)):
                    return
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._put(exc)

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Prepared:
        if self._thread is None:
            return self.prepare(next(self.source))
        value = self._queue.get()
        if value is _END:
            raise StopIteration
        if isinstance(value, BaseException):
            raise value
        return value

    def close(self) -> None:
        """Stop the background thread (it finishes the batch in hand) and drop what it prepared."""
        self._stop.set()
        if self._thread is not None:
            while True:  # free a producer blocked on a full queue
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
            self._thread.join(timeout=10)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StepWindow:
    """The sums of the training steps since the last metric line, and their seconds.

    ``add`` keeps the task's ``(K,)`` float64 stats on their device (a host read would wait for the device
    every step); ``padded`` counts the positions computed (batch x padded length, from shapes only);
    ``pause``/``resume`` leave evaluation and checkpoints out of the seconds.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        self.sums: torch.Tensor | None = None
        self.padded, self.steps = 0, 0
        self.t0, self.paused_s, self._pause_t = self.clock(), 0.0, None

    def add(self, stats: torch.Tensor, padded_tokens: int) -> None:
        self.sums = stats if self.sums is None else self.sums + stats
        self.padded += padded_tokens
        self.steps += 1

    def pause(self) -> None:
        self._pause_t = self.clock()

    def resume(self) -> None:
        if self._pause_t is not None:
            self.paused_s += self.clock() - self._pause_t
            self._pause_t = None

    def seconds(self) -> float:
        """Training seconds of the window (> 0)."""
        return max(1e-9, self.clock() - self.t0 - self.paused_s)

    def reduced(self, all_reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor, float]:
        """``(task sums on the host, padded tokens)`` summed over DDP ranks (one host read per window)."""
        extra = torch.tensor([float(self.padded)], dtype=torch.float64, device=self.sums.device)
        both = all_reduce_sum(torch.cat([self.sums.detach(), extra])).cpu()
        return both[:-1], float(both[-1])
