"""Comparing two models on the same input: representation similarity per layer (linear CKA,
Kornblith et al. 2019, "Similarity of Neural Network Representations Revisited", section 3 and
equation 2) and per-head attention difference (Jensen-Shannon distance, as Kovaleva et al. 2019,
"Revealing the Dark Secrets of BERT", section 5, compare heads before and after fine-tuning).

Both models must tokenize the input identically (same tokens at the same positions): CKA and
Jensen-Shannon pair up token *i* of one model with token *i* of the other. :func:`run_pair`
checks this and raises :class:`TokenizationMismatch` otherwise.

Never imports streamlit or plotly. Arrays are numpy; CKA is computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from transformers import BertTokenizerFast

from ...modeling.model import BertModel
from ...tokenization.tokenizer import TextError
from ..attention.activations import Activations, run

MAX_SENTENCES = 64  # more lines than this are refused (each is one forward of both models)
GRAM_BYTES = 256 * 2**20  # the Gram-matrix route of cka_matrix holds (La + Lb) float64 (N, N) matrices


class TokenizationMismatch(ValueError):
    """The two models split the input into different tokens, so they cannot be compared token by token."""


# ----------------------------------------------------------------------------- CKA


def _centered(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"representations must have shape (N tokens, features), got {x.shape}")
    return x - x.mean(0, keepdims=True)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA between two representations of the same N examples (Kornblith et al. 2019, eq. 2).

    ``CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)`` after centring each feature (column).
    It is 1 for identical representations, invariant to orthogonal transforms (e.g. a
    permutation of neurons) and to isotropic scaling, and lies in [0, 1].

    Args:
        x: ``(N, D1)`` float; y: ``(N, D2)`` float (D1 may differ from D2).
    Returns:
        a float in [0, 1]; 0.0 when either representation is constant over the N examples.
    Raises:
        ValueError: not 2-D, different N, or N < 2.
    """
    x, y = _centered(x), _centered(y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"CKA needs the same examples in both: got {x.shape[0]} and {y.shape[0]} rows")
    if x.shape[0] < 2:
        raise ValueError("CKA needs at least 2 tokens")
    cross = np.linalg.norm(y.T @ x) ** 2
    norm = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
    return float(np.clip(cross / norm, 0.0, 1.0)) if norm > 0 else 0.0


def _normalized_gram_features(h: np.ndarray) -> np.ndarray:
    """``(layers, N, D)`` -> ``(layers, N*N)``: each layer's centred linear Gram matrix ``X X^T``
    divided by its Frobenius norm, flattened; linear CKA of two layers is the dot product of
    their rows (``tr(K L) / (||K|| ||L||)`` with ``||X^T X||_F = ||X X^T||_F``)."""
    out = []
    for layer in h:
        xc = _centered(layer)
        gram = xc @ xc.T  # (N, N)
        n = np.linalg.norm(gram)
        out.append((gram / n if n > 0 else gram).reshape(-1))
    return np.stack(out)


def cka_matrix(hidden_a: np.ndarray, hidden_b: np.ndarray) -> np.ndarray:
    """Linear CKA between every layer of model A and every layer of model B.

    Args:
        hidden_a: ``(La, N, Da)`` hidden states of model A (e.g. ``L+1`` layers, index 0 = embeddings)
            over N tokens; hidden_b: ``(Lb, N, Db)`` of model B over the same N tokens.
    Returns:
        ``(La, Lb)`` float64 in [0, 1]; entry ``[i, j]`` is ``linear_cka(hidden_a[i], hidden_b[j])``.
    Raises:
        ValueError: not 3-D, different N, or N < 2.
    """
    hidden_a, hidden_b = np.asarray(hidden_a), np.asarray(hidden_b)
    if hidden_a.ndim != 3 or hidden_b.ndim != 3:
        raise ValueError("hidden states must have shape (layers, N tokens, H), "
                         f"got {hidden_a.shape} and {hidden_b.shape}")
    if hidden_a.shape[1] != hidden_b.shape[1]:
        raise ValueError(f"CKA needs the same tokens in both: got {hidden_a.shape[1]} and {hidden_b.shape[1]}")
    if hidden_a.shape[1] < 2:
        raise ValueError("CKA needs at least 2 tokens")
    (la, n, da), (lb, _, db) = hidden_a.shape, hidden_b.shape
    gram_cost, feature_cost = (la + lb) * n * n * max(da, db), la * lb * n * da * db
    if gram_cost <= feature_cost and (la + lb) * n * n * 8 <= GRAM_BYTES:  # the (N, N) Gram form
        return np.clip(_normalized_gram_features(hidden_a) @ _normalized_gram_features(hidden_b).T, 0.0, 1.0)
    return np.array([[linear_cka(a, b) for b in hidden_b] for a in hidden_a])


