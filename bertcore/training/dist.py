"""Training's devices, its side of PyTorch DDP (the process group: :mod:`bertcore.runs.distributed`), autocast and the
stop signal."""

from __future__ import annotations

import contextlib
import signal

import torch

from ..device import DeviceError
from ..runs import resolve_device
from ..runs.distributed import Dist, process_group_backend
from ..runs.distributed import init_distributed as _init_distributed
from .models import TrainingError

__all__ = ["Dist", "StopFlag", "autocast", "compile_encoder", "init_distributed", "pick_device",
           "process_group_backend"]


def pick_device(name: str | None, dist: Dist | None = None) -> torch.device:
    """``auto`` -> CUDA if available else CPU; under DDP on CUDA, ``cuda:<local_rank mod GPU count>`` (more ranks
    than GPUs share them: :func:`process_group_backend`).

    Raises:
        TrainingError: CUDA asked for but not available.
    """
    name = resolve_device(name)
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError(f"device {name!r} asked for, but CUDA is not available here; use --device cpu")
        if dist is not None and dist.enabled:
            return torch.device("cuda", dist.local_rank % torch.cuda.device_count())
    return torch.device(name)


def init_distributed(device_name: str | None) -> Dist:
    """:func:`bertcore.runs.distributed.init_distributed`, its device error a :class:`TrainingError`."""
    try:
        return _init_distributed(device_name)
    except DeviceError as exc:
        raise TrainingError(str(exc)) from exc


def autocast(device: torch.device, precision: str):
    """bf16 autocast on CUDA (``precision`` auto or bf16), on the CPU only for bf16; else a no-op context."""
    if device.type == "cuda" and precision in ("auto", "bf16"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if device.type == "cpu" and precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class StopFlag:
    """Set by SIGTERM / SIGINT; the loop checks it between steps."""

    def __init__(self) -> None:
        self.set = False
        self.signal: int | None = None

    def install(self) -> None:
        def handler(signum, frame):  # noqa: ARG001
            self.set, self.signal = True, signum

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                signal.signal(sig, handler)
            except ValueError:  # not the main thread (e.g. inside a test runner thread)
                pass


COMPILE_BACKEND = "inductor"  # tests set "eager" (Dynamo's tracing without code generation: fast on the CPU)


def compile_encoder(model: torch.nn.Module, mode: str) -> None:
    """``torch.compile`` the model's encoder in place (``nn.Module.compile``: the state dict's keys and the
    checkpoints stay the same) with ``mode`` (``default``, ``reduce-overhead`` = CUDA graphs, ``max-autotune``;
    ``none`` does nothing). The heads stay eager: the MLM head runs on the selected positions only, a number that
    varies by batch. Sequence lengths that vary (the length schedule) make Dynamo mark the length dynamic after the
    first recompile."""
    if mode == "none":
        return
    model.base_model.compile(mode=None if mode == "default" else mode, backend=COMPILE_BACKEND)
