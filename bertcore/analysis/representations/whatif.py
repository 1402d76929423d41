"""What if I change one word? Two inputs A and B run through the same model, compared token by token
(LIT's side-by-side mode, Tenney et al. 2020, "The Language Interpretability Tool", section 3).

Tokens are aligned on the WordPieces with :class:`difflib.SequenceMatcher` (``autojunk=False``): every token of
an ``equal`` block is paired with its partner, and a ``replace`` block of equal length on both sides is paired
one for one (``keys`` with ``key``: the same slot of the sentence); inserted, deleted and unequal replaced tokens
have no partner. Over the aligned pairs:

- **hidden states**: the cosine similarity of each pair at every layer, ``(L+1, n)`` (index 0 = embeddings);
- **attention**: the Jensen-Shannon distance (base 2, :func:`compare.js_distance`) of each pair's attention
  rows, per layer and head, ``(L, heads, n)``. A row is compared **over the aligned keys only**: the weights
  on keys without a partner are dropped and the rest renormalised to sum to 1 (a distribution over keys that
  exist in one input only has nothing to be compared with). How much was dropped is kept as
  ``dropped_a`` / ``dropped_b`` ``(L, heads)``, the mean over aligned queries of the attention on unpaired keys;
- **fill-mask** (a model with an MLM head): the k-th ``[MASK]`` of A against the k-th of B, the top-k of each
  and the change of probability ``p_B - p_A`` of every word in either top-k.

Identical inputs give exactly zero difference: identical encodings run once, the cosine is computed as
``1 - ||a/|a| - b/|b|||^2 / 2`` (scikit-learn's ``paired_cosine_distances``, exactly 1 for equal vectors, and
accurate where the distance is tiny), and the JS distance of two equal rows is exactly 0.

Never imports streamlit or plotly. Arrays are numpy, float64 for the measures.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np
import torch

from ...readouts.fill_mask import FillMaskError, mlm_head_of, mlm_logits_at
from ...tokenization.tokenizer import encode
from ..attention.ablation import paired_cosine
from ..attention.activations import Activations, run_encoding
from .compare import js_distance

DEFAULT_K = 5


# ----------------------------------------------------------------------------- alignment
@dataclass
class Alignment:
    """WordPieces of A paired with WordPieces of B.

    Attributes:
        a / b: ``(n,)`` int64 positions in A and in B of the n aligned pairs, increasing.
        same: ``(n,)`` bool, True where the two tokens are equal (False: a one-for-one replacement).
        only_a / only_b: positions without a partner (deleted from A, inserted into B).
        opcodes: :meth:`difflib.SequenceMatcher.get_opcodes` (tag, a0, a1, b0, b1).
    """

    a: np.ndarray
    b: np.ndarray
    same: np.ndarray
    only_a: list[int]
    only_b: list[int]
    opcodes: list[tuple[str, int, int, int, int]]

    def __len__(self) -> int:
        return int(self.a.size)


def align(tokens_a: list[str], tokens_b: list[str]) -> Alignment:
    """Align two token lists with :class:`difflib.SequenceMatcher` (``autojunk=False``; see the module docstring).

    Identical lists give the identity pairing. Raises nothing (empty lists give an empty alignment).
    """
    ops = difflib.SequenceMatcher(None, list(tokens_a), list(tokens_b), autojunk=False).get_opcodes()
    a, b, same, only_a, only_b = [], [], [], [], []
    for tag, a0, a1, b0, b1 in ops:
        if tag == "equal" or (tag == "replace" and a1 - a0 == b1 - b0):
            a += range(a0, a1)
            b += range(b0, b1)
            same += [tag == "equal"] * (a1 - a0)
        else:
            only_a += range(a0, a1)
            only_b += range(b0, b1)
    return Alignment(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(same, dtype=bool),
                     only_a, only_b, [tuple(o) for o in ops])


# ----------------------------------------------------------------------------- the measures
def aligned_cosine(hidden_a: np.ndarray, hidden_b: np.ndarray, alignment: Alignment) -> np.ndarray:
    """Cosine of each aligned pair's hidden states at every layer.

    Args:
        hidden_a: ``(L+1, Ta, H)``; hidden_b: ``(L+1, Tb, H)`` (same model).
    Returns:
        ``(L+1, n)`` float64 in [-1, 1]; exactly 1.0 where the two vectors are equal.
    Raises:
        ValueError: different layer counts or widths.
    """
    hidden_a, hidden_b = np.asarray(hidden_a), np.asarray(hidden_b)
    if hidden_a.ndim != 3 or hidden_a.shape[::2] != hidden_b.shape[::2]:
        raise ValueError(f"hidden states must be (layers, T, H) of one model, got {hidden_a.shape} and "
                         f"{hidden_b.shape}")
    layers, n = hidden_a.shape[0], len(alignment)
    if n == 0:
        return np.zeros((layers, 0))
    x = hidden_a[:, alignment.a].reshape(layers * n, -1)  # (L+1 * n, H)
    y = hidden_b[:, alignment.b].reshape(layers * n, -1)
    return paired_cosine(x, y).reshape(layers, n)


def aligned_js(attn_a: np.ndarray, attn_b: np.ndarray, alignment: Alignment) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray]:
    """Jensen-Shannon distance of the aligned queries' attention rows, over the aligned keys.

    Args:
        attn_a: ``(L, heads, Ta, Ta)``; attn_b: ``(L, heads, Tb, Tb)`` (same model).
    Returns:
        ``(js (L, heads, n), dropped_a (L, heads), dropped_b (L, heads))``: the distance (base 2, in [0, 1]) per
        aligned query, and the mean attention of the aligned queries on keys without a partner (removed before
        the rows are renormalised). Exactly 0 where two rows are equal.
    Raises:
        ValueError: different layer x head shapes.
    """
    attn_a, attn_b = np.asarray(attn_a), np.asarray(attn_b)
    if attn_a.ndim != 4 or attn_a.shape[:2] != attn_b.shape[:2]:
        raise ValueError(f"attentions must be (layers, heads, T, T) of one model, got {attn_a.shape} and "
                         f"{attn_b.shape}")
    layers, heads = attn_a.shape[:2]
    if len(alignment) == 0:
        return np.zeros((layers, heads, 0)), np.zeros((layers, heads)), np.zeros((layers, heads))
    queries_a, queries_b = attn_a[:, :, alignment.a], attn_b[:, :, alignment.b]  # (L, heads, n, T)
    rows_a, rows_b = queries_a[..., alignment.a], queries_b[..., alignment.b]  # (L, heads, n, n): aligned keys
    dropped_a = queries_a[..., alignment.only_a].sum(-1, dtype=np.float64).mean(-1)  # (L, heads); 0 if none
    dropped_b = queries_b[..., alignment.only_b].sum(-1, dtype=np.float64).mean(-1)
    return js_distance(rows_a, rows_b), np.clip(dropped_a, 0.0, 1.0), np.clip(dropped_b, 0.0, 1.0)


# ----------------------------------------------------------------------------- fill-mask
@dataclass
class MaskComparison:
    """The k-th [MASK] of A and the k-th [MASK] of B.

    Attributes:
        position_a / position_b: token positions in A and B.
        top_a / top_b: the k most probable WordPieces at each, with ``probs_a`` / ``probs_b`` (plain softmax).
        candidates: every word of either top-k (A's first), with ``p_a``, ``p_b`` ``(m,)`` float64 their
            probabilities in A and in B and ``delta = p_b - p_a``.
    """

    position_a: int
    position_b: int
    top_a: list[str]
    probs_a: list[float]
    top_b: list[str]
    probs_b: list[float]
    candidates: list[str]
    p_a: np.ndarray
    p_b: np.ndarray

    @property
    def delta(self) -> np.ndarray:
        return self.p_b - self.p_a


def mask_comparisons(tokenizer, logits_a: torch.Tensor, logits_b: torch.Tensor, positions_a: list[int],
                     positions_b: list[int], k: int = DEFAULT_K) -> list[MaskComparison]:
    """Top-k and Δ probability at paired [MASK]s from MLM logits ``(Na, V)`` and ``(Nb, V)`` at ``positions_a`` /
    ``positions_b``; the first ``min(Na, Nb)`` are paired in order. Raises ``FillMaskError`` for k < 1."""
    if k < 1:
        raise FillMaskError(f"k must be at least 1, got {k}")
    probs_a = logits_a.double().softmax(-1)  # (Na, V)
    probs_b = logits_b.double().softmax(-1)  # (Nb, V)
    out = []
    for i in range(min(len(positions_a), len(positions_b))):  # paired [MASK]s, a handful
        pa, ia = probs_a[i].topk(min(k, probs_a.size(-1)))
        pb, ib = probs_b[i].topk(min(k, probs_b.size(-1)))
        ids = list(dict.fromkeys(ia.tolist() + ib.tolist()))
        out.append(MaskComparison(
            positions_a[i], positions_b[i], tokenizer.convert_ids_to_tokens(ia.tolist()), pa.tolist(),
            tokenizer.convert_ids_to_tokens(ib.tolist()), pb.tolist(), tokenizer.convert_ids_to_tokens(ids),
            probs_a[i, ids].cpu().numpy(), probs_b[i, ids].cpu().numpy()))
    return out


# ----------------------------------------------------------------------------- both inputs
@dataclass
class WhatIf:
    """Inputs A and B through one model (see the module docstring).

    Attributes:
        act_a / act_b: the :class:`~bertcore.analysis.attention.activations.Activations` of each (the same
            object when the encodings are identical).
        alignment: the WordPiece :class:`Alignment`.
        cosine: ``(L+1, n)`` float64, aligned tokens' hidden-state cosine per layer (0 = embeddings).
        js: ``(L, heads, n)`` float64, aligned queries' attention JS distance per layer and head.
        dropped_a / dropped_b: ``(L, heads)`` attention share on unpaired keys (left out of ``js``).
        masks: the paired [MASK]s' :class:`MaskComparison`; None when the model has no MLM head.
        unpaired_masks: [MASK]s of A and B beyond the paired ones (A and B hold different counts).
    """

    act_a: Activations
    act_b: Activations
    alignment: Alignment
    cosine: np.ndarray
    js: np.ndarray
    dropped_a: np.ndarray
    dropped_b: np.ndarray
    masks: list[MaskComparison] | None = None
    unpaired_masks: int = 0
    identical: bool = False

    @property
    def head_js(self) -> np.ndarray:
        """``(L, heads)`` mean JS distance over the aligned queries (0 with no aligned token)."""
        return self.js.mean(-1) if self.js.shape[-1] else np.zeros(self.js.shape[:2])

    def labels(self) -> list[str]:
        """One label per aligned pair: the token, or ``"keys→key"`` where the pair was replaced."""
        ta, tb = self.act_a.tokens, self.act_b.tokens
        return [ta[i] if s else f"{ta[i]}→{tb[j]}" for i, j, s in zip(self.alignment.a, self.alignment.b,
                                                                      self.alignment.same)]


def compare_activations(act_a: Activations, act_b: Activations) -> WhatIf:
    """Align and compare two runs of one model (no fill-mask). Raises ``ValueError`` for two models' runs."""
    alignment = align(act_a.tokens, act_b.tokens)
    cosine = aligned_cosine(act_a.hidden_states, act_b.hidden_states, alignment)
    js, dropped_a, dropped_b = aligned_js(act_a.attentions, act_b.attentions, alignment)
    return WhatIf(act_a, act_b, alignment, cosine, js, dropped_a, dropped_b,
                  identical=act_a.encoding.input_ids == act_b.encoding.input_ids
                  and act_a.encoding.token_type_ids == act_b.encoding.token_type_ids)


def _mask_positions(tokenizer, act: Activations) -> list[int]:
    return [i for i, t in enumerate(act.encoding.input_ids) if t == tokenizer.mask_token_id]


def compare(model: torch.nn.Module, tokenizer, text_a: str, text_b: str, pair_a: str | None = None,
            pair_b: str | None = None, max_length: int | None = None, k: int = DEFAULT_K,
            act_a: Activations | None = None) -> WhatIf:
    """Run ``model`` on A (``text_a`` [+ ``pair_a``]) and B (``text_b`` [+ ``pair_b``]) and compare them.

    Args:
        model: a :class:`~bertcore.modeling.model.BertModel` or any head class (its ``base_model`` gives the hidden
            states and attentions; an MLM head adds the fill-mask comparison), in eval mode. Never changed.
        tokenizer: its tokenizer; ``[MASK]`` typed in either text is its mask token.
        max_length: the most tokens per input (default and upper bound: the model's positions and the
            tokenizer's maximum); longer inputs are cut, ``act_b.encoding.num_truncated`` says by how much.
        k: how many guesses per [MASK].
        act_a: A's activations when the caller already has them (a cached forward of the same encoding).
    Returns:
        a :class:`WhatIf`.
    Raises:
        bertcore.tokenization.tokenizer.TextError: an empty or unreadable A or B.
        bertcore.modeling.embeddings.InputError: ids the model cannot embed.
    """
    encoder = model.base_model
    limit = min(int(encoder.config.max_sequence_length), int(tokenizer.model_max_length))
    limit = limit if max_length is None else min(int(max_length), limit)
    enc_a = encode(tokenizer, text_a, pair_a, max_length=limit)
    enc_b = encode(tokenizer, text_b, pair_b, max_length=limit)
    if act_a is None or act_a.encoding.input_ids != enc_a.input_ids \
            or act_a.encoding.token_type_ids != enc_a.token_type_ids:
        act_a = run_encoding(encoder, enc_a)
    same = enc_a.input_ids == enc_b.input_ids and enc_a.token_type_ids == enc_b.token_type_ids
    act_b = act_a if same else run_encoding(encoder, enc_b)  # identical inputs run once: exactly zero difference
    result = compare_activations(act_a, act_b)
    pos_a, pos_b = _mask_positions(tokenizer, act_a), _mask_positions(tokenizer, act_b)
    result.unpaired_masks = abs(len(pos_a) - len(pos_b))
    try:
        mlm_head_of(model)
    except FillMaskError:
        return result  # no MLM head: hidden states and attention only (masks stays None)
    result.masks = []
    if pos_a and pos_b:
        device = next(model.parameters()).device
        t_a, t_b = enc_a.tensors(device), enc_b.tensors(device)
        logits_a = mlm_logits_at(model, t_a["input_ids"], pos_a, t_a["attention_mask"], t_a["token_type_ids"])
        logits_b = logits_a if same else mlm_logits_at(model, t_b["input_ids"], pos_b, t_b["attention_mask"],
                                                       t_b["token_type_ids"])
        result.masks = mask_comparisons(tokenizer, logits_a.float().cpu(), logits_b.float().cpu(), pos_a, pos_b, k)
    return result
