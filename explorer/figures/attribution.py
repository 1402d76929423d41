"""Figure of an attribution: one bar per token (or word), red where it pushes the explained
output up, blue where it pulls it down."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import _plain

POSITIVE, NEGATIVE = "#d62728", "#1f77b4"


def attribution_bars(labels: Sequence[str], scores, title: str = "", unit: str = "") -> go.Figure:
    """Attribution scores as bars in reading order.

    Args:
        labels: one label per token or word (duplicates are fine: bars are placed by position).
        scores: ``(N,)`` float, in the units of the explained output (``unit``, e.g. "probability").
    Raises:
        ValueError: ``scores`` not 1-D, empty, or of another length than ``labels``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError(f"scores must have shape (N,) with N >= 1, got {scores.shape}")
    if len(labels) != scores.size:
        raise ValueError(f"got {len(labels)} labels for {scores.size} scores; pass one label per score")
    n = scores.size
    names = [_plain(str(lab)) for lab in labels]
    fig = go.Figure(go.Bar(
        x=np.arange(n), y=scores, marker_color=[POSITIVE if s >= 0 else NEGATIVE for s in scores],
        customdata=names, hovertemplate="%{x}: %{customdata}<br>attribution %{y:.4f}<extra></extra>",
    ))
    step = max(1, int(np.ceil(n / 80)))
    ticks = list(range(0, n, step))
    fig.update_xaxes(tickvals=ticks, ticktext=[names[i] if step == 1 else f"{i}:{names[i]}" for i in ticks],
                     tickangle=-60)
    fig.update_yaxes(title=f"attribution{f' ({unit})' if unit else ''}", zeroline=True, zerolinecolor="#888")
    fig.update_layout(title=_plain(title) or None, height=420, margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      showlegend=False)
    return fig
