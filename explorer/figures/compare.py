"""Figures comparing two models: CKA and mean Jensen-Shannon distance by layer, a layer x layer
CKA heatmap, and one head of both models side by side. (The per-head JS heatmap is
:func:`explorer.figures.attention.stat_heatmap`.)"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .attention import COLORSCALE, _check_tokens, _square, token_axis
from .tokens import _plain


def by_layer(cka, js_per_layer=None) -> go.Figure:
    """Linear CKA of the same layer index (0 = embeddings) and, when given, the mean
    Jensen-Shannon distance of the layer's heads, on one [0, 1] axis.

    Args:
        cka: ``(L+1,)`` CKA values in [0, 1] (1 = same representation up to rotation and scale).
        js_per_layer: ``(L,)`` mean JS distance of layers 1..L (0 = identical attention), or None.
    Raises:
        ValueError: ``cka`` not 1-D and non-empty, or ``js_per_layer`` not of length ``len(cka) - 1``.
    """
    cka = np.asarray(cka, dtype=np.float64)
    if cka.ndim != 1 or cka.size == 0:
        raise ValueError(f"CKA by layer must have shape (layers + 1,), got {cka.shape}")
    layers = np.arange(cka.size)
    fig = go.Figure(go.Scatter(x=layers, y=cka, mode="lines+markers", name="CKA of hidden states (1 = same)",
                               hovertemplate="layer %{x}<br>CKA %{y:.3f}<extra></extra>"))
    if js_per_layer is not None:
        js = np.asarray(js_per_layer, dtype=np.float64)
        if js.shape != (cka.size - 1,):
            raise ValueError(f"JS by layer must have shape ({cka.size - 1},) for layers 1..{cka.size - 1}, "
                             f"got {js.shape}")
        fig.add_trace(go.Scatter(x=layers[1:], y=js, mode="lines+markers",
                                 name="mean JS distance of the heads (0 = same)",
                                 line={"dash": "dot", "color": "#d62728"},
                                 hovertemplate="layer %{x}<br>JS %{y:.3f}<extra></extra>"))
    fig.update_xaxes(tickvals=layers, ticktext=["emb"] + [str(i) for i in layers[1:]], title="layer")
    fig.update_yaxes(range=[0, 1.02], title="similarity / distance")
    fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "y": 1.12, "x": 0})
    return fig


def cka_heatmap(matrix, name_a: str = "model A", name_b: str = "model B") -> go.Figure:
    """Layer x layer linear CKA: row i = layer i of model A, column j = layer j of model B (0 = embeddings).

    Raises:
        ValueError: not 2-D or empty.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"a CKA matrix must have shape (layers of A, layers of B), got {matrix.shape}")
    la, lb = matrix.shape

    def names(n):
        return ["emb"] + [str(i) for i in range(1, n)]

    fig = go.Figure(go.Heatmap(
        z=matrix, x=names(lb), y=names(la), zmin=0, zmax=1, colorscale="Viridis",
        texttemplate="%{z:.2f}" if matrix.size <= 625 else None, colorbar={"title": {"text": "CKA"}},
        hovertemplate="A layer %{y}, B layer %{x}<br>CKA %{z:.3f}<extra></extra>",
    ))
    fig.update_xaxes(title=f"layer of B: {_plain(name_b)}", type="category")
    fig.update_yaxes(title=f"layer of A: {_plain(name_a)}", type="category", autorange="reversed")
    fig.update_layout(height=min(760, 160 + 40 * la), margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig


def side_by_side(attn_a, attn_b, tokens: Sequence[str], title_a: str = "model A", title_b: str = "model B",
                 max_labels: int = 32) -> go.Figure:
    """One head of two models on the same tokens, two heatmaps sharing one colour scale
    (rows: queries, columns: keys, as :func:`explorer.figures.attention.attention_heatmap`).

    Raises:
        ValueError: not ``(T, T)`` each, different shapes, or label count != T.
    """
    attn_a = _square(attn_a, 2, "side_by_side")
    attn_b = _square(attn_b, 2, "side_by_side")
    if attn_a.shape != attn_b.shape:
        raise ValueError(f"the two maps must cover the same tokens, got {attn_a.shape} and {attn_b.shape}")
    t = attn_a.shape[0]
    labels = _check_tokens(tokens, t)
    fig = make_subplots(rows=1, cols=2, subplot_titles=[_plain(title_a), _plain(title_b)], horizontal_spacing=0.08)
    zmax = max(float(attn_a.max()), float(attn_b.max()), 1e-6)
    for col, attn in ((1, attn_a), (2, attn_b)):
        fig.add_trace(go.Heatmap(z=attn, x=np.arange(t), y=np.arange(t), coloraxis="coloraxis",
                                 hovertemplate="query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>"),
                      row=1, col=col)
    # two panels share the width: half as many labels across as down
    bottom = max(token_axis(fig, labels, max(max_labels // 2, 1), "x", angle=-60, row=1, col=col) for col in (1, 2))
    left = token_axis(fig, labels, max_labels, "y", row=1, col=1)
    fig.update_yaxes(showticklabels=False, automargin=False, row=1, col=2)  # the same tokens as on the left
    fig.update_xaxes(title="key (attended to)")  # below: the panel titles are above
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title="query (attending)", col=1)
    size = min(640, 220 + 12 * min(t, max_labels))
    fig.update_layout(coloraxis={"colorscale": COLORSCALE, "cmin": 0, "cmax": zmax,
                                 "colorbar": {"title": {"text": "weight"}}},
                      height=size + bottom + 50, margin={"l": left, "r": 10, "t": 50, "b": bottom})
    return fig
