"""The Positional embeddings page's views: the model's learned position table beside sinusoids of the same size
(Vaswani et al. 2017, section 3.5), Wang & Chen's (2020) linear read-out of a position from its vector, and what a
rotary model's heads do with relative offsets (Su et al. 2021)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.analysis import shipped
from bertcore.analysis.attention import activations
from bertcore.readouts import positional
from explorer.figures import positions as pos_figures
from explorer.views.core import load, view

MAX_OFFSET = 64  # the largest offset of the similarity-by-offset curve
MAX_BASE = 1e12


class BaseError(ValueError):
    """A sinusoid base outside (1, 10^12)."""


@dataclass
class Positions:
    """Positions ``start .. stop - 1`` of the learned table and of sinusoids with ``base``: each as a
    :class:`~bertcore.readouts.positional.PositionViews` (``table`` (P, H), ``cosine`` (P, P), ``pca``, ``norms``);
    ``offsets``: the mean cosine of positions 1 .. min(64, P - 1) apart, learned and sinusoidal (None below 2
    positions)."""

    start: int
    stop: int
    base: float
    learned: positional.PositionViews
    sinusoidal: positional.PositionViews
    offsets: tuple[np.ndarray, np.ndarray] | None


@view
def positions(source, start: int, stop: int, base: float) -> Positions:
    """The learned position vectors ``start .. stop - 1`` of the model and sinusoids of the same size.

    Raises ``PositionRangeError`` (a range outside the table), ``BaseError`` (a base outside (1, 10^12)) and
    ``NoPositionTableError`` (a model with rotary positions)."""
    lm = load(source)
    start, stop = positional.check_range(start, stop, lm.config.max_position_embeddings)
    if not 1.0 < base < MAX_BASE:
        raise BaseError(f"The sinusoid base must be above 1 (and below 10^12); got {base:g}.")
    learned = positional.learned_positions(lm.model, start, stop)  # (P, H): this model's table
    sinus = positional.sinusoidal(stop - start, lm.config.hidden_size, base=base, start=start)  # Vaswani et al. 3.5
    lv, sv = positional.views(learned), positional.views(sinus)  # values, cosine (P, P), PCA path
    offsets = None
    if stop - start >= 2:  # mean cosine between positions 1, 2, ... apart
        max_offset = min(MAX_OFFSET, stop - start - 1)
        offsets = (positional.neighbour_similarity(lv.cosine, max_offset),
                   positional.neighbour_similarity(sv.cosine, max_offset))
    return Positions(start, stop, base, lv, sv, offsets)


def titles(result: Positions) -> tuple[str, str]:
    """The two panels' titles."""
    return ("learned (this model)", f"sinusoidal (base {result.base:g})")


def cosine_figure(result: Positions):
    """Cosine similarity of every pair of positions, learned beside sinusoidal."""
    return pos_figures.compare_cosine(result.learned.cosine, result.sinusoidal.cosine, result.start, titles(result))


@dataclass
class Regression:
    """Wang & Chen's (2020) read-out on the whole table: per table (``learned``, ``sinusoidal``), each position's
    held-out prediction (``predictions`` (P,)) and their mean absolute error (``mae``)."""

    predictions: dict[str, np.ndarray]
    mae: dict[str, float]


@view
def regression(source) -> Regression:
    """A 5-fold cross-validated linear regression from each vector of the model's whole learned table (and of a
    sinusoidal table of the same size) to its position (Wang & Chen 2020, Table 1); the result shipped beside the
    model when there is one.

    Raises ``ValueError`` (no position table)."""
    lm = load(source)
    summary = shipped.get(lm, shipped.position_regression(lm))  # {"learned": {...}, "sinusoidal": {...}}
    return Regression({k: np.asarray(v["predictions"]) for k, v in summary.items()},
                      {k: float(v["mae"]) for k, v in summary.items()})


@dataclass
class OffsetProfile:
    """A rotary model's heads: ``profile`` ``(layers, heads, offsets)``, each head's mean attention to the key at
    each offset from the query; ``offsets`` (the key's position minus the query's)."""

    profile: np.ndarray
    offsets: np.ndarray


@view
def offset_profile(source, text: str, max_offset: int = 16) -> OffsetProfile:
    """Each head of every layer: its mean attention by relative offset, up to ``max_offset``, on ``text``.

    Raises ``TextError`` and ``InputError``."""
    lm = load(source)
    act = activations.run(lm.encoder, lm.tokenizer, text)  # attentions (L, heads, T, T)
    by_layer = [positional.attention_by_offset(layer, max_offset) for layer in act.attentions]
    return OffsetProfile(np.stack([profile for profile, _ in by_layer]), by_layer[0][1])
