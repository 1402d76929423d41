"""Figures of the Features page (sparse autoencoder features): pure Plotly, arrays in, ``go.Figure`` out."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def token_strip(tokens: list[str], z: np.ndarray, features: list[int]) -> go.Figure:
    """Heat map of ``z (T, d_sae)`` restricted to ``features`` (rows) over the tokens (columns).

    Raises:
        ValueError: ``z`` does not have one row per token.
    """
    z = np.asarray(z)
    if z.ndim != 2 or z.shape[0] != len(tokens):
        raise ValueError(f"need activations (T, d_sae) for T = {len(tokens)} tokens; got {z.shape}")
    rows = [f"#{f}" for f in features]
    values = z[:, features].T if features else np.zeros((0, len(tokens)))
    columns = [f"{i}:{t}" for i, t in enumerate(tokens)]
    fig = go.Figure(go.Heatmap(z=values, x=columns, y=rows, colorscale="Blues", zmin=0,
                               colorbar={"title": "activation"},
                               hovertemplate="feature %{y}<br>token %{x}<br>activation %{z:.2f}<extra></extra>"))
    fig.update_layout(height=120 + 22 * max(1, len(rows)), margin={"l": 60, "r": 20, "t": 30, "b": 60},
                      xaxis={"tickangle": -45, "type": "category"}, yaxis={"type": "category", "autorange": "reversed"},
                      title="The strongest features on each token")
    return fig


def histogram(edges: np.ndarray, counts: np.ndarray, feature: int) -> go.Figure:
    """Bar chart of one feature's activation counts in log-spaced bins (``edges (B+1,)``, ``counts (B,)``)."""
    edges, counts = np.asarray(edges), np.asarray(counts)
    if edges.shape[0] != counts.shape[0] + 1:
        raise ValueError(f"need B + 1 edges for B counts; got {edges.shape[0]} and {counts.shape[0]}")
    keep = np.nonzero(counts)[0]
    lo, hi = (keep.min(), keep.max() + 1) if keep.size else (0, len(counts))
    centres = np.sqrt(edges[:-1] * edges[1:])[lo:hi]
    fig = go.Figure(go.Bar(x=centres, y=counts[lo:hi], marker_color="#4c78a8",
                           hovertemplate="activation ~%{x:.2f}<br>%{y} tokens<extra></extra>"))
    fig.update_layout(height=260, margin={"l": 50, "r": 20, "t": 40, "b": 40}, xaxis={"type": "log",
                      "title": "activation (log scale)"}, yaxis={"title": "tokens"},
                      title=f"Feature #{feature}: how strongly it fires when it fires (held-out text)")
    return fig


def logit_bars(promoted: list[tuple[str, float]], suppressed: list[tuple[str, float]], feature: int) -> go.Figure:
    """Horizontal bars: the WordPieces a feature's direction promotes (positive Δ logit) and suppresses."""
    items = list(reversed(suppressed)) + list(reversed(promoted))
    labels = [t for t, _ in items]
    values = [v for _, v in items]
    colors = ["#e45756" if v < 0 else "#54a24b" for v in values]
    fig = go.Figure(go.Bar(x=values, y=[f"{i}. {t}" for i, t in enumerate(labels)], orientation="h",
                           marker_color=colors, hovertemplate="%{y}: Δ logit %{x:.2f}<extra></extra>"))
    fig.update_layout(height=80 + 20 * len(items), margin={"l": 110, "r": 20, "t": 40, "b": 40},
                      xaxis={"title": "Δ logit"}, title=f"Feature #{feature} through the MLM head")
    return fig


def purity_bars(numbers: dict[str, dict]) -> go.Figure:
    """The share of label-pure directions for the SAE's features, random directions and neurons (``numbers``:
    :func:`bertcore.sae.features.purity` per scale): all pure ones, and those with varied words when measured."""
    names = {"sae": "SAE features", "random": "random directions", "neurons": "neurons"}
    keys = [k for k in names if k in numbers]
    measures = [("share", "label-pure", "#4c78a8"), ("pure_varied_share", "label-pure, varied words", "#f58518")]
    fig = go.Figure()
    for key, label, color in measures:
        if all(key in numbers[k] for k in keys):
            fig.add_bar(x=[names[k] for k in keys], y=[100 * numbers[k][key] for k in keys], name=label,
                        text=[f"{100 * numbers[k][key]:.1f}%" for k in keys], textposition="outside",
                        marker_color=color)
    fig.update_layout(height=300, margin={"l": 50, "r": 20, "t": 40, "b": 40}, barmode="group",
                      yaxis={"title": "% of alive directions", "range": [0, 100]},
                      legend={"orientation": "h", "y": -0.2},
                      title="Top 20 tokens sharing one spaCy label (>= 80%)")
    return fig


CURVES = {"fvu": "unexplained variance (FVU)", "l0": "active features per token (L0)", "dead": "dead features (share)"}


def sae_curves(metrics: list[dict], layers: list[int]) -> go.Figure:
    """An SAE run's FVU, L0 and dead share against training tokens, per layer; training (lines) and held-out
    (dotted, markers) records of ``metrics.jsonl``. ``layers``: the 0-based blocks the run's SAEs read; the records'
    keys and the legend name each by its label, block + 1 (``L2/fvu``, "layer 2" for block 1)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3, subplot_titles=list(CURVES.values()))
    for col, name in enumerate(CURVES, start=1):
        for split, dash in (("train", None), ("val", "dot")):
            for layer in layers:
                key = f"L{layer + 1}/{name}"  # bertcore.sae.io.label: block + 1
                rows = [r for r in metrics if r.get("split") == split and key in r]
                if not rows:
                    continue
                label = f"layer {layer + 1}, {'held-out' if dash else 'training'}"
                fig.add_trace(go.Scatter(x=[r["tokens"] for r in rows], y=[r[key] for r in rows],
                                         mode="lines+markers" if dash else "lines", line={"dash": dash}, name=label,
                                         showlegend=col == 1), row=1, col=col)
    fig.update_xaxes(title_text="training tokens")
    fig.update_layout(height=330, margin={"l": 40, "r": 20, "t": 40, "b": 40})
    return fig
