"""Figures of where attention comes from: raw vs rollout vs flow per layer (Abnar & Zuidema 2020)
and bertviz's neuron view (query, keys, q * k, scores, probabilities of one head; Vig 2019).

Pure functions: arrays and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .attention import COLORSCALE, HOVER_TEXT_MAX, _check_tokens, token_axis


def contributions_figure(maps: Mapping[str, np.ndarray | None], tokens: Sequence[str], query_label: str,
                         max_labels: int = 16) -> go.Figure:
    """Side-by-side heatmaps, one per method: row = layer (1 at the bottom), column = input token,
    colour = that token's share of the chosen token at that layer.

    Args:
        maps: method title -> ``(L, T)`` array (rows sum to 1), or None for a method not computed
            (drawn as an empty panel titled "not offered").
        tokens: T input token labels.
        query_label: the chosen token, for the title.
        max_labels: tick labels per panel (every k-th token beyond; hover shows each token).
    Raises:
        ValueError: no map, maps of different shapes, or label count != T.
    """
    given = {name: np.asarray(m, dtype=np.float64) for name, m in maps.items() if m is not None}
    if not given:
        raise ValueError("contributions_figure needs at least one (layers, tokens) map")
    shapes = {m.shape for m in given.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"every map must have the same shape (layers, tokens); got {sorted(shapes)}")
    num_layers, t = next(iter(shapes))
    labels = _check_tokens(tokens, t)
    titles = [name if maps[name] is not None else f"{name} (not offered)" for name in maps]
    fig = make_subplots(rows=1, cols=len(maps), subplot_titles=titles, shared_yaxes=True, horizontal_spacing=0.03)
    zmax = max(float(m.max()) for m in given.values())
    layers = [f"layer {i}" for i in range(1, num_layers + 1)]
    for col, name in enumerate(maps, start=1):
        z = given.get(name)
        if z is None:
            fig.add_trace(go.Heatmap(z=np.full((num_layers, t), np.nan), x=np.arange(t), y=layers,
                                     showscale=False, hoverinfo="skip"), row=1, col=col)
        else:
            fig.add_trace(go.Heatmap(
                z=z, x=np.arange(t), y=layers, colorscale=COLORSCALE, zmin=0, zmax=max(zmax, 1e-6),
                showscale=col == 1, colorbar={"title": {"text": "share"}},
                customdata=np.array([labels] * num_layers, dtype=object) if t <= HOVER_TEXT_MAX else None,
                hovertemplate=(f"{name}<br>%{{y}}<br>" + ("%{customdata}" if t <= HOVER_TEXT_MAX else "token %{x}")
                               + " → " + query_label + ": %{z:.3f}<extra></extra>")), row=1, col=col)
        bottom = token_axis(fig, labels, max_labels, "x", angle=-60, title=False, row=1, col=col)
    fig.update_yaxes(automargin=False)
    fig.update_layout(height=180 + bottom + 28 * num_layers, margin={"l": 70, "r": 10, "t": 60, "b": bottom},
                      title={"text": f"What reaches “{query_label}” at each layer"})
    return fig


def neuron_figure(query_vector, key_vectors, product, scores, probs, tokens: Sequence[str], query_label: str,
                  max_dims: int = 64, max_labels: int = 48) -> go.Figure:
    """bertviz's neuron view as five aligned panels: q (one row), k of every token, q * k elementwise,
    the scores ``q . k / sqrt(d)`` and the softmax probabilities (one row per key token).

    Args:
        query_vector: ``(d,)``; key_vectors, product: ``(T, d)``; scores, probs: ``(T,)``.
        tokens: T key labels; query_label: the query token, for the titles.
        max_dims: show at most this many of the d dimensions (all when d is smaller).
        max_labels: token labels on the y axis (every k-th token beyond; hover shows each token).
    Raises:
        ValueError: shapes that do not agree.
    """
    q = np.asarray(query_vector, dtype=np.float64)
    k = np.asarray(key_vectors, dtype=np.float64)
    qk = np.asarray(product, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    if q.ndim != 1 or k.shape != (len(s), q.size) or qk.shape != k.shape or p.shape != s.shape:
        raise ValueError(f"neuron_figure: query (d,), keys and product (T, d), scores and probs (T,); got "
                         f"{q.shape}, {k.shape}, {qk.shape}, {s.shape}, {p.shape}")
    labels = _check_tokens(tokens, len(s))
    d = min(q.size, max_dims)
    rows = [f"{i}: {tok}" for i, tok in enumerate(labels)]
    fig = make_subplots(rows=2, cols=4, row_heights=[0.08, 0.92], column_widths=[0.38, 0.38, 0.12, 0.12],
                        vertical_spacing=0.04, horizontal_spacing=0.02, shared_yaxes=False,
                        subplot_titles=[f"query q ({query_label})", "", "", "",
                                        "keys k", "q × k (elementwise)", "q·k/√d", "softmax"])

    def lim(m):
        return max(float(np.abs(m).max()), 1e-6)

    fig.add_trace(go.Heatmap(z=q[None, :d], colorscale="RdBu_r", zmid=0, zmin=-lim(q), zmax=lim(q), showscale=False,
                             hovertemplate="dim %{x}: %{z:.3f}<extra>q</extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(z=k[:, :d], y=rows, colorscale="RdBu_r", zmid=0, zmin=-lim(k), zmax=lim(k),
                             showscale=False,
                             hovertemplate="%{y}<br>dim %{x}: %{z:.3f}<extra>k</extra>"), row=2, col=1)
    fig.add_trace(go.Heatmap(z=qk[:, :d], y=rows, colorscale="RdBu_r", zmid=0, zmin=-lim(qk), zmax=lim(qk),
                             showscale=False, hovertemplate="%{y}<br>dim %{x}: %{z:.3f}<extra>q×k</extra>"),
                  row=2, col=2)
    fig.add_trace(go.Heatmap(z=s[:, None], y=rows, colorscale="RdBu_r", zmid=0, zmin=-lim(s), zmax=lim(s),
                             showscale=False, text=np.round(s[:, None], 2),
                             texttemplate="%{text}" if len(s) <= 48 else None,
                             hovertemplate="%{y}: %{z:.3f}<extra>score</extra>"), row=2, col=3)
    fig.add_trace(go.Heatmap(z=p[:, None], y=rows, colorscale=COLORSCALE, zmin=0, zmax=max(float(p.max()), 1e-6),
                             showscale=False, text=np.round(p[:, None], 2),
                             texttemplate="%{text}" if len(s) <= 48 else None,
                             hovertemplate="%{y}: %{z:.3f}<extra>probability</extra>"), row=2, col=4)
    for col in (1, 2, 3, 4):
        fig.update_yaxes(autorange="reversed", row=2, col=col, showticklabels=col == 1, automargin=False)
        fig.update_xaxes(showticklabels=col <= 2, row=2, col=col, automargin=False)
    left = token_axis(fig, labels, max_labels, "y", values=rows, title=False, row=2, col=1)
    fig.update_yaxes(showticklabels=False, automargin=False, row=1, col=1)
    fig.update_layout(height=min(1400, 220 + 18 * len(s)), margin={"l": left, "r": 10, "t": 50, "b": 30})
    return fig
