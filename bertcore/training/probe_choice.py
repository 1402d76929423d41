"""Probe sentences that show learning early: held-out sentences whose masked word its neighbours predict.

A from-scratch MLM first learns token frequencies (the unigram plateau), then local statistics: which
word fills a slot between two given neighbours (Chang & Bergen 2022, "Word acquisition in neural
language models": frequent words and bigram statistics come first). A fixed hand-written probe ("The
government said it would [MASK] the new law next [MASK].") asks for more than that, so it shows nothing
until late. :func:`choose_probes` picks, deterministically from a run's own data, held-out sentences
where a model that uses only its two neighbours could already name the masked content word:

1. count, over the *training* documents' sentences, each (left, word, right) token triple and each
   (left, right) neighbour pair (sentence boundaries count as neighbours);
2. candidate positions are in *held-out* sentences that fit the model's sequence length: the word is a
   whole-word content word (:func:`bertcore.analysis.papers.emergence.is_content_word`: letters, not a stop word,
   not a ``##`` piece, not followed by one, at least :data:`MIN_LETTERS` letters) seen at least
   :data:`MIN_WORD_COUNT` times in training, and its neighbour pair at least :data:`MIN_CONTEXT_COUNT` times;
3. the score is the share of that neighbour pair's training occurrences that hold this word,
   ``P(word | left _ right)`` (the neighbour-count model of ``docs/measurements/recipes.md``'s honest metrics);
4. the best-scoring positions are taken, one per masked word and per document, best first.

The result depends on the corpus, the tokenizer and the train/held-out split (``--seed``) only, so a
checkpoint loaded fresh (:func:`bertcore.training.evaluate.evaluate_checkpoint`) gets the same sentences.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_WORD_COUNT = 100  # the masked word occurs at least this often in the training sentences
MIN_CONTEXT_COUNT = 30  # its (left, right) neighbour pair at least this often
MIN_LETTERS = 3  # the masked word has at least this many letters ('s' after an apostrophe, 'mi' are not words)
MIN_TOKENS = 6  # held-out sentences shorter than this (in WordPiece tokens) are not probes
N_PROBES = 4


def _flat(sentences: Sequence[Sequence[int]], boundary: int) -> np.ndarray:
    """Sentences -> one int64 array ``[B s1 B B s2 B ...]`` (``B`` = ``boundary``)."""
    if not sentences:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.asarray([boundary, *s, boundary], dtype=np.int64) for s in sentences])


def _count(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(keys, return_counts=True)


def _lookup(table: tuple[np.ndarray, np.ndarray], keys: np.ndarray) -> np.ndarray:
    uniq, counts = table
    i = np.clip(np.searchsorted(uniq, keys), 0, max(0, len(uniq) - 1))
    return np.where((len(uniq) > 0) & (uniq[i] == keys), counts[i], 0) if len(uniq) else np.zeros_like(keys)


def choose_probes(train_docs: Sequence[Sequence[Sequence[int]]], val_docs: Sequence[Sequence[Sequence[int]]],
                  tokenizer, max_tokens: int, n: int = N_PROBES) -> list[dict]:
    """Up to ``n`` held-out probe sentences (see the module docstring for the rule).

    Args:
        train_docs, val_docs: documents as lists of sentences of WordPiece ids without special tokens
            (:func:`bertcore.data.tokenized_corpus` split by :func:`bertcore.data.split_documents`).
        tokenizer: the run's WordPiece tokenizer (a ``[MASK]`` token, ``convert_ids_to_tokens``).
        max_tokens: the longest sentence taken, in WordPiece tokens (the run's ``max_seq_len`` - 2).
        n: how many sentences.
    Returns:
        ``[{"text": sentence with "[MASK]", "answer": word, "score": P(word | neighbours), "context_count",
        "word_count"}, ...]``, best first; ``[]`` when no held-out sentence qualifies (tiny corpora).
    """
    from ..analysis.papers.emergence import is_content_word

    vocab = len(tokenizer)
    base = vocab + 1  # the boundary id is ``vocab``
    train_sents = [s for d in train_docs for s in d if len(s)]
    flat = _flat(train_sents, vocab)
    if flat.size < 3:
        return []
    a, w, b = flat[:-2], flat[1:-1], flat[2:]
    inside = w != vocab
    a, w, b = a[inside], w[inside], b[inside]
    triples = _count((a * base + w) * base + b)
    pairs = _count(a * base + b)
    word_counts = np.bincount(w, minlength=vocab)[:vocab]
    tokens = tokenizer.convert_ids_to_tokens(list(range(vocab)))
    content = np.array([is_content_word(t) and len(t) >= MIN_LETTERS for t in tokens] + [False])
    piece = np.array([t.startswith("##") for t in tokens] + [False])

    cands = []  # (score, -context_count, doc, sentence, position)
    for d, doc in enumerate(val_docs):
        for s, sent in enumerate(doc):
            if not MIN_TOKENS <= len(sent) <= max_tokens:
                continue
            x = np.concatenate([[vocab], np.asarray(sent, dtype=np.int64), [vocab]])
            left, mid, right = x[:-2], x[1:-1], x[2:]
            ok = content[mid] & ~piece[right] & (word_counts[mid] >= MIN_WORD_COUNT)
            if not ok.any():
                continue
            ctx = _lookup(pairs, left * base + right)
            hits = _lookup(triples, (left * base + mid) * base + right)
            ok &= ctx >= MIN_CONTEXT_COUNT
            for p in np.flatnonzero(ok):
                cands.append((hits[p] / ctx[p], -int(ctx[p]), d, s, int(p)))
    cands.sort(key=lambda c: (-c[0], c[1], c[2], c[3], c[4]))
    chosen, words, docs = [], set(), set()
    for score, neg_ctx, d, s, p in cands:
        word = int(val_docs[d][s][p])
        if word in words or d in docs:
            continue
        ids = list(val_docs[d][s])
        ids[p] = tokenizer.mask_token_id
        text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=True)
        chosen.append({"text": text, "answer": tokens[word], "score": round(float(score), 4),
                       "context_count": -neg_ctx, "word_count": int(word_counts[word])})
        words.add(word)
        docs.add(d)
        if len(chosen) == n:
            break
    return chosen


def mask_label(sentence: str, k: int = 0, width: int = 2) -> str:
    """The ``k``-th [MASK] of ``sentence`` with ``width`` words either side: ``'… most ___ city of …'``."""
    words = sentence.replace("[MASK]", " [MASK] ").split()
    at = [i for i, w in enumerate(words) if w == "[MASK]"]
    if k >= len(at):
        return "___"
    i = at[k]
    left, right = words[max(0, i - width):i], words[i + 1:i + 1 + width]
    return " ".join((["…"] if i > width else []) + left + ["___"] + right
                    + (["…"] if i + 1 + width < len(words) else []))


def mask_labels(sentences: Sequence[str], rows: Sequence[int]) -> list[str]:
    """:func:`mask_label` of each [MASK], given the sentence index of each in reading order (``rows``)."""
    seen: dict[int, int] = {}
    out = []
    for r in rows:
        k = seen.get(r, 0)
        seen[r] = k + 1
        out.append(mask_label(sentences[r], k))
    return out
