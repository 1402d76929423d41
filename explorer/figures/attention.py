"""Attention figures: one head's heatmap, all heads of a layer, a layers x heads thumbnail
mosaic, a head view (lines from one token to the tokens it attends to) and per-head statistics.

Long inputs stay light: grids average blocks of tokens (at most ``max_cells`` per side), the
head view draws only the ``top_k`` strongest edges, and per-cell hover text is only built for
short inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .tokens import _plain

COLORSCALE = "Blues"
HOVER_TEXT_MAX = 96  # above this many tokens, heatmap cells get no per-cell token text


def _square(attn, ndim: int, what: str) -> np.ndarray:
    attn = np.asarray(attn, dtype=np.float32)
    if attn.ndim != ndim or attn.shape[-1] != attn.shape[-2] or attn.shape[-1] == 0:
        want = {2: "(T, T) for one head", 3: "(heads, T, T) for one layer", 4: "(layers, heads, T, T)"}[ndim]
        raise ValueError(f"{what}: attention must have shape {want} with T >= 1, got {attn.shape}")
    return attn


def _check_tokens(tokens: Sequence[str], t: int) -> list[str]:
    if len(tokens) != t:
        raise ValueError(f"got {len(tokens)} token labels for attention over {t} tokens; pass one label per token")
    return [_plain(str(tok)) for tok in tokens]


def _block_average(matrix: np.ndarray, max_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Shrink ``(..., T, T)`` to at most ``max_size`` blocks per side: queries (rows) of a block
    are averaged, keys (columns) of a block summed, so each row still sums to 1 (the share of
    attention an average query of the block gives to each block of keys). Returns the
    matrix and each block's first position."""
    t = matrix.shape[-1]
    if t <= max_size:
        return matrix, np.arange(t)
    edges = np.linspace(0, t, max_size + 1).round().astype(int)
    starts = edges[:-1]
    both = np.add.reduceat(np.add.reduceat(matrix, starts, axis=-2), starts, axis=-1)
    sizes = np.diff(edges).astype(np.float32)
    return both / sizes[:, None], starts


TICK_CHARS = 14  # a tick label longer than this is cut with "…" (hover shows the whole token)
CHAR_PX = 7.5  # width of one tick-label character at Plotly's default 12 px font
TITLE_PX = 24  # room for an axis title beside its tick labels


def _ticks(labels: list[str], max_labels: int) -> tuple[list[int], list[str]]:
    step = max(1, math.ceil(len(labels) / max_labels))
    vals = list(range(0, len(labels), step))
    text = [f"{labels[i]}" if step == 1 else f"{i}:{labels[i]}" for i in vals]
    return vals, [t if len(t) <= TICK_CHARS else t[: TICK_CHARS - 1] + "…" for t in text]


def token_axis(fig: go.Figure, labels: list[str], max_labels: int, axis: str = "x", angle: int = 0,
               values: Sequence | None = None, title: bool = True, **where) -> int:
    """Put token labels on one axis (at most ``max_labels``, every k-th token beyond, each cut to
    ``TICK_CHARS``) with Plotly's automargin off, and return the margin in px they need.

    Plotly's automargin lays the figure out again for each label that overflows: a 128-token
    heatmap with 64 labels per axis took about 3x longer to draw with it (measured in Chromium).
    The caller adds the returned margin to the layout (``t``/``b`` for x, ``l`` for y).

    Args:
        axis: "x" or "y"; ``angle``: tick angle in degrees (x only).
        values: the axis coordinates of the T tokens when they are not 0..T-1 (e.g. category names).
        title: leave room for an axis title.
        where: ``row``/``col`` of a subplot.
    """
    vals, text = _ticks(labels, max_labels)
    coords = [values[i] for i in vals] if values is not None else vals
    width = max((len(t) for t in text), default=0) * CHAR_PX
    if axis == "x":
        need = width * abs(math.sin(math.radians(angle))) + 16 * abs(math.cos(math.radians(angle))) + 6
        fig.update_xaxes(tickvals=coords, ticktext=text, tickangle=angle, automargin=False, **where)
    else:
        need = width + 8
        fig.update_yaxes(tickvals=coords, ticktext=text, automargin=False, **where)
    return int(need + (TITLE_PX if title else 0))


