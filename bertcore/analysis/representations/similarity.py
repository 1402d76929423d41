"""Contextual word vectors and their similarities: subword -> word mean pooling across sentences,
cosine matrices, similarity by layer, a random-pair baseline and a 2-D PCA (the Word senses page,
the Findings page and the positional views share them). Numpy in and out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from transformers import BertTokenizerFast

from ...modeling.model import BertModel
from ...tokenization.tokenizer import Encoding, TextError
from ...vectors import cosine_matrix
from ..attention.activations import run


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
        bertcore.tokenization.tokenizer.TextError: the target is empty, or is not something the tokenizer can read.
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
