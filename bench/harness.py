"""The benchmarks' one harness: the command line, the timings (pyperf's), the reference in the same run, the results.

Every script in ``bench/`` begins with ``import harness``; run it as ``python bench/<name>.py`` (this folder is then
on ``sys.path``). The import puts the repository on ``sys.path`` and keeps the Hugging Face hub offline, so the
script's own imports of ``bertcore`` follow it.

    args = harness.parse(__doc__, lambda ap: ap.add_argument("--reps", type=int, default=7))
    pair = harness.paired("mixing alti", fn, "forward", forward, reps=args.reps)   # fn, reference alternately
    print(pair.ms, pair.ref_ms, pair.ratio)
    harness.save(args.json)                                 # every timing of the run, as one pyperf suite

A timing is a ``pyperf.Benchmark`` (values in seconds, with pyperf's system metadata: CPUs, load average, Python),
so a saved file reads with pyperf's own tools: ``python -m pyperf stats out.json``, ``python -m pyperf compare_to
before.json after.json``, ``python -m pyperf hist out.json``.

Why in-process, and not ``pyperf.Runner``: the Runner spawns a fresh interpreter per run, so each would import torch
and load the model again (seconds each), and it cannot alternate a computation with its reference inside one
process. Our speed goals are ratios against a reference measured in the same run, pair by pair, so that a load that
changes during the run cancels. pyperf still does the statistics, the metadata and the file format.

``--threads N`` (every script) sets torch's intra-op threads before anything is timed; ``--json PATH`` saves the
run's timings (pyperf's format) and, for scripts that measure more than time, ``harness.write_json`` writes their
own results beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyperf  # noqa: E402  (after the path: pyperf itself needs nothing of ours, but keep the setup first)

_TIMINGS: list[pyperf.Benchmark] = []


def parse(doc: str | None, add: Callable[[argparse.ArgumentParser], Any] | None = None,
          argv: list[str] | None = None) -> argparse.Namespace:
    """The script's command line: its docstring as the help, the options ``add`` puts on, and the common two.

    ``--threads N`` is applied (``torch.set_num_threads``) before this returns; ``--json PATH`` is where
    :func:`save` writes. Returns the parsed namespace.
    """
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if add is not None:
        add(ap)
    names = {a.dest for a in ap._actions}
    if "threads" not in names:
        ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    if "json" not in names:
        ap.add_argument("--json", type=Path, default=None,
                        help="save this run's timings here (pyperf's JSON: python -m pyperf stats PATH)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def _benchmark(name: str, seconds: list[float], warmups: int, metadata: dict | None = None) -> pyperf.Benchmark:
    meta = {"name": name, "unit": "second", "loops": 1, "warmups": warmups}
    meta.update(metadata or {})
    run = pyperf.Run(seconds, metadata=meta, collect_metadata=True)
    bench = pyperf.Benchmark([run])
    _TIMINGS.append(bench)
    return bench


def _once(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed(name: str, fn: Callable[[], object], reps: int, warmup: int = 0,
          metadata: dict | None = None) -> pyperf.Benchmark:
    """``fn()`` timed ``reps`` times after ``warmup`` untimed calls: a pyperf benchmark (values in seconds).

    The benchmark is also kept for :func:`save`. ``bench.median() * 1000`` is the median in milliseconds.
    """
    for _ in range(warmup):
        fn()
    return _benchmark(name, [_once(fn) for _ in range(reps)], warmup, metadata)


def median_ms(fn: Callable[[], object], reps: int, warmup: int = 0, name: str | None = None) -> float:
    """Median wall time of ``fn()`` over ``reps`` calls, in milliseconds, after ``warmup`` untimed calls."""
    return 1000 * timed(name or getattr(fn, "__name__", "fn"), fn, reps, warmup).median()


@dataclass(frozen=True)
class Pair:
    """A computation and its reference, timed alternately in one run (medians in ms; ``ratio``: the median of the
    per-pair ratios ``fn / reference``, robust to a machine load that changes during the run)."""

    bench: pyperf.Benchmark
    reference: pyperf.Benchmark
    ratios: tuple[float, ...]

    @property
    def ms(self) -> float:
        return 1000 * self.bench.median()

    @property
    def ref_ms(self) -> float:
        return 1000 * self.reference.median()

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


def paired(name: str, fn: Callable[[], object], ref_name: str, ref: Callable[[], object], reps: int,
           warmup: int = 1) -> Pair:
    """``fn`` and the reference ``ref`` timed back to back ``reps`` times (reference first in each pair), after
    ``warmup`` untimed calls of each. Both benchmarks are kept for :func:`save`; the pair's median ratio is stored in
    ``fn``'s metadata as ``ratio_to_reference``."""
    for _ in range(warmup):
        ref(), fn()
    ref_s, fn_s = [], []
    for _ in range(reps):
        ref_s.append(_once(ref))
        fn_s.append(_once(fn))
    ratios = tuple(a / b for a, b in zip(fn_s, ref_s))
    reference = _benchmark(f"{name} | reference: {ref_name}", ref_s, warmup)
    bench = _benchmark(name, fn_s, warmup, {"ratio_to_reference": statistics.median(ratios)})
    return Pair(bench, reference, ratios)


