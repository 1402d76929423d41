"""The Corpus search page's views: which tokens of a sentence can be searched for, and where else in a corpus a
token has a vector like this one at a layer (exBERT, Hoover et al. 2020)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertcore.analysis import shipped
from bertcore.analysis.representations import corpus_search as CS
from bertcore.tokenization.tokenizer import TextError, encode
from explorer.views.core import load, progress, view

MAX_UPLOAD_CHARS = 2_000_000


@dataclass
class Sentence:
    """The sentence searched from: its ``tokens`` (at most ``limit``), ``num_truncated`` (tokens cut off),
    ``ordinary`` (positions that can be searched for: not [CLS], [SEP], [MASK] ...) and ``default`` (the position
    of :data:`bertcore.analysis.shipped.CORPUS_WORD`, else the first ordinary one; -1 when there is none)."""

    tokens: list[str]
    limit: int
    num_truncated: int
    ordinary: list[int]
    default: int


@view
def sentence(source, text: str) -> Sentence:
    """``text`` as the search reads it (128 tokens at most, as each corpus segment). Raises ``TextError``."""
    lm = load(source)
    limit = min(lm.max_length, CS.MAX_TOKENS)
    enc = encode(lm.tokenizer, text, max_length=limit)
    special = set(lm.tokenizer.all_special_ids)
    ordinary = [i for i, tid in enumerate(enc.input_ids) if tid not in special]  # typed [MASK]s too are special
    default = next((i for i in ordinary if enc.tokens[i] == shipped.CORPUS_WORD), ordinary[0] if ordinary else -1)
    return Sentence(enc.tokens, limit, enc.num_truncated, ordinary, default)


def paragraphs(file: Path) -> list[str]:
    """The paragraphs (separated by blank lines) of a .txt file, its first :data:`MAX_UPLOAD_CHARS` characters.
    Raises ``TextError`` for a file that is not text or holds none."""
    raw = file.read_bytes()
    if raw[:4] in (b"\x89PNG", b"%PDF", b"PK\x03\x04"):
        raise TextError("That is not a text file.")
    body = raw.decode("utf-8", errors="replace")[:MAX_UPLOAD_CHARS]
    texts = [p.strip() for p in body.replace("\r\n", "\n").split("\n\n") if p.strip()]
    if not texts:
        raise TextError("The file holds no text.")
    return texts


@dataclass
class Search:
    """The ``k`` nearest tokens: ``hits`` (:class:`~bertcore.analysis.representations.corpus_search.Hit`: token,
    cosine, context, text), ``labels`` (spaCy's part of speech and dependency label of each; None without spaCy),
    ``n_tokens`` / ``n_texts`` indexed, ``from_model`` (the result shipped beside the model: nothing computed)."""

    hits: list[CS.Hit]
    labels: list[tuple[str, str]] | None
    n_tokens: int
    n_texts: int
    from_model: bool


@view
def search(source, text: str, position: int, layer: int, k: int = shipped.CORPUS_K,
           n_segments: int = shipped.CORPUS_SEGMENTS, upload: Path | None = None,
           index_root: str | None = None) -> Search:
    """The ``k`` tokens nearest (cosine) to token ``position`` of ``text`` at ``layer`` (a hidden_states index,
    0 = the embeddings), among every token of ``n_segments`` held-out BBC segments, or of the paragraphs of the file
    ``upload``. The corpus's index is kept in ``index_root`` (a folder; None: none kept).

    Raises ``ValueError`` (a layer outside 0..L), ``TextError`` (a text or file without text), ``DataError`` (no
    packaged BBC corpus)."""
    lm = load(source)
    cache = None if index_root is None else Path(index_root)
    if upload is None:
        # the held-out BBC segments; the default view (this model, sentence, token, layer, k, segments) is shipped
        # beside the model: read, not computed
        computation = shipped.corpus_search(lm, text, position, layer, k, n_segments, cache=cache)
        found = shipped.shipped(lm, computation)
        from_model = found is not None
        if found is None:
            found = computation.compute(progress)
    else:
        from_model = False
        # index every token of the corpus at the layer (or read the index kept on disk), then the nearest by cosine
        found = shipped.corpus_neighbours(lm, paragraphs(upload), text, position, layer, k, cache=cache)
    return Search(found["hits"], found["labels"], found["n_tokens"], found["n_texts"], from_model)
