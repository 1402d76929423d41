"""Figures of what flows: context-mixing maps of several methods side by side, the route graph of one
token, a prediction taken apart into one bar per input token (DecompX) beside other rankings, and the
faithfulness of each explanation.

Pure functions: arrays and labels in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .attention import COLORSCALE, HOVER_TEXT_MAX, _check_tokens, token_axis
from .tokens import _plain

POSITIVE, NEGATIVE, REST = "#3182bd", "#e6550d", "#9e9e9e"


def side_by_side(maps: Mapping[str, np.ndarray], tokens: Sequence[str], query: int | None = None,
                 title: str = "", max_labels: int = 30) -> go.Figure:
    """One heatmap per method, in one row with one shared colour scale: row = the token receiving, column = the
    token contributing, each row as a share of its total (rows normalised here, so raw norms compare).

    Args:
        maps: method title -> ``(T, T)`` array >= 0 of one layer.
        tokens: T labels.
        query: a token whose row is outlined (the selected token), or None.
        max_labels: tick labels per axis (every k-th token beyond).
    Raises:
        ValueError: no map, maps of different or non-square shapes, label count != T, a query out of range.
    """
    if not maps:
        raise ValueError("side_by_side needs at least one (T, T) map")
    given = {name: np.asarray(m, dtype=np.float64) for name, m in maps.items()}
    shapes = {m.shape for m in given.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2 or len(set(next(iter(shapes)))) != 1:
        raise ValueError(f"every map must be (T, T) of the same T; got {sorted(shapes)}")
    t = next(iter(shapes))[0]
    labels = _check_tokens(tokens, t)
    if query is not None and not 0 <= query < t:
        raise ValueError(f"query must lie in [0, {t}); got {query}")
    norm = {}
    for name, m in given.items():
        total = m.sum(-1, keepdims=True)
        norm[name] = np.divide(m, total, out=np.zeros_like(m), where=total > 0)
    zmax = max(max(float(m.max()) for m in norm.values()), 1e-6)
    fig = make_subplots(rows=1, cols=len(norm), subplot_titles=list(norm), shared_yaxes=True,
                        horizontal_spacing=0.02)
    hover = None
    if t <= HOVER_TEXT_MAX:
        hover = np.array([[f"{labels[j]} → {labels[i]}" for j in range(t)] for i in range(t)], dtype=object)
    for col, (name, z) in enumerate(norm.items(), start=1):
        fig.add_trace(go.Heatmap(
            z=z, x=np.arange(t), y=np.arange(t), colorscale=COLORSCALE, zmin=0, zmax=zmax,
            showscale=col == len(norm), colorbar={"title": {"text": "share"}}, customdata=hover,
            hovertemplate=(_plain(name) + "<br>" + ("%{customdata}" if hover is not None else "%{x} → %{y}")
                           + ": %{z:.3f} of the row<extra></extra>")), row=1, col=col)
        top = token_axis(fig, labels, max_labels, "x", angle=-60, title=False, row=1, col=col)
        if query is not None:
            fig.add_shape(type="rect", x0=-0.5, x1=t - 0.5, y0=query - 0.5, y1=query + 0.5,
                          line={"color": NEGATIVE, "width": 2}, row=1, col=col)
    left = token_axis(fig, labels, max_labels, "y", title=False, row=1, col=1)
    fig.update_yaxes(autorange="reversed")
    size = min(520, 160 + 12 * min(t, max_labels))
    fig.update_layout(height=size + top + 80, title={"text": title, "y": 0.98, "yanchor": "top"} if title else None,
                      margin={"l": left, "r": 10, "t": 80 if title else 40, "b": top})
    fig.update_annotations(font={"size": 12})
    return fig


def route_graph(nodes: Sequence[tuple[int, int]], edges: Sequence[tuple[int, int, int, float]],
                tokens: Sequence[str], num_layers: int, title: str = "") -> go.Figure:
    """The route graph of one token (:func:`bertcore.analysis.attention.flows.routes`): a node per
    ``(level, token)``, level L at the top (the chosen token's output), 0 at the bottom (the inputs); each edge
    from ``(level, i)`` down to ``(level - 1, j)``, its width the contribution. Clicking a node selects it (its
    ``customdata`` is ``[level, token]``, and so is that of the edge ends drawn over it).

    Raises:
        ValueError: a node or edge outside the tokens or levels.
    """
    labels = [_plain(str(t)) for t in tokens]
    t = len(labels)
    for level, j in nodes:
        if not (0 <= level <= num_layers and 0 <= j < t):
            raise ValueError(f"node ({level}, {j}) is outside {num_layers} layers and {t} tokens")
    fig = go.Figure()
    widest = max((w for *_, w in edges), default=1.0) or 1.0
    for level, i, j, w in edges:
        if not (1 <= level <= num_layers and 0 <= i < t and 0 <= j < t):
            raise ValueError(f"edge ({level}, {i}, {j}) is outside {num_layers} layers and {t} tokens")
        fig.add_trace(go.Scatter(x=[i, j], y=[level, level - 1], mode="lines", hoverinfo="text",
                                 customdata=[[level, i], [level - 1, j]],  # a click on an end selects that node
                                 text=f"layer {level}: {labels[j]} → {labels[i]}: {w:.0%}",
                                 line={"width": 1 + 9 * w / widest, "color": POSITIVE},
                                 opacity=0.35 + 0.6 * w / widest, showlegend=False))
    if nodes:
        xs, ys = [j for _, j in nodes], [lv for lv, _ in nodes]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers+text", text=[labels[j] for j in xs], textposition="middle right",
            customdata=[[lv, j] for lv, j in nodes], marker={"size": 11, "color": NEGATIVE},
            hovertemplate="%{text}, " + "level %{y}<extra>click: its row</extra>", showlegend=False))
    fig.update_yaxes(tickvals=list(range(num_layers + 1)),
                     ticktext=["input"] + [f"layer {lv}" for lv in range(1, num_layers + 1)],
                     range=[-0.5, num_layers + 0.5])
    fig.update_xaxes(visible=False, range=[-0.5, t + 1.5])
    fig.update_layout(height=120 + 70 * num_layers, title={"text": title} if title else None,
                      margin={"l": 70, "r": 10, "t": 50 if title else 10, "b": 10}, clickmode="event+select")
    return fig


def contribution_bars(tokens: Sequence[str], contributions, rest: float, value: float, title: str = "",
                      unit: str = "logit") -> go.Figure:
    """One horizontal bar per input token (its term of the prediction) and one for the rest term (biases); the
    bars sum to ``value``, shown in the title.

    Raises:
        ValueError: label count != number of contributions.
    """
    c = np.asarray(contributions, dtype=np.float64).reshape(-1)
    labels = [_plain(str(t)) for t in tokens]
    if len(labels) != c.size:
        raise ValueError(f"got {len(labels)} labels for {c.size} contributions")
    names = [f"{i}: {lab}" for i, lab in enumerate(labels)] + ["rest (biases)"]
    values = np.append(c, rest)
    colors = [POSITIVE if v >= 0 else NEGATIVE for v in c] + [REST]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", marker_color=colors,
                           hovertemplate="%{y}: %{x:+.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=120 + 20 * len(names),
                      title={"text": (title + "<br>" if title else "")
                             + f"<sup>bars sum to {unit} {value:.3f}</sup>"},
                      margin={"l": 10, "r": 10, "t": 70, "b": 30}, xaxis_title=f"contribution to the {unit}")
    return fig


def rankings(tokens: Sequence[str], columns: Mapping[str, np.ndarray], scaled: bool = True) -> go.Figure:
    """The same tokens ranked by several methods, one bar panel per method (each scaled to its own largest
    magnitude, sign kept; ``scaled=False``: the values themselves, e.g. shares), sharing the token axis.

    Raises:
        ValueError: no column, or a column whose length is not the number of tokens.
    """
    if not columns:
        raise ValueError("rankings needs at least one column")
    labels = [_plain(str(t)) for t in tokens]
    names = [f"{i}: {lab}" for i, lab in enumerate(labels)]
    fig = make_subplots(rows=1, cols=len(columns), subplot_titles=list(columns), shared_yaxes=True,
                        horizontal_spacing=0.03)
    for col, (name, v) in enumerate(columns.items(), start=1):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        if v.size != len(labels):
            raise ValueError(f"{name}: got {v.size} values for {len(labels)} tokens")
        scale = (float(np.abs(v).max()) or 1.0) if scaled else 1.0
        fig.add_trace(go.Bar(x=v / scale, y=names, orientation="h", customdata=v, showlegend=False,
                             marker_color=[POSITIVE if x >= 0 else NEGATIVE for x in v],
                             hovertemplate="%{y}: %{customdata:+.3f}<extra>" + _plain(name) + "</extra>"),
                      row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    if scaled:
        fig.update_xaxes(range=[-1.05, 1.05])
    fig.update_layout(height=120 + 20 * len(names), margin={"l": 10, "r": 10, "t": 50, "b": 30})
    return fig


def faithfulness_figure(methods: Sequence[str], means: np.ndarray, effects: Sequence[str],
                        published: Mapping[str, float] | None = None, n: int | None = None) -> go.Figure:
    """Mean Spearman correlation of each method's ranking with each effect of removing a token (grouped bars),
    with published figures as a separate group of grey bars.

    Args:
        methods: M labels; means ``(M, E)``; effects: E labels; published: label -> correlation; n: sentences.
    Raises:
        ValueError: ``means`` not ``(M, E)``.
    """
    m = np.asarray(means, dtype=np.float64)
    if m.shape != (len(methods), len(effects)):
        raise ValueError(f"means must have shape ({len(methods)}, {len(effects)}); got {m.shape}")
    fig = go.Figure()
    for e, effect in enumerate(effects):
        fig.add_trace(go.Bar(x=list(methods), y=m[:, e], name=f"here, vs {effect}",
                             hovertemplate="%{x}: %{y:.2f}<extra>" + _plain(effect) + "</extra>"))
    if published:
        fig.add_trace(go.Bar(x=list(published), y=list(published.values()), name="Ferrando et al. 2022 (published)",
                             marker_color=REST, hovertemplate="%{x}: %{y:.2f}<extra>published</extra>"))
    fig.update_layout(barmode="group", height=420, yaxis={"title": "Spearman correlation", "range": [-0.3, 1]},
                      title={"text": "Which explanation ranks the tokens that matter first?"
                             + (f"<br><sup>mean over {n} sentences</sup>" if n else "")},
                      legend={"orientation": "h", "y": -0.25}, margin={"l": 60, "r": 10, "t": 70, "b": 120})
    return fig
