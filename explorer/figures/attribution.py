"""Figure of an attribution: one bar per token (or word), red where it pushes the explained
output up, blue where it pulls it down."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .attention import token_axis
from .tokens import _plain

POSITIVE, NEGATIVE = "#d62728", "#1f77b4"


def attribution_bars(labels: Sequence[str], scores, title: str = "", unit: str = "",
                     max_labels: int = 48) -> go.Figure:
    """Attribution scores as bars in reading order.

    Args:
        labels: one label per token or word (duplicates are fine: bars are placed by position).
        scores: ``(N,)`` float, in the units of the explained output (``unit``, e.g. "probability").
        max_labels: tick labels on the x axis (every k-th beyond; hover shows each label).
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
    bottom = token_axis(fig, names, max_labels, "x", angle=-60, title=False)
    fig.update_yaxes(title=f"attribution{f' ({unit})' if unit else ''}", zeroline=True, zerolinecolor="#888",
                     automargin=False)
    fig.update_layout(title=_plain(title) or None, height=300 + bottom,
                      margin={"l": 80, "r": 10, "t": 50, "b": bottom}, showlegend=False)
    return fig
