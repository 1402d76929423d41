"""The embedding projector's scatter: many points in WebGL (``go.Scattergl``), one animation frame per
layer with a slider and a play button, coloured by a category (the most common ones, the rest grey) or a number.
Pure Plotly: arrays in, ``go.Figure`` out."""

from __future__ import annotations

from collections import Counter

import numpy as np
import plotly.graph_objects as go

MAX_CATEGORIES = 12
OTHER = "other"
OTHER_COLOUR = "rgba(150,150,150,0.35)"
HOVER_CHARS = 70


def _palette(n: int) -> list[str]:
    import plotly.express as px

    base = px.colors.qualitative.D3 + px.colors.qualitative.Set2
    return [base[i % len(base)] for i in range(n)]


def hover_texts(tokens: list[str], sentence: np.ndarray, texts: list[str], unit: str) -> list[str]:
    """One short hover line per point: its number, the token and the start of its text (``HOVER_CHARS``
    characters)."""
    out = []
    for i, (tok, s) in enumerate(zip(tokens, sentence.tolist())):
        text = texts[s]
        snippet = text if len(text) <= HOVER_CHARS else text[:HOVER_CHARS - 1] + "…"
        out.append(f"#{i} " + (snippet if unit != "token" else f"<b>{tok}</b> · {snippet}"))
    return out


def categories(values: list[str], max_categories: int = MAX_CATEGORIES) -> list[str]:
    """The ``max_categories`` most common values, most common first (ties by name)."""
    counts = Counter(values)
    return [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_categories]]


def projector_scatter(coords: np.ndarray, layers: list[int], layer: int, values: list, numeric: bool,
                      hover: list[str], colour_title: str, axis_titles: tuple[str, str] = ("x", "y"),
                      highlight: list[int] | None = None, height: int = 620) -> go.Figure:
    """The projector's figure.

    Args:
        coords: ``(F, N, 2)`` coordinates, one frame per layer of ``layers`` (F = 1: no slider).
        layer: the frame shown first (one of ``layers``).
        values: N colours (strings, or numbers when ``numeric``).
        hover: N hover lines. colour_title: the legend's or colour bar's title.
        highlight: point indices drawn as open rings (the clicked point first, then its neighbours).
    Every trace's ``customdata`` is the point's index (what a click or a selection returns).
    Raises:
        ValueError: mismatched lengths, or ``layer`` not among ``layers``.
    """
    coords = np.asarray(coords, dtype=np.float32)
    if coords.ndim != 3 or coords.shape[2] != 2 or coords.shape[0] != len(layers):
        raise ValueError(f"coords must be (len(layers), N, 2); got {coords.shape} for {len(layers)} layers")
    n = coords.shape[1]
    if len(values) != n or len(hover) != n:
        raise ValueError(f"{n} points but {len(values)} colour values and {len(hover)} hover lines")
    if layer not in layers:
        raise ValueError(f"layer {layer} not among the frames {layers}")
    start = layers.index(layer)
    hover_arr = np.asarray(hover, dtype=object)
    index = np.arange(n)
    groups: list[tuple[str, np.ndarray, dict]] = []
    if numeric:
        groups.append(("", index, {"color": np.asarray(values, np.float32), "colorscale": "Viridis",
                                   "colorbar": {"title": {"text": colour_title}, "thickness": 12}, "size": 4}))
    else:
        vals = np.asarray([str(v) for v in values], dtype=object)
        top = categories(list(vals))
        for cat, col in zip(top, _palette(len(top))):
            groups.append((cat, np.flatnonzero(vals == cat), {"color": col, "size": 4}))
        rest = np.flatnonzero(~np.isin(vals, top))
        if len(rest):
            groups.append((f"{OTHER} ({len(set(vals[rest]))} values)", rest, {"color": OTHER_COLOUR, "size": 3}))
    ring = np.asarray(highlight or [], dtype=int)

    def traces(f: int) -> list:
        out = [go.Scattergl(x=coords[f, idx, 0], y=coords[f, idx, 1]) for _, idx, _ in groups]
        out.append(go.Scattergl(x=coords[f, ring, 0], y=coords[f, ring, 1]))
        return out

    fig = go.Figure()
    for (name, idx, marker), tr in zip(groups, traces(start)):
        fig.add_trace(go.Scattergl(x=tr.x, y=tr.y, mode="markers", name=name or colour_title, marker=marker,
                                   customdata=idx, hovertext=hover_arr[idx],
                                   hovertemplate="%{hovertext}<extra></extra>",
                                   showlegend=not numeric))
    fig.add_trace(go.Scattergl(x=coords[start, ring, 0], y=coords[start, ring, 1], mode="markers", customdata=ring,
                               name="clicked point and its neighbours", hoverinfo="skip",
                               marker={"size": [14] + [9] * (len(ring) - 1) if len(ring) else 9,
                                       "color": "rgba(0,0,0,0)", "line": {"color": "black", "width": 1.5}},
                               showlegend=bool(len(ring))))
    fig.update_layout(height=height, margin={"l": 50, "r": 20, "t": 30, "b": 40}, uirevision="projector",
                      xaxis_title=axis_titles[0], yaxis_title=axis_titles[1], legend_title_text=colour_title,
                      dragmode="lasso", hovermode="closest")
    if len(layers) > 1:
        fig.frames = [go.Frame(name=str(x), data=traces(f)) for f, x in enumerate(layers)]
        step = {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}}
        fig.update_layout(
            sliders=[{"active": start, "currentvalue": {"prefix": "Layer "}, "pad": {"t": 40},
                      "steps": [{"label": str(x), "method": "animate", "args": [[str(x)], step]} for x in layers]}],
            updatemenus=[{"type": "buttons", "showactive": False, "x": 0, "y": -0.12, "xanchor": "right",
                          "buttons": [{"label": "▶ play", "method": "animate",
                                       "args": [None, {"frame": {"duration": 700, "redraw": True},
                                                       "transition": {"duration": 0}, "fromcurrent": True}]}]}])
        fig.update_layout(margin={"b": 110})
    return fig


