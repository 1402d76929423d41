"""Snippets of "Train your own": the Train page's run (the command line and the Python call that start the same run)
and the Evolution page's attention of one head across a run's checkpoints."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from bertcore.training.config import TrainConfig

from .common import snippet

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
    return snippet(f"Train: a {task} run", None, ["from bertcore import runs"],
                   {"task": task, "args": args, "device": device}, body)


def evolution(run_dir: Path, steps: list[int], text: str, layer: int, head: int, words: bool) -> str:
    """One head's attention at each chosen checkpoint of a run: ``result`` = ``(checkpoints, T, T)`` float64 (words
    with ``words``). ``layer`` / ``head``: 0-based (the title shows the page's 1-based labels)."""
    merge = ""
    if words:
        merge = """
    groups = word_groups(acts.encoding.tokens, acts.encoding.word_ids)
    one, tokens = merge_attention(one, groups), groups.labels  # (W, W): words, not WordPieces"""
    body = f"""checkpoints = {{runs.checkpoint_step(c): c for c in runs.checkpoints(run_dir)}}
maps = []
for step in steps:  # each checkpoint loaded, run on the sentence and dropped
    loaded = sources.load(sources.ModelSource("run", str(checkpoints[step])))
    acts = activations.run(loaded.encoder, loaded.tokenizer, text)
    one, tokens = acts.attentions[layer, head], acts.tokens  # (T, T); layer and head count from 0{merge}
    maps.append(one.astype(np.float64))
result = np.stack(maps)  # (checkpoints, T, T)
fig = figs.attention_evolution_figure(maps, tokens, steps, layer=layer, head=head)
fig.show()"""
    imports = ["import numpy as np", "from bertcore import runs, sources",
               "from bertcore.analysis.attention import activations", "from explorer.figures import evolution as figs"]
    if words:
        imports.append("from bertcore.analysis.attention.words import merge_attention, word_groups")
    return snippet(f"Evolution: layer {layer + 1}, head {head + 1} across checkpoints", None, imports,
                   {"run_dir": str(run_dir), "steps": steps, "text": text, "layer": layer, "head": head}, body)
