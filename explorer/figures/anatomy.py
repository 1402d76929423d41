"""Figures of a model's anatomy: parameters per group, preset sizes, what the pooler does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from .tokens import _plain



def _fmt(n: int) -> str:
    """1,234 -> '1.2 k', 109,482,240 -> '109.5 M'."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(int(n))


def groups_figure(groups: Sequence[str], counts: Sequence[int]) -> go.Figure:
    """Parameters per group (embeddings, each encoder layer, pooler, heads) as horizontal bars
    with the count and the share of the total.

    Raises:
        ValueError: no groups, lengths that differ, or negative counts.
    """
    if len(groups) == 0 or len(groups) != len(counts):
        raise ValueError(f"need one count per group, got {len(groups)} groups and {len(counts)} counts")
    c = np.asarray(counts, dtype=np.int64)
    if (c < 0).any():
        raise ValueError("counts must be >= 0")
    total = int(c.sum()) or 1
    fig = go.Figure(go.Bar(x=c, y=[_plain(g) for g in groups], orientation="h", marker_color="#3b75af",
                           text=[f"{_fmt(int(n))} ({n / total:.1%})" for n in c], textposition="auto",
                           hovertemplate="%{y}: %{x:,} parameters<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(height=max(220, 60 + 24 * len(groups)), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title="parameters")
    return fig


def presets_figure(names: Sequence[str], counts: Sequence[int], highlight: str | None = None) -> go.Figure:
    """Parameter count of each preset (log scale), the current model's size highlighted when named.

    Raises:
        ValueError: no presets, lengths that differ, or counts < 1.
    """
    if len(names) == 0 or len(names) != len(counts):
        raise ValueError(f"need one count per preset, got {len(names)} names and {len(counts)} counts")
    c = np.asarray(counts, dtype=np.int64)
    if (c < 1).any():
        raise ValueError("counts must be >= 1 (log scale)")
    colours = ["#e15759" if n == highlight else "#3b75af" for n in names]
    fig = go.Figure(go.Bar(x=[_plain(n) for n in names], y=c, marker_color=colours,
                           text=[_fmt(int(n)) for n in c], textposition="outside",
                           hovertemplate="%{x}: %{y:,} parameters<extra></extra>"))
    fig.update_yaxes(type="log", title_text="parameters (log scale)")
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig


def pooler_figure(dense, pooled) -> go.Figure:
    """The pooler's tanh: each dimension's pre-activation ``W h_[CLS] + b`` against its output,
    over the tanh curve (outputs squashed into (-1, 1)).

    Args:
        dense: ``(H,)`` pre-activations; pooled: ``(H,)`` ``tanh(dense)``.
    Raises:
        ValueError: shapes that differ or are empty.
    """
    d = np.asarray(dense, dtype=np.float64).reshape(-1)
    p = np.asarray(pooled, dtype=np.float64).reshape(-1)
    if d.size == 0 or d.size != p.size:
        raise ValueError(f"dense and pooled must be (H,) vectors of the same size, got {d.size} and {p.size}")
    lim = max(3.0, float(np.abs(d).max()) * 1.05)
    xs = np.linspace(-lim, lim, 200)
    fig = go.Figure()
    fig.add_scatter(x=xs, y=np.tanh(xs), mode="lines", name="tanh", line={"color": "#bbbbbb"})
    fig.add_scatter(x=d, y=p, mode="markers", name="dimensions of [CLS]", marker={"size": 5, "color": "#e15759"},
                    customdata=np.arange(d.size), hovertemplate="dim %{customdata}: %{x:.3f} → %{y:.3f}<extra></extra>")
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title="dense(h_[CLS]) (before tanh)", yaxis_title="pooler output",
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"})
    return fig
