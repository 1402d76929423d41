"""The benchmarks' one timing helper (run a benchmark as ``python bench/<name>.py``: this folder is on sys.path)."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], reps: int, warmup: int = 0) -> float:
    """Median wall time of ``fn()`` over ``reps`` calls, in milliseconds, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)
