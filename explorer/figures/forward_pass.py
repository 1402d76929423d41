"""Figures of one forward pass in real numbers: each vector or matrix a coloured strip, labelled with its shape;
hovering a cell shows its number and the formula that made it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .attention import token_axis
from .tokens import _plain

ROW_PX = 16  # height of one matrix row
STRIP_PX = 30  # height of a one-row strip
TITLE_PX = 34  # room for a panel's title
MAX_TOKEN_LABELS = 40
SATURATE = 0.98  # signed strips: the colour scale ends at this quantile of |value| (hover shows the value)
CELL_TEXT_MAX = 32  # one-row strips over at most this many tokens write each token in its cell


@dataclass
class Strip:
    """One panel: a vector ``(n,)`` or a matrix ``(r, n)`` drawn as coloured cells.

    Attributes:
        label: what it is ("q of 'cat', head 2").
        values: ``(n,)`` or ``(r, n)`` numbers.
        shape: the tensor's shape as the model holds it, e.g. ``"(T, 384)"``; shown in the title.
        formula: how it was computed, shown on hover (e.g. ``"softmax(q·k / √d)"``).
        columns: labels of the n columns when they are tokens (keys); None: dimensions 0..n-1. A one-row strip
            of at most :data:`CELL_TEXT_MAX` tokens writes them in its cells; the last panel labels its axis.
        rows: labels of the r rows of a matrix (None: 0..r-1).
        highlight: row of a matrix to outline (the followed token).
        probability: values in [0, 1] (a sequential colour scale from 0) instead of signed ones (diverging at 0).
    """

    label: str
    values: np.ndarray
    shape: str
    formula: str
    columns: Sequence[str] | None = None
    rows: Sequence[str] | None = None
    highlight: int | None = None
    probability: bool = False


def _matrix(strip: Strip) -> np.ndarray:
    z = np.asarray(strip.values, dtype=np.float64)
    if z.ndim == 1:
        z = z[None, :]
    if z.ndim != 2 or z.size == 0:
        raise ValueError(f"{strip.label}: values must be a non-empty (n,) vector or (r, n) matrix, got shape "
                         f"{np.shape(strip.values)}")
    if not np.isfinite(z).all():
        raise ValueError(f"{strip.label}: values must be finite numbers")
    if strip.columns is not None and len(strip.columns) != z.shape[1]:
        raise ValueError(f"{strip.label}: {len(strip.columns)} column labels for {z.shape[1]} columns")
    if strip.rows is not None and len(strip.rows) != z.shape[0]:
        raise ValueError(f"{strip.label}: {len(strip.rows)} row labels for {z.shape[0]} rows")
    if strip.highlight is not None and not 0 <= strip.highlight < z.shape[0]:
        raise ValueError(f"{strip.label}: highlighted row {strip.highlight} outside 0..{z.shape[0] - 1}")
    return z


def strips_figure(strips: Sequence[Strip], title: str = "") -> go.Figure:
    """Stacked panels, one per :class:`Strip`, each with its own colour range (signed values: blue < 0 < red,
    centred on 0, saturating at the :data:`SATURATE` quantile of |value| so that BERT's few outlier dimensions do
    not wash out the rest; probabilities: white 0 to dark blue at the panel's maximum).

    Hover: the row, the column (dimension or key token), the value and the strip's formula.

    Raises:
        ValueError: no strips, a strip that is not a finite vector or matrix, labels that do not fit it.
    """
    if not strips:
        raise ValueError("no strips to draw")
    mats = [_matrix(s) for s in strips]
    heights = [STRIP_PX if m.shape[0] == 1 else ROW_PX * min(m.shape[0], 40) for m in mats]
    total = sum(heights) + TITLE_PX * len(strips)
    fig = make_subplots(rows=len(strips), cols=1, row_heights=[h / sum(heights) for h in heights],
                        vertical_spacing=min(0.9 / len(strips), TITLE_PX / total),
                        subplot_titles=[f"{_plain(s.label, 90)}   <span style='color:#888'>shape "
                                        f"{_plain(s.shape)}</span>" for s in strips])
    bottom = 30
    for i, (s, z) in enumerate(zip(strips, mats)):
        r, n = z.shape
        cols = [_plain(c, 20) for c in s.columns] if s.columns is not None else [f"dim {j}" for j in range(n)]
        rows = [_plain(c, 20) for c in s.rows] if s.rows is not None else [str(j) for j in range(r)]
        custom = np.empty((r, n, 2), dtype=object)
        custom[:, :, 0] = np.array(rows, dtype=object)[:, None]
        custom[:, :, 1] = np.array(cols, dtype=object)[None, :]
        if s.probability:
            scale = {"colorscale": "Blues", "zmin": 0.0, "zmax": max(float(z.max()), 1e-9)}
        else:
            lim = max(float(np.quantile(np.abs(z), SATURATE)), 1e-9)  # a few outlier dimensions saturate
            scale = {"colorscale": "RdBu", "reversescale": True, "zmin": -lim, "zmax": lim}
        where = {"row": i + 1, "col": 1}
        hover = ("%{customdata[0]} · %{customdata[1]}: %{z:.5g}" if r > 1 else "%{customdata[1]}: %{z:.5g}")
        last = i == len(strips) - 1
        named = {}
        if s.columns is not None and r == 1 and n <= CELL_TEXT_MAX:  # key tokens written in their cells
            named = {"text": [[_plain(c, 12) for c in s.columns]], "texttemplate": "%{text}", "textfont": {"size": 10}}
        fig.add_trace(go.Heatmap(z=z, customdata=custom, showscale=False, xgap=1 if named else 0,
                                 ygap=1 if r > 1 else 0, **named, **scale,
                                 hovertemplate=f"{hover}<br>{_plain(s.formula)}<extra></extra>"), **where)
        fig.update_yaxes(autorange="reversed", showticklabels=r > 1, **where)
        if r > 1:
            token_axis(fig, rows, MAX_TOKEN_LABELS, axis="y", title=False, **where)
        if s.columns is not None and last and not named:
            bottom = max(bottom, token_axis(fig, cols, MAX_TOKEN_LABELS, axis="x", angle=-45 if n > 12 else 0,
                                            title=False, **where))
        elif s.columns is not None:
            fig.update_xaxes(showticklabels=False, **where)
        else:
            fig.update_xaxes(showticklabels=i == len(strips) - 1 or r > 1, **where)
        if s.highlight is not None:
            fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=s.highlight - 0.5, y1=s.highlight + 0.5,
                          line={"color": "#111", "width": 2}, **where)
    fig.update_annotations(font_size=12, xanchor="left", x=0)
    fig.update_xaxes(ticks="", showgrid=False, zeroline=False)
    fig.update_yaxes(ticks="", showgrid=False, zeroline=False)
    fig.update_layout(height=total + 40 + bottom + (30 if title else 0), title=_plain(title) if title else None,
                      margin={"l": 90, "r": 10, "t": 40 + (30 if title else 0), "b": bottom})
    return fig

