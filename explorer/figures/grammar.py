"""Figures of the Grammar page: each token's contribution to a sentence's pseudo-log-likelihood, and the
minimal-pair suite's accuracy by paradigm. Pure functions: numbers and labels in, a ``go.Figure`` out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .tokens import _plain

COLORS = ("#1f77b4", "#d62728")
MAX_TOKENS = 60  # bars per sentence drawn; longer sentences show their first tokens (the title says so)


def contributions_figure(sentences: Sequence[tuple[str, Sequence[str], Sequence[float]]]) -> go.Figure:
    """One panel per sentence: a bar per WordPiece, its log-probability when masked (nats; taller = less
    surprising), titled with the sentence's PLL.

    Args:
        sentences: ``(label, tokens, log_probs)`` per sentence (1 or 2), ``len(tokens) == len(log_probs)``.
    Raises:
        ValueError: no sentence, or tokens and log-probabilities of different lengths.
    """
    if not sentences:
        raise ValueError("contributions_figure needs at least one sentence")
    for label, tokens, lp in sentences:
        if len(tokens) != len(lp):
            raise ValueError(f"{label}: {len(tokens)} tokens but {len(lp)} log-probabilities")
    titles = []
    for label, tokens, lp in sentences:
        cut = f" (first {MAX_TOKENS} of {len(tokens)} tokens)" if len(tokens) > MAX_TOKENS else ""
        titles.append(f"{_plain(label)}: PLL {float(np.sum(lp)):.2f} nats{cut}")
    fig = make_subplots(rows=len(sentences), cols=1, subplot_titles=titles, vertical_spacing=0.25)
    for i, (label, tokens, lp) in enumerate(sentences):
        toks, vals = list(tokens)[:MAX_TOKENS], np.asarray(lp, dtype=float)[:MAX_TOKENS]
        x = [f"{j + 1}. {_plain(t)}" for j, t in enumerate(toks)]  # unique categories: a word may repeat
        fig.add_trace(go.Bar(x=x, y=vals, name=label, marker_color=COLORS[i % 2],
                             hovertemplate="%{x}<br>log P = %{y:.2f} nats<extra>" + _plain(label) + "</extra>"),
                      row=i + 1, col=1)
        fig.update_yaxes(title_text="log P (nats)", row=i + 1, col=1)
        fig.update_xaxes(tickangle=-45, automargin=False, row=i + 1, col=1)
    fig.update_layout(height=260 * len(sentences) + 80, showlegend=False, margin=dict(l=60, r=20, t=50, b=90))
    return fig


def suite_figure(accuracy: Mapping[str, Mapping[str, float]]) -> go.Figure:
    """Accuracy by paradigm (horizontal bars): PLL and the critical-word test side by side, chance at 50%.

    Args:
        accuracy: ``{paradigm: {"pll": share, "critical": share or NaN, "n": pairs}}``
            (:func:`bertcore.analysis.grammar.minimal_pairs.accuracy_by_paradigm`).
    Raises:
        ValueError: empty.
    """
    if not accuracy:
        raise ValueError("suite_figure needs at least one paradigm")
    names = [_plain(n) for n in list(accuracy)[::-1]]  # first paradigm on top
    fig = go.Figure()
    for key, label, color in (("pll", "whole sentence (PLL)", COLORS[0]),
                              ("critical", "[MASK] at the critical word", COLORS[1])):
        vals = [accuracy[n].get(key, float("nan")) for n in list(accuracy)[::-1]]
        fig.add_trace(go.Bar(y=names, x=vals, orientation="h", name=label, marker_color=color,
                             text=[f"{v:.0%}" if np.isfinite(v) else "-" for v in vals], textposition="outside",
                             hovertemplate="%{y}<br>%{x:.1%}<extra>" + label + "</extra>"))
    fig.add_vline(x=0.5, line=dict(color="#555", dash="dash", width=1), annotation_text="chance (50%)",
                  annotation_position="top")
    fig.update_layout(barmode="group", height=90 + 48 * len(names), xaxis=dict(range=[0, 1.12], tickformat=".0%",
                      title="share of pairs where the grammatical sentence wins"),
                      legend=dict(orientation="h", y=1.06, x=0), margin=dict(l=260, r=20, t=60, b=50))
    fig.update_yaxes(automargin=False)
    return fig
