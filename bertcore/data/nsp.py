"""Sentences -> next-sentence-prediction pairs (Devlin et al. 2019, section 3.1 "Task #2: NSP" and
appendix A.2; Google's ``create_pretraining_data.py``).

    NSP pairs      [CLS] A [SEP] B [SEP]; A = the first sentences of a chunk of consecutive
                   sentences, B = the rest of the chunk (IsNext, label 0) or, with probability
                   0.5, sentences from another document (NotNext, label 1)

Truncation policy: a pair longer than ``max_seq_len - 3`` tokens is cut longest-first, removing
tokens from the *start* of A and the *end* of B, so the A|B boundary (what NSP judges) is kept.
A chunk is filled up to the target length (``max_seq_len - 3``, or with probability
``short_seq_prob`` a random shorter one, as BERT), so a "sentence" is a span of text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .corpora import DataError, tokenized_corpus


def truncate_pair(a: list[int], b: list[int], max_tokens: int) -> tuple[list[int], list[int], int]:
    """Cut a pair to ``max_tokens`` longest-first: A loses tokens at its start, B at its end,
    so the A|B boundary stays. Returns (a, b, tokens removed)."""
    a, b = list(a), list(b)
    removed = 0
    while len(a) + len(b) > max_tokens:
        if len(a) > len(b):
            a.pop(0)
        else:
            b.pop()
        removed += 1
    return a, b, removed


def shorten_pair(row: dict[str, Any], max_len: int) -> dict[str, Any]:
    """A ``[CLS] A [SEP] B [SEP]`` example cut to ``max_len`` tokens with :func:`truncate_pair` (the
    A|B boundary stays, so its NSP label still holds); shorter rows are returned unchanged.
    ``token_type_ids`` tell A (0) from B (1). Used by the sequence-length schedule (short first).
    A row's ``agreement_position`` (a counterfactual pair's verb) follows its token, or becomes -1 when the token
    is cut."""
    ids, types = list(row["input_ids"]), list(row["token_type_ids"])
    if len(ids) <= max_len:
        return row
    n0 = types.count(0)  # [CLS] A [SEP]
    a, b, _ = truncate_pair(ids[1:n0 - 1], ids[n0:-1], max_len - 3)
    out = dict(row)
    out["input_ids"] = [ids[0], *a, ids[n0 - 1], *b, ids[-1]]
    out["token_type_ids"] = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    pos = row.get("agreement_position", -1)
    if pos >= 0:
        cut_a = n0 - 2 - len(a)  # tokens A lost at its start
        kept = pos - cut_a >= 1 if pos < n0 else pos - n0 < len(b)  # A loses its start, B its end
        out["agreement_position"] = pos - cut_a if kept else -1
    return out


def unigram_reference(sequences: Sequence[Sequence[int]], special_ids: Sequence[int]) -> dict[str, Any]:
    """What a model that knows only token frequencies scores on MLM, from the training sequences.

    Over the maskable tokens (not in ``special_ids``) with frequencies p: ``unigram_loss`` = entropy
    -sum p ln p in nats (the MLM cross-entropy of predicting p at every selected position, since
    selection is uniform over maskable tokens), ``most_frequent_token_rate`` = max p (the accuracy of
    always guessing the most frequent token) and its id ``most_frequent_token_id``. The plateau of
    early pretraining sits near these (Chen et al. 2023: frequencies first, context later).
    """
    flat = np.fromiter((t for s in sequences for t in s), dtype=np.int64)
    if special_ids is not None and len(special_ids):
        flat = flat[~np.isin(flat, np.asarray(list(special_ids), dtype=np.int64))]
    if flat.size == 0:
        return {"unigram_loss": None, "most_frequent_token_rate": None, "most_frequent_token_id": None,
                "maskable_tokens": 0}
    counts = np.bincount(flat)
    p = counts[counts > 0] / flat.size
    return {"unigram_loss": float(-(p * np.log(p)).sum()), "most_frequent_token_rate": float(counts.max() / flat.size),
            "most_frequent_token_id": int(counts.argmax()), "maskable_tokens": int(flat.size)}


def create_nsp_pairs(
    documents: Sequence[Sequence[Sequence[int]]],
    max_seq_len: int,
    *,
    cls_id: int,
    sep_id: int,
    seed: int = 0,
    short_seq_prob: float = 0.1,
    random_next_prob: float = 0.5,
    balance: bool = False,
) -> dict[str, list]:
    """NSP examples from tokenized documents (each a list of sentences of token ids).

    Returns columns ``input_ids`` ([CLS] A [SEP] B [SEP]), ``token_type_ids`` (0 for [CLS] A [SEP],
    1 for B [SEP]), ``next_sentence_label`` (0 IsNext, 1 NotNext: B from another document),
    ``doc`` (index of A's document) and ``truncated`` (tokens cut). The coin for NotNext has
    probability ``random_next_prob`` per pair (a chunk of a single sentence at the end of a
    document has no true next part and becomes NotNext, so the NotNext share is higher: a little for
    news, 0.64 for a mixture of one-sentence quotations and glosses). ``balance=True`` pays that back: while the
    NotNext share of the pairs made so far is above ``random_next_prob``, a chunk that has a true next part
    becomes IsNext without a coin, so the share ends near ``random_next_prob`` (``--nsp-balance``; the documents
    are then taken in a seeded random order).
    """
    if max_seq_len < 8:
        raise DataError(f"max_seq_len {max_seq_len} is too short for sentence pairs (at least 8)")
    docs = [[list(s) for s in d if len(s)] for d in documents]
    usable = [i for i, d in enumerate(docs) if d]
    if len(usable) < 2:
        raise DataError("NSP needs at least 2 documents with text")
    pos = {d: k for k, d in enumerate(usable)}
    rng = random.Random(seed)
    max_tokens = max_seq_len - 3
    out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "next_sentence_label": [], "doc": [],
                            "truncated": []}
    n_notnext = 0
    # balanced: documents in a seeded random order, so one-sentence documents (often a whole part of a mixture,
    # e.g. fortunes last) are spread among the others and each forced NotNext is soon paid back
    for d_idx in (random.Random(seed).sample(usable, len(usable)) if balance else usable):
        doc = docs[d_idx]
        target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
        chunk: list[list[int]] = []
        length = 0
        i = 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                a_end = 1 if len(chunk) < 2 else rng.randint(1, len(chunk) - 1)
                a = [t for s in chunk[:a_end] for t in s]
                has_next = len(chunk) >= 2 or i < len(doc) - 1
                if balance and has_next and n_notnext > random_next_prob * len(out["input_ids"]):
                    is_random = False  # too many NotNext so far (lone last sentences): this one is IsNext
                    if len(chunk) == 1:
                        chunk.append(doc[i + 1])
                        i += 1
                else:
                    is_random = len(chunk) == 1 or rng.random() < random_next_prob
                    if len(chunk) == 1 and i < len(doc) - 1 and rng.random() >= random_next_prob:
                        # a single long sentence: its true next sentence is the next one in the document
                        is_random = False
                        chunk.append(doc[i + 1])
                        i += 1
                if is_random and random_next_prob <= 0:
                    b = []  # no NSP: never a B from another document (a lone last sentence is dropped)
                elif is_random:
                    r = rng.randrange(len(usable) - 1)  # any usable document but this one
                    other = usable[r + 1 if r >= pos[d_idx] else r]
                    rdoc = docs[other]
                    start = rng.randrange(len(rdoc))
                    b: list[int] = []
                    for s in rdoc[start:]:
                        b.extend(s)
                        if len(b) >= max(1, target - len(a)):
                            break
                    i -= len(chunk) - a_end  # put the unused sentences back
                else:
                    b = [t for s in chunk[a_end:] for t in s]
                if a and b:
                    a, b, cut = truncate_pair(a, b, max_tokens)
                    out["input_ids"].append([cls_id, *a, sep_id, *b, sep_id])
                    out["token_type_ids"].append([0] * (len(a) + 2) + [1] * (len(b) + 1))
                    out["next_sentence_label"].append(int(is_random))
                    n_notnext += int(is_random)
                    out["doc"].append(d_idx)
                    out["truncated"].append(cut)
                chunk, length = [], 0
                target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
            i += 1
    return out



@dataclass
class PretrainData:
    """Pretraining splits as ``datasets.Dataset`` (input_ids, token_type_ids, next_sentence_label),
    and how they were made (``stats``)."""

    train: Any
    val: Any
    stats: dict[str, Any] = field(default_factory=dict)
    #: (training, held-out) documents, each a list of sentences of WordPiece ids (the split the pairs came from)
    documents: tuple[list, list] = field(default_factory=lambda: ([], []))


def build_pretraining_data(
    tokenizer,
    corpus: str = "bbc",
    max_seq_len: int = 128,
    *,
    seed: int = 0,
    pair_seed: int | None = None,
    max_docs: int | None = None,
    val_fraction: float = 0.05,
    short_seq_prob: float = 0.1,
    random_next_prob: float = 0.5,
    weights: dict[str, float] | None = None,
    balance_nsp: bool = False,
) -> PretrainData:
    """Corpus -> documents -> sentences -> NSP pairs, split by document (validation pairs come
    from documents never seen in training; their NotNext partners too).

    ``seed`` fixes the split and the validation pairs; ``pair_seed`` (default ``seed``) the training
    pairs (segment lengths and random NotNext partners), so a continued stage can draw new pairs
    from the same training documents. ``weights`` (``--corpus-weights``) repeat the training documents of
    parts of a mixture: see :func:`weighted_rounds`; validation is never weighted. ``balance_nsp`` holds the
    training pairs' NotNext share at ``random_next_prob`` (:func:`create_nsp_pairs`, ``balance``); the validation
    pairs stay as they were, so held-out numbers compare across runs.

    Raises:
        DataError: see :func:`load_documents`; too few documents for a validation split; a weight for a part
        the corpus does not have.
    """
    import datasets

    from .corpora import CORPORA

    parts = CORPORA[corpus].parts if corpus in CORPORA else ()
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(parts or (corpus,)))
    if unknown:
        raise DataError(f"--corpus-weights names {', '.join(unknown)}, not a part of corpus {corpus!r} (parts: "
                        f"{', '.join(parts or (corpus,))})")
    train_docs, val_docs, per_part, train_parts = [], [], {}, []
    val = {"input_ids": [], "token_type_ids": [], "next_sentence_label": []}
    common = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, short_seq_prob=short_seq_prob,
                  random_next_prob=random_next_prob)
    # a mixture is split corpus by corpus, each as if alone: its held-out documents (and their pairs) are the
    # ones that corpus holds out on its own, so per-corpus metrics of a mixture run are clean
    for name in parts or (corpus,):
        all_ids = tokenized_corpus(name, tokenizer, max_docs, seed)
        tr, va = split_documents(all_ids, seed, val_fraction)
        train_docs += tr
        val_docs += va
        train_parts.append((name, tr))
        per_part[name] = {"documents": len(all_ids), "val_documents": len(va)}
        if va:
            pairs = create_nsp_pairs(va, max_seq_len, seed=seed + 1, **common)
            for k in val:
                val[k] += pairs[k]
    n, n_val = len(train_docs) + len(val_docs), len(val_docs)
    pair_seed = seed if pair_seed is None else pair_seed
    train: dict[str, list] = {"input_ids": [], "token_type_ids": [], "next_sentence_label": [], "truncated": []}
    pairs_by_part = {name: 0 for name, _ in train_parts}
    for k, (docs_k, part_k) in enumerate(weighted_rounds(train_parts, weights, seed)):
        if len(docs_k) < 2:
            continue
        pairs = create_nsp_pairs(docs_k, max_seq_len, seed=pair_seed + 7919 * k, balance=balance_nsp,
                                 **common)  # round 0: as unweighted
        for key in train:
            train[key] += pairs[key]
        for d in pairs["doc"]:
            pairs_by_part[part_k[d]] += 1
    if not train["input_ids"]:
        raise DataError(f"no training pairs: --corpus-weights {weights} leave fewer than 2 training documents")
    val = val if n_val else None
    stats = {
        "corpus": corpus, "documents": n, "train_documents": len(train_docs), "val_documents": n_val,
        "sentences": int(sum(len(s) for d in (train_docs, val_docs) for s in d)),
        "train_pairs": len(train["input_ids"]),
        "val_pairs": len(val["input_ids"]) if val else 0,
        "notnext_fraction": float(np.mean(train["next_sentence_label"])) if train["input_ids"] else 0.0,
        "truncated_fraction": float(np.mean([c > 0 for c in train["truncated"]])) if train["input_ids"] else 0.0,
        "mean_tokens": float(np.mean([len(x) for x in train["input_ids"]])) if train["input_ids"] else 0.0,
        "max_seq_len": max_seq_len,
        "truncation": "longest-first; A loses tokens at its start, B at its end",
    }
    keep = ("input_ids", "token_type_ids", "next_sentence_label")
    to_ds = lambda d: datasets.Dataset.from_dict({k: d[k] for k in keep})  # noqa: E731
    # validation pairs in a seeded random order: evaluating the first batches must not mean
    # evaluating the first documents (one topic) only
    val_ds = to_ds(val).shuffle(seed=seed).flatten_indices() if val else None
    if parts:
        stats["parts"] = per_part
        stats["train_pairs_by_part"] = pairs_by_part
    if weights:
        stats["corpus_weights"] = weights
    return PretrainData(to_ds(train), val_ds, stats, (train_docs, val_docs))


def split_documents(docs: list, seed: int, val_fraction: float) -> tuple[list, list]:
    """Documents (of one corpus; any items) -> (training, held-out): the indices shuffled with
    ``random.Random(seed)``, the first ``max(2, round(n * val_fraction))`` held out (none when ``val_fraction``
    is 0), each part in corpus order. The one split rule of pretraining and of every held-out evaluation.

    Raises:
        DataError: fewer than 2 documents would be left for training.
    """
    n = len(docs)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_val = max(2, int(round(n * val_fraction))) if val_fraction > 0 else 0
    if n - n_val < 2:
        raise DataError(f"corpus has {n} documents: too few for a validation split of {val_fraction:.0%}")
    return [docs[i] for i in sorted(order[n_val:])], [docs[i] for i in sorted(order[:n_val])]



def weighted_rounds(train_parts: list[tuple[str, list]], weights: dict[str, float],
                    seed: int) -> list[tuple[list, list]]:
    """The document lists that are cut into training pairs, one per round, and the part of each document.

    Round k holds every training document of each part whose weight is at least k + 1, a seeded share (weight - k)
    of those whose weight lies between k and k + 1, and none of the others; each round gets its own pairs, so a
    document entering twice is cut and partnered differently, and a NotNext partner is never a copy of the same
    document. With no weights there is one round of every document: the unweighted data, unchanged.
    """
    top = max([1.0, *weights.values()]) if weights else 1.0
    rounds = []
    for k in range(int(np.ceil(top))):
        docs_k, part_k = [], []
        for name, docs in train_parts:
            w = weights.get(name, 1.0) - k
            if w >= 1:
                keep = list(range(len(docs)))
            elif w > 0:
                keep = sorted(random.Random(f"{seed}/{name}/{k}").sample(range(len(docs)), int(round(w * len(docs)))))
            else:
                keep = []
            docs_k += [docs[i] for i in keep]
            part_k += [name] * len(keep)
        rounds.append((docs_k, part_k))
    return rounds
