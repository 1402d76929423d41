"""Published analyses of BERT, recomputed: pure numpy measures over attention maps and hidden states.

- Clark et al. 2019, "What does BERT look at? An analysis of BERT's attention" (BlackboxNLP),
  section 3: attention to [CLS] / [SEP] / periods and commas per layer (Figure 2), heads that put
  more than half of their attention on the previous / next token (section 3.1), attention entropy
  per head (Figure 4) and of [CLS] in the last layer, broad heads (at most 10% on any token).
- Kovaleva et al. 2019, "Revealing the dark secrets of BERT" (EMNLP), section 4.1: the five
  self-attention pattern types, here with a rule-based classifier (:func:`pattern_type`).
- Ethayarajh 2019, "How contextual are contextualized word representations?" (EMNLP), section 3:
  anisotropy, self-similarity and intra-sentence similarity, the last two adjusted by anisotropy.

Every attention argument is ``(L, heads, T, T)`` (or ``(T, T)`` where noted) float probabilities,
rows = queries summing to 1, as in :class:`bertcore.analysis.attention.activations.Activations`. Functions return
float64 numpy arrays; entropies are in nats (natural log), as Clark et al. report them.
"""

from __future__ import annotations

import numpy as np

from ...vectors import cosine_matrix
from ..attention.activations import check_attention

# ----------------------------------------------------------------------------- Clark et al. 2019

BROAD_MAX = 0.10  # a head is broad when its mean largest weight per query is below this (Clark et al. 3.3)
POSITIONAL_MIN = 0.5  # a previous / next-token head puts more than this on that token (Clark et al. 3.1)


def share_to(attn: np.ndarray, keys: np.ndarray | list[bool]) -> np.ndarray:
    """Mean (over queries) share of attention going to the key positions where ``keys`` is true.

    Args:
        attn: ``(L, heads, T, T)`` attention probabilities.
        keys: ``(T,)`` bool, e.g. the [SEP] positions.
    Returns:
        ``(L, heads)`` float64 in [0, 1].
    Raises:
        ValueError: wrong shapes.
    """
    attn = check_attention(attn, 4)
    keys = np.asarray(keys, dtype=bool)
    if keys.shape != (attn.shape[-1],):
        raise ValueError(f"keys must have one flag per token ({attn.shape[-1]}), got shape {keys.shape}")
    return attn[..., keys].sum(-1, dtype=np.float64).mean(-1)


def offset_share(attn: np.ndarray, offset: int) -> np.ndarray:
    """Mean attention a query ``i`` puts on token ``i + offset`` (``-1``: previous, ``+1``: next token).

    Averaged over the queries that have such a token (``T - |offset|`` of them).

    Returns:
        ``(L, heads)`` float64 in [0, 1]; zeros when ``|offset| >= T``.
    """
    attn = check_attention(attn, 4)
    t = attn.shape[-1]
    if abs(offset) >= t:
        return np.zeros(attn.shape[:2])
    diag = np.diagonal(attn, offset=offset, axis1=-2, axis2=-1)  # (L, heads, T - |offset|)
    return diag.astype(np.float64).mean(-1)


def positional_heads(share: np.ndarray, threshold: float = POSITIONAL_MIN) -> list[tuple[int, int]]:
    """``(layer, head)`` pairs (0-based block and head; Clark et al.'s "layer-head" name of one is
    ``f"{layer + 1}-{head + 1}"``) whose share is above ``threshold``."""
    layers, heads = np.nonzero(np.asarray(share) > threshold)
    return [(int(layer), int(head)) for layer, head in zip(layers, heads)]


def entropy(attn: np.ndarray) -> np.ndarray:
    """Entropy of each query's attention distribution, in nats: ``(L, heads, T, T) -> (L, heads, T)``.

    0 = all weight on one token; ``ln T`` = uniform over T tokens.
    """
    attn = check_attention(attn, 4).astype(np.float64)
    return -(attn * np.log(np.clip(attn, 1e-12, 1.0))).sum(-1)


def max_weight(attn: np.ndarray) -> np.ndarray:
    """The largest weight in each query's row: ``(L, heads, T, T) -> (L, heads, T)`` float64."""
    return check_attention(attn, 4).max(-1).astype(np.float64)


