"""Figures of training runs: curves and progress (the probe's predictions: :mod:`explorer.figures.probe`; a
fine-tuning run's test results: :mod:`explorer.figures.classification`).

Pure functions: plain data (the records of a run directory, numpy arrays, labels) in,
``plotly.graph_objects.Figure`` (or a small dataclass / list of rows) out. No Streamlit here.
Inputs are checked first; a ``ValueError`` says what is wrong and how to fix it.

Record formats are those of ``docs/CONTRACTS.md``: ``metrics.jsonl`` lines
(``{"step", "split": "train"|"val", "loss", ...}``), ``status.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from bertcore.analysis.papers import emergence

# Which metric keys each task logs (CONTRACTS.md, metrics.jsonl).
LOSS_KEYS = {"pretrain": ("loss", "mlm_loss", "nsp_loss", "agreement_margin_loss"), "finetune": ("loss",)}
ACC_KEYS = {"pretrain": ("mlm_acc_mask", "mlm_top5_mask", "mlm_acc", "nsp_acc", "agreement_acc"),
            "finetune": ("acc", "f1")}
METRIC_LABELS = {
    "loss": "total loss", "mlm_loss": "MLM loss", "nsp_loss": "NSP loss", "agreement_margin_loss": "agreement margin",
    "mlm_acc": "MLM accuracy, all selected (mix of [MASK], random, unchanged)", "agreement_acc": "agreement at verb",
    "mlm_acc_mask": "MLM accuracy at [MASK]", "mlm_top5_mask": "top-5 at [MASK]",
    "mlm_acc_random": "MLM accuracy at random replacements", "mlm_acc_unchanged": "MLM accuracy at unchanged tokens",
    "nsp_acc": "NSP accuracy", "acc": "accuracy", "f1": "macro F1", "lr": "learning rate", "tokens_per_s": "tokens / s",
}
REFERENCE_SPLIT = "reference"  # the metrics.jsonl record of the run's own data (unigram loss, frequent-token rate)
SPLIT_STYLE = {"train": dict(dash="solid", width=1.5), "val": dict(dash="dot", width=2.5)}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
STATES = ("queued", "running", "done", "failed", "cancelled")


# ----------------------------------------------------------------------------- helpers
def _check_records(records: Any, what: str) -> list[Mapping[str, Any]]:
    if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
        raise ValueError(f"{what} must be a list of dicts (one per JSON line), got {type(records).__name__}")
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise ValueError(f"{what}[{i}] must be a dict, got {type(rec).__name__}")
        if "step" not in rec:
            raise ValueError(f"{what}[{i}] has no 'step' (keys: {sorted(rec)}); is this a metrics.jsonl record?")
    return list(records)


def _empty(title: str, message: str, height: int = 320) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font=dict(size=14, color="#666"))
    fig.update_layout(title=title, height=height, xaxis=dict(visible=False), yaxis=dict(visible=False),
                      margin=dict(l=40, r=20, t=50, b=40))
    return fig


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def metric_series(records: Sequence[Mapping[str, Any]], key: str,
                  split: str = "train") -> tuple[list[int], list[float]]:
    """Steps and values of one metric in one split, sorted by step; records without a finite
    value for ``key`` are skipped (a run logs some keys only on some steps)."""
    records = _check_records(records, "metrics")
    pairs = sorted((int(r["step"]), v) for r in records if r.get("split", "train") == split
                   and (v := finite_number(r.get(key))) is not None)
    return [p[0] for p in pairs], [p[1] for p in pairs]


# ----------------------------------------------------------------------------- curves
def curves_figure(records: Sequence[Mapping[str, Any]], keys: Sequence[str], *, title: str = "",
                  yaxis_title: str = "", total_steps: int | None = None, height: int = 340) -> go.Figure:
    """Lines of ``keys`` against step: train solid, validation dotted with markers; one colour per key.

    Args:
        records: ``metrics.jsonl`` records (dicts with ``step``, ``split`` and the keys).
        keys: metric names to draw (absent ones are skipped).
        total_steps: if given, the x axis spans the whole run, so the curve grows into it.
    Raises:
        ValueError: records are not a list of dicts with a ``step``; ``keys`` is empty.
    """
    records = _check_records(records, "metrics")
    if isinstance(keys, str) or not keys:
        raise ValueError("keys must be a non-empty list of metric names, e.g. ['loss', 'mlm_loss']")
    fig = go.Figure()
    for i, key in enumerate(keys):
        color = PALETTE[i % len(PALETTE)]
        for split in ("train", "val"):
            steps, values = metric_series(records, key, split)
            if not steps:
                continue
            name = f"{METRIC_LABELS.get(key, key)} ({'validation' if split == 'val' else 'train'})"
            fig.add_trace(go.Scatter(
                x=steps, y=values, name=name, mode="lines+markers" if split == "val" or len(steps) < 3 else "lines",
                line=dict(color=color, **SPLIT_STYLE[split]), legendgroup=key,
                hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.4f}}<extra></extra>"))
    if not fig.data:
        return _empty(title, "no values logged yet: the curves appear after the first logged step", height)
    xrange = [0, total_steps] if total_steps and total_steps > 0 else None
    fig.update_layout(title=title, height=height, hovermode="x unified", margin=dict(l=50, r=20, t=50, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
                      xaxis=dict(title="step", range=xrange), yaxis=dict(title=yaxis_title))
    return fig


def reference_of(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's reference record (``split == "reference"``: ``unigram_loss``, ``most_frequent_token_rate``,
    ``most_frequent_token``), or {} for runs that did not log one."""
    return dict(next((r for r in records if r.get("split") == REFERENCE_SPLIT), {}))


