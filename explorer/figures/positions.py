"""Figures comparing two position tables side by side (learned vs sinusoidal): the values,
cosine similarity between positions, a 2-D PCA path, and similarity against the offset."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .embeddings import robust_limit
from .tokens import _plain



def _pair(left, right, what: str, cols: int | None = None, square: bool = False) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
    for name, m in (("left", a), ("right", b)):
        if m.ndim != 2 or m.shape[0] == 0:
            raise ValueError(f"{what}: the {name} table must be a non-empty 2-D array, got shape {m.shape}")
        if cols is not None and m.shape[1] != cols:
            raise ValueError(f"{what}: the {name} table must have {cols} columns, got {m.shape[1]}")
        if square and m.shape[0] != m.shape[1]:
            raise ValueError(f"{what}: the {name} matrix must be square (positions x positions), got {m.shape}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{what}: both tables need the same positions, got {a.shape[0]} and {b.shape[0]} rows")
    return a, b


def compare_tables(left, right, start: int = 0, titles: Sequence[str] = ("learned", "sinusoidal")) -> go.Figure:
    """Two ``(P, D)`` position tables as heatmaps (rows: positions ``start..``, columns: dims).

    Each panel has its own symmetric colour scale up to the 99th percentile of its |values|
    (learned values are ~0.05 with a few outlier dimensions, sinusoids ±1); outliers saturate.

    Raises:
        ValueError: not 2-D, empty, or a different number of positions.
    """
    a, b = _pair(left, right, "compare_tables")
    y = np.arange(start, start + a.shape[0])
    fig = make_subplots(rows=1, cols=2, subplot_titles=[_plain(t) for t in titles], horizontal_spacing=0.16)
    for i, m in enumerate((a, b)):
        lim = robust_limit(m)
        fig.add_trace(go.Heatmap(z=m, y=y, colorscale="RdBu_r", zmid=0, zmin=-lim, zmax=lim,
                                 colorbar={"x": 0.43 if i == 0 else 1.0, "xanchor": "left", "len": 0.9,
                                           "thickness": 12},
                                 hovertemplate="position %{y}<br>dim %{x}: %{z:.4f}<extra></extra>"),
                      row=1, col=i + 1)
        fig.update_xaxes(title_text="dimension", row=1, col=i + 1)
        fig.update_yaxes(title_text="position" if i == 0 else None, autorange="reversed", row=1, col=i + 1)
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def compare_cosine(left, right, start: int = 0, titles: Sequence[str] = ("learned", "sinusoidal")) -> go.Figure:
    """Two ``(P, P)`` cosine-similarity matrices between positions, on one colour scale [-1, 1].

    Raises:
        ValueError: not square, or of different sizes.
    """
    a, b = _pair(left, right, "compare_cosine", square=True)
    axis = np.arange(start, start + a.shape[0])
    fig = make_subplots(rows=1, cols=2, subplot_titles=[_plain(t) for t in titles], horizontal_spacing=0.08)
    for i, m in enumerate((a, b)):
        fig.add_trace(go.Heatmap(z=m, x=axis, y=axis, colorscale="RdBu_r", zmid=0, zmin=-1, zmax=1, showscale=i == 1,
                                 colorbar={"len": 0.9, "thickness": 12, "title": {"text": "cos"}},
                                 hovertemplate="positions %{y} and %{x}: %{z:.3f}<extra></extra>"),
                      row=1, col=i + 1)
        fig.update_xaxes(title_text="position", row=1, col=i + 1)
        fig.update_yaxes(title_text="position" if i == 0 else None, autorange="reversed", row=1, col=i + 1)
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def compare_pca(left, right, start: int = 0, explained: Sequence[Sequence[float]] | None = None,
                titles: Sequence[str] = ("learned", "sinusoidal")) -> go.Figure:
    """Two ``(P, 2)`` PCA paths: positions joined in order, coloured from first to last.

    Args:
        left / right: ``(P, 2)`` coordinates, row p is position ``start + p``.
        explained: optional pair of ``(2,)`` explained-variance ratios (axis titles).
    Raises:
        ValueError: not ``(P, 2)`` or of different lengths.
    """
    a, b = _pair(left, right, "compare_pca", cols=2)
    positions = np.arange(start, start + a.shape[0])
    fig = make_subplots(rows=1, cols=2, subplot_titles=[_plain(t) for t in titles], horizontal_spacing=0.1)
    for i, m in enumerate((a, b)):
        fig.add_scatter(x=m[:, 0], y=m[:, 1], mode="lines", line={"color": "#bbbbbb", "width": 1}, showlegend=False,
                        hoverinfo="skip", row=1, col=i + 1)
        fig.add_scatter(x=m[:, 0], y=m[:, 1], mode="markers", showlegend=False, customdata=positions,
                        marker={"color": positions, "colorscale": "Viridis", "size": 6,
                                "showscale": i == 1, "colorbar": {"title": {"text": "position"}, "thickness": 12}},
                        hovertemplate="position %{customdata}<br>(%{x:.3f}, %{y:.3f})<extra></extra>",
                        row=1, col=i + 1)
        ev = explained[i] if explained is not None else None
        fig.update_xaxes(title_text="PC1" + (f" ({ev[0]:.0%} of variance)" if ev is not None else ""), row=1, col=i + 1)
        fig.update_yaxes(title_text="PC2" + (f" ({ev[1]:.0%})" if ev is not None else ""), row=1, col=i + 1)
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def offset_similarity(left: Sequence[float], right: Sequence[float],
                      titles: Sequence[str] = ("learned", "sinusoidal")) -> go.Figure:
    """Mean cosine similarity between positions ``o`` apart, against ``o = 1, 2, ...``.

    Raises:
        ValueError: curves of different lengths or empty.
    """
    a = np.asarray(left, dtype=np.float64).reshape(-1)
    b = np.asarray(right, dtype=np.float64).reshape(-1)
    if a.size == 0 or a.size != b.size:
        raise ValueError(f"both curves need the same non-zero length, got {a.size} and {b.size}")
    x = np.arange(1, a.size + 1)
    fig = go.Figure()
    for name, v, colour in ((titles[0], a, "#3b75af"), (titles[1], b, "#f28e2b")):
        fig.add_scatter(x=x, y=v, mode="lines+markers", name=_plain(name), line={"color": colour},
                        hovertemplate="offset %{x}: %{y:.3f}<extra></extra>")
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 30, "b": 10}, xaxis_title="offset between positions",
                      yaxis_title="mean cosine similarity", legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"})
    return fig