def broad_heads(mean_max_weight: np.ndarray, threshold: float = BROAD_MAX) -> np.ndarray:
    """Bool ``(L, heads)``: heads whose mean largest weight per query is below ``threshold`` (10%).

    Clark et al. 2019, section 3.3: broad heads "spend at most 10% of their attention mass on any
    single word".
    """
    return np.asarray(mean_max_weight) < threshold


# ----------------------------------------------------------------------------- Kovaleva et al. 2019

PATTERNS = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
PATTERN_RULES = {
    "vertical_min": 0.5,  # share on [CLS]/[SEP] keys for "vertical"
    "diagonal_min": 0.5,  # share on keys i-1, i, i+1 for "diagonal"
    "other_max": 0.25,  # ... while the other score stays below this
    "mixed_min": 0.2,  # "vertical+diagonal": both scores at least this ...
    "mixed_sum": 0.6,  # ... and together at least this
    "block_min": 0.9,  # share of (non-special) attention staying inside the query's own segment
}


def pattern_scores(attn: np.ndarray, special: np.ndarray, segment: np.ndarray) -> dict[str, np.ndarray]:
    """The three scores the pattern classifier reads, per head.

    Args:
        attn: ``(L, heads, T, T)``.
        special: ``(T,)`` bool, the [CLS] / [SEP] positions.
        segment: ``(T,)`` int, the segment (token_type_ids: 0 for A, 1 for B) of each token.
    Returns:
        ``{"vertical", "diagonal", "block"}``, each ``(L, heads)`` float64 in [0, 1]:
        vertical = mean share on special keys; diagonal = mean share on keys ``i-1, i, i+1``
        (queries and keys that are not special); block = for queries that are not special, the
        share of their attention to non-special keys that stays in their own segment (NaN with a
        single segment).
    """
    attn = check_attention(attn, 4).astype(np.float64)
    special = np.asarray(special, dtype=bool)
    segment = np.asarray(segment)
    t = attn.shape[-1]
    if special.shape != (t,) or segment.shape != (t,):
        raise ValueError(f"special and segment need one entry per token ({t})")
    vertical = attn[..., special].sum(-1).mean(-1)
    idx = np.arange(t)
    near = (np.abs(idx[:, None] - idx[None, :]) <= 1) & ~special[None, :]  # (T, T) keys near the query
    queries = ~special
    diag = (attn * near).sum(-1)[..., queries].mean(-1) if queries.any() else np.zeros(attn.shape[:2])
    if len(np.unique(segment[queries])) < 2:
        block = np.full(attn.shape[:2], np.nan)
    else:
        same = (segment[:, None] == segment[None, :]) & ~special[None, :]  # (T, T)
        inside = (attn * same).sum(-1)[..., queries]
        ordinary = attn[..., ~special].sum(-1)[..., queries]
        block = np.divide(inside, ordinary, out=np.ones_like(inside), where=ordinary > 1e-9).mean(-1)
    return {"vertical": vertical, "diagonal": diag, "block": block}


def pattern_type(vertical: float, diagonal: float, block: float) -> str:
    """Kovaleva et al.'s five pattern types, by rules on :func:`pattern_scores` (thresholds in ``PATTERN_RULES``).

    Kovaleva et al. trained a CNN on ~400 hand-labelled maps; this is a transparent stand-in:

    1. vertical: ``vertical >= 0.5`` and ``diagonal < 0.25``
    2. diagonal: ``diagonal >= 0.5`` and ``vertical < 0.25``
    3. vertical+diagonal: both ``>= 0.2`` and ``vertical + diagonal >= 0.6``
    4. block: ``block >= 0.9`` (two segments; attention stays inside the query's sentence)
    5. heterogeneous: everything else.
    """
    r = PATTERN_RULES
    if vertical >= r["vertical_min"] and diagonal < r["other_max"]:
        return "vertical"
    if diagonal >= r["diagonal_min"] and vertical < r["other_max"]:
        return "diagonal"
    if vertical >= r["mixed_min"] and diagonal >= r["mixed_min"] and vertical + diagonal >= r["mixed_sum"]:
        return "vertical+diagonal"
    if not np.isnan(block) and block >= r["block_min"]:
        return "block"
    return "heterogeneous"


