"""SAE and transcoder training under ``torchrun``: what makes N ranks compute what one process reading the global
batch computes (:class:`bertcore.sae.train.Trainer`). Each helper is the identity, or a plain value, in one process;
the process group itself is :mod:`bertcore.runs.distributed`'s."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..runs.distributed import Dist
from .transcoder import BatchTopK


def wrap(sae, dist: Dist, device: torch.device):
    """``sae`` itself in one process; under ``torchrun`` wrapped in DDP, which averages the gradients."""
    if not dist.enabled:
        return sae
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(sae, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False)


def total(value: int, dist: Dist, device: torch.device) -> int:
    """``value`` summed over the ranks."""
    if not dist.enabled:
        return value
    t = torch.tensor([value], dtype=torch.long, device=device if device.type == "cuda" else "cpu")
    return int(dist.all_reduce_sum(t).item())


def fired_anywhere(out, d_sae: int, dist: Dist) -> torch.Tensor:
    """The latents active on some token of the global batch, ``(M,)`` long."""
    fired = out.fired()
    if not dist.enabled:
        return fired
    seen = torch.zeros(d_sae, dtype=torch.long, device=fired.device)
    seen[fired] = 1
    return dist.all_reduce_sum(seen).nonzero().flatten()


@dataclass
class Rows:
    """The rows resampling reads of a forward pass (:func:`bertcore.sae.model.resample`)."""

    x: torch.Tensor
    x_hat: torch.Tensor
    target: torch.Tensor


def global_rows(out, dist: Dist):
    """What resampling reads of one forward pass (``x``, ``x_hat``, ``target``), every rank's rows in shard order:
    each rank then resamples the same latents the same way (what one process reading the global batch does)."""
    if not dist.enabled:
        return out
    import torch.distributed as tdist

    n = torch.tensor([out.x_hat.shape[0]], device=out.x_hat.device)
    sizes = [torch.zeros_like(n) for _ in range(dist.world_size)]
    tdist.all_gather(sizes, n)
    width = int(max(s.item() for s in sizes))

    def gather(t: torch.Tensor) -> torch.Tensor:
        padded = torch.zeros(width, *t.shape[1:], dtype=t.dtype, device=t.device)
        padded[:t.shape[0]] = t.detach()
        parts = [torch.zeros_like(padded) for _ in sizes]
        tdist.all_gather(parts, padded)
        return torch.cat([p[:int(s.item())] for p, s in zip(parts, sizes)])

    x = gather(out.x)
    return Rows(x, gather(out.x_hat), x if out.target is out.x else gather(out.target))


def all_positions(mine: list[list[int]], dist: Dist) -> list[list[int]]:
    """Every shard's stream position ``[block, offset]``, in shard order, from this rank's ``mine``."""
    if not dist.enabled:
        return mine
    every: list = [None] * dist.world_size
    torch.distributed.all_gather_object(every, mine)
    return [p for rank in every for p in rank]


class GlobalBatchTopK(BatchTopK):
    """BatchTopK over the global batch of a ``torchrun`` run: the ``k x N`` largest activations of every rank's rows
    together (``N`` all of them), so each rank keeps what one process reading the global batch keeps. Each rank
    sends its own ``k x N`` largest (the global ones are among them), every rank finds the same cut."""

    def __init__(self, dist: Dist) -> None:
        self.dist = dist

    def select(self, activations: torch.Tensor, k: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch.distributed as tdist

        total_rows = int(self.dist.all_reduce_sum(torch.tensor([rows], device=activations.device)).item())
        count = k * total_rows
        mine = activations.detach().topk(min(count, activations.numel()), sorted=False).values
        padded = torch.full((count,), -1.0, dtype=mine.dtype, device=mine.device)
        padded[:len(mine)] = mine
        every = [torch.empty_like(padded) for _ in range(self.dist.world_size)]
        tdist.all_gather(every, padded)
        cut = torch.cat(every).topk(count, sorted=False).values.min()  # the count-th largest of the global batch
        return self.above(activations, cut)

    def lowest(self, values: torch.Tensor) -> torch.Tensor | None:
        import torch.distributed as tdist

        low = values.min() if len(values) else values.new_tensor(float("inf"))
        low = low.reshape(1).clone()
        tdist.all_reduce(low, op=tdist.ReduceOp.MIN)
        return None if torch.isinf(low).item() else low[0]
