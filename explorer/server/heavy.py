"""Heavy work on a shared server: a server-wide queue that caps how many run at once, and one computation for
students who ask for the same thing.

A classroom opens the same pages with the same defaults at the same time. Without this, 20 students opening
Activation patching start 20 identical scans on 2 cores, and every light page (a fill-mask, an attention map)
waits behind them. :class:`HeavyJobs` (one per server, :func:`jobs`) gives each heavy job a place in a FIFO
queue, lets at most ``slots`` run at once (``BERT_EXPLORER_HEAVY_SLOTS``, default half the CPU cores, at least
1), and runs a job whose key is already running or done only once: the other sessions wait for it and share its
result (kept ``RESULT_TTL_S`` seconds, at most ``RESULT_ENTRIES`` of them: a patching grid is a few kB).

While a job waits or runs, ``report(state, value)`` is called in the caller's thread: ``("queued", position)``
(1 = next), ``("progress", fraction)`` for the caller's own job, ``("shared", fraction)`` while another session
computes the same key. The page turns these into a message and a progress bar (:func:`run_with_status`).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import cachetools
import streamlit as st

from bertcore.settings import settings
from explorer.views.core import reporting

RESULT_ENTRIES = 64
RESULT_TTL_S = 3600.0
POLL_S = 0.25

Report = Callable[[str, float], None]


def default_slots() -> int:
    """``BERT_EXPLORER_HEAVY_SLOTS`` (:mod:`bertcore.settings`), else half the CPU cores, at least 1."""
    return settings().slots


def default_threads() -> int:
    """The torch threads of the app's own computations: ``BERT_EXPLORER_THREADS`` (:mod:`bertcore.settings`), else
    half the CPU cores, at least 1 (the other half for the browser, a training run started from the Train page, or
    a second session's job).

    Measured (``python bench/bench_app_threads.py``, 2 cores, MiniLM-MLM): idle, 2 threads are 1.2-1.7x faster
    than 1 (a 40-word forward pass 26 against 40 ms; 20 minimal pairs 1.27 against 1.52 s); with one core busy, 2
    threads are 1.4-2.3x *slower* (the minimal pairs 3.5 against 1.5 s): torch's threads wait for each other
    while one of them has no core. A slow page beside a training run is what a student sees; a few ms idle is not.
    """
    return settings().app_threads


def limit_threads() -> int:
    """Set this process's torch intra-op threads (process-wide: every session's thread) to
    :func:`default_threads`; returns the count. Called by ``app.py`` on every script run, before the page runs
    (torch is imported by then; a call that changes nothing costs nothing)."""
    import torch

    n = default_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


@dataclass(eq=False)
class _Job:
    future: Future | None = None
    progress: float = 0.0
    waiting: int = 0  # sessions waiting for it now


class HeavyJobs:
    """A FIFO queue of heavy jobs, ``slots`` running at once, identical keys computed once (see the module).

    The queue is a ``concurrent.futures.ThreadPoolExecutor`` of ``slots`` workers (first in, first run); a key
    already queued or running is not submitted again: its future is shared. A job runs in a worker thread, so a
    session that leaves or reruns never stops it half-way; one still queued with nobody waiting for it is cancelled.
    """

    def __init__(self, slots: int | None = None, entries: int = RESULT_ENTRIES, ttl_s: float = RESULT_TTL_S) -> None:
        self.slots = slots or default_slots()
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="heavy-job")
        self._lock = threading.Lock()
        self._queued: list[_Job] = []  # submitted, not started, in arrival order: a waiter's place in the queue
        self._running = 0
        self._jobs: dict[Hashable, _Job] = {}  # queued or running
        self._results: cachetools.TTLCache = cachetools.TTLCache(entries, ttl_s)

    def status(self) -> tuple[int, int]:
        """``(running, queued)`` now."""
        with self._lock:
            return self._running, len(self._queued)

    def run(self, key: Hashable, compute: Callable[[Callable[[float], None]], Any], report: Report | None = None,
            keep: bool = True) -> Any:
        """The result of ``compute(progress)`` for ``key``: computed in the queue's next free slot, or taken from the
        session that computes or computed the same key. ``progress(fraction)`` reports the job's progress.
        ``keep=False``: the result is shared with the sessions waiting for it, not kept for later ones (for a
        job that writes a file the caller reads back, such as the tuned lens).

        ``report(state, value)`` is called in the caller's thread every :data:`POLL_S` seconds while it waits:
        ``("queued", position)`` by the session that submitted the job, ``("progress", fraction)`` once it runs,
        ``("shared", fraction)`` by a session that found the same key submitted.

        Raises whatever ``compute`` raised (to every session that waited for that key), and whatever ``report``
        raises (Streamlit stops a script that way: the job goes on for the others, or leaves the queue if it has
        not started and nobody else waits for it).
        """
        report = report or (lambda state, value: None)
        with self._lock:
            if key in self._results:
                return self._results[key]
            job = self._jobs.get(key)
            own = job is None
            if own:
                job = self._jobs[key] = _Job()
                self._queued.append(job)
                job.future = self._pool.submit(self._work, key, job, compute, keep)
            job.waiting += 1
        try:
            while True:
                if not own:
                    report("shared", job.progress)
                elif position := self._position(job):
                    report("queued", position)
                else:
                    report("progress", job.progress)
                try:
                    return job.future.result(timeout=POLL_S)
                except FutureTimeout:
                    pass
        finally:
            with self._lock:
                job.waiting -= 1
                if not job.waiting and job in self._queued and job.future.cancel():
                    self._queued.remove(job)
                    self._jobs.pop(key, None)

    def _position(self, job: _Job) -> int:
        """``job``'s place among the jobs that wait for a slot (1 = next), 0 once it runs or a slot is free for it."""
        with self._lock:
            if job not in self._queued:
                return 0
            return max(0, self._queued.index(job) + 1 - (self.slots - self._running))

    def _work(self, key: Hashable, job: _Job, compute, keep: bool) -> Any:
        with self._lock:
            self._queued.remove(job)
            self._running += 1

        def progress(fraction: float) -> None:
            job.progress = float(fraction)

        try:
            result = compute(progress)
            if keep:
                with self._lock:
                    self._results[key] = result
            return result
        finally:
            with self._lock:
                self._running -= 1
                self._jobs.pop(key, None)