def attention_heatmap(attn, tokens: Sequence[str], title: str = "", segment_break: int | None = None,
                      max_labels: int = 40) -> go.Figure:
    """One head: rows are queries (the token that looks), columns keys (the token looked at).

    Args:
        attn: ``(T, T)`` probabilities, rows sum to 1 (or less when tokens are hidden).
        tokens: T labels.
        segment_break: position of the first token of sentence B; draws a separating line.
        max_labels: at most this many tick labels per axis (every k-th token beyond).
    Raises:
        ValueError: not a square 2-D array, or label count != T.
    """
    attn = _square(attn, 2, "attention_heatmap")
    t = attn.shape[0]
    labels = _check_tokens(tokens, t)
    hover = None
    if t <= HOVER_TEXT_MAX:
        hover = np.array([[f"{labels[i]} → {labels[j]}" for j in range(t)] for i in range(t)], dtype=object)
    fig = go.Figure(go.Heatmap(
        z=attn, x=np.arange(t), y=np.arange(t), colorscale=COLORSCALE, zmin=0, zmax=max(float(attn.max()), 1e-6),
        customdata=hover, colorbar={"title": {"text": "weight"}},
        hovertemplate=("%{customdata}<br>" if hover is not None else "query %{y} → key %{x}<br>")
        + "weight %{z:.3f}<extra></extra>",
    ))
    top = token_axis(fig, labels, max_labels, "x", angle=-60)
    left = token_axis(fig, labels, max_labels, "y")
    fig.update_xaxes(title="key (attended to)", side="top")
    fig.update_yaxes(autorange="reversed", title="query (attending)")
    if segment_break is not None and 0 < segment_break < t:
        for kw in ({"x0": segment_break - 0.5, "x1": segment_break - 0.5, "y0": -0.5, "y1": t - 0.5},
                   {"y0": segment_break - 0.5, "y1": segment_break - 0.5, "x0": -0.5, "x1": t - 0.5}):
            fig.add_shape(type="line", line={"color": "#e6550d", "width": 1.5, "dash": "dot"}, **kw)
    size = min(720, 240 + 14 * min(t, max_labels))
    fig.update_layout(title=title or None, height=size + top,
                      margin={"l": left, "r": 10, "t": top + (30 if title else 0), "b": 10})
    return fig


def layer_grid(attn, tokens: Sequence[str], layer: int, cols: int = 4, max_cells: int = 40) -> go.Figure:
    """Every head of one layer, small multiples sharing one colour scale.

    Args:
        attn: ``(heads, T, T)``; ``tokens``: T labels; ``layer``: its 0-based block (the title says "Layer
            ``layer + 1``").
        max_cells: longer inputs are averaged in blocks of tokens down to this many per side.
    Raises:
        ValueError: bad shape or label count; ``cols < 1``.
    """
    attn = _square(attn, 3, "layer_grid")
    heads, t = attn.shape[0], attn.shape[-1]
    labels = _check_tokens(tokens, t)
    if cols < 1:
        raise ValueError(f"cols must be >= 1, got {cols}")
    small, starts = _block_average(attn, max_cells)
    n = small.shape[-1]
    cols = min(cols, heads)
    rows = math.ceil(heads / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {h + 1}" for h in range(heads)],
                        horizontal_spacing=0.02, vertical_spacing=0.06)
    # token text on hover only at full resolution; blocks are named by their first position
    hover = np.array([[f"{labels[i]} → {labels[j]}" for j in range(n)] for i in range(n)], dtype=object) \
        if n == t else None
    zmax = max(float(small.max()), 1e-6)
    for h in range(heads):
        r, c = divmod(h, cols)
        fig.add_trace(go.Heatmap(z=small[h], x=starts, y=starts, coloraxis="coloraxis", customdata=hover,
                                 hovertemplate=f"head {h + 1}<br>" + ("%{customdata}" if hover is not None
                                                                      else "tokens from %{y} → tokens from %{x}")
                                 + "<br>weight %{z:.3f}<extra></extra>"), row=r + 1, col=c + 1)
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    note = "" if n == t else f" (blocks of ~{t / n:.1f} tokens: queries averaged, keys summed)"
    fig.update_layout(coloraxis={"colorscale": COLORSCALE, "cmin": 0, "cmax": zmax}, height=60 + 210 * rows,
                      title=f"Layer {layer + 1}: every head{note}", margin={"l": 10, "r": 10, "t": 70, "b": 10})
    return fig