def _hline(fig: go.Figure, y: float, name: str, x_end: float, dash: str, color: str = "#555") -> None:
    """A horizontal reference line as a legend entry (from step 0 to ``x_end``)."""
    fig.add_trace(go.Scatter(x=[0, x_end], y=[y, y], name=name, mode="lines",
                             line=dict(color=color, dash=dash, width=1),
                             hovertemplate=f"{name}<extra></extra>"))


def _x_end(records: Sequence[Mapping[str, Any]], total_steps: int | None) -> float:
    steps = [int(r["step"]) for r in records if r.get("split") in ("train", "val")]
    return float(total_steps or max(steps or [1]))


def _task_keys(table: dict[str, tuple[str, ...]], task: str) -> tuple[str, ...]:
    if task not in table:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(table)}")
    return table[task]


def loss_figure(records: Sequence[Mapping[str, Any]], task: str, total_steps: int | None = None) -> go.Figure:
    """Loss curves of a run (pretraining: total, MLM and NSP loss; fine-tuning: loss), train vs val.

    Pretraining adds the unigram loss of the run's own data (the entropy of its token frequencies,
    from the ``reference`` record): an MLM loss near it means the model guesses by frequency only.
    """
    fig = curves_figure(records, _task_keys(LOSS_KEYS, task), title="Loss", yaxis_title="cross-entropy",
                        total_steps=total_steps)
    unigram = finite_number(reference_of(records).get("unigram_loss"))
    if task == "pretrain" and fig.data and unigram is not None:
        _hline(fig, unigram, f"unigram (frequency-only) MLM loss {unigram:.2f}", _x_end(records, total_steps), "dash")
        step = unigram_exit_step(records, unigram)
        if step is not None:
            fig.add_vline(x=step, line=dict(color=PALETTE[2], width=1, dash="dot"),
                          annotation=dict(text=f"left the unigram line: step {step}", font=dict(size=11)),
                          annotation_position="top right")
    return fig


def unigram_exit_step(records: Sequence[Mapping[str, Any]], unigram: float) -> int | None:
    """:func:`bertcore.analysis.papers.emergence.left_unigram_line` of the held-out MLM loss (``split == "val"``)."""
    val = [(int(r["step"]), float(r["mlm_loss"])) for r in records
           if r.get("split") == "val" and finite_number(r.get("mlm_loss")) is not None]
    return emergence.left_unigram_line(*zip(*val), unigram) if val else None


def accuracy_figure(records: Sequence[Mapping[str, Any]], task: str, total_steps: int | None = None) -> go.Figure:
    """Accuracy curves, train vs val. Pretraining: accuracy at [MASK] (the headline), top-5 at [MASK], the
    mix over all selected positions (unchanged ones are easy: copying), NSP accuracy, with the
    most-frequent-token rate and NSP's 50% chance as reference lines. Fine-tuning: accuracy, macro F1."""
    fig = curves_figure(records, _task_keys(ACC_KEYS, task), title="Accuracy", yaxis_title="fraction correct",
                        total_steps=total_steps)
    if fig.data:
        fig.update_yaxes(range=[0, 1.02])
        if task == "pretrain":
            x_end = _x_end(records, total_steps)
            ref = reference_of(records)
            rate = finite_number(ref.get("most_frequent_token_rate"))
            if rate is not None:
                token = ref.get("most_frequent_token")
                _hline(fig, rate, f"always the most frequent token{f' ({token})' if token else ''}: {rate:.1%}",
                       x_end, "dash")
            if any(finite_number(r.get("nsp_acc")) is not None for r in records):
                _hline(fig, 0.5, "NSP chance (50%)", x_end, "dot", PALETTE[3])
    return fig


# ----------------------------------------------------------------------------- progress
def format_duration(seconds: float | None) -> str:
    """``75`` -> ``'1 min 15 s'``; ``None`` or not finite -> ``'unknown'``."""
    value = finite_number(seconds)
    if value is None or value < 0:
        return "unknown"
    s = int(round(value))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


@dataclass(frozen=True)
class Progress:
    """What a progress bar shows: ``fraction`` in [0, 1] and a one-line ``text``."""

    fraction: float
    text: str


def progress_summary(status: Mapping[str, Any]) -> Progress:
    """Fraction done and a line ``step 120 / 300 (40%) · ETA 1 min 05 s · 5,400 tokens/s`` from ``status.json``;
    under a time budget (``time_budget_s``, ``elapsed_s``) the progress is in time:
    ``running · 2 min 10 s of 10 min 00 s (22%) · step 340 · ETA ...``.

    Raises:
        ValueError: ``status`` is not a dict or has no ``state``.
    """
    if not isinstance(status, Mapping) or "state" not in status:
        raise ValueError("status must be the dict of a run's status.json (with a 'state')")
    state = status["state"]
    step = int(finite_number(status.get("step")) or 0)
    total = int(finite_number(status.get("total_steps")) or 0)
    budget, elapsed = finite_number(status.get("time_budget_s")), finite_number(status.get("elapsed_s"))
    fraction = min(1.0, max(0.0, step / total)) if total > 0 else 0.0
    if budget and elapsed is not None:  # a time budget: progress in time (or steps, whichever is further)
        fraction = max(fraction, min(1.0, max(0.0, elapsed / budget)))
    if state == "done":
        fraction = 1.0
    parts = [f"{state}", f"step {step:,} / {total:,} ({fraction:.0%})" if total else f"step {step:,}"]
    if budget:
        parts.insert(1, f"{format_duration(elapsed)} of {format_duration(budget)} ({fraction:.0%})")
    if state == "running":
        parts.append(f"ETA {format_duration(status.get('eta_s'))}")
    tps = finite_number(status.get("tokens_per_s"))
    if tps is not None:
        parts.append(f"{tps:,.0f} tokens/s")
    return Progress(fraction, " · ".join(parts))