def pattern_counts(attn: np.ndarray, special: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """How many heads of each layer have each pattern type on this input: ``(L, 5)`` int (order of ``PATTERNS``)."""
    scores = pattern_scores(attn, special, segment)
    n_layers, n_heads = scores["vertical"].shape
    counts = np.zeros((n_layers, len(PATTERNS)), dtype=np.int64)
    for layer in range(n_layers):
        for head in range(n_heads):
            kind = pattern_type(scores["vertical"][layer, head], scores["diagonal"][layer, head],
                                scores["block"][layer, head])
            counts[layer, PATTERNS.index(kind)] += 1
    return counts


# ----------------------------------------------------------------------------- Ethayarajh 2019


def _pair_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of ``(..., H)`` arrays (0 where a vector is zero)."""
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def anisotropy(vectors: np.ndarray, words: list[str], n_pairs: int = 1000, seed: int = 0) -> np.ndarray:
    """Mean cosine of random pairs of occurrences of *different* words, per layer (Ethayarajh 2019,
    sections 3.4 and 4.1).

    The baseline that :func:`self_similarity` and :func:`intra_similarity` subtract: in an isotropic
    space it is 0; in BERT it is well above 0, so raw cosines overstate how similar two words are.

    Args:
        vectors: ``(N, L+1, H)`` word vectors (one row per occurrence); ``words``: their N texts.
        n_pairs: pairs to sample (seeded).
    Returns:
        ``(L+1,)`` float64; NaN when there are fewer than 2 distinct words.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 3 or vectors.shape[0] != len(words):
        raise ValueError(f"vectors must be (N, layers, H) with N = {len(words)} words, got {vectors.shape}")
    if len(set(words)) < 2:
        return np.full(vectors.shape[1], np.nan)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(words), size=n_pairs * 4)
    b = rng.integers(0, len(words), size=n_pairs * 4)
    labels = np.asarray(words, dtype=object)
    keep = labels[a] != labels[b]
    a, b = a[keep][:n_pairs], b[keep][:n_pairs]
    return _pair_cosines(vectors[a], vectors[b]).mean(0)


def self_similarity(vectors: np.ndarray, words: list[str], min_contexts: int = 2) -> np.ndarray:
    """Average cosine between the occurrences of the same word in different contexts, per layer.

    ``SelfSim(w) = mean over pairs j < k of cos(f(w, s_j), f(w, s_k))`` (Ethayarajh 2019, section 3.3,
    Definition 1), averaged over the words with at least ``min_contexts`` occurrences (one row of
    ``vectors`` per context).

    Returns:
        ``(L+1,)`` float64 (1 when every occurrence has the same vector); NaN if no word qualifies.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 3 or vectors.shape[0] != len(words):
        raise ValueError(f"vectors must be (N, layers, H) with N = {len(words)} words, got {vectors.shape}")
    groups: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        groups.setdefault(w, []).append(i)
    per_word = []
    for rows in groups.values():
        if len(rows) < max(2, min_contexts):
            continue
        upper = np.triu_indices(len(rows), 1)
        per_word.append([cosine_matrix(vectors[rows, layer])[upper].astype(np.float64).mean()
                         for layer in range(vectors.shape[1])])
    return np.asarray(per_word).mean(0) if per_word else np.full(vectors.shape[1], np.nan)


def intra_similarity(vectors: np.ndarray) -> np.ndarray:
    """Mean cosine between each word of one sentence and the sentence's mean vector, per layer.

    ``IntraSim(s) = 1/n sum_i cos(s_mean, f(w_i))`` (Ethayarajh 2019, section 3.3, Definition 2).

    Args:
        vectors: ``(n, L+1, H)``, the n words of one sentence.
    Returns:
        ``(L+1,)`` float64; NaN for a sentence of fewer than 2 words.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 3:
        raise ValueError(f"vectors must be (n, layers, H), got {vectors.shape}")
    if vectors.shape[0] < 2:
        return np.full(vectors.shape[1], np.nan)
    mean = vectors.mean(0, keepdims=True)  # (1, L+1, H)
    return _pair_cosines(vectors, np.broadcast_to(mean, vectors.shape)).mean(0)


def adjust(raw: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Anisotropy-adjusted similarity: ``raw - baseline`` per layer (Ethayarajh 2019, section 3.4)."""
    return np.asarray(raw, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
