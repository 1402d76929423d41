"""Figures of MLM masking: each token's decision, counts against the recipe, top-k predictions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from .tokens import _plain

# display codes: bertcore.tokenization.masking's decisions 0..3, plus 4 for positions that cannot be selected
NOT_SELECTED, MASKED, RANDOM, UNCHANGED, NOT_ELIGIBLE = 0, 1, 2, 3, 4
PALETTE = {NOT_SELECTED: "#eef3f8", MASKED: "#f4a259", RANDOM: "#b48ad9", UNCHANGED: "#7cc47f",
           NOT_ELIGIBLE: "#d0d0d0"}
NAMES = {NOT_SELECTED: "not selected", MASKED: "selected → [MASK]", RANDOM: "selected → random token",
         UNCHANGED: "selected, kept unchanged", NOT_ELIGIBLE: "special / padding (never selected)"}



def _percent(p: float) -> str:
    """0.734 -> '73.4%', 0.0000331 -> '0.0033%'."""
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def display_codes(decisions: Sequence[int], eligible: Sequence[bool]) -> np.ndarray:
    """``(T,)`` int: the masking decision, or NOT_ELIGIBLE where a position could not be selected."""
    d = np.asarray(decisions, dtype=int).reshape(-1)
    e = np.asarray(eligible, dtype=bool).reshape(-1)
    if d.shape != e.shape:
        raise ValueError(f"decisions ({d.size}) and eligible ({e.size}) must have one entry per token")
    if d.size and (d.min() < 0 or d.max() > 3):
        raise ValueError("decisions must be bertcore.tokenization.masking codes 0..3")
    return np.where(e, d, NOT_ELIGIBLE)


def decision_grid(tokens: Sequence[str], decisions: Sequence[int], eligible: Sequence[bool],
                  fed_tokens: Sequence[str], per_row: int = 12) -> go.Figure:
    """Tokens in reading order as cells coloured by their masking decision.

    Each cell shows the original token; below it, what the model is fed instead (``→ [MASK]``,
    ``→ <random token>``, ``kept``). A legend names the colours; hover gives the position.

    Args:
        tokens: T original WordPiece tokens.
        decisions: T codes of :mod:`bertcore.tokenization.masking` (0 not selected, 1 [MASK], 2 random, 3 unchanged).
        eligible: T booleans (False for special tokens and padding).
        fed_tokens: T tokens the model receives after masking.
        per_row: cells per line (>= 1).
    Raises:
        ValueError: empty input, lists of different lengths, unknown codes, ``per_row < 1``.
    """
    t = len(tokens)
    if t == 0:
        raise ValueError("no tokens to show: encode a non-empty text first")
    if per_row < 1:
        raise ValueError(f"per_row must be >= 1, got {per_row}")
    if len(fed_tokens) != t or len(decisions) != t:
        raise ValueError(f"decisions ({len(decisions)}) and fed_tokens ({len(fed_tokens)}) need one entry per "
                         f"token ({t})")
    codes = display_codes(decisions, eligible)
    per_row = min(per_row, t)
    rows = math.ceil(t / per_row)
    z = np.full((rows, per_row), np.nan)
    text = np.full((rows, per_row), "", dtype=object)
    hover = np.full((rows, per_row), "", dtype=object)
    for i in range(t):  # T display cells
        r, c = divmod(i, per_row)
        code = int(codes[i])
        z[r, c] = code
        below = {MASKED: "→ [MASK]", RANDOM: f"→ {_plain(fed_tokens[i], 12)}", UNCHANGED: "kept"}.get(code, "")
        text[r, c] = f"{_plain(tokens[i], 14)}<br><sub>{below}</sub>"
        hover[r, c] = (f"position {i}<br>token {_plain(tokens[i])}<br>{NAMES[code]}<br>"
                       f"model sees {_plain(fed_tokens[i])}")
    n = len(PALETTE)
    scale = []
    for k in range(n):
        scale += [[k / n, PALETTE[k]], [(k + 1) / n, PALETTE[k]]]
    fig = go.Figure(go.Heatmap(z=z, text=text, texttemplate="%{text}", textfont={"size": 13}, customdata=hover,
                               hovertemplate="%{customdata}<extra></extra>", colorscale=scale, zmin=-0.5,
                               zmax=n - 0.5, showscale=False, xgap=3, ygap=3, hoverongaps=False))
    for code in (MASKED, RANDOM, UNCHANGED, NOT_SELECTED, NOT_ELIGIBLE):  # legend entries only
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=NAMES[code],
                                 marker={"size": 12, "symbol": "square", "color": PALETTE[code],
                                         "line": {"width": 1, "color": "#888"}}))
    fig.update_yaxes(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_layout(height=80 + 48 * rows, margin={"l": 5, "r": 5, "t": 30, "b": 5}, plot_bgcolor="white",
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    return fig


def counts_figure(counts: Mapping[str, int], mlm_probability: float, mask_replace_prob: float,
                  random_replace_prob: float) -> go.Figure:
    """Observed counts against what the recipe expects, with a ±2 standard-error band.

    Expected: ``selected = p * eligible``; ``masked / random / unchanged = fraction * selected``
    (binomial standard errors ``sqrt(n q (1 - q))``), so a small text shows how much a single
    draw can wander from 15% and 80/10/10.

    Args:
        counts: ``eligible``, ``selected``, ``masked``, ``random``, ``unchanged`` (as
            ``MaskingResult.counts()``).
        mlm_probability, mask_replace_prob, random_replace_prob: the parameters used.
    Raises:
        ValueError: a missing key, negative counts, or fractions outside [0, 1].
    """
    keys = ("eligible", "selected", "masked", "random", "unchanged")
    missing = [k for k in keys if k not in counts]
    if missing:
        raise ValueError(f"counts needs the keys {keys}; missing {missing}")
    if any(int(counts[k]) < 0 for k in keys):
        raise ValueError("counts must be >= 0")
    keep = 1.0 - mask_replace_prob - random_replace_prob
    for name, q in (("mlm_probability", mlm_probability), ("mask_replace_prob", mask_replace_prob),
                    ("random_replace_prob", random_replace_prob), ("unchanged fraction", keep)):
        if not -1e-9 <= q <= 1 + 1e-9:
            raise ValueError(f"{name} must be in [0, 1], got {q}")
    keep = min(max(keep, 0.0), 1.0)
    n_e, n_s = int(counts["eligible"]), int(counts["selected"])
    rows = [("selected", n_e, mlm_probability), ("→ [MASK]", n_s, mask_replace_prob),
            ("→ random", n_s, random_replace_prob), ("unchanged", n_s, keep)]
    labels = [r[0] for r in rows]
    observed = [n_s, int(counts["masked"]), int(counts["random"]), int(counts["unchanged"])]
    expected = [n * q for _, n, q in rows]
    band = [2 * math.sqrt(max(n * q * (1 - q), 0.0)) for _, n, q in rows]
    fig = go.Figure()
    fig.add_bar(x=labels, y=expected, name="expected (±2 s.e.)", marker_color="#c9d6e3",
                error_y={"type": "data", "array": band, "arrayminus": [min(b, e) for b, e in zip(band, expected)],
                         "visible": True, "color": "#555"},
                hovertemplate="%{x}: expected %{y:.1f}<extra></extra>")
    fig.add_bar(x=labels, y=observed, name="this draw", marker_color="#3b75af",
                hovertemplate="%{x}: %{y}<extra></extra>")
    fig.update_layout(barmode="group", height=320, margin={"l": 10, "r": 10, "t": 60, "b": 10},
                      yaxis={"title": {"text": "positions"}, "rangemode": "tozero"},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
                      title={"text": f"{n_e} eligible positions", "font": {"size": 13}, "x": 0, "xanchor": "left",
                             "y": 0.97, "yanchor": "top"})
    return fig


def topk_figure(titles: Sequence[str], tokens: Sequence[Sequence[str]], probs: Sequence[Sequence[float]],
                originals: Sequence[str | None], cols: int = 3) -> go.Figure:
    """Top-k predictions at several positions: one horizontal bar chart per position.

    A bar is green when it is the original token (recovered if it is the top bar), blue otherwise.
    The x axis spans [0, 1] when a guess is confident (> 50%); otherwise it zooms in on the bars
    (an untrained model gives every token about 1/V).

    Args:
        titles: N panel titles (e.g. ``"pos 4: cat → [MASK]"``).
        tokens / probs: N lists of k predicted tokens and their probabilities, most probable first.
        originals: N original tokens (None where unknown, e.g. a [MASK] the user typed).
        cols: panels per row.
    Raises:
        ValueError: no positions, lists of different lengths, probabilities outside [0, 1].
    """
    n = len(titles)
    if n == 0:
        raise ValueError("no positions to show: select or type at least one [MASK]")
    if not (len(tokens) == len(probs) == len(originals) == n):
        raise ValueError(f"titles ({n}), tokens ({len(tokens)}), probs ({len(probs)}) and originals "
                         f"({len(originals)}) need one entry per position")
    for toks, ps in zip(tokens, probs):
        if len(toks) != len(ps) or not toks:
            raise ValueError("each position needs as many tokens as probabilities (at least one)")
        if any(not 0.0 <= float(p) <= 1.0 + 1e-6 for p in ps):
            raise ValueError("probabilities must lie in [0, 1]")
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[_plain(t, 40) for t in titles],
                        horizontal_spacing=0.12, vertical_spacing=min(0.12, 0.3 / rows))
    k_max = max(len(t) for t in tokens)
    for i in range(n):  # N panels
        r, c = divmod(i, cols)
        labels = [f"{j + 1}. {_plain(tok, 16)}" for j, tok in enumerate(tokens[i])]
        colours = ["#4caf50" if originals[i] is not None and tok == originals[i] else "#3b75af"
                   for tok in tokens[i]]
        fig.add_bar(x=list(map(float, probs[i])), y=labels, orientation="h", marker_color=colours, showlegend=False,
                    text=[_percent(float(p)) for p in probs[i]], textposition="auto",
                    hovertemplate="%{y}: %{x:.3%}<extra></extra>", row=r + 1, col=c + 1)
        fig.update_yaxes(autorange="reversed", row=r + 1, col=c + 1)
        top = max(map(float, probs[i]))  # an untrained model spreads ~1/V over the vocabulary: zoom in
        fig.update_xaxes(range=[0, 1 if top > 0.5 else max(top * 1.25, 1e-6)],
                         tickformat=".1%" if top > 0.02 else ".2~%", row=r + 1, col=c + 1)
    fig.update_layout(height=60 + rows * (40 + 24 * k_max), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
