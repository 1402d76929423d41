"""Figures of the logit lens (:mod:`bertcore.analysis.representations.logit_lens`): the top token of every layer at
every
position, and how the final guess at chosen positions rises through the layers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import _plain


def _layer_names(n_rows: int) -> list[str]:
    return ["embeddings"] + [f"layer {i}" for i in range(1, n_rows)]


def lens_grid(tokens: Sequence[str], top_tokens: Sequence[Sequence[Sequence[str]]], top_probs,
              final_rank, title: str = "", positions: Sequence[int] | None = None) -> go.Figure:
    """Layers (rows, embeddings at the bottom) x positions (columns): each cell shows the layer's top-1 token,
    coloured by its probability, in bold where it is already the final guess; hover: the top-k with
    probabilities and the rank of the final guess.

    Args:
        tokens: the T input tokens (column labels).
        top_tokens: ``[L+1][T][k]`` strings, from ``LogitLens.top_ids``.
        top_probs: ``(L+1, T, k)`` probabilities.
        final_rank: ``(L+1, T)`` rank of the last layer's guess at each layer (0 = top-1).
        positions: the columns to draw, in order (None: all T); labels keep each position's index.
    Raises:
        ValueError: shapes that disagree, a position outside 0..T-1, or no position.
    """
    probs = np.asarray(top_probs, dtype=float)
    rank = np.asarray(final_rank)
    if probs.ndim != 3 or probs.shape[1] != len(tokens) or rank.shape != probs.shape[:2]:
        raise ValueError(f"top_probs must be (L+1, T={len(tokens)}, k) and final_rank (L+1, T); got "
                         f"{probs.shape} and {rank.shape}")
    n_rows = probs.shape[0]
    keep = list(range(len(tokens))) if positions is None else [int(c) for c in positions]
    if not keep or any(not 0 <= c < len(tokens) for c in keep):
        raise ValueError(f"positions must be a non-empty list within 0..{len(tokens) - 1}; got {positions}")
    layers = _layer_names(n_rows)
    cols = [f"{i}: {_plain(tokens[i])}" for i in keep]
    short = 9 if len(keep) > 12 else 14  # cells narrow as the input grows: the hover has the whole token
    text = [[(f"<b>{_plain(top_tokens[r][c][0], short)}</b>" if rank[r, c] == 0
              else _plain(top_tokens[r][c][0], short)) for c in keep] for r in range(n_rows)]
    hover = [[("<br>".join(f"{_plain(w)}: {p:.1%}" for w, p in zip(top_tokens[r][c], probs[r, c]))
               + f"<br>final guess: rank {int(rank[r, c]) + 1}") for c in keep] for r in range(n_rows)]
    fig = go.Figure(go.Heatmap(
        z=probs[:, keep, 0], x=cols, y=layers, text=text, texttemplate="%{text}", textfont={"size": 12},
        customdata=hover, hovertemplate="%{y}, %{x}<br>%{customdata}<extra></extra>", colorscale="Blues", zmin=0,
        zmax=1, xgap=1, ygap=1, colorbar={"title": {"text": "p(top-1)"}, "tickformat": ".0%"}))
    fig.update_layout(title=title or "Logit lens: each layer's best guess at each position",
                      height=max(320, 44 * n_rows + 150), xaxis={"tickangle": -45, "type": "category"},
                      yaxis={"type": "category"}, margin={"l": 90, "r": 20, "t": 50, "b": 90})
    return fig


def final_guess_by_layer(labels: Sequence[str], final_prob, final_rank) -> go.Figure:
    """One line per chosen position: probability of the final guess at each layer (hover: its rank).

    Args:
        labels: one label per line (e.g. "pos 6: [MASK] -> are").
        final_prob / final_rank: ``(L+1, N)`` for the N chosen positions.
    Raises:
        ValueError: shapes that disagree.
    """
    p = np.asarray(final_prob, dtype=float)
    r = np.asarray(final_rank)
    if p.ndim != 2 or p.shape[1] != len(labels) or r.shape != p.shape:
        raise ValueError(f"final_prob and final_rank must be (L+1, N={len(labels)}); got {p.shape} and {r.shape}")
    layers = _layer_names(p.shape[0])
    fig = go.Figure()
    for j, label in enumerate(labels):
        fig.add_trace(go.Scatter(x=layers, y=p[:, j], mode="lines+markers", name=label, customdata=r[:, j] + 1,
                                 hovertemplate="%{x}: p = %{y:.1%}, rank %{customdata}<extra>" + label + "</extra>"))
    fig.update_layout(title="When does the final guess become readable?", yaxis={"title": "probability",
                      "tickformat": ".0%", "range": [0, 1.02]}, xaxis={"title": "decoded after", "type": "category"},
                      height=340, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def kl_by_layer(kl_logit, kl_tuned) -> go.Figure:
    """Mean KL(final || layer) on held-out positions, logit lens vs tuned lens, by layer (``(L+1,)`` each)."""
    a, b = np.asarray(kl_logit, dtype=float), np.asarray(kl_tuned, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"kl_logit and kl_tuned must be (L+1,) alike; got {a.shape} and {b.shape}")
    layers = _layer_names(a.size)
    fig = go.Figure([go.Bar(x=layers, y=a, name="logit lens", marker_color="#9db4c0"),
                     go.Bar(x=layers, y=b, name="tuned lens", marker_color="#1f77b4")])
    fig.update_layout(title="How far each layer's decoding is from the final prediction (held-out text)",
                      yaxis={"title": "KL(final ‖ layer), nats"}, barmode="group", height=320,
                      xaxis={"type": "category"}, margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig
