"""A corpus's WordPiece vocabulary, trained once (:func:`bertcore.tokenization.wordpiece.train_wordpiece`) and
cached under :func:`bertcore.data.cache_dir`; the ``--tokenizer`` values of a run from scratch (packaged, corpus,
corpus:N, a folder)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from transformers import BertTokenizerFast

from ..tokenization.tokenizer import TokenizerError, load_tokenizer, save_tokenizer, vocab_md5
from ..tokenization.wordpiece import INFO_FILE, MAX_VOCAB_SIZE, MIN_VOCAB_SIZE, TRAINER_VERSION, train_wordpiece
from .corpora import cache_dir


def _slug(corpus: str) -> str:
    return re.sub(r"[^A-Za-z0-9+_-]+", "_", Path(corpus).name if os.sep in corpus else corpus)[:40] or "corpus"


def corpus_vocab_dir(corpus: str, vocab_size: int, fingerprint: str, lowercase: bool = True) -> Path:
    """Where :func:`corpus_tokenizer` caches a vocabulary: ``cache_dir()/wordpiece/<corpus>-<size>-<key>``,
    the key hashing the corpus name and fingerprint, the size, casing and :data:`TRAINER_VERSION`."""
    key = hashlib.sha256(f"{TRAINER_VERSION}|{corpus}|{fingerprint}|{vocab_size}|{lowercase}".encode()).hexdigest()[:12]
    return cache_dir() / "wordpiece" / f"{_slug(corpus)}-{int(vocab_size)}-{key}"


def corpus_tokenizer(corpus: str, vocab_size: int, *, lowercase: bool = True) -> BertTokenizerFast:
    """A WordPiece tokenizer trained on every document of a pretraining corpus, cached on disk.

    Args:
        corpus: a corpus name or path as :func:`bertcore.data.load_documents` takes it.
        vocab_size: see :func:`train_wordpiece`.
    Returns:
        The tokenizer; the first call trains it (seconds for BBC) and saves the folder
        (:func:`bertcore.tokenization.tokenizer.save_tokenizer` + ``wordpiece.json``) under :func:`corpus_vocab_dir`,
        written to a temporary folder and renamed, so a cached folder is always complete. Corpora
        without a fingerprint (hub data sets) are trained anew each time and not cached.
    Raises:
        TokenizerError: bad ``vocab_size``; bertcore.data.DataError: the corpus cannot be loaded.
    """
    from . import corpora as D
    from .corpora import _corpus_fingerprint

    if not MIN_VOCAB_SIZE <= int(vocab_size) <= MAX_VOCAB_SIZE:
        raise TokenizerError(f"vocab_size {vocab_size} is outside [{MIN_VOCAB_SIZE:,}, {MAX_VOCAB_SIZE:,}]")
    try:
        fingerprint = _corpus_fingerprint(corpus)
    except OSError:
        fingerprint = None
    folder = None if fingerprint is None else corpus_vocab_dir(corpus, vocab_size, fingerprint, lowercase)
    if folder is not None and folder.is_dir():
        try:
            return load_tokenizer(folder)
        except TokenizerError:
            shutil.rmtree(folder, ignore_errors=True)  # a damaged cache is rebuilt
    docs = D.load_documents(corpus)
    tok = train_wordpiece(docs["text"], vocab_size, lowercase=lowercase)
    if folder is None:
        return tok
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        save_tokenizer(tok, tmp)
        info = {"corpus": corpus, "corpus_fingerprint": fingerprint, "documents": len(docs),
                "vocab_size_requested": int(vocab_size), "vocab_size": len(tok), "lowercase": lowercase,
                "vocab_md5": vocab_md5(tok), "trainer": f"tokenizers WordPieceTrainer ({TRAINER_VERSION})"}
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        try:
            tmp.rename(folder)
        except OSError:  # another process cached it first: use theirs
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load_tokenizer(folder) if folder.is_dir() else tok


DEFAULT_VOCAB_SIZE = 8000


def parse_tokenizer_spec(spec: str | None, vocab_size: int | None = None) -> tuple[str, int | str | None]:
    """Read a ``--tokenizer`` value without loading anything.

    ``"packaged"`` (or empty): bert-base-uncased's vocabulary -> ``("packaged", None)``;
    ``"corpus"`` / ``"corpus:<N>"``: a WordPiece vocabulary of N tokens (``vocab_size`` or
    :data:`DEFAULT_VOCAB_SIZE` when N is not given) trained on the run's corpus -> ``("corpus", N)``;
    anything else is a tokenizer folder -> ``("folder", path)``.

    Raises:
        TokenizerError: N is not a whole number in [MIN_VOCAB_SIZE, MAX_VOCAB_SIZE].
    """
    spec = (spec or "").strip()
    if spec in ("", "packaged"):
        return "packaged", None
    if spec == "corpus" or spec.startswith("corpus:"):
        raw = spec.partition(":")[2].strip()
        size = vocab_size if not raw else None
        if raw:
            try:
                size = int(raw.replace("_", "").replace(",", ""))
            except ValueError:
                raise TokenizerError(f"--tokenizer {spec}: the vocabulary size must be a whole number, "
                                     "e.g. corpus:8000") from None
        size = DEFAULT_VOCAB_SIZE if size is None else int(size)
        if not MIN_VOCAB_SIZE <= size <= MAX_VOCAB_SIZE:
            raise TokenizerError(f"--tokenizer {spec}: vocabulary size {size:,} is outside "
                                 f"[{MIN_VOCAB_SIZE:,}, {MAX_VOCAB_SIZE:,}]")
        return "corpus", size
    return "folder", spec


def resolve_tokenizer(spec: str | None, corpus: str = "bbc", vocab_size: int | None = None) -> BertTokenizerFast:
    """The tokenizer of a run trained from scratch, from its ``--tokenizer`` value (see
    :func:`parse_tokenizer_spec`): the packaged bert-base-uncased vocabulary, the cached corpus
    vocabulary of ``corpus`` (:func:`corpus_tokenizer`), or a checked folder (:func:`load_tokenizer`).

    Raises:
        TokenizerError: a bad spec or a folder that is not a usable BERT WordPiece tokenizer;
        bertcore.data.DataError: the corpus cannot be read; bertcore.loading.sources.SourceError: the
        packaged model is not installed.
    """
    kind, value = parse_tokenizer_spec(spec, vocab_size)
    if kind == "packaged":
        from ..loading.sources import packaged_model_dir

        return load_tokenizer(packaged_model_dir())
    if kind == "corpus":
        return corpus_tokenizer(corpus, int(value))
    return load_tokenizer(value)
