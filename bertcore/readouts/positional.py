"""Position encodings side by side: BERT's learned table and the Transformer's sinusoids.

- Learned: BERT adds a trained vector per position, ``embeddings.position_embeddings.weight``
  ``(P, H)`` (Devlin et al. 2019, section 3.2; HF ``BertEmbeddings``).
- Sinusoidal: ``PE(pos, 2i) = sin(pos / 10000^(2i/d))``, ``PE(pos, 2i+1) = cos(pos / 10000^(2i/d))``
  (Vaswani et al. 2017, "Attention Is All You Need", section 3.5), a fixed function of the position.

Three views of either table: the values, cosine similarity between positions, and a 2-D PCA path
(both computed by :mod:`bertcore.analysis`, the one owner of cosine and PCA), plus Wang & Chen's
(2020) linear position regression. Everything here is numpy in, numpy out (float64 for the analyses).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..vectors import cosine_matrix, pca_2d


class PositionRangeError(ValueError):
    """A position range that does not fit the table (the message says the valid range)."""


def sinusoidal(n_positions: int, d_model: int, base: float = 10000.0, start: int = 0) -> np.ndarray:
    """Sinusoidal position encodings (Vaswani et al. 2017, section 3.5).

    Args:
        n_positions: number of positions (rows).
        d_model: encoding width (columns); an odd width drops the last cosine column.
        base: the wavelength base (10000 in the paper).
        start: first position (rows are positions ``start .. start + n_positions - 1``).
    Returns:
        ``(n_positions, d_model)`` float32: column 2i is ``sin(pos * w_i)``, column 2i+1 is
        ``cos(pos * w_i)`` with ``w_i = base^(-2i/d_model)``.
    Raises:
        ValueError: non-positive sizes, negative start or base <= 1.
    """
    if n_positions < 1 or d_model < 1:
        raise ValueError(f"n_positions and d_model must be >= 1, got {n_positions}, {d_model}")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    pos = np.arange(start, start + n_positions, dtype=np.float64)[:, None]  # (P, 1)
    i2 = np.arange(0, d_model, 2, dtype=np.float64)  # (ceil(d/2),) the even indices 2i
    angle = pos * base ** (-i2 / d_model)  # (P, ceil(d/2))
    pe = np.empty((n_positions, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)[:, : d_model // 2]
    return pe.astype(np.float32)


def check_range(start: int, stop: int, max_positions: int) -> tuple[int, int]:
    """Validate a half-open position range ``[start, stop)`` against a table of ``max_positions`` rows.

    Returns:
        ``(start, stop)`` as ints.
    Raises:
        PositionRangeError: empty range, negative start, or stop past ``max_positions``.
    """
    start, stop = int(start), int(stop)
    if start < 0:
        raise PositionRangeError(f"the first position must be >= 0, got {start}")
    if stop > max_positions:
        raise PositionRangeError(
            f"this model has {max_positions} positions (0 to {max_positions - 1}); "
            f"the range ends at {stop - 1}. Choose positions below {max_positions}.")
    if stop - start < 1:
        raise PositionRangeError(f"the range [{start}, {stop}) is empty; the last position must be >= the first")
    return start, stop


def cosine_similarity(x: np.ndarray) -> np.ndarray:
    """Cosine similarity between every pair of rows (:func:`bertcore.vectors.cosine_matrix`).

    Args:
        x: ``(P, D)`` float.
    Returns:
        ``(P, P)`` float64 in [-1, 1]; a zero row has similarity 0 with everything (1 with itself).
    Raises:
        ValueError: ``x`` not 2-D.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a (positions, dims) matrix, got shape {x.shape}")
    sim = cosine_matrix(x).astype(np.float64)  # (P, P)
    np.fill_diagonal(sim, 1.0)
    return sim


@dataclass
class PCAPath:
    """Positions projected on their first two principal components.

    Attributes:
        coords: ``(P, 2)`` float64, row p is position ``start + p``.
        explained: ``(2,)`` fraction of the variance each component explains (0 for a missing one).
    """

    coords: np.ndarray
    explained: np.ndarray


