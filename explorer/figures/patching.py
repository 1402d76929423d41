"""Figures of activation patching (:mod:`bertcore.analysis.causal.patching`): the restored share of the clean metric
per site, 0 = the corrupted run, 1 = the clean run."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import _plain

TITLES = {"resid": "Residual stream (hidden state after the layer)",
          "attn": "Attention output (before the residual add)",
          "mlp": "Feed-forward output (before the residual add)", "head": "Each head's output (all positions)"}


def effect_heatmap(effect, kind: str, tokens: Sequence[str] | None = None) -> go.Figure:
    """One kind of site: rows = layers (resid: embeddings, layer 1..L), columns = positions (labelled with the
    clean and corrupted tokens) or heads.

    Args:
        effect: ``(layers, T)`` or, for ``head``, ``(L, heads)`` normalised effects.
        tokens: T column labels (positions) for every kind but ``head``.
    Raises:
        ValueError: a shape that does not fit the labels.
    """
    z = np.asarray(effect, dtype=float)
    if z.ndim != 2:
        raise ValueError(f"effect must be 2-D; got {z.shape}")
    if kind == "head":
        cols = [f"head {h + 1}" for h in range(z.shape[1])]
        rows = [f"layer {i}" for i in range(1, z.shape[0] + 1)]
    else:
        if tokens is None or len(tokens) != z.shape[1]:
            raise ValueError(f"{z.shape[1]} positions need as many token labels")
        cols = [f"{i}: {_plain(t)}" for i, t in enumerate(tokens)]
        first = 0 if kind == "resid" else 1
        rows = ["embeddings" if i == 0 else f"layer {i}" for i in range(first, first + z.shape[0])]
    top = max(1.0, float(np.nanmax(np.abs(z)))) if z.size else 1.0
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=rows, colorscale="RdBu", zmid=0, zmin=-top, zmax=top,
                               text=np.round(z, 2), texttemplate="%{text}" if z.size <= 400 else None,
                               colorbar={"title": {"text": "restored"}},
                               hovertemplate="%{y}, %{x}: %{z:.3f} of the clean metric<extra></extra>"))
    fig.update_layout(title=TITLES.get(kind, kind), height=max(260, 34 * len(rows) + 140),
                      xaxis={"type": "category", "tickangle": -45}, yaxis={"type": "category"},
                      margin={"l": 90, "r": 20, "t": 50, "b": 90})
    return fig
