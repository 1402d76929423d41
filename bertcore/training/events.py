"""Subscribers to the loop's metric records (besides ``metrics.jsonl``): TensorBoard event files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

Event = dict[str, Any]


def tensorboard_writer(folder: Path) -> Callable[[Event], None]:
    """A subscriber writing every metric record as TensorBoard scalars ``<split>/<metric>`` against the
    step (``torch.utils.tensorboard.SummaryWriter``; event files in ``folder``)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))

    def write(record: Event) -> None:
        split, step = record.get("split", "train"), int(record.get("step", 0))
        for key, value in record.items():
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if numeric and key not in ("step", "split", "epoch"):
                writer.add_scalar(f"{split}/{key}", value, step)
        writer.flush()

    return write
