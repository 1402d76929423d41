"""Views: what a page shows, computed once per server for every session that asks.

A *view* is a pure function of a model source and a page's parameters that returns a small dataclass of numbers:
what the page's figure draws and what its text quotes. :func:`view` makes one:

- **server-wide and keyed on the inputs**: the key is the view's name, each :class:`ModelSource` argument's
  :func:`source_key` (kind, ref and its files' stamp: sizes and modification times, so a rewritten model file
  gives a new key) and every other argument (lists as tuples);
- **one computation per key**: a session that asks while another computes the same key waits for it and shares
  its result; a :class:`~pathlib.Path` argument is keyed on its files' sizes and modification times (every file
  under a folder);
- **bounded**: results live in a least-recently-used cache of at most ``BERT_EXPLORER_VIEW_CACHE_MB`` megabytes
  (:mod:`bertcore.settings`; read when the first view is called), a result's size being the bytes of its arrays
  and tensors;
- **read-only**: every numpy array of a result is made read-only before it is shared, so no session can change
  what another sees.

The same function is "Show the code": :func:`explorer.views.code.snippet` prints its source with the page's inputs
bound above it. Models come from :func:`load`, the server's one model cache (``explorer.resources`` reads it too),
which a snippet prints as :func:`bertcore.loading.sources.load`.

Views import no Streamlit; heavy views (seconds of CPU) are called by their page through ``explorer.server.heavy``'s
queue, with the key :meth:`View.key` gives. A view reports how far it is by passing :func:`progress` to the library
functions that take a ``progress`` callback: the queue draws it as the page's progress bar (a snippet prints
``progress = None``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import sys
import threading
from pathlib import Path
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

import cachetools
import numpy as np
import torch

from bertcore.device import memory_error, out_of_memory
from bertcore.device import resolve as resolve_device
from bertcore.loading.sources import LoadedModel, ModelSource, files_stamp
from bertcore.settings import settings
from bertcore.loading.sources import load as _load_source

P = ParamSpec("P")
R = TypeVar("R")

MODEL_ENTRIES = 4


def source_key(source: ModelSource) -> tuple[str, str, str]:
    """The part of a :class:`ModelSource` that identifies its weights: ``(kind, ref, files stamp)``; the stamp
    (:func:`bertcore.loading.sources.files_stamp`) changes when the folder's files are rewritten, so no cache keyed
    on it serves results of the old files."""
    return (source.kind, source.ref, files_stamp(source))


def nbytes(value: Any, _seen: set[int] | None = None) -> int:
    """The bytes of the numpy arrays and torch tensors in ``value`` (through dataclasses, lists, tuples and dict
    values), at least 1: a result's size in the view cache."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return int(value.element_size() * value.nelement())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return max(1, sum(nbytes(getattr(value, f.name), seen) for f in dataclasses.fields(value)))
    if isinstance(value, (list, tuple)):
        return max(1, sum(nbytes(v, seen) for v in value))
    if isinstance(value, dict):
        return max(1, sum(nbytes(v, seen) for v in value.values()))
    return 1


def _host(value: Any) -> Any:
    """A tensor on an accelerator copied to the CPU (a kept result holds no GPU memory and reads as numpy); anything
    else as it is."""
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.detach().cpu()
    return value


def freeze(value: Any, _seen: set[int] | None = None) -> Any:
    """Make every numpy array in ``value`` read-only and bring every tensor on an accelerator to the CPU (through
    dataclasses, lists, dict values; tuples' tensors stay where they are); returns ``value``."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            on_host = _host(v)
            if on_host is not v:
                object.__setattr__(value, f.name, on_host)
            freeze(on_host, seen)
    elif isinstance(value, list):
        value[:] = [_host(v) for v in value]
        for v in value:
            freeze(v, seen)
    elif isinstance(value, tuple):
        for v in value:
            freeze(v, seen)
    elif isinstance(value, dict):
        for k, v in value.items():
            value[k] = _host(v)
            freeze(value[k], seen)
    return value


def results_cache(mb: float) -> cachetools.LRUCache:
    """An empty least-recently-used cache of view results of at most ``mb`` megabytes (:func:`nbytes` each)."""
    return cachetools.LRUCache(maxsize=int(mb * 2**20), getsizeof=nbytes)


# One lock for the results of every view, a Condition: a second caller of a key being computed waits for the first
# (cachetools.cached's ``condition``). A result larger than the whole cache is returned, not kept.
_LOCK = threading.Condition(threading.RLock())
_RESULTS: cachetools.LRUCache | None = None  # made by the first call of a view (_results)


def _results() -> cachetools.LRUCache:
    global _RESULTS
    with _LOCK:
        if _RESULTS is None:
            _RESULTS = results_cache(settings().view_cache_mb)
        return _RESULTS


_DEVICE: list = []  # the app's device, once chosen: [torch.device]


def choose_device(name: str | None = None):
    """For the app's entry point: where every model loads and every view computes, as a ``torch.device``.

    ``name`` (the shared-server operator's ``device``), else ``BERT_EXPLORER_DEVICE`` (:mod:`bertcore.settings`;
    ``auto``: CUDA when there is one, else the CPU). A device other than the one chosen before forgets the kept
    results and models (they were computed there).

    Raises:
        bertcore.device.DeviceError: a name that is not a device here (CUDA asked for on a machine without one).
    """
    chosen = resolve_device(name or settings().device)
    with _LOCK:
        if _DEVICE and _DEVICE[0] != chosen:
            clear(models=True)
        _DEVICE[:] = [chosen]
    return chosen


def device():
    """The app's device (:func:`choose_device`, chosen from the settings on first use)."""
    return _DEVICE[0] if _DEVICE else choose_device()