def pca_path(x: np.ndarray) -> PCAPath:
    """Project the rows of ``x`` on their first two principal components (:func:`bertcore.vectors.pca_2d`,
    scikit-learn PCA).

    Args:
        x: ``(P, D)`` float, one row per position.
    Returns:
        :class:`PCAPath`; with a single row, or identical rows, everything is 0 (and explains 0).
    Raises:
        ValueError: ``x`` not 2-D or empty.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"expected a non-empty (positions, dims) matrix, got shape {x.shape}")
    if x.shape[0] < 2:
        return PCAPath(np.zeros((x.shape[0], 2)), np.zeros(2))
    coords, explained = pca_2d(x)
    return PCAPath(coords.astype(np.float64), explained.astype(np.float64))


def position_predictions(table: np.ndarray, n_splits: int = 5, seed: int = 0) -> np.ndarray:
    """Held-out predictions of a linear regression from each row of a position table to its index
    (Wang & Chen 2020, Table 1; the authors' code: MiuLab/PE-Study ``absolute.py``).

    ``sklearn.linear_model.LinearRegression``, ``n_splits``-fold cross-validation over shuffled rows
    (``KFold(shuffle=True, random_state=seed)``): each row is predicted by a model that never saw it.

    Args:
        table: ``(P, D)`` float, row p is position p.
    Returns:
        ``(P,)`` float64, the predicted (unrounded) index of each row.
    Raises:
        ValueError: ``table`` not 2-D, or fewer rows than ``n_splits``.
    """
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import KFold, cross_val_predict

    x = np.asarray(table, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < max(2, n_splits):
        raise ValueError(f"need a (positions, dims) table with at least {max(2, n_splits)} rows, got {x.shape}")
    y = np.arange(x.shape[0], dtype=np.float64)
    return cross_val_predict(LinearRegression(), x, y, cv=KFold(n_splits=n_splits, shuffle=True, random_state=seed))


def regression_summary(model, n_splits: int = 5, seed: int = 0) -> dict[str, dict]:
    """:func:`position_predictions` and their error on the model's whole learned table and on a sinusoidal table
    of the same size (Wang & Chen 2020, Table 1: the Findings and Positional embeddings pages).

    Returns:
        ``{"learned": {"predictions": (P,), "mae": float}, "sinusoidal": {...}}``.
    """
    table = learned_positions(model)  # (P, H)
    out = {}
    for name, t in (("learned", table), ("sinusoidal", sinusoidal(*table.shape))):
        pred = position_predictions(t, n_splits, seed)
        out[name] = {"predictions": pred, "mae": prediction_error(pred)}
    return out


def position_regression(table: np.ndarray, n_splits: int = 5, seed: int = 0) -> float:
    """How linearly a position table encodes the absolute position (Wang & Chen 2020, Table 1): the mean
    absolute difference between the rounded held-out prediction of :func:`position_predictions` and the
    true index, as in the authors' code. 0 = every held-out position is recovered exactly.

    Returns:
        the mean absolute error in positions (float).
    Raises:
        ValueError: ``table`` not 2-D, or fewer rows than ``n_splits``.
    """
    return prediction_error(position_predictions(table, n_splits, seed))


def prediction_error(predictions: np.ndarray) -> float:
    """Mean absolute error, in positions, of rounded predictions ``(P,)`` of the indices ``0..P-1``."""
    pred = np.asarray(predictions, dtype=np.float64)
    return float(np.abs(np.round(pred) - np.arange(len(pred))).mean())


class NoPositionTableError(ValueError):
    """A model without a learned position table (rotary positions); the message says so."""


def learned_positions(model, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``[start, stop)`` of a BERT's learned position table.

    Args:
        model: a bertcore :class:`~bertcore.modeling.model.BertModel` or any head class (``.bert``), or
            anything with ``embeddings.position_embeddings``.
        start / stop: the position range (stop None: every position).
    Returns:
        ``(stop - start, H)`` float32 numpy array (a copy).
    Raises:
        PositionRangeError: the range does not fit the model's ``max_position_embeddings``.
        NoPositionTableError (a ValueError): a model with rotary positions (ModernBERT) has no table.
    """
    encoder = getattr(model, "base_model", model)
    if encoder.embeddings.position_embeddings is None:
        raise NoPositionTableError(f"this {encoder.config.family} model has no learned position table: its positions "
                                   "are rotary, applied inside attention (the Positional embeddings page shows them)")
    table = encoder.embeddings.position_embeddings.weight  # (P, H)
    n = table.shape[0]
    start, stop = check_range(start, n if stop is None else stop, n)
    return table[start:stop].detach().float().cpu().numpy().copy()


@dataclass
class PositionViews:
    """The three views of one position table (rows ``start .. start + P - 1``).

    Attributes:
        table: ``(P, D)`` float32, the encodings.
        cosine: ``(P, P)`` cosine similarity between positions.
        pca: :class:`PCAPath` of the positions.
        norms: ``(P,)`` L2 norm of each position's vector.
    """

    table: np.ndarray
    cosine: np.ndarray
    pca: PCAPath
    norms: np.ndarray


def views(table: np.ndarray) -> PositionViews:
    """Compute the three views (plus row norms) of a ``(P, D)`` position table."""
    table = np.asarray(table, dtype=np.float32)
    return PositionViews(table, cosine_similarity(table), pca_path(table),
                         np.linalg.norm(table.astype(np.float64), axis=1))


def neighbour_similarity(cosine: np.ndarray, max_offset: int) -> np.ndarray:
    """Mean cosine similarity between positions ``offset`` apart, for offsets ``1..max_offset``.

    Args:
        cosine: ``(P, P)`` from :func:`cosine_similarity`.
        max_offset: largest offset (clipped to ``P - 1``).
    Returns:
        ``(min(max_offset, P-1),)`` float64: entry ``o-1`` is the mean of the o-th off-diagonal.
    """
    p = cosine.shape[0]
    m = min(int(max_offset), p - 1)
    return np.array([np.diagonal(cosine, offset=o).mean() for o in range(1, m + 1)], dtype=np.float64)


def attention_by_offset(attentions: np.ndarray, max_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Each head's mean attention probability by relative offset: what a head does with positions.

    Args:
        attentions: ``(heads, T, T)`` probabilities of one layer (rows: queries).
        max_offset: the largest |key − query| shown (clipped to T − 1), >= 0.
    Returns:
        ``(profile (heads, 2R+1), offsets (2R+1,))``: ``profile[h, r]`` is the mean over queries q of
        ``p[h, q, q + offsets[r]]`` (those with such a key); a peak at -1 is a previous-token head.
    Raises:
        ValueError: not ``(heads, T, T)``, or a negative ``max_offset``.
    """
    a = np.asarray(attentions, dtype=np.float64)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"attentions must be (heads, T, T), got shape {a.shape}")
    if max_offset < 0:
        raise ValueError(f"max_offset must be >= 0, got {max_offset}")
    r = min(int(max_offset), a.shape[1] - 1)
    offsets = np.arange(-r, r + 1)
    profile = np.stack([np.diagonal(a, offset=int(o), axis1=1, axis2=2).mean(axis=1) for o in offsets], axis=1)
    return profile, offsets
