"""Figures of the embedding layer taken apart: token + position + segment, their sum, LayerNorm."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from .tokens import _plain

COLOURS = {"token": "#3b75af", "position": "#f28e2b", "segment": "#59a14f", "sum": "#7f7f7f",
           "normalised": "#b07aa1", "output": "#e15759"}



def robust_limit(m: np.ndarray, q: float = 99.0) -> float:
    """Colour limit: the q-th percentile of |m| (a few outlier dimensions, common in trained BERTs,
    would otherwise wash every other cell out), or the maximum when that is 0, or 1 for all zeros."""
    a = np.abs(np.asarray(m, dtype=np.float64))
    if a.size == 0:
        return 1.0
    return float(np.percentile(a, q)) or float(a.max()) or 1.0


def _labels(tokens: Sequence[str], first: int = 0) -> list[str]:
    """Unique y labels ``"pos token"`` (Plotly merges equal category labels)."""
    return [f"{first + i} {_plain(t, 14)}" for i, t in enumerate(tokens)]


def _matrices(components: Mapping[str, object], n_tokens: int) -> dict[str, np.ndarray]:
    if not components:
        raise ValueError("no components to show: pass e.g. {'token': (T, H) array, ...}")
    out = {}
    width = None
    for name, value in components.items():
        m = np.asarray(value, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != n_tokens:
            raise ValueError(f"component {name!r} has shape {m.shape}; expected (tokens={n_tokens}, dims)")
        if width is not None and m.shape[1] != width:
            raise ValueError(f"component {name!r} has {m.shape[1]} dims, the others {width}: slice them alike")
        width = m.shape[1]
        out[name] = m
    return out


def component_heatmaps(components: Mapping[str, object], tokens: Sequence[str], first_token: int = 0,
                       first_dim: int = 0) -> go.Figure:
    """One heatmap per component (rows: tokens, columns: hidden dimensions), side by side.

    Each panel has its own symmetric colour range (the summands are ~0.05 in size, the
    LayerNorm output ~1) set at the 99th percentile of its |values| (see :func:`robust_limit`),
    so every panel is readable; brighter outliers saturate, and hover gives the exact value.

    Args:
        components: ``{name: (T, D) array}``, e.g. token, position, segment, sum, output.
        tokens: T token strings (row labels).
        first_token / first_dim: index of the first row / column shown (for labels when sliced).
    Raises:
        ValueError: no tokens, no components, or shapes that disagree.
    """
    if len(tokens) == 0:
        raise ValueError("no tokens to show: encode a non-empty text first")
    mats = _matrices(components, len(tokens))
    names = list(mats)
    fig = make_subplots(rows=1, cols=len(names), shared_yaxes=True, horizontal_spacing=0.02,
                        subplot_titles=[_plain(n) for n in names])
    y = _labels(tokens, first_token)
    for i, name in enumerate(names):  # one panel per component
        m = mats[name]
        lim = robust_limit(m)
        x = list(range(first_dim, first_dim + m.shape[1]))
        fig.add_trace(go.Heatmap(z=m, x=x, y=y, colorscale="RdBu_r", zmid=0, zmin=-lim, zmax=lim, showscale=False,
                                 hovertemplate=f"{_plain(name)}<br>%{{y}}<br>dim %{{x}}: %{{z:.4f}}<extra></extra>"),
                      row=1, col=i + 1)
        fig.update_xaxes(title_text="dim", row=1, col=i + 1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_layout(height=max(260, 90 + 16 * len(tokens)), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def norms_figure(norms: Mapping[str, Sequence[float]], tokens: Sequence[str], first_token: int = 0) -> go.Figure:
    """L2 norm of each component per token, one line per component.

    Args:
        norms: ``{name: (T,) array}``.
        tokens: T token strings (x labels).
    Raises:
        ValueError: no tokens / components, or a component of another length.
    """
    if len(tokens) == 0 or not norms:
        raise ValueError("no tokens or no components to show")
    x = _labels(tokens, first_token)
    fig = go.Figure()
    for name, values in norms.items():
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size != len(tokens):
            raise ValueError(f"norms of {name!r} have {v.size} entries but there are {len(tokens)} tokens")
        fig.add_scatter(x=x, y=v, mode="lines+markers", name=_plain(name), line={"color": COLOURS.get(name)},
                        hovertemplate=f"{_plain(name)}<br>%{{x}}: %{{y:.3f}}<extra></extra>")
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 30, "b": 10}, yaxis_title="L2 norm",
                      xaxis={"type": "category", "tickangle": -45},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    return fig


def token_vectors_figure(vectors: Mapping[str, Sequence[float]], title: str = "") -> go.Figure:
    """One token's vectors over the hidden dimensions: one row per component, shared x axis.

    Args:
        vectors: ``{name: (H,) array}`` (e.g. token, position, segment, sum, output).
        title: panel title (escaped).
    Raises:
        ValueError: no vectors or vectors of different lengths.
    """
    if not vectors:
        raise ValueError("no vectors to show")
    arrays = {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in vectors.items()}
    sizes = {a.size for a in arrays.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"every vector must have the same non-zero length, got {sorted(sizes)}")
    fig = make_subplots(rows=len(arrays), cols=1, shared_xaxes=True, vertical_spacing=0.03,
                        subplot_titles=[_plain(k) for k in arrays])
    for i, (name, a) in enumerate(arrays.items()):
        fig.add_bar(x=np.arange(a.size), y=a, marker_color=COLOURS.get(name, "#3b75af"), showlegend=False,
                    hovertemplate=f"{_plain(name)} dim %{{x}}: %{{y:.4f}}<extra></extra>", row=i + 1, col=1)
    fig.update_xaxes(title_text="dim", row=len(arrays), col=1)
    fig.update_layout(height=110 * len(arrays) + 60, margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      title={"text": _plain(title), "font": {"size": 14}}, bargap=0)
    return fig