@cachetools.cached(cachetools.LRUCache(maxsize=MODEL_ENTRIES),
                   key=lambda source: ("model", *source_key(source), str(device())), condition=threading.Condition())
def load(source: ModelSource) -> LoadedModel:
    """The model of ``source`` (:func:`bertcore.loading.sources.load`: eval mode, on the app's :func:`device`),
    loaded once per server per version of its files (:func:`source_key`) and shared by every session and view:
    never change it (per-call edits go through ``Interventions``). At most :data:`MODEL_ENTRIES` models are kept.

    Raises:
        bertcore.loading.sources.SourceError: the model cannot be found or read (not kept: a later call tries
            again).
    """
    return _load_source(source, device=device())


_PROGRESS: contextvars.ContextVar[Callable[[float], None] | None] = contextvars.ContextVar("view_progress",
                                                                                       default=None)


def progress(done: float, total: float = 1.0) -> None:
    """Report how far the running view is: ``done / total``, a fraction (``progress(0.4)``) or steps done of a
    number (``progress(3, 8)``), the two forms of bertcore's ``progress`` callbacks. Drawn as the page's progress
    bar while the view runs through the heavy queue (:func:`reporting`); nothing otherwise."""
    report = _PROGRESS.get()
    if report is not None and total:
        report(min(1.0, max(0.0, float(done) / float(total))))


@contextlib.contextmanager
def reporting(report: Callable[[float], None]):
    """Within the block, :func:`progress` calls ``report(fraction)`` (the heavy queue's progress of this job)."""
    token = _PROGRESS.set(report)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _key_part(value: Any) -> Hashable:
    if isinstance(value, ModelSource):
        return ("source", *source_key(value))
    if isinstance(value, Path):  # a file or folder read by the view: a rewritten file is a new key
        try:
            files = sorted(p for p in value.rglob("*") if p.is_file()) if value.is_dir() else [value]
        except (OSError, ValueError):  # unreadable, or a name the file system refuses
            files = [value]
        stamps = []
        for f in files:
            try:
                st = f.stat()
                stamps.append((str(f), st.st_size, st.st_mtime_ns))
            except (OSError, ValueError):
                stamps.append((str(f), None))
        return ("path", str(value), tuple(stamps))
    if isinstance(value, (list, tuple)):
        return tuple(_key_part(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key_part(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return frozenset(_key_part(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    hash(value)  # TypeError for an argument no key can be made of
    return value


class View(Generic[P, R]):
    """A view function made server-wide, single-flight and bounded (:func:`view`). Call it as the function.

    ``cache``: where its results live (default: the server's one cache of every view's results).
    """

    def __init__(self, fn: Callable[P, R], cache: cachetools.Cache | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = f"{fn.__module__}.{fn.__qualname__}"
        self.signature = inspect.signature(fn)
        self._own_cache = cache
        self._wrapped = None
        _VIEWS.append(self)

    @property
    def cache(self) -> cachetools.Cache:
        """Where this view's results live."""
        return _results() if self._own_cache is None else self._own_cache

    @property
    def _call(self):
        if self._wrapped is None:
            with _LOCK:  # one wrapper (one set of keys in flight) even when two sessions make the first call
                if self._wrapped is None:
                    fn = self.fn

                    @functools.wraps(fn)
                    def compute(*args, **kwargs):
                        try:
                            return freeze(fn(*args, **kwargs))
                        except RuntimeError as exc:  # the GPU full: a message for the page, not a traceback
                            if out_of_memory(exc):
                                raise memory_error(exc, device()) from exc
                            raise

                    self._wrapped = cachetools.cached(self.cache, key=self.key, condition=_LOCK, info=True)(compute)
        return self._wrapped

    def key(self, *args: P.args, **kwargs: P.kwargs) -> Hashable:
        """The cache key of a call: the view's name, its arguments by name (defaults filled in), each model source
        as :func:`source_key`. Raises ``TypeError`` for arguments the function does not take or that cannot be
        hashed."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return (self.name, tuple((k, _key_part(v)) for k, v in bound.arguments.items()))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._call(*args, **kwargs)

    def cached(self, *args: P.args, **kwargs: P.kwargs) -> R | None:
        """The kept result of this call, or None (computes nothing)."""
        key = self.key(*args, **kwargs)
        with _LOCK:
            return self.cache.get(key)

    @property
    def computed(self) -> int:
        """How many computations of this view started (cache misses; read by the tests)."""
        return 0 if self._wrapped is None else self._wrapped.cache_info().misses

    def __get__(self, obj, objtype=None):  # a view is a plain function of its module, never a method
        return self


_VIEWS: list[View] = []


def view(fn: Callable[P, R]) -> View[P, R]:
    """Decorator: ``fn`` (a model source and a page's parameters -> a dataclass of numbers) as a :class:`View`."""
    return View(fn)


def stats() -> dict[str, int]:
    """The view cache now: ``entries``, ``bytes`` and ``limit`` (bytes), ``computed`` (computations so far)."""
    results = _results()
    with _LOCK:
        return {"entries": len(results), "bytes": int(results.currsize), "limit": int(results.maxsize),
                "computed": sum(v.computed for v in _VIEWS if v._own_cache is None)}


def clear(models: bool = False) -> None:
    """Forget every kept view result, and with ``models`` every loaded model too (as after a server start)."""
    with _LOCK:
        _results().clear()
    if models:
        load.cache_clear()
