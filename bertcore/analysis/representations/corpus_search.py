"""Corpus search by contextual vectors (exBERT: Hoover et al. 2020, "exBERT: A Visual Analysis Tool to Explore
Learned Representations in Transformer Models", ACL demos).

An index holds the hidden state of every token of a corpus at one layer (L2-normalised); a query token's vector
from a sentence of the user's is compared to all of them by cosine similarity, brute force (a matrix-vector
product: a few hundred thousand tokens take milliseconds, no index library needed). The index is built once per
(model, corpus, layer) and kept on disk as ``.npz`` (written atomically).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...device import device_of

MAX_TOKENS = 128  # tokens of one corpus segment, [CLS]/[SEP] included (and of the query sentence)


@dataclass
class CorpusIndex:
    """Token vectors of a corpus at one layer.

    Attributes:
        vectors: ``(N, H)`` float32, unit length. tokens: N WordPieces. segment / position: ``(N,)`` int.
        texts: the segments' texts (``segment`` indexes it). layer: hidden_states index (0 = embeddings).
    """

    vectors: np.ndarray
    tokens: list[str]
    segment: np.ndarray
    position: np.ndarray
    texts: list[str]
    layer: int


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


@torch.no_grad()
def build_index(encoder, tokenizer, texts: list[str], layer: int, max_length: int = MAX_TOKENS,
                progress=None, batch_size: int = 16) -> CorpusIndex:
    """Run the encoder on the texts (each cut to ``max_length`` tokens; ``batch_size`` at a time, padded to the
    longest of the batch, the padding masked and dropped) and keep every ordinary token's vector at ``layer``, a
    hidden_states index (0 = embeddings), ``0..L`` ([CLS] / [SEP] left out: they would match everything).
    ``progress(done, total)`` counts texts.

    Raises:
        ValueError: no text, or a layer outside 0..L (the message names the range).
    """
    if not texts:
        raise ValueError("the corpus has no text")
    if not 0 <= layer <= encoder.config.num_hidden_layers:
        raise ValueError(f"layer must be a hidden_states index in 0..{encoder.config.num_hidden_layers} "
                         f"(0 = embeddings); got {layer}")
    special = set(tokenizer.all_special_ids)
    device = device_of(encoder)
    max_length = min(max_length, int(encoder.config.max_sequence_length))  # a model with fewer positions
    vecs, toks, seg, pos = [], [], [], []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        enc = tokenizer(batch, return_tensors="pt", truncation=True, max_length=max_length, padding=True)
        types = enc.get("token_type_ids")  # byte-level BPE tokenizers of one-segment models have none
        types = types if types is not None else torch.zeros_like(enc["input_ids"])
        out = encoder(enc["input_ids"].to(device), enc["attention_mask"].to(device), types.to(device),
                      output_hidden_states=True)
        hs = out.hidden_states[layer].float().cpu().numpy()
        for b in range(len(batch)):
            real = enc["attention_mask"][b].bool().numpy()  # the text's tokens, whichever side the padding is
            ids, h = enc["input_ids"][b][real].tolist(), hs[b][real]
            keep = [t for t, tid in enumerate(ids) if tid not in special]
            vecs.append(h[keep])
            toks += tokenizer.convert_ids_to_tokens([ids[t] for t in keep])
            seg += [start + b] * len(keep)
            pos += keep
        if progress is not None:
            progress(start + len(batch), len(texts))
    return CorpusIndex(_unit(np.concatenate(vecs)).astype(np.float32), toks, np.asarray(seg), np.asarray(pos),
                       list(texts), layer)


def index_path(cache: Path, model_key: str, texts: list[str], layer: int) -> Path:
    """``cache/corpus-index/<hash>.npz`` for a model key (it must change with the weights), the corpus text and
    the layer (the hidden_states index (0 = embeddings) of :func:`build_index`; only hashed here)."""
    h = hashlib.sha256(f"v1|{model_key}|{layer}|".encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    return cache / "corpus-index" / f"{h.hexdigest()[:24]}.npz"


def save_index(index: CorpusIndex, path: Path) -> None:
    from ...modeling.checkpoint import atomic_write

    def write(p: Path) -> None:
        with open(p, "wb") as fh:
            np.savez(fh, vectors=index.vectors, tokens=np.asarray(index.tokens), segment=index.segment,
                     position=index.position, texts=np.asarray(index.texts), layer=index.layer)

    atomic_write(path, write)


def load_index(path: Path) -> CorpusIndex | None:
    """The index saved at ``path``, or None when it is missing or unreadable (then it is rebuilt)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return CorpusIndex(z["vectors"], z["tokens"].tolist(), z["segment"], z["position"], z["texts"].tolist(),
                               int(z["layer"]))
    except (OSError, ValueError, KeyError):
        return None


@dataclass
class Hit:
    """One neighbour: ``token``, ``cosine``, its ``segment`` and ``position``, and ``context`` (a few tokens each
    side, the hit in brackets)."""

    token: str
    cosine: float
    segment: int
    position: int
    context: str


def search(index: CorpusIndex, query: np.ndarray, k: int = 20, window: int = 6) -> list[Hit]:
    """The ``k`` corpus tokens nearest to ``query`` (``(H,)``, the same layer) by cosine, best first."""
    q = _unit(np.asarray(query, dtype=np.float32).reshape(-1))
    sims = index.vectors @ q
    k = min(k, len(sims))
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top])]
    hits = []
    for i in top:
        same = np.flatnonzero(index.segment == index.segment[i])
        j = int(np.searchsorted(same, i))
        left = [index.tokens[t] for t in same[max(0, j - window):j]]
        while left and left[0].startswith("##"):  # do not start the context in the middle of a word
            left.pop(0)
        right = [index.tokens[t] for t in same[j + 1:j + 1 + window]]
        context = " ".join(left + [f"[{index.tokens[i]}]"] + right).replace(" ##", "")
        hits.append(Hit(index.tokens[i], float(sims[i]), int(index.segment[i]), int(index.position[i]), context))
    return hits


def summary(hits: list[Hit]) -> list[tuple[str, int]]:
    """What the hits are: each token and how many hits it is, most common first."""
    return Counter(h.token for h in hits).most_common()


def hit_labels(index: CorpusIndex, hits: list[Hit], tokenizer, max_length: int = MAX_TOKENS) -> list[tuple[str, str]]:
    """``(part of speech, dependency label)`` of each hit's word, from spaCy (:mod:`.parses`;
    raises its ``SyntaxUnavailable`` without spaCy). The hit's text is parsed and aligned as it was indexed."""
    from . import parses

    parsed: dict[int, object] = {}
    out = []
    for h in hits:
        if h.segment not in parsed:
            parsed[h.segment] = parses.parse_segment(tokenizer, index.texts[h.segment], max_length=max_length)
        seg = parsed[h.segment]
        w = seg.word_ids[h.position] if h.position < len(seg.word_ids) else None
        out.append(("", "") if w is None else (seg.words[w].pos, seg.words[w].dep))
    return out
