"""Snippets of "Train your own": the Train page's run (the command line and the Python call that start the same
run)."""

from __future__ import annotations

import shlex
from typing import Any

from bertcore.runs.config import TrainConfig
from explorer.views.code import document

CLI_PREFIX = "#   "  # the command line's line in the Train snippet starts with this, then "python -m bertcore.training"


def train_command(task: str, args: dict[str, Any], device: str) -> list[str]:
    """The command line that starts the run of ``task`` with the TrainConfig options ``args`` on ``device``: every
    option that differs from its default (:meth:`TrainConfig.to_argv`). Raises ``OptionError`` (a ValueError) for an
    option TrainConfig refuses."""
    config = TrainConfig.create(task, **args)
    config.check()
    return ["python", "-m", "bertcore.training", *config.to_argv(), "--device", device]


def train(task: str, args: dict[str, Any], device: str) -> str:
    """The run the Train form starts, from a shell and from Python (``bertcore.runs.launch``, what the Start button
    calls). Raises what :func:`train_command` raises."""
    cli = shlex.join(train_command(task, args, device))
    body = f"""# The same run from a shell, in the repository's root folder (it writes runs/<run id>/):
{CLI_PREFIX}{cli}
# From Python, as the page's Start button does: the run is its own process, launch returns its folder at once and
# the Train and Evolution pages show it (--device and the device lock are set by launch).
run_dir = runs.launch(task, args, device=device)
print("started", run_dir)"""
    inputs = [f"{name} = {value!r}" for name, value in (("task", task), ("args", args), ("device", device))]
    return document(f"Train: a {task} run", ["from bertcore import runs"], inputs, [body])