def layer_paths(coords: np.ndarray, layers: list[int], hover: list[str], points: list[int],
                axis_titles: tuple[str, str] = ("x", "y"), height: int = 620) -> go.Figure:
    """Each point of ``points`` at every layer, coloured by layer, joined in layer order: a token's path through
    the layers in the (sign-aligned) per-layer coordinates of ``coords (F, N, 2)``.

    Raises:
        ValueError: fewer than 2 frames.
    """
    coords = np.asarray(coords, dtype=np.float32)
    if coords.shape[0] < 2:
        raise ValueError("a path needs at least two layers")
    pts = np.asarray(points, dtype=int)
    fig = go.Figure()
    xs, ys = [], []
    for p in pts:
        xs += coords[:, p, 0].tolist() + [None]
        ys += coords[:, p, 1].tolist() + [None]
    fig.add_trace(go.Scattergl(x=xs, y=ys, mode="lines", line={"color": "rgba(120,120,120,0.35)", "width": 1},
                               hoverinfo="skip", showlegend=False))
    f_idx = np.repeat(np.arange(coords.shape[0]), len(pts))
    p_idx = np.tile(pts, coords.shape[0])
    fig.add_trace(go.Scattergl(
        x=coords[f_idx, p_idx, 0], y=coords[f_idx, p_idx, 1], mode="markers", customdata=p_idx,
        hovertext=[f"layer {layers[f]} · {hover[p]}" for f, p in zip(f_idx, p_idx)],
        hovertemplate="%{hovertext}<extra></extra>", showlegend=False,
        marker={"size": 5, "color": np.asarray(layers)[f_idx], "colorscale": "Viridis",
                "colorbar": {"title": {"text": "layer"}, "thickness": 12}}))
    fig.update_layout(height=height, margin={"l": 50, "r": 20, "t": 30, "b": 40}, xaxis_title=axis_titles[0],
                      yaxis_title=axis_titles[1], hovermode="closest", dragmode="lasso")
    return fig
