"""Figures of how a model changes across a run's checkpoints (the Evolution page).

Pure functions: numpy arrays and labels in, ``plotly.graph_objects.Figure`` out; no Streamlit.
Inputs are checked first; a ``ValueError`` says what is wrong and how to fix it.
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .training import PALETTE

# ----------------------------------------------------------------------------- across checkpoints
def _grid(n: int, cols: int) -> tuple[int, int]:
    cols = max(1, min(cols, n))
    return math.ceil(n / cols), cols


def _check_stack(maps: Sequence[Any], steps: Sequence[int], what: str) -> list[np.ndarray]:
    if not isinstance(maps, Sequence) or not maps:
        raise ValueError(f"{what}: give at least one checkpoint's matrix")
    if len(steps) != len(maps):
        raise ValueError(f"{what}: {len(maps)} matrices but {len(steps)} steps; give one step per checkpoint")
    arrays = [np.asarray(m, dtype=float) for m in maps]
    shape = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"{what}: matrix {i} must be square (T x T), got shape {a.shape}")
        if a.shape != shape:
            raise ValueError(f"{what}: matrix {i} has shape {a.shape}, matrix 0 {shape}; all checkpoints must see "
                             "the same tokens / positions")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{what}: matrix {i} holds NaN or infinite values")
    return arrays


def attention_evolution_figure(maps: Sequence[Any], tokens: Sequence[str], steps: Sequence[int], *,
                               layer: int | None = None, head: int | None = None, cols: int = 4) -> go.Figure:
    """Small multiples: one head's attention map (queries down, keys across) at each checkpoint,
    on one shared colour scale (0 to the largest weight in any panel) so panels compare directly
    and near-uniform early maps still show their structure.

    Args:
        maps: one (T, T) array per checkpoint, rows summing to 1.
        tokens: the T token strings (same tokenizer for every checkpoint).
        steps: the training step of each checkpoint (panel titles).
        layer, head: the 0-based block and head, named in the title as "layer ``layer + 1``, head ``head + 1``".
    Raises:
        ValueError: shapes differ, a row does not sum to 1, or tokens do not match T.
    """
    arrays = _check_stack(maps, steps, "attention maps")
    t = arrays[0].shape[0]
    if len(tokens) != t:
        raise ValueError(f"{len(tokens)} tokens for {t} x {t} attention maps; give one token per row")
    for i, a in enumerate(arrays):
        if (a < -1e-6).any() or not np.allclose(a.sum(axis=1), 1.0, atol=1e-3):
            raise ValueError(f"attention map {i} is not a probability map (each row must sum to 1)")
    # Make token labels unique so that repeated words stay separate rows/columns.
    labels = [f"{tok} ·{i}" for i, tok in enumerate(tokens)]
    rows, cols = _grid(len(arrays), cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"step {s}" for s in steps],
                        horizontal_spacing=0.04, vertical_spacing=0.08 if rows > 1 else 0.0)
    for i, a in enumerate(arrays):
        r, c = divmod(i, cols)
        fig.add_trace(go.Heatmap(z=a, x=labels, y=labels, coloraxis="coloraxis",
                                 hovertemplate=f"step {steps[i]}<br>%{{y}} → %{{x}}<br>%{{z:.3f}}<extra></extra>"),
                      row=r + 1, col=c + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    for r in range(rows):  # labels on the outer panels only, to keep the grid readable
        fig.update_yaxes(showticklabels=True, tickfont=dict(size=9), row=r + 1, col=1)
    where = f"layer {layer + 1}, head {head + 1}: " if layer is not None and head is not None else ""
    cmax = max(float(a.max()) for a in arrays)
    fig.update_layout(title=f"{where}attention at each checkpoint (shared colour scale 0-{cmax:.2f})",
                      coloraxis=dict(colorscale="Viridis", cmin=0, cmax=cmax, colorbar=dict(title="weight")),
                      height=max(300, 260 * rows + 60), margin=dict(l=90, r=20, t=70, b=30))
    return fig


def position_similarity_evolution_figure(sims: Sequence[Any], steps: Sequence[int], *, cols: int = 4) -> go.Figure:
    """Small multiples: cosine similarity between the learned position embeddings (P x P) at each
    checkpoint, on one shared -1..1 scale. A band along the diagonal appearing over training means
    nearby positions have learned similar vectors.

    Raises:
        ValueError: shapes differ or values fall outside [-1, 1].
    """
    arrays = _check_stack(sims, steps, "position similarities")
    for i, a in enumerate(arrays):
        if (np.abs(a) > 1 + 1e-4).any():
            raise ValueError(f"similarity matrix {i} has values outside [-1, 1]; pass cosine similarities")
    p = arrays[0].shape[0]
    rows, cols = _grid(len(arrays), cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"step {s}" for s in steps],
                        horizontal_spacing=0.04, vertical_spacing=0.08 if rows > 1 else 0.0)
    for i, a in enumerate(arrays):
        r, c = divmod(i, cols)
        fig.add_trace(go.Heatmap(z=a, x=list(range(p)), y=list(range(p)), coloraxis="coloraxis",
                                 hovertemplate=f"step {steps[i]}<br>positions %{{y}} & %{{x}}<br>cos %{{z:.3f}}"
                                               "<extra></extra>"), row=r + 1, col=c + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"cosine similarity of position embeddings 0-{p - 1} at each checkpoint",
                      coloraxis=dict(colorscale="RdBu", cmin=-1, cmax=1, reversescale=True,
                                     colorbar=dict(title="cosine")),
                      height=max(300, 250 * rows + 60), margin=dict(l=50, r=20, t=70, b=30))
    return fig


def neighbour_similarity_figure(sims: Sequence[Any], steps: Sequence[int], max_offset: int = 8) -> go.Figure:
    """Mean cosine similarity between positions ``i`` and ``i + k`` (k = 1..max_offset) against step:
    one line per offset. Summarises the small multiples: learned positions that encode order show
    high similarity at small offsets, falling with distance.

    Raises:
        ValueError: as :func:`position_similarity_evolution_figure`, or ``max_offset`` < 1.
    """
    arrays = _check_stack(sims, steps, "position similarities")
    if not isinstance(max_offset, int) or max_offset < 1:
        raise ValueError(f"max_offset must be a positive integer, got {max_offset!r}")
    p = arrays[0].shape[0]
    offsets = list(range(1, min(max_offset, p - 1) + 1))
    if not offsets:
        raise ValueError("need at least 2 positions to compare neighbours")
    fig = go.Figure()
    order = np.argsort(np.asarray(steps))
    xs = [steps[i] for i in order]
    for j, k in enumerate(offsets):
        ys = [float(np.mean(np.diagonal(arrays[i], offset=k))) for i in order]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"offset {k}",
                                 line=dict(color=PALETTE[j % len(PALETTE)] if j < len(PALETTE) else None)))
    fig.update_layout(title="mean similarity of positions i and i + offset, per checkpoint", height=320,
                      xaxis=dict(title="step"), yaxis=dict(title="mean cosine"),
                      margin=dict(l=50, r=20, t=50, b=40))
    return fig
