"""The process group of a run started by ``torchrun`` (PyTorch DDP): who this process is, and the backend (gloo on
the CPU, NCCL with one rank per GPU, gloo where ranks share a GPU). Pretraining, fine-tuning and SAE training join it
the same way (:func:`init_distributed`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from ..device import DeviceError
from .lock import resolve_device


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


def process_group_backend(use_cuda: bool, local_world_size: int) -> str:
    """NCCL with one rank per GPU; gloo on the CPU, and where more ranks than GPUs share them (NCCL refuses two
    ranks on one device; gloo all-reduces CUDA tensors through the host). Two ranks on one H200 ran a fine-tuning
    to its end, but its weights differed from one process's beyond the CPU test's tolerance: docs/gpu.md."""
    if use_cuda and local_world_size <= torch.cuda.device_count():
        return "nccl"
    return "gloo"


def init_distributed(device_name: str | None) -> Dist:
    """Join the process group when started by ``torchrun`` (``WORLD_SIZE`` > 1); a plain :class:`Dist` otherwise.

    Raises:
        bertcore.device.DeviceError: CUDA asked for but not available.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = resolve_device(device_name).startswith("cuda")
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if use_cuda:
        if not torch.cuda.is_available():
            raise DeviceError(f"device {device_name!r} asked for, but CUDA is not available here; use --device cpu")
        torch.cuda.set_device(local % torch.cuda.device_count())
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(process_group_backend(use_cuda, local_world))
    return Dist(rank, world, local, True)