def layerwise_cka(hidden_a: np.ndarray, hidden_b: np.ndarray) -> np.ndarray:
    """Linear CKA between the same layer index of two models: ``(L, N, Da), (L, N, Db) -> (L,)``.

    Raises:
        ValueError: different numbers of layers (use :func:`cka_matrix`), different N, N < 2.
    """
    if len(hidden_a) != len(hidden_b):
        raise ValueError(f"the models have {len(hidden_a)} and {len(hidden_b)} layers: compare them layer by layer "
                         "with the layer x layer CKA matrix instead")
    return np.array([linear_cka(a, b) for a, b in zip(hidden_a, hidden_b)])


# ----------------------------------------------------------------------------- Jensen-Shannon


def js_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon distance between attention rows, base 2: the square root of the JS
    divergence, equal to scipy's ``jensenshannon(p, q, axis=-1, base=2)`` (to ~1e-7), written
    out so a (layers, heads, T, T) stack runs in float32 one layer at a time (scipy's float64
    temporaries of a 512-token stack are ~150 MB each).

    ``JS(p, q) = sqrt(0.5 KL(p || m) + 0.5 KL(q || m))`` with ``m = (p + q) / 2``: 0 for identical
    rows, 1 for rows with disjoint support. Rows are renormalised to sum to 1; ``0 log 0 = 0``.

    Args:
        p, q: ``(..., T)`` non-negative, same shape (the last axis is the distribution).
    Returns:
        ``(...)`` float64 in [0, 1] (0 for an all-zero row).
    Raises:
        ValueError: shapes differ.
    """
    p, q = np.asarray(p, dtype=np.float32), np.asarray(q, dtype=np.float32)
    if p.shape != q.shape:
        raise ValueError(f"attention maps to compare must have the same shape, got {p.shape} and {q.shape}")
    if p.ndim > 2:  # one leading index at a time keeps the temporaries small
        return np.stack([js_distance(a, b) for a, b in zip(p, q)]) if len(p) else np.zeros(p.shape[:-1])
    sp, sq = p.sum(-1, keepdims=True), q.sum(-1, keepdims=True)
    p = np.divide(p, sp, out=np.zeros_like(p), where=sp > 0)
    q = np.divide(q, sq, out=np.zeros_like(q), where=sq > 0)
    s = p + q  # 2 m
    with np.errstate(divide="ignore", invalid="ignore"):
        twice = np.where(p > 0, p * np.log2(2 * p / s), 0).sum(-1, dtype=np.float64)  # 2 * 0.5 KL(p || m)
        twice += np.where(q > 0, q * np.log2(2 * q / s), 0).sum(-1, dtype=np.float64)
    return np.sqrt(np.clip(0.5 * twice, 0.0, 1.0))


def head_js(attn_a: np.ndarray, attn_b: np.ndarray) -> np.ndarray:
    """Per-head Jensen-Shannon distance, averaged over query rows: ``(L, heads, N, T)`` x 2 -> ``(L, heads)``.

    The query axis may concatenate several sentences (see :func:`run_pair`). Raises
    ``ValueError`` when the two models have different numbers of layers or heads.
    """
    attn_a, attn_b = np.asarray(attn_a), np.asarray(attn_b)
    if attn_a.shape[:2] != attn_b.shape[:2]:
        raise ValueError(f"per-head comparison needs the same layers x heads: model A has "
                         f"{attn_a.shape[0]} x {attn_a.shape[1]}, model B {attn_b.shape[0]} x {attn_b.shape[1]}")
    return js_distance(attn_a, attn_b).mean(-1)


# ----------------------------------------------------------------------------- both models on the input


def sentences_of(text: str, max_sentences: int = MAX_SENTENCES) -> list[str]:
    """The non-empty lines of ``text`` (one sentence or short passage per line).

    Raises:
        bertcore.tokenization.tokenizer.TextError: no non-empty line, or more than ``max_sentences`` lines.
    """
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise TextError("The input is empty: type one sentence per line.")
    if len(lines) > max_sentences:
        raise TextError(f"{len(lines)} lines: compare at most {max_sentences} sentences at once.")
    return lines


@dataclass
class Comparison:
    """Two models run on the same sentences.

    Attributes:
        sentences: the sentences (one forward each, no padding).
        runs_a / runs_b: the :class:`~bertcore.analysis.attention.activations.Activations` of each sentence.
        tokens: the number of tokens pooled for CKA (special tokens excluded unless asked).
        cka: ``(L+1,)`` CKA of the same layer index (index 0 = embeddings); None when the layer counts differ.
        cka_matrix: ``(La+1, Lb+1)`` CKA of every layer pair.
        js: ``(L, heads)`` Jensen-Shannon distance per head, averaged over every query of every
            sentence; None when the layer x head shapes differ.
    """

    sentences: list[str]
    runs_a: list[Activations]
    runs_b: list[Activations]
    tokens: int
    cka: np.ndarray | None
    cka_matrix: np.ndarray
    js: np.ndarray | None


def run_pair(model_a: BertModel, tok_a: BertTokenizerFast, model_b: BertModel, tok_b: BertTokenizerFast,
             sentences: list[str], include_special: bool = False) -> Comparison:
    """Run both encoders on each sentence and compare them (CKA per layer, JS per head).

    Hidden states of all sentences are stacked along the token axis (special tokens dropped
    unless ``include_special``: [CLS]/[SEP] vectors are outliers that would dominate CKA). Each
    sentence is truncated to the shorter of the two models' maximum lengths.

    Raises:
        bertcore.tokenization.tokenizer.TextError: an empty sentence, or fewer than 2 tokens in all.
        TokenizationMismatch: the two tokenizers split a sentence differently.
        bertcore.modeling.embeddings.InputError: ids a model cannot embed.
    """
    # both read the same tokens: a sentence is cut to the shorter of the two models' lengths
    limit = min(int(model_a.config.max_sequence_length), int(model_b.config.max_sequence_length),
                int(tok_a.model_max_length), int(tok_b.model_max_length))
    runs_a, runs_b = [], []
    for i, sentence in enumerate(sentences):
        act_a = run(model_a, tok_a, sentence, max_length=limit)
        act_b = run(model_b, tok_b, sentence, max_length=limit)
        if act_a.tokens != act_b.tokens:
            first = next((k for k, (x, y) in enumerate(zip(act_a.tokens, act_b.tokens)) if x != y),
                         min(len(act_a.tokens), len(act_b.tokens)))
            raise TokenizationMismatch(
                f"the two models tokenize line {i + 1} differently (at token {first}: "
                f"{act_a.tokens[first] if first < len(act_a.tokens) else 'end'!r} vs "
                f"{act_b.tokens[first] if first < len(act_b.tokens) else 'end'!r}), so they cannot be compared token "
                "by token. Compare models that share a vocabulary (e.g. a checkpoint and the model it was "
                "fine-tuned from).")
        runs_a.append(act_a)
        runs_b.append(act_b)
    keep = [np.ones(len(a.tokens), bool) if include_special else ~np.array(a.encoding.special_tokens_mask, bool)
            for a in runs_a]
    hidden_a = np.concatenate([a.hidden_states[:, k] for a, k in zip(runs_a, keep)], axis=1)  # (La+1, N, Ha)
    hidden_b = np.concatenate([b.hidden_states[:, k] for b, k in zip(runs_b, keep)], axis=1)  # (Lb+1, N, Hb)
    n = hidden_a.shape[1]
    if n < 2:
        raise TextError("CKA needs at least 2 tokens: type more text (or include [CLS]/[SEP]).")
    matrix = cka_matrix(hidden_a, hidden_b)
    same_depth = hidden_a.shape[0] == hidden_b.shape[0]
    cka = np.diagonal(matrix).copy() if same_depth else None
    js = None
    if runs_a[0].attentions.shape[:2] == runs_b[0].attentions.shape[:2]:
        # rows of every sentence, weighted by its number of queries
        per = [head_js(a.attentions, b.attentions) * len(a.tokens) for a, b in zip(runs_a, runs_b)]
        js = np.sum(per, axis=0) / sum(len(a.tokens) for a in runs_a)
    return Comparison(list(sentences), runs_a, runs_b, n, cka, matrix, js)
