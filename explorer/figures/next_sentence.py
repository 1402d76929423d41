"""Next-sentence figures: P(IsNext) as a bar against the 50% line, and where [CLS] looks in each layer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import _plain


def is_next_bar(p_is_next: float) -> go.Figure:
    """One horizontal bar split into IsNext (``p_is_next``) and NotNext, with the 50% chance line."""
    p = float(p_is_next)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p_is_next must be a probability in [0, 1], got {p}")
    fig = go.Figure()
    fig.add_bar(y=["NSP head"], x=[p], orientation="h", name="IsNext (B follows A)", marker_color="#2e7d32",
                text=[f"IsNext {p:.1%}"], textposition="inside", hovertemplate="IsNext %{x:.1%}<extra></extra>")
    fig.add_bar(y=["NSP head"], x=[1 - p], orientation="h", name="NotNext (B is random)", marker_color="#c62828",
                text=[f"NotNext {1 - p:.1%}"], textposition="inside", hovertemplate="NotNext %{x:.1%}<extra></extra>")
    fig.add_vline(x=0.5, line_dash="dash", line_color="#555", annotation_text="chance (50%)")
    fig.update_layout(barmode="stack", height=170, margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(range=[0, 1], tickformat=".0%"), legend=dict(orientation="h", y=-0.3))
    return fig


def cls_attention_figure(cls_attention, tokens: Sequence[str], token_type_ids: Sequence[int] | None = None,
                         head: int | None = None) -> go.Figure:
    """Heatmap, layers x tokens, of the attention ``[CLS]`` pays to each token.

    Args:
        cls_attention: ``(L, heads, T)`` rows of [CLS] from every layer's attention.
        head: 0-based head to show; None averages the heads.
        token_type_ids: optional segment of each token; sentence B's tokens get a "B:" label prefix.
    Raises:
        ValueError: wrong shape or a label count that does not match T.
    """
    a = np.asarray(cls_attention, dtype=np.float32)
    if a.ndim != 3 or a.shape[-1] == 0:
        raise ValueError(f"cls_attention must have shape (layers, heads, T), got {a.shape}")
    if len(tokens) != a.shape[-1]:
        raise ValueError(f"got {len(tokens)} token labels for {a.shape[-1]} positions")
    if head is not None and not 0 <= head < a.shape[1]:
        raise ValueError(f"head {head} out of range 0..{a.shape[1] - 1}")
    z = a.mean(axis=1) if head is None else a[:, head]  # (L, T)
    seg = list(token_type_ids) if token_type_ids is not None else [0] * len(tokens)
    labels = [f"{i}:{'B:' if s else ''}{_plain(t)}" for i, (t, s) in enumerate(zip(tokens, seg))]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=[f"layer {i + 1}" for i in range(z.shape[0])], colorscale="Blues",
                               zmin=0, hovertemplate="%{y}, token %{x}: %{z:.3f}<extra></extra>",
                               colorbar=dict(title="attention")))
    fig.update_layout(height=120 + 28 * z.shape[0], margin=dict(l=10, r=10, t=30, b=10),
                      title="[CLS] attention" + (" (mean over heads)" if head is None else f" (head {head + 1})"),
                      yaxis=dict(autorange="reversed"))
    return fig
