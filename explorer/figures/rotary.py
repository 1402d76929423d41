"""Figures of rotary position embeddings (RoPE; Su et al. 2021): the rotation frequencies per dimension pair,
the score grid q(m) . k(n) whose diagonals are constant, the long-range decay, and each head's attention by
relative offset (pure Plotly; the numbers come from :mod:`bertcore.modeling.rotary` and
:mod:`bertcore.readouts.positional`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def wavelengths(curves: Mapping[str, np.ndarray], window: int | None = None) -> go.Figure:
    """Positions per full turn of each rotation plane (``2 pi / theta_j``), one line per base, on a log axis.

    Args:
        curves: ``{label: (d/2,) wavelengths}`` (e.g. the global and the local base).
        window: draw a line at this many positions (ModernBERT's local window), or None.
    Raises:
        ValueError: no curve, or a curve that is not a non-empty 1-D array.
    """
    if not curves:
        raise ValueError("wavelengths: give at least one curve")
    fig = go.Figure()
    for i, (label, w) in enumerate(curves.items()):
        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 1 or not len(w):
            raise ValueError(f"wavelengths: {label!r} must be a non-empty 1-D array, got shape {w.shape}")
        fig.add_scatter(x=np.arange(len(w)), y=w, mode="lines+markers", name=label, marker={"size": 4},
                        line={"color": COLOURS[i % len(COLOURS)]},
                        hovertemplate="plane %{x}<br>%{y:,.1f} positions per turn<extra>" + label + "</extra>")
    if window:
        fig.add_hline(y=window, line={"dash": "dot", "color": "#555"},
                      annotation_text=f"local window ({window} tokens)", annotation_position="bottom right")
    fig.update_yaxes(type="log", title_text="positions per full turn (log)")
    fig.update_xaxes(title_text="dimension pair j (plane), fast to slow")
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 30, "b": 10}, legend={"orientation": "h", "y": 1.1})
    return fig


def score_grid(scores: np.ndarray) -> go.Figure:
    """``(P, P)`` heatmap of ``q(m) . k(n)``: rows m (query position), columns n (key position).

    Raises:
        ValueError: not a non-empty square matrix.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or not s.size:
        raise ValueError(f"score_grid: a square (positions x positions) matrix is needed, got shape {s.shape}")
    lim = float(np.abs(s).max()) or 1.0
    fig = go.Figure(go.Heatmap(z=s, colorscale="RdBu_r", zmid=0, zmin=-lim, zmax=lim,
                               colorbar={"title": {"text": "q·k"}, "thickness": 12},
                               hovertemplate="query at %{y}, key at %{x}<br>q·k = %{z:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="key position n")
    fig.update_yaxes(title_text="query position m", autorange="reversed", scaleanchor="x")
    fig.update_layout(height=440, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig


def decay(distances: np.ndarray, curves: Mapping[str, np.ndarray]) -> go.Figure:
    """Su et al. 2021's long-range decay bound against the relative distance, one line per base (log x).

    Raises:
        ValueError: no curve, or a curve of another length than ``distances``.
    """
    x = np.asarray(distances, dtype=np.float64)
    if not curves:
        raise ValueError("decay: give at least one curve")
    fig = go.Figure()
    for i, (label, y) in enumerate(curves.items()):
        y = np.asarray(y, dtype=np.float64)
        if y.shape != x.shape:
            raise ValueError(f"decay: {label!r} has shape {y.shape}, the distances {x.shape}")
        fig.add_scatter(x=x, y=y, mode="lines", name=label, line={"color": COLOURS[i % len(COLOURS)]},
                        hovertemplate="distance %{x:,.0f}<br>bound %{y:.3f}<extra>" + label + "</extra>")
    fig.update_xaxes(type="log", title_text="relative distance m − n (log)")
    fig.update_yaxes(title_text="mean |partial sum| (upper bound on |q·k|, scaled)")
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 30, "b": 10}, legend={"orientation": "h", "y": 1.1})
    return fig


def offset_profile(profile: np.ndarray, offsets: np.ndarray, title: str = "") -> go.Figure:
    """Heads x relative offsets heatmap: the mean attention a head gives the key ``offset`` tokens away.

    Args:
        profile: ``(heads, R)`` mean probabilities (NaN where no query has a key at that offset).
        offsets: ``(R,)`` the offsets (key position − query position).
    Raises:
        ValueError: shapes that do not match.
    """
    p = np.asarray(profile, dtype=np.float64)
    o = np.asarray(offsets)
    if p.ndim != 2 or p.shape[1] != len(o):
        raise ValueError(f"offset_profile: profile must be (heads, {len(o)}), got shape {p.shape}")
    fig = go.Figure(go.Heatmap(z=p, x=o, y=[f"head {h + 1}" for h in range(p.shape[0])], colorscale="Viridis",
                               zmin=0, colorbar={"title": {"text": "mean p"}, "thickness": 12},
                               hovertemplate="%{y}, offset %{x}: %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="key position − query position (negative: earlier tokens)")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=120 + 28 * p.shape[0], margin={"l": 10, "r": 10, "t": 30 if title else 10, "b": 10},
                      title={"text": title, "font": {"size": 13}} if title else None)
    return fig