def interleaved(cases: dict[str, Callable[[], object]], reps: int, warmup: int = 1) -> dict[str, pyperf.Benchmark]:
    """Several computations timed in turn, round after round (``reps`` rounds), so each sees the same machine load:
    one pyperf benchmark per name, kept for :func:`save`."""
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    seconds: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(reps):
        for k, fn in cases.items():
            seconds[k].append(_once(fn))
    return {k: _benchmark(k, v, warmup) for k, v in seconds.items()}


class stopwatch:
    """Time one block (a whole training run, a page's first paint) as a one-value pyperf benchmark, kept for
    :func:`save`: ``with harness.stopwatch("run") as sw: ...`` then ``sw.seconds``. Inside the block, ``sw.elapsed()``
    reads the seconds so far (for a rate printed while the block runs)."""

    def __init__(self, name: str, metadata: dict | None = None):
        self.name, self.metadata, self.seconds = name, metadata, float("nan")
        self.bench: pyperf.Benchmark | None = None

    def __enter__(self) -> "stopwatch":
        self._t0 = time.perf_counter()
        return self

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def __exit__(self, *exc) -> None:
        self.seconds = self.elapsed()
        if exc[0] is None:
            self.bench = _benchmark(self.name, [self.seconds], 0, self.metadata)


def timings() -> list[pyperf.Benchmark]:
    """Every benchmark timed so far in this process, in order."""
    return list(_TIMINGS)


def save(path: Path | str | None, benchmarks: Iterable[pyperf.Benchmark] | None = None) -> None:
    """Write the run's timings (default: all of them) to ``path`` as one pyperf suite; no-op when ``path`` is None.

    Two benchmarks with one name (a script that times a case twice) keep both runs under that name."""
    if path is None:
        return
    by_name: dict[str, pyperf.Benchmark] = {}
    for b in (timings() if benchmarks is None else list(benchmarks)):
        if b.get_name() in by_name:
            by_name[b.get_name()].add_runs(b)
        else:
            by_name[b.get_name()] = pyperf.Benchmark(list(b.get_runs()))
    if not by_name:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pyperf.BenchmarkSuite(list(by_name.values())).dump(str(path), replace=True)
    print(f"timings saved to {path} (python -m pyperf stats {path})")


def write_json(path: Path | str, obj: Any) -> Path:
    """Write a script's own results (anything JSON can hold) to ``path``, creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def load_average() -> float:
    """The machine's 1-minute load average (the machine may be shared: print it beside a timing)."""
    return os.getloadavg()[0]
