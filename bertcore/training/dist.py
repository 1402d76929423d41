"""Devices, PyTorch DDP (torchrun: gloo on CPU, NCCL on GPUs; gloo where ranks share a GPU), autocast and the
stop signal."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

import torch

from ..runs import resolve_device
from .models import TrainingError


@dataclass
class Dist:
    """Process group facts: ``rank``, ``world_size``, ``local_rank``; ``enabled`` under torchrun."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    enabled: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t

    def any_flag(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when ``flag`` is True on any (so DDP ranks stop at the same step)."""
        if not self.enabled:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=device if device.type == "cuda" else "cpu")
        self.all_reduce_sum(t)
        return bool(t.item() > 0)

    def value_of_main(self, value: int, device: torch.device) -> int:
        """Rank 0's ``value`` on every rank (e.g. a calibrated step count); ``value`` in a single process."""
        if not self.enabled:
            return value
        t = torch.tensor([float(value) if self.main else 0.0], device=device if device.type == "cuda" else "cpu")
        self.all_reduce_sum(t)
        return int(t.item())


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


def process_group_backend(use_cuda: bool, local_world_size: int) -> str:
    """NCCL with one rank per GPU; gloo on the CPU, and where more ranks than GPUs share them (NCCL refuses two
    ranks on one device; gloo all-reduces CUDA tensors through the host). Two ranks on one H200 ran a fine-tuning
    to its end, but its weights differed from one process's beyond the CPU test's tolerance: docs/gpu.md."""
    if use_cuda and local_world_size <= torch.cuda.device_count():
        return "nccl"
    return "gloo"


def init_distributed(device_name: str | None) -> Dist:
    """Join the process group when started by ``torchrun`` (``WORLD_SIZE`` > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = resolve_device(device_name).startswith("cuda")
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if use_cuda:
        if not torch.cuda.is_available():
            raise TrainingError(f"device {device_name!r} asked for, but CUDA is not available here; use --device cpu")
        torch.cuda.set_device(local % torch.cuda.device_count())
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(process_group_backend(use_cuda, local_world))
    return Dist(rank, world, local, True)


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
