"""When do the published patterns appear while a model trains? Summaries of a
:class:`~bertcore.analysis.papers.evalset.FindingsResult` per checkpoint, and the step at which each
crosses its mark, plus the end of the loss plateau (Chen et al. 2023, "Sudden drops in the loss").

Pure functions of numbers: no model, no files.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import findings as F

PREV_MIN = F.POSITIONAL_MIN  # a previous-token head: > 50% on the previous token (Clark et al. 2019, 3.1)
SEP_RISE = 2.0  # [SEP] attention "rose": at least twice its value at the first checkpoint ...
SEP_MIN = 0.10  # ... and at least 10% of all attention
FLAT = 0.1  # the plateau starts where the loss falls at under 10% of its fastest rate so far
DROP = 0.5  # the plateau ends where the loss has fallen half-way from the plateau to its final value
MIN_FALL = 0.1  # ... provided it falls by at least 10% of the plateau's level at all
UNIGRAM_MARGIN = 0.1  # nats: "below the unigram line" means at least this far below it

SUMMARY_NAMES = {
    "prev_max": "Strongest previous-token head (share)",
    "sep": "Attention to [SEP] (all heads)",
    "cls": "Attention to [CLS] (all heads)",
    "heterogeneous": "Heterogeneous heads (share)",
    "anisotropy_last": "Anisotropy, last layer (cosine)",
    "cls_entropy_last": "[CLS] entropy, last layer (nats)",
    "syntax_uas": "Best head's attachment score (UAS)",
}


def summary(result) -> dict[str, float]:
    """The numbers of one checkpoint (keys of ``SUMMARY_NAMES`` but ``syntax_uas``, which needs parses: the
    caller adds it from :func:`bertcore.analysis.representations.syntax.run_syntax`) from a ``FindingsResult``."""
    patterns = np.asarray(result.patterns, dtype=np.float64)
    return {
        "prev_max": float(np.max(result.prev)),
        "sep": float(np.mean(result.to_sep)),
        "cls": float(np.mean(result.to_cls)),
        "heterogeneous": float(patterns[:, F.PATTERNS.index("heterogeneous")].sum() / max(patterns.sum(), 1)),
        "anisotropy_last": float(result.anisotropy[-1]),
        "cls_entropy_last": float(np.mean(result.cls_entropy[-1])),
    }


def first_above(steps: Sequence[int], values: Sequence[float], threshold: float) -> int | None:
    """The first step whose value is above ``threshold`` (None if none is)."""
    for step, value in zip(steps, values):
        if np.isfinite(value) and value > threshold:
            return int(step)
    return None


def rise_step(steps: Sequence[int], values: Sequence[float], factor: float = SEP_RISE,
              minimum: float = SEP_MIN) -> int | None:
    """The first step where ``values`` reach ``factor`` times their first value and at least ``minimum``."""
    if not len(values):
        return None
    start = float(values[0])
    for step, value in zip(steps, values):
        if value >= max(factor * start, minimum):
            return int(step)
    return None


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average (the first points average what exists so far)."""
    v = np.asarray(values, dtype=np.float64)
    if window <= 1 or v.size == 0:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def plateau_exit(steps: Sequence[int], losses: Sequence[float],
                 window: int | None = None) -> tuple[int | None, float | None]:
    """Where the MLM loss leaves its plateau (Chen et al. 2023 see a plateau, then a sudden drop).

    Rule, on the loss smoothed over ``window`` points (default: 1/20 of the points):

    1. the plateau starts at the first point where the loss falls at under ``FLAT`` (10%) of its
       fastest rate so far (after the first quick fall to the unigram level);
    2. it ends at the first later step where the loss is below ``plateau - DROP * (plateau - final)``,
       provided the loss falls by at least ``MIN_FALL`` of the plateau level in all.

    Returns:
        ``(step, plateau_loss)``; ``(None, plateau_loss)`` if the loss has not left the plateau,
        ``(None, None)`` with fewer than 3 points.
    """
    steps = np.asarray(steps, dtype=np.float64)
    s = smooth(losses, window if window is not None else max(1, len(losses) // 20))
    if s.size < 3:
        return None, None
    rate = -np.diff(s) / np.maximum(np.diff(steps), 1e-9)  # fall per step, (n-1,)
    fastest = np.maximum.accumulate(np.maximum(rate, 0.0))
    flat = np.flatnonzero(rate <= FLAT * fastest)
    start = int(flat[0]) + 1 if flat.size else s.size - 1
    level, final = float(s[start]), float(s[-1])
    if level - final < MIN_FALL * abs(level):
        return None, level
    below = np.flatnonzero(s[start:] < level - DROP * (level - final))
    return (int(steps[start + below[0]]), level) if below.size else (None, level)


def left_unigram_line(steps: Sequence[int], losses: Sequence[float], unigram_loss: float,
                      margin: float = UNIGRAM_MARGIN) -> int | None:
    """The step from which the (held-out) MLM loss stays below the unigram line for good.

    The unigram loss is what a model that knows only token frequencies gets (the entropy of the data's token
    distribution); a loss below it is information from the context. Rule: the first step whose loss, and
    every later loss, is below ``unigram_loss - margin`` (nats), so one lucky evaluation does not count.

    Args:
        steps, losses: the curve, in step order (NaN losses never count as below).
        unigram_loss: the line, in nats.
        margin: how far below counts (default :data:`UNIGRAM_MARGIN`, 0.1 nats).
    Returns:
        The step, or None if the last loss is not below the line.
    """
    below = [bool(np.isfinite(v) and v < unigram_loss - margin) for v in losses]
    if not below or not below[-1]:
        return None
    i = len(below) - 1
    while i > 0 and below[i - 1]:
        i -= 1
    return int(steps[i])


def is_content_word(token: str) -> bool:
    """A whole-word WordPiece that is a content word: letters only, not a ``##`` continuation, not a special
    token, and not in scikit-learn's English stop-word list (318 function words). A probe that puts such a word
    in its top guesses is using context beyond frequency (the most frequent tokens are function words and
    punctuation)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return token.isalpha() and token.lower() not in ENGLISH_STOP_WORDS
