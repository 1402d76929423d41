"""Figures of a WordPiece encoding: tokens as coloured cells, pieces of a word sharing a colour."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

# colour codes of the cells: special tokens, then two alternating shades per segment
SPECIAL, A_EVEN, A_ODD, B_EVEN, B_ODD, PADDING = 0, 1, 2, 3, 4, 5
PALETTE = ["#d9d9d9", "#7fb8dc", "#cfe1f2", "#8fd18a", "#d3eecd", "#ffffff"]
LEGEND = {SPECIAL: "special token", A_EVEN: "sentence A", B_EVEN: "sentence B"}


def _check_lengths(tokens: Sequence[str], **columns: Sequence) -> None:
    n = len(tokens)
    for name, col in columns.items():
        if col is not None and len(col) != n:
            raise ValueError(f"{name} has {len(col)} entries but there are {n} tokens; pass one per token")


def token_codes(word_ids: Sequence[int | None], special_mask: Sequence[int],
                token_type_ids: Sequence[int]) -> np.ndarray:
    """Colour code per token: SPECIAL, or A/B shade alternating word by word (``(T,)`` int)."""
    codes = np.empty(len(word_ids), dtype=int)
    for i, (w, sp, seg) in enumerate(zip(word_ids, special_mask, token_type_ids)):
        if sp or w is None:
            codes[i] = SPECIAL
        else:
            codes[i] = (B_EVEN if seg else A_EVEN) + (w % 2)
    return codes


def token_grid(
    tokens: Sequence[str],
    input_ids: Sequence[int],
    word_ids: Sequence[int | None],
    special_mask: Sequence[int],
    token_type_ids: Sequence[int],
    attention_mask: Sequence[int] | None = None,
    per_row: int = 12,
    labels: Sequence[str] | None = None,
    label_hover: Sequence[str] | None = None,
) -> go.Figure:
    """Tokens in reading order as cells ``token / id``, wrapped ``per_row`` to a line.

    Pieces of one word share a colour (words alternate two shades), sentence A is blue,
    sentence B green, special tokens grey. Hover shows position, id, word, segment and mask.

    Args:
        tokens, input_ids, word_ids, special_mask, token_type_ids, attention_mask: one entry per
            token (T), as in :class:`bertcore.tokenization.tokenizer.Encoding`.
        per_row: cells per line (>= 1).
        labels / label_hover: optional per-token annotation drawn as a third line in each cell (e.g. part of
            speech and dependency label) and its hover text.
    Raises:
        ValueError: lists of different lengths, no tokens, or ``per_row < 1``.
    """
    if len(tokens) == 0:
        raise ValueError("no tokens to show: encode a non-empty text first")
    if per_row < 1:
        raise ValueError(f"per_row must be >= 1, got {per_row}")
    attention_mask = attention_mask if attention_mask is not None else [1] * len(tokens)
    _check_lengths(tokens, input_ids=input_ids, word_ids=word_ids, special_mask=special_mask,
                   token_type_ids=token_type_ids, attention_mask=attention_mask)
    if labels is not None:
        label_hover = label_hover if label_hover is not None else labels
        _check_lengths(tokens, labels=labels, label_hover=label_hover)
    t = len(tokens)
    per_row = min(per_row, t)
    rows = math.ceil(t / per_row)
    codes = token_codes(word_ids, special_mask, token_type_ids)
    z = np.full((rows, per_row), PADDING, dtype=float)
    text = np.full((rows, per_row), "", dtype=object)
    hover = np.full((rows, per_row), "", dtype=object)
    for i, tok in enumerate(tokens):
        r, c = divmod(i, per_row)
        z[r, c] = codes[i]
        shown = tok if len(tok) <= 14 else tok[:13] + "…"
        text[r, c] = f"{_plain(shown)}<br><sub>{input_ids[i]}</sub>"
        word = "special" if word_ids[i] is None else f"word {word_ids[i]}"
        hover[r, c] = (f"position {i}<br>token {_plain(tok)}<br>id {input_ids[i]}<br>{word}<br>"
                       f"segment {token_type_ids[i]}<br>attention mask {attention_mask[i]}")
        if labels is not None and labels[i]:
            text[r, c] += f"<br><sub><i>{_plain(labels[i])}</i></sub>"
            hover[r, c] += f"<br>{_plain(label_hover[i])}"
    n_colors = len(PALETTE)
    scale = []
    for k, colour in enumerate(PALETTE):
        scale += [[k / n_colors, colour], [(k + 1) / n_colors, colour]]
    fig = go.Figure(go.Heatmap(
        z=z, text=text, texttemplate="%{text}", textfont={"size": 13}, customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", colorscale=scale, zmin=-0.5, zmax=n_colors - 0.5,
        showscale=False, xgap=3, ygap=3,
    ))
    fig.update_yaxes(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    for code, name in LEGEND.items():  # legend entries only (no data)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                 marker={"size": 12, "symbol": "square", "color": PALETTE[code]}))
    fig.update_layout(height=70 + (62 if labels is not None else 46) * rows, margin={"l": 5, "r": 5, "t": 30, "b": 5},
                      plot_bgcolor="white", legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                      title=None)
    return fig


def _plain(text: str, limit: int | None = None) -> str:
    """Text safe inside Plotly's HTML-like labels (``&``, ``<``, ``>`` escaped), optionally shortened to
    ``limit`` characters (an ellipsis marks the cut). The one escape helper of every figure module."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