def thumbnails(attn, max_cells: int = 16) -> go.Figure:
    """All layers x heads as one mosaic of small attention maps (rows: layers, columns: heads).

    Each map is averaged in blocks down to at most ``max_cells`` per side, and every map is
    scaled to its own maximum so weak and strong heads both show their pattern.

    Raises:
        ValueError: not ``(layers, heads, T, T)``.
    """
    attn = _square(attn, 4, "thumbnails")
    n_layers, heads = attn.shape[:2]
    small, _ = _block_average(attn, max_cells)  # (L, heads, n, n)
    n = small.shape[-1]
    peak = small.max(axis=(-1, -2), keepdims=True)
    small = np.divide(small, peak, out=np.zeros_like(small), where=peak > 0)
    gap = 1
    tile = n + gap
    mosaic = np.full((n_layers * tile - gap, heads * tile - gap), np.nan, dtype=np.float32)
    who = np.zeros(mosaic.shape + (2,), dtype=np.int8)  # (layer, head) of each cell, 1-based
    for layer in range(n_layers):
        for h in range(heads):
            r0, c0 = layer * tile, h * tile
            mosaic[r0:r0 + n, c0:c0 + n] = small[layer, h]
            who[r0:r0 + n, c0:c0 + n] = (layer + 1, h + 1)
    fig = go.Figure(go.Heatmap(z=mosaic, colorscale=COLORSCALE, zmin=0, zmax=1, customdata=who, showscale=False,
                               hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<extra></extra>",
                               hoverongaps=False))
    fig.update_xaxes(tickvals=[h * tile + (n - 1) / 2 for h in range(heads)],
                     ticktext=[f"H{h + 1}" for h in range(heads)], side="top", showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=[layer * tile + (n - 1) / 2 for layer in range(n_layers)],
                     ticktext=[f"L{layer + 1}" for layer in range(n_layers)], autorange="reversed",
                     showgrid=False, zeroline=False, scaleanchor="x")
    fig.update_layout(height=min(1400, 80 + 46 * n_layers * max(1, 12 // max(heads, 1))), plot_bgcolor="white",
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def head_view(attn, tokens: Sequence[str], query: int, top_k: int = 15, min_weight: float = 0.0,
              segment_ids: Sequence[int] | None = None, max_labels: int = 80) -> go.Figure:
    """Lines from one query token (left column) to the tokens it attends to (right column).

    Line width and opacity grow with the weight; only the ``top_k`` strongest keys (and only
    those with weight >= ``min_weight``) get a line, so 512 tokens stay light. With more than
    ``max_labels`` tokens, only the query and the linked keys are listed (in reading order,
    labelled with their positions).

    Args:
        attn: ``(T, T)`` one head; ``tokens``: T labels; ``query``: position in [0, T).
        segment_ids: optional T segment ids: sentence B labels are drawn in green.
    Raises:
        ValueError: bad shape, label count, query out of range, ``top_k < 1``.
    """
    attn = _square(attn, 2, "head_view")
    t = attn.shape[0]
    labels = _check_tokens(tokens, t)
    if not 0 <= query < t:
        raise ValueError(f"query must be a token position in [0, {t}), got {query}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if segment_ids is not None and len(segment_ids) != t:
        raise ValueError(f"got {len(segment_ids)} segment ids for {t} tokens")
    row = attn[query]
    order = np.argsort(-row, kind="stable")[:top_k]
    keys = sorted(int(k) for k in order if row[k] >= min_weight and row[k] > 0)
    peak = float(row[keys].max()) if keys else 1.0
    colours = ["#31a354" if segment_ids is not None and segment_ids[i] == 1 else "#222222" for i in range(t)]
    compact = t > max_labels
    if compact:
        # long input: list only the query (left) and its linked keys (right), evenly spaced in reading order
        right = keys
        slot = {k: n for n, k in enumerate(right)}
        left, left_y = [query], [(len(right) - 1) / 2 if right else 0]
        right_y = [slot[k] for k in right]
        name = lambda i: f"{i}: {labels[i]}"  # noqa: E731
        rows_shown = max(len(right), 1)
    else:
        left, left_y = list(range(t)), list(range(t))
        right, right_y = list(range(t)), list(range(t))
        slot = {k: k for k in range(t)}
        name = lambda i: labels[i]  # noqa: E731
        rows_shown = t
    query_y = left_y[left.index(query)]
    fig = go.Figure()
    for k in keys:
        w = float(row[k])
        fig.add_trace(go.Scatter(
            x=[0, 1], y=[query_y, slot[k]], mode="lines", showlegend=False, hoverinfo="text",
            text=f"{labels[query]} → {labels[k]} (position {k}): {w:.3f}",
            line={"width": 1 + 9 * w / peak, "color": f"rgba(33, 113, 181, {0.25 + 0.75 * w / peak:.3f})"},
        ))
    is_query = [i == query for i in left]
    fig.add_trace(go.Scatter(
        x=[0] * len(left), y=left_y, mode="markers+text", text=[name(i) for i in left], textposition="middle left",
        marker={"size": [11 if q else 6 for q in is_query],
                "color": ["#e6550d" if q else colours[i] for i, q in zip(left, is_query)]},
        textfont={"color": ["#e6550d" if q else colours[i] for i, q in zip(left, is_query)], "size": 12},
        hoverinfo="skip", showlegend=False,
    ))
    linked = set(keys)
    fig.add_trace(go.Scatter(
        x=[1] * len(right), y=right_y, mode="markers+text", textposition="middle right",
        text=[name(i) + (f" ({row[i]:.2f})" if i in linked else "") for i in right],
        marker={"size": 6, "color": [colours[i] for i in right]},
        textfont={"color": [colours[i] for i in right], "size": 12}, hoverinfo="skip", showlegend=False,
    ))
    fig.update_xaxes(range=[-0.8, 1.8], visible=False)
    fig.update_yaxes(range=[rows_shown - 0.5, -0.5], visible=False)
    height = min(1400, max(320, 22 * rows_shown + 60))
    note = f" (the {len(keys)} strongest of {t} tokens)" if compact else ""
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10}, plot_bgcolor="white",
                      title=f"{labels[query]} (position {query}) attends to ...{note}")
    return fig


def stat_heatmap(values, title: str, zmin: float | None = None, zmax: float | None = None, fmt: str = ".2f",
                 colorscale: str = "Viridis") -> go.Figure:
    """A ``(layers, heads)`` statistic as a heatmap with the value written in each cell.

    Raises:
        ValueError: not 2-D or empty.
    """
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != 2 or values.size == 0:
        raise ValueError(f"a per-head statistic must have shape (layers, heads), got {values.shape}")
    n_layers, heads = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, x=[f"H{h + 1}" for h in range(heads)], y=[f"L{layer + 1}" for layer in range(n_layers)],
        colorscale=colorscale, zmin=zmin, zmax=zmax, texttemplate="%{z:" + fmt + "}" if values.size <= 400 else None,
        hovertemplate="layer %{y}, head %{x}<br>" + title + " %{z:" + fmt + "}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=title, height=120 + 34 * n_layers, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig
