"""Figures of contextual word vectors: a cosine similarity matrix, similarity across layers
against a random-pair baseline, and a 2-D PCA scatter."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import _plain

SENSE_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def _short(text: str, n: int = 48) -> str:
    text = " ".join(str(text).split())
    return _plain(text if len(text) <= n else text[: n - 1] + "…")


def cosine_heatmap(sim, labels: Sequence[str], title: str = "", baseline: float | None = None) -> go.Figure:
    """A symmetric ``(N, N)`` cosine similarity matrix with its values written in the cells.

    The colour scale runs from ``baseline`` (e.g. the mean cosine of random word pairs; default:
    the lowest value shown, at most 0) to 1, so colour shows how far above chance a pair is.

    Args:
        sim: ``(N, N)`` similarities in [-1, 1]; ``labels``: N row / column labels.
        baseline: the value that gets the lightest colour (values below it share that colour).
    Raises:
        ValueError: not square, or ``len(labels) != N``.
    """
    sim = np.asarray(sim, dtype=np.float32)
    if sim.ndim != 2 or sim.shape[0] != sim.shape[1] or sim.shape[0] == 0:
        raise ValueError(f"a similarity matrix must have shape (N, N) with N >= 1, got {sim.shape}")
    n = sim.shape[0]
    if len(labels) != n:
        raise ValueError(f"got {len(labels)} labels for a {n} x {n} matrix; pass one label per occurrence")
    names = [f"{i + 1}. {_short(lab, 28)}" for i, lab in enumerate(labels)]
    if baseline is not None and np.isfinite(baseline):
        low = float(min(baseline, 0.99))
    else:
        low = float(min(0.0, np.nanmin(sim)))
    fig = go.Figure(go.Heatmap(
        z=sim, x=list(range(n)), y=list(range(n)), colorscale="Viridis", zmin=low, zmax=1,
        texttemplate="%{z:.2f}" if n <= 30 else None, colorbar={"title": {"text": "cosine"}},
        hovertemplate="%{y} vs %{x}<br>cosine %{z:.3f}<extra></extra>",
    ))
    fig.update_xaxes(tickvals=list(range(n)), ticktext=[str(i + 1) for i in range(n)], side="top")
    fig.update_yaxes(tickvals=list(range(n)), ticktext=names, autorange="reversed")
    fig.update_layout(title=title or None, height=min(900, 160 + 40 * n), margin={"l": 10, "r": 10, "t": 80, "b": 10})
    return fig


def similarity_by_layer(same, different, baseline_mean=None, baseline_std=None,
                        layer_names: Sequence[str] | None = None) -> go.Figure:
    """Mean cosine of same-sense and different-sense pairs at each layer, with the random-pair
    baseline as a band (mean +- std).

    Args:
        same, different: ``(L+1,)`` (NaN where no pair exists: the line is left out).
        baseline_mean, baseline_std: optional ``(L+1,)``.
        layer_names: L+1 x-axis labels (default ``emb, 1, 2, ...``).
    Raises:
        ValueError: the arrays' lengths differ.
    """
    same = np.asarray(same, dtype=np.float32)
    different = np.asarray(different, dtype=np.float32)
    n = same.shape[0] if same.ndim == 1 else -1
    arrays = {"same": same, "different": different}
    if baseline_mean is not None:
        arrays["baseline_mean"] = np.asarray(baseline_mean, dtype=np.float32)
        arrays["baseline_std"] = (np.zeros(n, np.float32) if baseline_std is None
                                  else np.asarray(baseline_std, dtype=np.float32))
    for name, arr in arrays.items():
        if arr.ndim != 1 or arr.shape[0] != n or n == 0:
            raise ValueError(f"{name} must be a 1-D array with one value per layer ({n}), got shape {arr.shape}")
    names = list(layer_names) if layer_names is not None else ["emb"] + [str(i) for i in range(1, n)]
    if len(names) != n:
        raise ValueError(f"got {len(names)} layer names for {n} layers")
    x = list(range(n))
    fig = go.Figure()
    if baseline_mean is not None and not np.all(np.isnan(arrays["baseline_mean"])):
        mean, std = arrays["baseline_mean"], arrays["baseline_std"]
        fig.add_trace(go.Scatter(x=x + x[::-1], y=list(mean + std) + list((mean - std)[::-1]),
                                 fill="toself", mode="lines",
                                 fillcolor="rgba(150,150,150,0.25)", line={"width": 0}, hoverinfo="skip",
                                 name="random word pairs (± std)"))
        fig.add_trace(go.Scatter(x=x, y=mean, mode="lines", line={"color": "#777777", "dash": "dash"},
                                 name="random word pairs (mean)"))
    for name, arr, colour in (("same sense", same, "#2ca02c"), ("different sense", different, "#d62728")):
        if not np.all(np.isnan(arr)):
            fig.add_trace(go.Scatter(x=x, y=arr, mode="lines+markers", name=name, line={"color": colour, "width": 3}))
    fig.update_xaxes(tickvals=x, ticktext=names, title="layer")
    fig.update_yaxes(title="mean cosine similarity")
    fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    return fig


def pca_scatter(points, labels: Sequence[str], senses: Sequence[str] | None = None,
                explained: Sequence[float] | None = None, title: str = "") -> go.Figure:
    """Occurrences projected on 2 principal components, coloured by sense, numbered as in the matrix.

    Args:
        points: ``(N, 2)``; ``labels``: N hover texts (the sentences); ``senses``: N sense labels
            (empty: "unlabelled"); ``explained``: variance ratio of the 2 components.
    Raises:
        ValueError: ``points`` is not ``(N, 2)`` or the label counts differ.
    """
    points = np.asarray(points, dtype=np.float32)
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] == 0:
        raise ValueError(f"points must have shape (N, 2) with N >= 1, got {points.shape}")
    n = points.shape[0]
    senses = list(senses) if senses is not None else [""] * n
    if len(labels) != n or len(senses) != n:
        raise ValueError(f"got {len(labels)} labels and {len(senses)} senses for {n} points; pass one each")
    fig = go.Figure()
    order = list(dict.fromkeys(s or "unlabelled" for s in senses))
    for k, sense in enumerate(order):
        idx = [i for i in range(n) if (senses[i] or "unlabelled") == sense]
        fig.add_trace(go.Scatter(
            x=points[idx, 0], y=points[idx, 1], mode="markers+text", name=_short(sense, 30),
            text=[str(i + 1) for i in idx], textposition="top center",
            customdata=[_short(labels[i], 80) for i in idx], hovertemplate="%{customdata}<extra></extra>",
            marker={"size": 13, "color": SENSE_COLORS[k % len(SENSE_COLORS)], "line": {"width": 1, "color": "white"}},
        ))
    if explained is not None and len(explained) == 2:
        fig.update_xaxes(title=f"PC 1 ({100 * float(explained[0]):.0f}% of variance)")
        fig.update_yaxes(title=f"PC 2 ({100 * float(explained[1]):.0f}% of variance)")
    fig.update_layout(title=title or None, height=420, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    return fig
