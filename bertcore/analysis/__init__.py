"""Numpy-side analysis of a BERT forward pass: attentions, per-head statistics, contextual word
embeddings (subword -> word mean pooling), cosine similarities, similarity across layers,
a random-pair baseline and a 2-D PCA.

Never imports streamlit or plotly; every array returned is numpy ``float32`` (or ``float64``
where noted). Layers are indexed as in :class:`~bertcore.model.BertModelOutput`: attentions
``0..L-1`` (layer 1..L), hidden states ``0..L`` (0 = the embedding output).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import BertTokenizerFast

from ..model import BertModel
from ..tokenizer import Encoding, TextError, encode

# ----------------------------------------------------------------------------- forward pass


@dataclass
class Activations:
    """One text (or sentence pair) run through the encoder.

    Attributes:
        encoding: the :class:`~bertcore.tokenizer.Encoding` that was run (T tokens).
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
        bertcore.embeddings.InputError: the encoding does not fit the model (too long, ids out of range).
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
        bertcore.tokenizer.TextError: empty / whitespace-only / unreadable / over-long text.
        bertcore.embeddings.InputError: ids the model cannot embed (a tokenizer that is not the model's).
    """
    limit = min(int(model.config.max_position_embeddings), int(tokenizer.model_max_length))
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


# ----------------------------------------------------------------------------- word vectors


def word_pieces(tokenizer: BertTokenizerFast, word: str) -> list[str]:
    """The WordPiece tokens of ``word`` alone (normalized as the tokenizer does: lower case, accents)."""
    return tokenizer.tokenize(word)


def find_word(encoding: Encoding, pieces: list[str]) -> list[list[int]]:
    """Every occurrence of the piece sequence ``pieces`` in ``encoding`` as whole words.

    An occurrence starts at the first piece of a word and ends at the last piece of a word
    (so ``bank`` does not match inside ``banking``). Returns a list of position lists.
    """
    toks, n = encoding.tokens, len(pieces)
    if n == 0:
        return []
    found = []
    for i in range(1, len(toks) - n + 1):
        if toks[i:i + n] != pieces or encoding.word_ids[i] is None:
            continue
        starts_word = encoding.word_ids[i - 1] != encoding.word_ids[i]
        after = i + n
        ends_word = after >= len(toks) or encoding.word_ids[after] != encoding.word_ids[after - 1]
        if starts_word and ends_word:
            found.append(list(range(i, i + n)))
    return found


def pool(hidden_states: np.ndarray, positions: list[int]) -> np.ndarray:
    """Mean of the hidden vectors at ``positions``: ``(L+1, T, H) -> (L+1, H)`` (a word from its pieces).

    Raises:
        ValueError: no positions, or a position outside ``[0, T)``.
    """
    if not positions:
        raise ValueError("a word needs at least one token position")
    t = hidden_states.shape[-2]
    if min(positions) < 0 or max(positions) >= t:
        raise ValueError(f"positions {positions} outside the {t} tokens")
    return hidden_states[..., positions, :].mean(-2)


@dataclass
class Occurrences:
    """A target word's contextual vectors across sentences.

    Attributes:
        target: the word as typed; ``pieces``: its WordPiece tokens.
        vectors: ``(N, L+1, H)`` float32, mean of the word's piece vectors at every layer
            (first occurrence per sentence).
        sentence_index: ``(N,)`` index into ``sentences`` of each occurrence.
        sentences: every sentence given (cleaned text).
        missing: indices of sentences without the word (or where it fell beyond truncation).
        errors: ``{index: message}`` for sentences that could not be encoded (empty ...).
        others: ``(M, L+1, H)`` vectors of the other words of the sentences (for baselines);
            ``other_words``: their texts (M,).
        truncated: indices of sentences that were truncated to the model's positions.
    """

    target: str
    pieces: list[str]
    vectors: np.ndarray
    sentence_index: np.ndarray
    sentences: list[str]
    missing: list[int] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    others: np.ndarray | None = None
    other_words: list[str] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)


def word_occurrences(model: BertModel, tokenizer: BertTokenizerFast, target: str, sentences: list[str]) -> Occurrences:
    """Contextual vectors of ``target`` in each sentence, and of every other word (for a baseline).

    Sentences are run one at a time (no padding), truncated to the model's positions.

    Raises:
        bertcore.tokenizer.TextError: the target is empty, or is not something the tokenizer can read.
    """
    target = (target or "").strip()
    if not target:
        raise TextError("The target word is empty: type the word to follow across sentences.")
    pieces = word_pieces(tokenizer, target)
    if not pieces:
        raise TextError("The target word has no token BERT can read (only characters the tokenizer drops).")
    if len(pieces) > 32:
        raise TextError(f"The target is {len(pieces)} tokens long; type one word (or a short phrase).")
    vectors, index, others, other_words = [], [], [], []
    missing, truncated, errors, cleaned = [], [], {}, []
    for i, sentence in enumerate(sentences):
        try:
            act = run(model, tokenizer, sentence)
        except TextError as exc:
            errors[i] = str(exc)
            cleaned.append(sentence)
            continue
        enc = act.encoding
        cleaned.append(enc.text)
        if enc.num_truncated:
            truncated.append(i)
        hits = find_word(enc, pieces)
        if not hits:
            missing.append(i)
        else:
            vectors.append(pool(act.hidden_states, hits[0]))
            index.append(i)
        hit_positions = {p for h in hits for p in h}
        for positions in enc.words:
            if hit_positions.intersection(positions):
                continue
            others.append(pool(act.hidden_states, positions))
            other_words.append("".join(enc.tokens[p].removeprefix("##") for p in positions))
    h = model.config.hidden_size
    n_layers = model.config.num_hidden_layers + 1
    empty = np.zeros((0, n_layers, h), np.float32)
    return Occurrences(target, pieces, np.stack(vectors).astype(np.float32) if vectors else empty,
                       np.array(index, dtype=np.int64), cleaned, missing, errors,
                       np.stack(others).astype(np.float32) if others else empty, other_words, truncated)


# ----------------------------------------------------------------------------- similarities


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of the rows of ``x (N, H)`` -> ``(N, N)`` float32 in [-1, 1].

    A zero row has similarity 0 with everything. Raises ``ValueError`` unless ``x`` is 2-D.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must have shape (N, H), got {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    return np.clip(unit @ unit.T, -1.0, 1.0).astype(np.float32)


def similarity_by_layer(vectors: np.ndarray, senses: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Mean cosine similarity per layer of same-sense pairs and of different-sense pairs.

    Args:
        vectors: ``(N, L+1, H)`` occurrences.
        senses: N sense labels; an empty label takes part in no pair.
    Returns:
        ``(same, different)``, each ``(L+1,)`` float32; NaN where there is no such pair.
    Raises:
        ValueError: shapes do not match.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 3 or vectors.shape[0] != len(senses):
        raise ValueError(f"vectors must be (N, layers, H) with N = {len(senses)} senses, got {vectors.shape}")
    n = len(senses)
    labels = np.array([s or "" for s in senses], dtype=object)
    known = labels != ""
    upper = np.triu(np.ones((n, n), bool), 1) & known[:, None] & known[None, :]
    same_mask = upper & (labels[:, None] == labels[None, :])
    diff_mask = upper & (labels[:, None] != labels[None, :])
    same, diff = [], []
    for layer in range(vectors.shape[1]):
        sim = cosine_matrix(vectors[:, layer])
        same.append(sim[same_mask].mean() if same_mask.any() else np.nan)
        diff.append(sim[diff_mask].mean() if diff_mask.any() else np.nan)
    return np.array(same, np.float32), np.array(diff, np.float32)


def random_pair_baseline(vectors: np.ndarray, words: list[str], n_pairs: int = 300,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std per layer of the cosine similarity of random pairs of *different* words.

    Contextual BERT vectors share a common direction, so even unrelated words often have a
    cosine of 0.3 to 0.6 in upper layers: read a target's similarities against this baseline.

    Args:
        vectors: ``(M, L+1, H)`` word vectors; ``words``: their M texts (pairs of the same text are skipped).
        n_pairs: pairs to sample (seeded, reproducible).
    Returns:
        ``(mean, std)`` each ``(L+1,)`` float32; NaN when fewer than 2 distinct words.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 3 or vectors.shape[0] != len(words):
        raise ValueError(f"vectors must be (M, layers, H) with M = {len(words)} words, got {vectors.shape}")
    n_layers = vectors.shape[1]
    rng = np.random.default_rng(seed)
    m = len(words)
    if m < 2 or len(set(words)) < 2:
        nan = np.full(n_layers, np.nan, np.float32)
        return nan, nan.copy()
    a = rng.integers(0, m, size=n_pairs * 3)
    b = rng.integers(0, m, size=n_pairs * 3)
    keep = np.array([words[i] != words[j] for i, j in zip(a, b)])
    a, b = a[keep][:n_pairs], b[keep][:n_pairs]
    va, vb = vectors[a], vectors[b]  # (P, L+1, H)
    num = (va * vb).sum(-1)
    den = np.linalg.norm(va, axis=-1) * np.linalg.norm(vb, axis=-1)
    cos = np.divide(num, den, out=np.zeros_like(num), where=den > 0)  # (P, L+1)
    return cos.mean(0).astype(np.float32), cos.std(0).astype(np.float32)


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Project the rows of ``x (N, H)`` on their first two principal components (scikit-learn PCA).

    Returns ``(points (N, 2) float32, explained_variance_ratio (2,) float32)``; with N = 2 the
    second coordinate is 0 (two points span one direction); identical rows give all zeros.

    Raises:
        ValueError: fewer than 2 rows or not 2-D.
    """
    from sklearn.decomposition import PCA

    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"PCA needs at least 2 vectors of shape (N, H), got {x.shape}")
    if np.allclose(x, x.mean(0), rtol=0.0, atol=1e-7):  # no variance: every point is the same
        return np.zeros((x.shape[0], 2), np.float32), np.zeros(2, np.float32)
    k = min(2, x.shape[0] - 1, x.shape[1])
    pca = PCA(n_components=k, svd_solver="full")
    pts = pca.fit_transform(x)
    ratio = pca.explained_variance_ratio_
    if k < 2:
        pts = np.hstack([pts, np.zeros((pts.shape[0], 2 - k))])
        ratio = np.concatenate([ratio, np.zeros(2 - k)])
    return pts.astype(np.float32), np.nan_to_num(ratio).astype(np.float32)