@st.cache_resource(show_spinner=False)
def jobs() -> HeavyJobs:
    """The server's one :class:`HeavyJobs` (``st.cache_resource``: shared by every session)."""
    return HeavyJobs()


def run_with_status(key: Hashable, compute: Callable[[Callable[[float], None]], Any], what: str,
                    keep: bool = True) -> Any:
    """:meth:`HeavyJobs.run` on the server's queue, with a message and a progress bar on the page: the queue
    position while waiting ("N heavy jobs of other students run first"), the job's progress, or the progress of
    another student's identical job. ``what`` names the job ("the patching scan"); ``keep`` as
    :meth:`HeavyJobs.run`. Cleared when done."""
    slot = st.empty()

    def report(state: str, value: float) -> None:
        if state == "queued":
            ahead = int(value) - 1
            slot.info(f"Waiting for a free slot for {what}: {'you are next' if ahead == 0 else f'{ahead} ahead of you'}"
                      f" (heavy jobs run {jobs().slots} at a time on this server, so that light pages stay fast).",
                      icon=":material/hourglass_top:")
        elif state == "shared":
            slot.progress(min(1.0, value), text=f"Another session is computing {what} with the same inputs: "
                                                f"sharing its result ({value:.0%})")
        else:
            slot.progress(min(1.0, value), text=f"Computing {what} ({value:.0%})")

    try:
        return jobs().run(key, compute, report, keep)
    finally:
        slot.empty()


def run_view(view, what: str, *args, keep: bool = True, **kwargs) -> Any:
    """A heavy view (:class:`explorer.views.core.View`) through the server's queue, with :func:`run_with_status`'s
    message: a result the view cache keeps is returned at once; otherwise one computation per key
    (:meth:`View.key`) runs when a slot is free, shared by every session asking for the same. ``keep=False``: the
    queue does not keep the result beside the view cache (a large one, such as a 50k-point projection)."""
    kept = view.cached(*args, **kwargs)
    if kept is not None:
        return kept
    def compute(progress):
        with reporting(progress):  # the view's calls of explorer.views.core.progress move this page's bar
            return view(*args, **kwargs)

    return run_with_status(("view", view.key(*args, **kwargs)), compute, what, keep)
