"""Word-level attention: merge WordPiece rows and columns into words (Clark et al. 2019, "What Does
BERT Look At?", section 4.1).

Attention *to* a word is the sum of the attention to its pieces (so a row still sums to 1);
attention *from* a word is the mean of its pieces' rows. Special tokens ([CLS], [SEP]) stay
their own unit. Groups come from the encoding's ``word_ids`` (:class:`~bertcore.tokenization.tokenizer.Encoding`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class WordGroups:
    """How T tokens map onto W units (words, plus each special token on its own).

    Attributes:
        labels: W display strings (the pieces joined without ``##``).
        members: W lists of token positions, in order.
        assign: ``(T, W)`` float64 one-hot: ``assign[t, w] = 1`` when token t belongs to unit w.
        token_to_unit: T ints, the unit of each token.
    """

    labels: list[str]
    members: list[list[int]]
    assign: np.ndarray
    token_to_unit: list[int]

    @property
    def num_units(self) -> int:
        return len(self.labels)


def word_groups(tokens: list[str], word_ids: list[int | None]) -> WordGroups:
    """Group tokens by word: consecutive-or-not pieces with the same word id form one unit, in order of
    their first piece; a token whose word id is None (special) is a unit of its own.

    Args:
        tokens: T WordPiece strings (``##`` marks a continuation).
        word_ids: T word indices or None (as :attr:`bertcore.tokenization.tokenizer.Encoding.word_ids`).
    Raises:
        ValueError: lists of different lengths.
    """
    if len(tokens) != len(word_ids):
        raise ValueError(f"tokens ({len(tokens)}) and word_ids ({len(word_ids)}) must have the same length")
    unit_of_word: dict[int, int] = {}
    members: list[list[int]] = []
    token_to_unit: list[int] = []
    for pos, w in enumerate(word_ids):
        if w is None:
            members.append([pos])
            token_to_unit.append(len(members) - 1)
            continue
        if w not in unit_of_word:
            unit_of_word[w] = len(members)
            members.append([])
        members[unit_of_word[w]].append(pos)
        token_to_unit.append(unit_of_word[w])
    labels = ["".join(tok[2:] if i and tok.startswith("##") else tok
                      for i, tok in enumerate(tokens[p] for p in group)) for group in members]
    assign = np.zeros((len(tokens), len(members)))
    assign[np.arange(len(tokens)), token_to_unit] = 1.0
    return WordGroups(labels, members, assign, token_to_unit)


def merge_attention(attention: np.ndarray, groups: WordGroups) -> np.ndarray:
    """Merge the last two axes (queries, keys) of an attention array from tokens into words.

    Args:
        attention: ``(..., T, T)`` attention (rows = queries), e.g. one head, one layer or ``(L, heads, T, T)``.
        groups: :func:`word_groups` of the same T tokens.
    Returns:
        ``(..., W, W)`` float32: ``[..., u, v]`` = mean over the pieces of u of the summed attention
        to the pieces of v. Row sums are preserved (a row of 1s stays 1).
    Raises:
        ValueError: the last two axes are not ``(T, T)``.
    """
    a = np.asarray(attention)
    t = groups.assign.shape[0]
    if a.shape[-2:] != (t, t):
        raise ValueError(f"attention must end in ({t}, {t}) to merge {t} tokens; got {a.shape}")
    sizes = groups.assign.sum(axis=0)  # (W,) pieces per unit
    starts = [m[0] for m in groups.members]
    if all(m == list(range(m[0], m[0] + len(m))) for m in groups.members) and starts == sorted(starts):
        # WordPieces of a word are contiguous: sum blocks in O(T^2) instead of two matmuls
        summed = np.add.reduceat(np.add.reduceat(a, starts, axis=-2), starts, axis=-1)  # rows first: contiguous
        return (summed / sizes[:, None].astype(summed.dtype)).astype(np.float32)  # (..., W, W)
    to_words = a.astype(np.float64) @ groups.assign  # (..., T, W): sum over each word's pieces (keys)
    mean_rows = (groups.assign / sizes[None, :]).T  # (W, T)
    return (mean_rows @ to_words).astype(np.float32)  # (..., W, W): mean over each word's pieces (queries)


def merge_vector(values: np.ndarray, groups: WordGroups, how: str = "sum") -> np.ndarray:
    """Merge the last axis (T tokens) of a per-token array into W words by ``"sum"`` (shares, e.g. a
    rollout row) or ``"mean"``. Returns float64 ``(..., W)``."""
    v = np.asarray(values, dtype=np.float64)
    if v.shape[-1] != groups.assign.shape[0]:
        raise ValueError(f"values must end in {groups.assign.shape[0]} tokens; got {v.shape}")
    summed = v @ groups.assign  # (..., W)
    return summed if how == "sum" else summed / groups.assign.sum(axis=0)
