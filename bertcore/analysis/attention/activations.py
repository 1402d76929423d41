"""Running a BERT for the views: activations (attentions, hidden states) of one text or pair, the
token table, and per-head attention statistics. Numpy out; see :mod:`bertcore.analysis`."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np
import torch
from transformers import BertTokenizerFast

from ...modeling.model import BertModel
from ...tokenization.tokenizer import Encoding, encode

# ----------------------------------------------------------------------------- forward pass


@dataclass
class Activations:
    """One text (or sentence pair) run through the encoder.

    Attributes:
        encoding: the :class:`~bertcore.tokenization.tokenizer.Encoding` that was run (T tokens).
        attentions: ``(L, heads, T, T)`` float32 attention probabilities; rows (queries) sum to 1.
        hidden_states: ``(L+1, T, H)`` float32; index 0 is the embedding output.
    """

    encoding: Encoding
    attentions: np.ndarray
    hidden_states: np.ndarray

    @property
    def tokens(self) -> list[str]:
        return self.encoding.tokens

    @property
    def num_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.attentions.shape[1])


@torch.no_grad()
def run_encoding(model: BertModel, encoding: Encoding) -> Activations:
    """Run ``model`` (a :class:`BertModel`, eval mode) on one encoding with attentions and hidden states.

    Raises:
        bertcore.modeling.embeddings.InputError: the encoding does not fit the model (too long, ids out of range).
    """
    device = next(model.parameters()).device
    out = model(**encoding.tensors(device), output_attentions=True, output_hidden_states=True)
    attentions = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()  # (L, heads, T, T)
    hidden = torch.stack([h[0] for h in out.hidden_states]).float().cpu().numpy()  # (L+1, T, H)
    return Activations(encoding, attentions, hidden)


def run(model: BertModel, tokenizer: BertTokenizerFast, text: str, text_pair: str | None = None,
        max_length: int | None = None) -> Activations:
    """Encode ``text`` (and ``text_pair``) truncated to the model's positions, then :func:`run_encoding`.

    ``max_length`` defaults to ``min(model.config.max_position_embeddings, tokenizer max)``;
    ``result.encoding.num_truncated`` says how many tokens were dropped.

    Raises:
        bertcore.tokenization.tokenizer.TextError: empty / whitespace-only / unreadable / over-long text.
        bertcore.modeling.embeddings.InputError: ids the model cannot embed (a tokenizer that is not the model's).
    """
    limit = min(int(model.config.max_sequence_length), int(tokenizer.model_max_length))
    enc = encode(tokenizer, text, text_pair, max_length=limit if max_length is None else min(max_length, limit))
    return run_encoding(model, enc)


# ----------------------------------------------------------------------------- tokens


def show_invisible(text: str) -> str:
    """``text`` with invisible characters made visible: format / control / unusual space
    characters become ``⟨U+200B⟩``-style markers (tab and newline become ``⟨TAB⟩`` / ``⟨LF⟩``)."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "\t":
            out.append("⟨TAB⟩")
        elif ch in "\n\r":
            out.append("⟨LF⟩" if ch == "\n" else "⟨CR⟩")
        elif cat in ("Cf", "Cc", "Co", "Cn") or (cat.startswith("Z") and ch != " "):
            out.append(f"⟨U+{ord(ch):04X}⟩")
        else:
            out.append(ch)
    return "".join(out)


def normalize(tokenizer: BertTokenizerFast, text: str) -> str:
    """The text as the tokenizer's normalizer sees it (lower case, accents stripped for uncased BERT)."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    return normalizer.normalize_str(text) if normalizer is not None else text


def word_rows(encoding: Encoding, tokenizer: BertTokenizerFast) -> list[dict]:
    """One row per word of the encoding: what was typed vs what the tokenizer made of it.

    Keys: ``word`` (index), ``segment`` ("A"/"B"), ``typed`` (the input span, invisible
    characters shown as markers), ``normalized`` (after the tokenizer's normalizer),
    ``pieces`` (WordPiece tokens joined by spaces), ``ids``, ``n_pieces``, ``unknown``
    (True when a piece is the unknown token).
    """
    rows = []
    for positions in encoding.words:
        first, last = positions[0], positions[-1]
        seq = encoding.sequence_ids[first]
        source = encoding.text_pair if seq == 1 and encoding.text_pair is not None else encoding.text
        typed = source[encoding.offsets[first][0]:encoding.offsets[last][1]]
        pieces = [encoding.tokens[p] for p in positions]
        rows.append({
            "word": encoding.word_ids[first],
            "segment": "B" if seq == 1 else "A",
            "typed": show_invisible(typed),
            "normalized": show_invisible(normalize(tokenizer, typed)),
            "pieces": " ".join(pieces),
            "ids": " ".join(str(encoding.input_ids[p]) for p in positions),
            "n_pieces": len(positions),
            "unknown": tokenizer.unk_token in pieces,
        })
    return rows


# ----------------------------------------------------------------------------- attention


def check_attention(attn: np.ndarray, ndim: int = 4) -> np.ndarray:
    """Return ``attn`` as float array after checking it has ``ndim`` dims and square last two.

    Raises:
        ValueError: wrong number of dimensions or non-square (T, T) maps.
    """
    attn = np.asarray(attn, dtype=np.float32)
    if attn.ndim != ndim or attn.shape[-1] != attn.shape[-2]:
        want = {2: "(T, T)", 3: "(heads, T, T)", 4: "(layers, heads, T, T)"}[ndim]
        raise ValueError(f"attention must have shape {want}, got {attn.shape}")
    return attn


def hide_tokens(attn: np.ndarray, hidden: np.ndarray | list[bool], renormalize: bool = True) -> np.ndarray:
    """Zero the attention *to* the key positions where ``hidden`` is true (e.g. [CLS]/[SEP]).

    Args:
        attn: ``(..., T, T)`` probabilities (queries x keys).
        hidden: ``(T,)`` bool, the key positions to hide.
        renormalize: rescale each row to sum to 1 over the remaining keys (rows whose whole
            mass went to hidden keys become all zero).
    Returns:
        a new float32 array, same shape.
    Raises:
        ValueError: ``hidden`` does not have length T.
    """
    attn = np.array(attn, dtype=np.float32, copy=True)
    hidden = np.asarray(hidden, dtype=bool)
    if hidden.shape != (attn.shape[-1],):
        raise ValueError(f"hidden must have one flag per token ({attn.shape[-1]}), got shape {hidden.shape}")
    attn[..., hidden] = 0.0
    if renormalize:
        total = attn.sum(-1, keepdims=True)
        np.divide(attn, total, out=attn, where=total > 1e-12)
    return attn


def is_punctuation(token: str) -> bool:
    """True for a token made only of punctuation characters (Unicode category P*), e.g. ``.`` ``,`` ``"``."""
    token = token.removeprefix("##")
    return bool(token) and all(unicodedata.category(ch).startswith("P") for ch in token)


@dataclass
class HeadStats:
    """Per-head statistics, each ``(L, heads)`` float32, averaged over the query tokens.

    Attributes:
        entropy: mean entropy of a query's attention distribution, in bits (0 = all on one
            token; log2(T) = uniform).
        to_cls / to_sep / to_punct: mean share of attention going to [CLS], to [SEP], to
            punctuation tokens (0..1).
        distance: mean attention distance ``sum_j a_ij |i - j|`` in tokens.
        max_entropy: log2(T), the entropy of uniform attention, for scale.
    """

    entropy: np.ndarray
    to_cls: np.ndarray
    to_sep: np.ndarray
    to_punct: np.ndarray
    distance: np.ndarray
    max_entropy: float

    NAMES = {
        "entropy": "Entropy (bits)",
        "to_cls": "Share to [CLS]",
        "to_sep": "Share to [SEP]",
        "to_punct": "Share to punctuation",
        "distance": "Mean distance (tokens)",
    }


def head_stats(attn: np.ndarray, tokens: list[str], cls_token: str = "[CLS]", sep_token: str = "[SEP]") -> HeadStats:
    """Statistics of every head of every layer.

    Args:
        attn: ``(L, heads, T, T)`` attention probabilities.
        tokens: the T token strings (to find [CLS], [SEP] and punctuation).
        cls_token / sep_token: the tokenizer's special tokens (``tokenizer.cls_token``).
    Raises:
        ValueError: wrong shape or ``len(tokens) != T``.
    """
    attn = check_attention(attn, 4)
    t = attn.shape[-1]
    if len(tokens) != t:
        raise ValueError(f"got {len(tokens)} tokens for attention over {t} positions")
    p = np.clip(attn, 1e-12, 1.0)
    entropy = -(attn * np.log2(p)).sum(-1).mean(-1)  # (L, heads)
    is_cls = np.array([tok == cls_token for tok in tokens])
    is_sep = np.array([tok == sep_token for tok in tokens])
    is_punct = np.array([is_punctuation(tok) for tok in tokens])
    share = lambda mask: attn[..., mask].sum(-1).mean(-1)  # noqa: E731  (L, heads)
    idx = np.arange(t)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(np.float32)  # (T, T)
    distance = (attn * dist).sum(-1).mean(-1)
    return HeadStats(entropy.astype(np.float32), share(is_cls).astype(np.float32), share(is_sep).astype(np.float32),
                     share(is_punct).astype(np.float32), distance.astype(np.float32),
                     float(np.log2(t)) if t > 1 else 0.0)
