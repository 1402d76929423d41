"""What-if figures: two inputs A and B of one model, token by token (the numbers come from
:mod:`bertcore.analysis.representations.whatif`). The per-head Jensen-Shannon heatmap is
:func:`explorer.figures.attention.stat_heatmap`; the top-k bars of A and B are
:func:`explorer.figures.masking.topk_figure`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .attention import COLORSCALE, _check_tokens, _square, token_axis
from .tokens import _plain

MAX_LABELS = 40
UP, DOWN = "#2e7d32", "#c62828"  # more probable in B / less probable in B


def _layer_names(n: int) -> list[str]:
    return ["emb"] + [f"L{i}" for i in range(1, n)]


def cosine_by_layer(cosine, labels: Sequence[str], replaced: Sequence[bool] | None = None,
                    max_labels: int = MAX_LABELS) -> go.Figure:
    """Cosine similarity of each aligned token's hidden state in A and B, at every layer.

    Rows: the embedding output then layers 1..L (top to bottom); columns: the aligned tokens. White is 1
    (unchanged); the darker, the more the token's vector moved. A second panel gives each layer's mean over the
    tokens that are the same in A and B (how far the edit spreads to its context).

    Args:
        cosine: ``(L+1, n)`` in [-1, 1].
        labels: n token labels (``"keys→key"`` for a replaced pair).
        replaced: n flags, True for a replaced pair (left out of the mean); None: none replaced.
    Raises:
        ValueError: not 2-D, no layer, label or flag count != n.
    """
    cosine = np.asarray(cosine, dtype=np.float64)
    if cosine.ndim != 2 or cosine.shape[0] == 0:
        raise ValueError(f"cosine must have shape (layers + 1, aligned tokens), got {cosine.shape}")
    n_rows, n = cosine.shape
    labels = _check_tokens(labels, n)
    same = np.ones(n, bool) if replaced is None else ~np.asarray(replaced, bool)
    if same.shape != (n,):
        raise ValueError(f"got {same.size} replaced flags for {n} aligned tokens")
    names = _layer_names(n_rows)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.78, 0.22], horizontal_spacing=0.06,
                        subplot_titles=["each aligned token", "mean of the unchanged tokens"])
    zmin = min(0.0, float(cosine.min())) if n else 0.0
    hover = np.array([[f"{names[r]} · {labels[c]}" for c in range(n)] for r in range(n_rows)], dtype=object)
    fig.add_trace(go.Heatmap(z=cosine, x=np.arange(n), y=names, zmin=zmin, zmax=1.0, colorscale=COLORSCALE,
                             reversescale=True, customdata=hover, colorbar={"title": {"text": "cosine"}},
                             hovertemplate="%{customdata}<br>cosine %{z:.4f}<extra></extra>"), row=1, col=1)
    mean = cosine[:, same].mean(1) if same.any() else np.full(n_rows, np.nan)
    fig.add_trace(go.Scatter(x=mean, y=names, mode="lines+markers", showlegend=False,
                             hovertemplate="%{y}: mean cosine %{x:.4f}<extra></extra>"), row=1, col=2)
    bottom = token_axis(fig, labels, max_labels, "x", angle=-60, title=False, row=1, col=1)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[min(zmin, float(np.nanmin(mean)) if same.any() else 0.0) - 0.02, 1.02], row=1, col=2)
    fig.update_layout(height=140 + 28 * n_rows + bottom, margin={"l": 50, "r": 10, "t": 40, "b": bottom})
    return fig


def mask_delta(candidates: Sequence[str], p_a, p_b, title: str = "") -> go.Figure:
    """Δ probability ``p_B - p_A`` of each candidate word at one [MASK] (green: more probable in B, red: less),
    largest change first; hover gives both probabilities.

    Args:
        candidates: m words; p_a / p_b: ``(m,)`` probabilities in [0, 1].
    Raises:
        ValueError: lengths differ, no candidate, or probabilities outside [0, 1].
    """
    p_a, p_b = np.asarray(p_a, dtype=np.float64), np.asarray(p_b, dtype=np.float64)
    m = len(candidates)
    if m == 0 or p_a.shape != (m,) or p_b.shape != (m,):
        raise ValueError(f"need one probability in A and in B per candidate, got {m} candidates, "
                         f"{p_a.shape} and {p_b.shape}")
    if ((p_a < 0) | (p_a > 1 + 1e-6) | (p_b < 0) | (p_b > 1 + 1e-6)).any():
        raise ValueError("probabilities must lie in [0, 1]")
    delta = p_b - p_a
    order = np.argsort(-np.abs(delta), kind="stable")
    words = [_plain(candidates[i], 20) for i in order]
    fig = go.Figure(go.Bar(
        x=delta[order], y=words, orientation="h", marker_color=[UP if d > 0 else DOWN for d in delta[order]],
        customdata=np.stack([p_a[order], p_b[order]], axis=1), text=[f"{d:+.1%}" for d in delta[order]],
        textposition="auto",
        hovertemplate="%{y}<br>A %{customdata[0]:.2%} → B %{customdata[1]:.2%}<br>Δ %{x:+.2%}<extra></extra>"))
    reach = max(float(np.abs(delta).max()), 1e-6) * 1.15
    fig.update_xaxes(range=[-reach, reach], tickformat="+.0%" if reach > 0.05 else "+.2%",
                     title="p(B) − p(A)", zeroline=True, zerolinecolor="#888")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=_plain(title, 60) or None, height=90 + 26 * m,
                      margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10})
    return fig


def pair_heatmaps(attn_a, tokens_a: Sequence[str], attn_b, tokens_b: Sequence[str], title_a: str = "A",
                  title_b: str = "B", max_labels: int = 32) -> go.Figure:
    """One head on input A and on input B, side by side with one colour scale (rows: queries, columns: keys);
    each panel has its own tokens.

    Raises:
        ValueError: not ``(T, T)`` each, or a label count that does not match its map.
    """
    attn_a, attn_b = _square(attn_a, 2, "pair_heatmaps"), _square(attn_b, 2, "pair_heatmaps")
    labels_a, labels_b = _check_tokens(tokens_a, attn_a.shape[0]), _check_tokens(tokens_b, attn_b.shape[0])
    fig = make_subplots(rows=1, cols=2, subplot_titles=[_plain(title_a, 50), _plain(title_b, 50)],
                        horizontal_spacing=0.12)
    zmax = max(float(attn_a.max()), float(attn_b.max()), 1e-6)
    bottoms, lefts = [], []
    for col, attn, labels in ((1, attn_a, labels_a), (2, attn_b, labels_b)):
        t = attn.shape[0]
        fig.add_trace(go.Heatmap(z=attn, x=np.arange(t), y=np.arange(t), coloraxis="coloraxis",
                                 hovertemplate="query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>"),
                      row=1, col=col)
        bottoms.append(token_axis(fig, labels, max(max_labels // 2, 1), "x", angle=-60, title=False, row=1, col=col))
        lefts.append(token_axis(fig, labels, max_labels, "y", title=False, row=1, col=col))
    fig.update_yaxes(autorange="reversed")
    t = max(attn_a.shape[0], attn_b.shape[0])
    size = min(640, 220 + 12 * min(t, max_labels))
    fig.update_layout(coloraxis={"colorscale": COLORSCALE, "cmin": 0, "cmax": zmax,
                                 "colorbar": {"title": {"text": "weight"}}},
                      height=size + max(bottoms) + 50, margin={"l": lefts[0], "r": 10, "t": 50, "b": max(bottoms)})
    return fig
