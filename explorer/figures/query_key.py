"""Figures of the joint query-key map (AttentionViz, Yeh et al. 2023): one head's queries and keys in 2-D, and
small multiples of every head of a layer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .tokens import _plain

QUERY_COLOR, KEY_COLOR = "#1f77b4", "#ff7f0e"


def qk_scatter(pq, pk, tokens: Sequence[str], sentence: Sequence[int], color=None, color_name: str = "",
               categorical: Sequence[str] | None = None, title: str = "") -> go.Figure:
    """Queries (circles) and keys (squares) of one head in one 2-D projection.

    Args:
        pq / pk: ``(N, 2)`` projected queries and keys of the same N tokens.
        tokens / sentence: per token, its text and sentence index (hover; a click selects the sentence).
        color: None (queries blue, keys orange), ``(N,)`` numbers (a colour scale, e.g. normalised position).
        categorical: ``(N,)`` category names (e.g. POS tags), one legend entry each (overrides ``color``).
    Raises:
        ValueError: shapes that disagree.
    """
    pq, pk = np.asarray(pq, dtype=float), np.asarray(pk, dtype=float)
    n = len(tokens)
    if pq.shape != (n, 2) or pk.shape != (n, 2) or len(sentence) != n:
        raise ValueError(f"pq and pk must be ({n}, 2) with one sentence index per token")
    hover = [f"{_plain(t)} (sentence {s + 1})" for t, s in zip(tokens, sentence)]
    fig = go.Figure()
    if categorical is not None:
        cats = list(dict.fromkeys(categorical))
        palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf"]
        for i, cat in enumerate(cats):
            idx = [j for j, c in enumerate(categorical) if c == cat]
            for pts, sym, role in ((pq, "circle", "query"), (pk, "square", "key")):
                fig.add_trace(go.Scatter(
                    x=pts[idx, 0], y=pts[idx, 1], mode="markers", name=f"{cat} ({role})", legendgroup=cat,
                    showlegend=role == "query", marker={"symbol": sym, "size": 7, "color": palette[i % 10],
                                                        "opacity": 0.8 if role == "query" else 0.5},
                    text=[f"{role}: {hover[j]}" for j in idx], customdata=[int(sentence[j]) for j in idx],
                    hovertemplate="%{text}<extra></extra>"))
    else:
        for pts, sym, role, base in ((pq, "circle", "queries", QUERY_COLOR), (pk, "square", "keys", KEY_COLOR)):
            marker = {"symbol": sym, "size": 7, "color": base, "opacity": 0.8}
            if color is not None:
                marker.update(color=np.asarray(color, dtype=float), colorscale="Viridis", cmin=0, cmax=1,
                              showscale=role == "queries", colorbar={"title": {"text": color_name}})
            fig.add_trace(go.Scatter(x=pts[:, 0], y=pts[:, 1], mode="markers", name=role, marker=marker,
                                     text=[f"{role[:-1]}: {h}" for h in hover], customdata=list(map(int, sentence)),
                                     hovertemplate="%{text}<extra></extra>"))
    fig.update_layout(title=title, height=520, xaxis={"showticklabels": False, "zeroline": False},
                      yaxis={"showticklabels": False, "zeroline": False, "scaleanchor": "x"},
                      legend={"orientation": "h", "y": -0.05}, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig


def head_multiples(projections: Sequence[tuple[np.ndarray, np.ndarray]], layer: int, cols: int = 4) -> go.Figure:
    """Every head of a layer (``layer``: the 0-based block; the title says "layer ``layer + 1``"), each its own PCA
    of queries (blue) and keys (orange)."""
    n = len(projections)
    rows = max(1, int(np.ceil(n / cols)))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {h + 1}" for h in range(n)],
                        horizontal_spacing=0.03, vertical_spacing=0.08)
    for h, (pq, pk) in enumerate(projections):
        r, c = divmod(h, cols)
        for pts, color in ((pq, QUERY_COLOR), (pk, KEY_COLOR)):
            fig.add_trace(go.Scatter(x=pts[:, 0], y=pts[:, 1], mode="markers", showlegend=False, hoverinfo="skip",
                                     marker={"size": 3, "color": color, "opacity": 0.6}), row=r + 1, col=c + 1)
    fig.update_xaxes(showticklabels=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, zeroline=False)
    fig.update_layout(title=f"Every head of layer {layer + 1}: queries (blue) and keys (orange)",
                      height=190 * rows + 60,
                      margin={"l": 10, "r": 10, "t": 70, "b": 10})
    return fig
