"""The Findings evaluation set and one pass of the published measures over it.

Segments follow Clark et al. 2019 (section 3): ``[CLS] <part 1> [SEP] <part 2> [SEP]`` of at most
128 tokens, two consecutive spans of one document, not masked. Documents are the packaged BBC
articles *held out* from pretraining (the validation documents of
:func:`bertcore.data.build_pretraining_data` for the same seed), so a model pretrained here has
never seen them.

:func:`run_findings` runs the model on every segment one at a time and accumulates the measures of
:mod:`bertcore.analysis.papers.findings` without keeping the attention maps (300 segments of bert-base
would be ~3 GB of attention): per-head sums and counts, pattern counts, and the word vectors of a
seeded sample of occurrences for the Ethayarajh measures.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import BertTokenizerFast

from ... import data
from ...modeling.model import BertModel
from ...modeling.interventions import eval_mode
from ...tokenization.tokenizer import Encoding, encode
from ..attention.activations import run_encoding
from ..representations.similarity import pool
from . import findings

DEFAULT_SEGMENTS = 150
MAX_TOKENS = 128
SELF_SIM_WORDS = 150  # word types sampled for self-similarity ...
SELF_SIM_CONTEXTS = 8  # ... with up to this many occurrences each (at least MIN_CONTEXTS)
MIN_CONTEXTS = 5  # Ethayarajh 2019 (section 3.2) uses words that appear in at least 5 contexts
ANISOTROPY_WORDS = 1000  # occurrences sampled for the random-pair baseline


def heldout_documents(corpus: str = "bbc", seed: int = 0, val_fraction: float = 0.05) -> list[str]:
    """The documents that pretraining with ``seed`` keeps for validation (never trained on).

    The rule of :func:`bertcore.data.build_pretraining_data` (:func:`bertcore.data.split_documents`; a mixture
    corpus per part).

    Raises:
        bertcore.data.DataError: the corpus cannot be read.
    """
    parts = data.CORPORA[corpus].parts if corpus in data.CORPORA else ()
    held: list[str] = []
    for name in parts or (corpus,):
        held += data.split_documents(data.load_documents(name, None, seed)["text"], seed, val_fraction)[1]
    return held


@dataclass
class Segment:
    """One evaluation input: two consecutive spans of a document, each a list of sentences."""

    part_a: list[str]
    part_b: list[str]

    @property
    def text_a(self) -> str:
        return " ".join(self.part_a)

    @property
    def text_b(self) -> str:
        return " ".join(self.part_b)


def build_segments(tokenizer: BertTokenizerFast, documents: list[str], n_segments: int = DEFAULT_SEGMENTS,
                   max_tokens: int = MAX_TOKENS, seed: int = 0) -> list[Segment]:
    """Cut documents into segments of at most ``max_tokens`` tokens ([CLS], 2 x [SEP] included).

    Consecutive sentences are packed until the next would not fit, then split in two halves (A, B);
    a sentence longer than the budget on its own is skipped. Returns at most ``n_segments``,
    a seeded sample spread over the documents.
    """
    budget = max_tokens - 3
    segments: list[Segment] = []
    for doc in documents:
        sentences = data.split_sentences(doc)
        if not sentences:
            continue
        lengths = [len(ids) for ids in tokenizer(sentences, add_special_tokens=False)["input_ids"]]
        chunk: list[str] = []
        used = 0
        for sentence, n in zip(sentences + [None], lengths + [budget + 1]):
            if sentence is not None and n > budget:
                continue
            if sentence is None or used + n > budget:
                if len(chunk) >= 2:
                    half = len(chunk) // 2
                    segments.append(Segment(chunk[:half], chunk[half:]))
                chunk, used = [], 0
            if sentence is not None:
                chunk.append(sentence)
                used += n
    if len(segments) > n_segments:
        keep = sorted(random.Random(seed).sample(range(len(segments)), n_segments))
        segments = [segments[i] for i in keep]
    return segments


def _sentence_of_tokens(enc: Encoding, seg: Segment) -> np.ndarray:
    """Sentence index of every token (-1 for special tokens): A's sentences first, then B's."""
    starts = []
    for part in (seg.part_a, seg.part_b):
        pos, s = 0, []
        for sentence in part:
            s.append(pos)
            pos += len(sentence) + 1
        starts.append(s)
    out = np.full(len(enc.tokens), -1, dtype=np.int64)
    for i, (seq, (start, _)) in enumerate(zip(enc.sequence_ids, enc.offsets)):
        if seq is None or enc.special_tokens_mask[i]:
            continue
        k = bisect_right(starts[seq], start) - 1
        out[i] = k + (len(seg.part_a) if seq == 1 else 0)
    return out


def _words(enc: Encoding) -> list[tuple[str, list[int]]]:
    """(text, positions) of each word that is not only punctuation."""
    out = []
    for positions in enc.words:
        text = "".join(enc.tokens[p].removeprefix("##") for p in positions)
        if any(ch.isalnum() for ch in text):
            out.append((text, positions))
    return out


@dataclass
class FindingsResult:
    """The measures of :mod:`bertcore.analysis.papers.findings` over an evaluation set.

    Per head ``(L, heads)`` float64, averaged over every query token of every segment: ``to_cls``,
    ``to_sep``, ``to_punct`` (periods and commas), ``entropy`` (nats), ``max_weight``; over the
    queries that have a previous / next token: ``prev``, ``next``; over segments: ``cls_entropy``
    (entropy of the [CLS] query's row). ``patterns``: ``(L, 5)`` head counts per type
    (``findings.PATTERNS``) summed over segments. Per layer ``(L+1,)`` (0 = embeddings):
    ``anisotropy``, ``self_similarity``, ``intra_similarity`` (raw, not adjusted).
    """

    n_segments: int
    n_tokens: int
    seconds: float
    to_cls: np.ndarray
    to_sep: np.ndarray
    to_punct: np.ndarray
    prev: np.ndarray
    next: np.ndarray
    entropy: np.ndarray
    cls_entropy: np.ndarray
    max_weight: np.ndarray
    patterns: np.ndarray
    anisotropy: np.ndarray
    self_similarity: np.ndarray
    intra_similarity: np.ndarray
    n_self_words: int = 0
    info: dict = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        return int(self.to_cls.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.to_cls.shape[1])

    @property
    def pattern_shares(self) -> np.ndarray:
        """``(L, 5)``: share of each pattern type among the layer's heads over all segments."""
        total = self.patterns.sum(-1, keepdims=True)
        return np.divide(self.patterns, total, out=np.zeros(self.patterns.shape), where=total > 0)

    @property
    def self_similarity_adjusted(self) -> np.ndarray:
        return findings.adjust(self.self_similarity, self.anisotropy)

    @property
    def intra_similarity_adjusted(self) -> np.ndarray:
        return findings.adjust(self.intra_similarity, self.anisotropy)


def run_findings(model: BertModel, tokenizer: BertTokenizerFast, segments: list[Segment], seed: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> FindingsResult:
    """Run ``model`` (eval mode) on every segment and accumulate the published measures.

    Args:
        model: a :class:`BertModel`; tokenizer: its tokenizer; segments: from :func:`build_segments`.
        seed: for the word samples of the Ethayarajh measures.
        progress: called with ``(done, total)`` after each segment (a progress bar).
    Raises:
        ValueError: no segment (an empty evaluation set).
        bertcore.modeling.embeddings.InputError: the tokenizer does not fit the model.
    """
    if not segments:
        raise ValueError("the evaluation set is empty: no held-out document gave a segment")
    t0 = time.perf_counter()
    limit = min(MAX_TOKENS, int(model.config.max_sequence_length), int(tokenizer.model_max_length))
    encodings = [encode(tokenizer, s.text_a, s.text_b, max_length=limit) for s in segments]
    words = [_words(e) for e in encodings]
    # choose the word occurrences to keep before running anything (seeded)
    rng = random.Random(seed)
    by_word: dict[str, list[tuple[int, int]]] = {}
    for si, ws in enumerate(words):
        for wi, (text, _) in enumerate(ws):
            by_word.setdefault(text, []).append((si, wi))
    frequent = sorted(w for w, occ in by_word.items() if len({s for s, _ in occ}) >= MIN_CONTEXTS)
    targets = rng.sample(frequent, min(SELF_SIM_WORDS, len(frequent)))
    keep_self: dict[tuple[int, int], str] = {}
    for w in targets:
        occ, seen = [], set()
        for s, wi in by_word[w]:  # one occurrence per segment (a context)
            if s not in seen:
                seen.add(s)
                occ.append((s, wi))
        for key in rng.sample(occ, min(SELF_SIM_CONTEXTS, len(occ))):
            keep_self[key] = w
    all_occ = [(si, wi) for si, ws in enumerate(words) for wi in range(len(ws))]
    keep_aniso = set(rng.sample(all_occ, min(ANISOTROPY_WORDS, len(all_occ))))

    sums: dict[str, np.ndarray] = {}
    n_queries = n_prev = 0
    patterns = None
    self_vecs, self_words, aniso_vecs, aniso_words = [], [], [], []
    intra_sum, intra_n = None, 0
    with eval_mode(model), torch.no_grad():
        for si, (seg, enc) in enumerate(zip(segments, encodings)):
            act = run_encoding(model, enc)
            attn = act.attentions  # (L, heads, T, T)
            t = attn.shape[-1]
            special = np.asarray(enc.special_tokens_mask, dtype=bool)
            is_cls = np.array([tok == tokenizer.cls_token for tok in enc.tokens])
            is_sep = np.array([tok == tokenizer.sep_token for tok in enc.tokens])
            is_punct = np.array([tok in (".", ",") for tok in enc.tokens])
            ent = findings.entropy(attn)  # (L, heads, T) nats
            part = {
                "to_cls": findings.share_to(attn, is_cls) * t,
                "to_sep": findings.share_to(attn, is_sep) * t,
                "to_punct": findings.share_to(attn, is_punct) * t,
                "entropy": ent.sum(-1),
                "max_weight": findings.max_weight(attn).sum(-1),
                "prev": findings.offset_share(attn, -1) * (t - 1),
                "next": findings.offset_share(attn, 1) * (t - 1),
                "cls_entropy": ent[..., 0],
            }
            for k, v in part.items():
                sums[k] = sums.get(k, 0) + v
            n_queries += t
            n_prev += t - 1
            counts = findings.pattern_counts(attn, special, np.asarray(enc.token_type_ids))
            patterns = counts if patterns is None else patterns + counts
            # word vectors (mean of pieces) for the sampled occurrences and each sentence
            hidden = act.hidden_states  # (L+1, T, H)
            sentence_of = _sentence_of_tokens(enc, seg)
            by_sentence: dict[int, list[np.ndarray]] = {}
            for wi, (text, positions) in enumerate(words[si]):
                vec = pool(hidden, positions)  # (L+1, H)
                by_sentence.setdefault(int(sentence_of[positions[0]]), []).append(vec)
                if (si, wi) in keep_self:
                    self_vecs.append(vec)
                    self_words.append(text)
                if (si, wi) in keep_aniso:
                    aniso_vecs.append(vec)
                    aniso_words.append(text)
            for k, vecs in by_sentence.items():
                if k < 0 or len(vecs) < 2:
                    continue
                sim = findings.intra_similarity(np.stack(vecs))
                intra_sum = sim if intra_sum is None else intra_sum + sim
                intra_n += 1
            if progress is not None:
                progress(si + 1, len(segments))
    n_layers = int(model.config.num_hidden_layers) + 1
    hidden_size = int(model.config.hidden_size)

    def stack(v):
        return np.stack(v) if v else np.zeros((0, n_layers, hidden_size))

    per_query = {k: sums[k] / n_queries for k in ("to_cls", "to_sep", "to_punct", "entropy", "max_weight")}
    per_prev = {k: sums[k] / max(n_prev, 1) for k in ("prev", "next")}
    nan = np.full(n_layers, np.nan)
    return FindingsResult(
        n_segments=len(segments), n_tokens=n_queries, seconds=time.perf_counter() - t0,
        **per_query, **per_prev, cls_entropy=sums["cls_entropy"] / len(segments), patterns=patterns,
        anisotropy=findings.anisotropy(stack(aniso_vecs), aniso_words, seed=seed) if aniso_words else nan,
        self_similarity=findings.self_similarity(stack(self_vecs), self_words, MIN_CONTEXTS),
        intra_similarity=intra_sum / intra_n if intra_n else nan,
        n_self_words=len(set(self_words)),
        info={"max_tokens": limit, "sentences": intra_n, "anisotropy_words": len(aniso_words)},
    )
