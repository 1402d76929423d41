"""Figures of syntax heads (Clark et al. 2019, section 4.2): relations x heads, and one sentence's arcs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import _plain


def relation_head_heatmap(relations: Sequence[str], grids: Sequence[np.ndarray], counts: Sequence[int]) -> go.Figure:
    """Rows: relations; columns: every head as "layer-head" (from 1); value: the head's accuracy on the relation
    (the better of its two directions).

    Args:
        grids: one ``(L, H)`` array per relation.
    Raises:
        ValueError: lists of different lengths or grids of different shapes.
    """
    if len(relations) != len(grids) or len(relations) != len(counts):
        raise ValueError("one grid and one count per relation")
    if not grids:
        raise ValueError("no relation to draw")
    shape = np.asarray(grids[0]).shape
    if any(np.asarray(g).shape != shape for g in grids):
        raise ValueError("every grid must be (layers, heads) alike")
    z = np.stack([np.asarray(g, dtype=float).reshape(-1) for g in grids])
    cols = [f"{layer + 1}-{head + 1}" for layer in range(shape[0]) for head in range(shape[1])]
    rows = [f"{r} ({n})" for r, n in zip(relations, counts)]
    fig = go.Figure(go.Heatmap(z=z, x=cols, y=rows, colorscale="Viridis", zmin=0, zmax=1,
                               colorbar={"title": {"text": "accuracy"}, "tickformat": ".0%"},
                               hovertemplate="%{y}, head %{x}: %{z:.1%}<extra></extra>"))
    fig.update_layout(title="Which head follows which relation (layer-head; arcs per relation in brackets)",
                      xaxis={"title": "head (layer-head)", "type": "category", "tickangle": -90,
                             "tickfont": {"size": 9}},
                      yaxis={"autorange": "reversed", "type": "category"}, height=max(320, 22 * len(rows) + 160),
                      margin={"l": 120, "r": 20, "t": 50, "b": 80})
    return fig


def arc_figure(words: Sequence[str], gold: Sequence[tuple[int, int, str]], predicted: Sequence[tuple[int, int]],
               title: str = "") -> go.Figure:
    """A sentence on a line with dependency arcs above it (gold, grey, labelled) and the head's predictions
    below it (green where they hit the gold arc, red where not).

    Args:
        words: the words in order.
        gold: ``(dependent, head, label)`` arcs to draw above.
        predicted: ``(from word, to word)`` arcs to draw below.
    Raises:
        ValueError: an index outside the sentence.
    """
    n = len(words)
    for a, b, *_ in [*gold, *predicted]:
        if not (0 <= a < n and 0 <= b < n):
            raise ValueError(f"arc ({a}, {b}) outside a sentence of {n} words")
    gold_pairs = {(d, h) for d, h, _ in gold}
    fig = go.Figure()

    def arcs(pairs: list[tuple[int, int, str, str]], up: bool, color: str) -> None:
        """All ``(from, to, hover, label)`` arcs of one colour as one line trace (None between arcs), their
        arrowheads as one marker trace and their labels (where given) as one text trace: few traces, not one per
        arc."""
        if not pairs:
            return
        xs, ys, hover, tips, mids = [], [], [], [], []
        for a, b, text, label in pairs:
            height = 0.3 + 0.12 * abs(b - a)
            xs += [*np.linspace(a, b, 24), None]
            ys += [*(height * np.sin(np.linspace(0, np.pi, 24)) * (1 if up else -1)), None]
            hover += [_plain(text)] * 24 + [""]
            tips.append(b)
            if label:
                mids.append(((a + b) / 2, height + 0.08, label))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": color, "width": 2}, showlegend=False,
                                 hoverinfo="text", text=hover))
        fig.add_trace(go.Scatter(x=tips, y=[0.08 if up else -0.08] * len(tips), mode="markers", showlegend=False,
                                 marker={"symbol": "triangle-down" if up else "triangle-up", "size": 9,
                                         "color": color}, hoverinfo="skip"))
        if mids:
            fig.add_trace(go.Scatter(x=[m[0] for m in mids], y=[m[1] for m in mids], mode="text",
                                     text=[_plain(m[2]) for m in mids], textfont={"size": 10, "color": color},
                                     showlegend=False, hoverinfo="skip"))

    arcs([(d, h, f"{words[d]} → {words[h]} ({label})", label) for d, h, label in gold], True, "#888888")
    for hit, color in ((True, "#2ca02c"), (False, "#d62728")):
        arcs([(a, b, f"head attends {words[a]} → {words[b]}" + (" (the gold arc)" if hit else " (not the gold arc)"),
               "") for a, b in predicted if ((a, b) in gold_pairs or (b, a) in gold_pairs) == hit], False, color)
    fig.add_trace(go.Scatter(x=list(range(n)), y=[0] * n, mode="text", text=[_plain(w) for w in words],
                             textfont={"size": 13}, showlegend=False, hoverinfo="skip"))
    fig.update_layout(title=title, height=320, xaxis={"visible": False, "range": [-0.8, n - 0.2]},
                      yaxis={"visible": False}, margin={"l": 10, "r": 10, "t": 50, "b": 10}, plot_bgcolor="white")
    return fig


def probe_weights_figure(weights: np.ndarray) -> go.Figure:
    """The attention-only probe's weights (Clark et al. 2019, section 5) as two layers x heads heatmaps: ``w`` (the
    word's attention to a candidate head) and ``u`` (the candidate's attention to the word); red raises a
    candidate's score, blue lowers it.

    Args:
        weights: ``(2, L, H)`` (:attr:`bertcore.analysis.representations.syntax_probe.AttentionProbe.weights`).
    Raises:
        ValueError: another shape.
    """
    from plotly.subplots import make_subplots

    w = np.asarray(weights, dtype=float)
    if w.ndim != 3 or w.shape[0] != 2:
        raise ValueError(f"weights must be (2, layers, heads); got {w.shape}")
    top = float(np.abs(w).max()) or 1.0
    titles = ("w: the word attends to the candidate", "u: the candidate attends to the word")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    for i in range(2):
        fig.add_trace(go.Heatmap(z=w[i], x=list(range(1, w.shape[2] + 1)), y=list(range(1, w.shape[1] + 1)),
                                 colorscale="RdBu", reversescale=True, zmin=-top, zmax=top, showscale=i == 1,
                                 colorbar={"title": {"text": "weight"}},
                                 hovertemplate="layer %{y}, head %{x}: %{z:.2f}<extra></extra>"), row=1, col=i + 1)
    fig.update_xaxes(title="head", dtick=1)
    fig.update_yaxes(title="layer", dtick=1, autorange="reversed")
    fig.update_layout(title="Which heads the attention-only probe relies on", height=340,
                      margin={"l": 50, "r": 20, "t": 80, "b": 50})
    return fig


def probe_figure(results: dict) -> go.Figure:
    """Probe accuracy by layer (0 = embeddings) for each task, beside its control task and majority baseline,
    with the expected layer marked (``results``: task name ->
    :class:`bertcore.analysis.representations.probes.ProbeResult`)."""
    from plotly.subplots import make_subplots

    if not results:
        raise ValueError("no probe result to draw")
    names = {"pos": "Part of speech", "dep": "Dependency label"}
    fig = make_subplots(rows=1, cols=len(results), subplot_titles=[names.get(t, t) for t in results],
                        horizontal_spacing=0.08)
    for i, (task, r) in enumerate(results.items(), start=1):
        layers = list(range(len(r.accuracy)))
        fig.add_trace(go.Scatter(x=layers, y=r.accuracy, mode="lines+markers", name="probe", legendgroup="probe",
                                 showlegend=i == 1, line={"color": "#1f77b4"}), row=1, col=i)
        fig.add_trace(go.Scatter(x=layers, y=r.control, mode="lines+markers", name="control task (word types)",
                                 legendgroup="control", showlegend=i == 1, line={"color": "#ff7f0e", "dash": "dot"}),
                      row=1, col=i)
        fig.add_trace(go.Scatter(x=[layers[0], layers[-1]], y=[r.majority] * 2, mode="lines", name="majority class",
                                 legendgroup="majority", showlegend=i == 1, line={"color": "#7f7f7f", "dash": "dash"}),
                      row=1, col=i)
        if r.expected_layer == r.expected_layer:
            fig.add_vline(x=r.expected_layer, line={"color": "#2ca02c", "dash": "dashdot"}, row=1, col=i,
                          annotation_text=f"expected layer {r.expected_layer:.2f}", annotation_position="top left")
    fig.update_xaxes(title="layer (0 = embeddings)", dtick=1)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    fig.update_layout(title="Probing classifiers: what a linear read-out of each layer recovers (test sentences)",
                      height=380, legend={"orientation": "h", "y": -0.25}, margin={"l": 50, "r": 20, "t": 70, "b": 80})
    return fig
