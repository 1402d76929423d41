"""Head-ablation figures: which heads are off, how far each layer's hidden states moved, and the
before / after of the model's predictions (fill-mask, P(IsNext), class probabilities).

Pure functions: arrays and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

BEFORE, AFTER = "#1f77b4", "#d62728"


def head_mask_figure(mask) -> go.Figure:
    """The head mask as a layers x heads grid: dark = switched off.

    Args:
        mask: ``(L, heads)`` with 1 keep / 0 off.
    Raises:
        ValueError: not 2-D.
    """
    m = np.asarray(mask, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"head_mask_figure: mask must have shape (layers, heads); got {m.shape}")
    num_layers, num_heads = m.shape
    fig = go.Figure(go.Heatmap(
        z=1 - m, x=[str(h) for h in range(1, num_heads + 1)], y=[str(lv) for lv in range(1, num_layers + 1)],
        colorscale=[[0, "#eef3fb"], [1, "#b2182b"]], zmin=0, zmax=1, showscale=False, xgap=2, ygap=2,
        hovertemplate="layer %{y}, head %{x}<extra></extra>"))
    fig.update_layout(height=90 + 26 * num_layers, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      title={"text": f"Heads switched off: {int((m == 0).sum())} of {m.size}"},
                      xaxis={"title": {"text": "head"}, "dtick": 1}, yaxis={"title": {"text": "layer"}, "dtick": 1})
    return fig


def movement_figure(per_layer, layer_names: Sequence[str], cls: float, mean_pooled: float,
                    pooled: float | None = None) -> go.Figure:
    """Cosine between unablated and ablated hidden states per layer (1 = unchanged), and of the
    sentence embeddings.

    Args:
        per_layer: ``(L+1,)`` mean cosine over tokens; layer_names: L+1 labels.
    Raises:
        ValueError: lengths that differ.
    """
    y = np.asarray(per_layer, dtype=np.float64)
    if y.ndim != 1 or len(layer_names) != y.size:
        raise ValueError(f"movement_figure: {y.size} values for {len(layer_names)} layer names")
    fig = make_subplots(rows=1, cols=2, column_widths=[0.68, 0.32], horizontal_spacing=0.12,
                        subplot_titles=["hidden states, mean over tokens", "sentence embedding"])
    fig.add_trace(go.Scatter(x=list(layer_names), y=y, mode="lines+markers", line={"color": AFTER},
                             hovertemplate="%{x}: cosine %{y:.4f}<extra></extra>", showlegend=False), row=1, col=1)
    names = ["[CLS]", "mean-pooled"] + (["pooler"] if pooled is not None else [])
    values = [cls, mean_pooled] + ([pooled] if pooled is not None else [])
    fig.add_trace(go.Bar(x=names, y=values, marker_color=AFTER, text=[f"{v:.3f}" for v in values],
                         textposition="outside", showlegend=False,
                         hovertemplate="%{x}: cosine %{y:.4f}<extra></extra>"), row=1, col=2)
    low = min(float(np.min(y)), *values)
    fig.update_yaxes(range=[min(low - 0.02, 0.9), 1.01], title_text="cosine to unablated", row=1, col=1)
    fig.update_yaxes(range=[min(low - 0.02, 0.9), 1.05], row=1, col=2)
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig


def before_after_bars(labels: Sequence[str], before: Sequence[float], after: Sequence[float], title: str,
                      xaxis_title: str = "probability") -> go.Figure:
    """Grouped horizontal bars: the same labels before (blue) and after (red) the ablation.

    Raises:
        ValueError: lengths that differ.
    """
    if not (len(labels) == len(before) == len(after)):
        raise ValueError(f"before_after_bars: {len(labels)} labels, {len(before)} before, {len(after)} after values")
    fig = go.Figure()
    for name, values, colour in (("before", before, BEFORE), ("after", after, AFTER)):
        fig.add_trace(go.Bar(y=list(labels), x=list(values), name=name, orientation="h", marker_color=colour,
                             hovertemplate="%{y}: %{x:.3f}<extra>" + name + "</extra>"))
    fig.update_layout(barmode="group", height=120 + 36 * len(labels), title={"text": title},
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, xaxis_title=xaxis_title,
                      yaxis={"autorange": "reversed"},
                      legend={"orientation": "h", "y": 1.08, "x": 1, "xanchor": "right"})
    return fig
