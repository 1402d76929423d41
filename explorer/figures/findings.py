"""Figures of the Findings page and of emergence during training: published analyses recomputed
(Clark et al. 2019, Kovaleva et al. 2019, Ethayarajh 2019) and their course across checkpoints.

Pure functions: numpy arrays in, ``go.Figure`` out. Layers are shown 1-based (hidden states: 0 =
the embedding output).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PATTERN_COLORS = {"vertical": "#1f77b4", "diagonal": "#ff7f0e", "vertical+diagonal": "#2ca02c",
                  "block": "#9467bd", "heterogeneous": "#7f7f7f"}
TOKEN_COLORS = {"[CLS]": "#d62728", "[SEP]": "#1f77b4", ". and ,": "#2ca02c"}


def _per_head(values, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"{what} must be a (layers, heads) array, got shape {v.shape}")
    return v


def token_attention_figure(shares: Mapping[str, np.ndarray]) -> go.Figure:
    """Clark et al. 2019, Figure 2: each head's average attention to [CLS], [SEP] and periods/commas, by layer.

    Args:
        shares: ``{label: (L, heads) array}``, e.g. ``{"[CLS]": to_cls, "[SEP]": to_sep, ". and ,": to_punct}``.
    Raises:
        ValueError: an array is not (L, heads), or the shapes differ.
    """
    if not shares:
        raise ValueError("give at least one (layers, heads) array of attention shares")
    arrays = {k: _per_head(v, f"shares[{k!r}]") for k, v in shares.items()}
    shape = next(iter(arrays.values())).shape
    if any(a.shape != shape for a in arrays.values()):
        raise ValueError("all share arrays need the same (layers, heads) shape, "
                         f"got {[a.shape for a in arrays.values()]}")
    n_layers, n_heads = shape
    layers = np.arange(1, n_layers + 1)
    fig = go.Figure()
    for i, (label, a) in enumerate(arrays.items()):
        color = TOKEN_COLORS.get(label, None)
        offset = (i - (len(arrays) - 1) / 2) * 0.12
        fig.add_trace(go.Scatter(
            x=np.repeat(layers, n_heads) + offset, y=a.ravel(), mode="markers", name=f"{label} (one dot per head)",
            marker={"size": 6, "opacity": 0.45, "color": color}, legendgroup=label, showlegend=False,
            customdata=np.stack([np.repeat(layers, n_heads), np.tile(np.arange(1, n_heads + 1), n_layers)], -1),
            hovertemplate=f"{label}<br>head %{{customdata[0]}}-%{{customdata[1]}}<br>%{{y:.3f}}<extra></extra>"))
        fig.add_trace(go.Scatter(x=layers, y=a.mean(1), mode="lines+markers", name=f"{label}: layer mean",
                                 line={"color": color, "width": 3}, legendgroup=label,
                                 hovertemplate=f"{label}<br>layer %{{x}} mean %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title="Average attention to special tokens (dots: heads; lines: layer means)",
                      xaxis={"title": "layer", "dtick": 1}, yaxis={"title": "share of attention", "range": [0, 1]},
                      height=380, margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig


def head_grid_figure(panels: Mapping[str, np.ndarray], threshold: float | None = None, zmax: float = 1.0,
                     colorbar: str = "share") -> go.Figure:
    """Side-by-side layer x head heatmaps (e.g. previous- and next-token attention), cells above
    ``threshold`` marked with their value.

    Raises:
        ValueError: an array is not (L, heads), or the shapes differ.
    """
    arrays = {k: _per_head(v, f"panels[{k!r}]") for k, v in panels.items()}
    if not arrays:
        raise ValueError("give at least one (layers, heads) array")
    shape = next(iter(arrays.values())).shape
    if any(a.shape != shape for a in arrays.values()):
        raise ValueError("all panels need the same (layers, heads) shape")
    n_layers, n_heads = shape
    fig = make_subplots(rows=1, cols=len(arrays), subplot_titles=list(arrays), horizontal_spacing=0.08)
    for i, (label, a) in enumerate(arrays.items()):
        text = [[f"{v:.2f}" if threshold is not None and v > threshold else "" for v in row] for row in a]
        fig.add_trace(go.Heatmap(
            z=a, x=list(range(1, n_heads + 1)), y=list(range(1, n_layers + 1)), zmin=0, zmax=zmax,
            colorscale="Blues", text=text, texttemplate="%{text}", showscale=i == len(arrays) - 1,
            colorbar={"title": {"text": colorbar}},
            hovertemplate=f"{label}<br>head %{{y}}-%{{x}}<br>%{{z:.3f}}<extra></extra>"), row=1, col=i + 1)
        fig.update_xaxes(title_text="head", dtick=1, row=1, col=i + 1)
        fig.update_yaxes(title_text="layer" if i == 0 else None, dtick=1, autorange="reversed", row=1, col=i + 1)
    fig.update_layout(height=140 + 28 * n_layers, margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig


def entropy_figure(entropy, uniform: float | None = None) -> go.Figure:
    """Clark et al. 2019, Figure 4: each head's mean attention entropy (nats) by layer, with the
    entropy of uniform attention over the average input as a dashed line.

    Raises:
        ValueError: ``entropy`` is not (L, heads).
    """
    e = _per_head(entropy, "entropy")
    n_layers, n_heads = e.shape
    layers = np.arange(1, n_layers + 1)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=np.repeat(layers, n_heads), y=e.ravel(), mode="markers", name="one head",
                             marker={"size": 7, "opacity": 0.5},
                             hovertemplate="layer %{x}<br>%{y:.2f} nats<extra></extra>"))
    fig.add_trace(go.Scatter(x=layers, y=e.mean(1), mode="lines+markers", name="layer mean", line={"width": 3}))
    if uniform is not None and np.isfinite(uniform):
        fig.add_hline(y=uniform, line_dash="dash", annotation_text=f"uniform attention ({uniform:.2f} nats)")
    fig.update_layout(title="Attention entropy per head", xaxis={"title": "layer", "dtick": 1},
                      yaxis={"title": "entropy (nats)", "rangemode": "tozero"}, height=360,
                      margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig


def pattern_figure(shares, patterns: Sequence[str]) -> go.Figure:
    """Kovaleva et al. 2019, Figure 2 (per layer instead of per task): share of each pattern type.

    Args:
        shares: ``(L, len(patterns))`` fractions summing to 1 per layer.
    Raises:
        ValueError: wrong shape.
    """
    s = np.asarray(shares, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != len(patterns):
        raise ValueError(f"shares must be (layers, {len(patterns)}), got {s.shape}")
    layers = list(range(1, s.shape[0] + 1))
    fig = go.Figure()
    for j, name in enumerate(patterns):
        fig.add_trace(go.Bar(x=layers, y=s[:, j], name=name, marker_color=PATTERN_COLORS.get(name),
                             hovertemplate=f"{name}<br>layer %{{x}}: %{{y:.1%}}<extra></extra>"))
    fig.update_layout(barmode="stack", title="Attention pattern types per layer",
                      xaxis={"title": "layer", "dtick": 1}, yaxis={"title": "share of heads", "tickformat": ".0%"},
                      height=360, margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig


def contextuality_figure(anisotropy, self_adjusted, intra_adjusted) -> go.Figure:
    """Ethayarajh 2019, Figures 1-3: anisotropy, and self- / intra-sentence similarity adjusted for
    it, per layer (0 = the embedding output).

    Raises:
        ValueError: the three arrays are not 1-D of one length.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in (anisotropy, self_adjusted, intra_adjusted)]
    if any(a.ndim != 1 for a in arrays) or len({len(a) for a in arrays}) != 1 or len(arrays[0]) == 0:
        raise ValueError(f"give three 1-D arrays of one length (layers + 1), got {[a.shape for a in arrays]}")
    layers = list(range(len(arrays[0])))
    fig = go.Figure()
    for a, name, dash in zip(arrays, ("anisotropy: cosine of random word pairs",
                                      "self-similarity (adjusted)", "intra-sentence similarity (adjusted)"),
                             ("dot", "solid", "dash")):
        fig.add_trace(go.Scatter(x=layers, y=a, mode="lines+markers", name=name, line={"dash": dash, "width": 3},
                                 hovertemplate=f"{name}<br>layer %{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.add_hline(y=0, line_color="#999")
    fig.update_layout(title="How contextual are the word vectors?",
                      xaxis={"title": "layer (0 = embeddings)", "dtick": 1},
                      yaxis={"title": "cosine"}, height=380, margin={"l": 50, "r": 20, "t": 50, "b": 40},
                      legend={"orientation": "h", "y": -0.25})
    return fig


def emergence_figure(series: Mapping[str, tuple[Sequence[int], Sequence[float]]],
                     marks: Mapping[str, int | None] | None = None) -> go.Figure:
    """Measures across training, one small panel each on a shared step axis.

    Args:
        series: ``{title: (steps, values)}``: per checkpoint (attention measures) or per logged step
            (the loss); NaN = not measured.
        marks: ``{title: step}``: a dashed vertical line where something emerged (None: not yet).
    Raises:
        ValueError: no series, or a series whose steps and values differ in length.
    """
    if not series:
        raise ValueError("give at least one series to plot")
    for name, (steps, values) in series.items():
        if len(values) != len(steps):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(steps)} steps")
    names = list(series)
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, subplot_titles=names, vertical_spacing=0.06)
    for i, name in enumerate(names):
        steps, values = series[name]
        fig.add_trace(go.Scatter(x=list(steps), y=[float(v) for v in values], mode="lines+markers",
                                 marker={"size": 5}, name=name, showlegend=False,
                                 hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}}<extra></extra>"), row=i + 1, col=1)
        step = (marks or {}).get(name)
        if step is not None:
            fig.add_vline(x=step, line_dash="dash", line_color="#d62728", row=i + 1, col=1)
    fig.update_xaxes(title_text="step", row=len(names), col=1)
    fig.update_layout(height=120 + 150 * len(names), margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig


def position_regression_figure(predictions: Mapping[str, np.ndarray], maes: Mapping[str, float]) -> go.Figure:
    """Wang & Chen 2020: held-out predicted position vs true position, one trace per table; the
    diagonal is a perfect read-out.

    Args:
        predictions: ``{name: (P,) predicted index}``; ``maes``: ``{name: mean absolute error}``.
    Raises:
        ValueError: a prediction array is not 1-D or empty.
    """
    fig = go.Figure()
    top = 1
    for name, pred in predictions.items():
        p = np.asarray(pred, dtype=np.float64)
        if p.ndim != 1 or p.size == 0:
            raise ValueError(f"predictions[{name!r}] must be a non-empty 1-D array, got shape {p.shape}")
        top = max(top, p.size - 1)
        label = f"{name} (MAE {maes.get(name, float('nan')):.1f})"
        fig.add_trace(go.Scatter(x=np.arange(p.size), y=p, mode="markers", name=label, marker={"size": 4},
                                 hovertemplate=f"{name}<br>position %{{x}} predicted %{{y:.1f}}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="perfect",
                             line={"dash": "dash", "color": "#999"}))
    fig.update_layout(title="Linear read-out of the position (5-fold, held-out predictions)",
                      xaxis={"title": "true position"}, yaxis={"title": "predicted position"}, height=380,
                      margin={"l": 50, "r": 20, "t": 50, "b": 40})
    return fig
