"""Everyday English from two Debian packages, registered in :data:`bertcore.data.corpora.CORPORA`, and the
mixture the packaged fill-mask model was trained on.

=================  ==========================================================  ========  ======================
name               documents                                                   words     licence of the text
=================  ==========================================================  ========  ======================
wordnet            WordNet 3.0 (Debian ``wordnet-base``): every synset as one   1.61M     WordNet 3.0 licence
                   line "<headword>: <gloss>. <example>. ...", 25 synsets of            (use, copy, modify,
                   one data file (noun, verb, adj, adv) a document                        redistribute with
                                                                                         the notice kept)
fortunes           BSD ``fortune`` quotations (Debian ``fortunes``,             0.28M     BSD (University of
                   ``fortunes-min``): one entry a document; the technical,                California)
                   ASCII-art and offensive-prone files are skipped (below)
everyday           bbc + wiki + wordnet + fortunes                              3.5M
everyday+agree     everyday + ``agreement-aug`` (generated agreement            3.7M
                   sentences, :mod:`bertcore.data.synthetic`)
=================  ==========================================================  ========  ======================

Neither Debian package is on PyPI, so neither is a dependency of the app: they reproduce the packaged
model (``apt-get install wordnet-base fortunes fortunes-min``). Loading them without the package raises a
:class:`DataError` that gives that line.

The mixtures are split into training and held-out documents **per corpus** (see
:func:`bertcore.data.build_pretraining_data`), so BBC's held-out articles are the same 111 as when BBC is
trained alone, and each corpus has its own held-out metrics.
"""

from __future__ import annotations

import re
from pathlib import Path

from .corpora import CORPORA, Corpus, DataError, _files_fingerprint, read_text

WORDNET_DIR = Path("/usr/share/wordnet")
FORTUNES_DIR = Path("/usr/share/games/fortunes")
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
SYNSETS_PER_DOCUMENT = 25
#: fortune files left out: programming and system jokes, ASCII art, Star Trek and Zippy quotes (not everyday
#: prose), disclaimers and one-line fragments
FORTUNES_SKIPPED = frozenset({"art", "ascii-art", "computers", "debian", "linux", "linuxcookie", "perl", "startrek",
                              "zippy", "translate-me", "disclaimer", "goedel", "knghtbrd", "definitions"})
_APT = "apt-get install wordnet-base fortunes fortunes-min"


def _require(path: Path, package: str) -> Path:
    if not path.is_dir():
        raise DataError(f"{path} not found: the corpus needs the Debian package {package} ({_APT}); "
                        "it is used only to reproduce the packaged model, the app does not need it")
    return path


def wordnet_files() -> list[Path]:
    root = _require(WORDNET_DIR, "wordnet-base")
    return [root / f for f in WORDNET_FILES if (root / f).is_file()]


def fortune_files() -> list[Path]:
    root = _require(FORTUNES_DIR, "fortunes")
    return sorted(p for p in root.iterdir()
                  if p.is_file() and "." not in p.name and p.name not in FORTUNES_SKIPPED)


def synset_line(line: str) -> str | None:
    """One line of a WordNet ``data.*`` file -> ``"<headword>: <gloss>. <example>. ..."`` (None for the licence
    header). The headword is the synset's first lemma, underscores as spaces, adjective markers such as
    ``(a)`` dropped; the gloss and its quoted examples follow the ``|``."""
    if not line or line.startswith(" ") or "|" not in line:
        return None
    fields, _, gloss = line.partition("|")
    parts = fields.split()
    if len(parts) < 5:
        return None
    head = re.sub(r"\(\w+\)$", "", parts[4]).replace("_", " ")
    pieces = [p.strip() for p in gloss.strip().split(";") if p.strip()]
    if not pieces:
        return None
    sentences = []
    for p in pieces:
        p = p.strip().strip('"').strip()
        if p:
            sentences.append(p if p[-1] in ".!?" else p + ".")
    sentences[0] = f"{head}: {sentences[0]}"
    return " ".join(sentences)


def wordnet_documents() -> tuple[list[str], list[str]]:
    """WordNet's synsets, :data:`SYNSETS_PER_DOCUMENT` consecutive ones of a data file per document, one synset a
    line; sources ``wordnet/<file>#<first line>``.

    Raises:
        DataError: ``wordnet-base`` is not installed.
    """
    texts, sources = [], []
    for path in wordnet_files():
        lines = [s for s in (synset_line(ln) for ln in read_text(path).splitlines()) if s]
        for i in range(0, len(lines), SYNSETS_PER_DOCUMENT):
            texts.append("\n".join(lines[i:i + SYNSETS_PER_DOCUMENT]))
            sources.append(f"wordnet/{path.name}#{i}")
    return texts, sources


def fortune_entry(raw: str) -> str:
    """One fortune -> prose: attribution lines (``-- Author``) dropped, lines of a paragraph joined (the files
    break lines at ~70 columns), paragraphs on their own lines."""
    paragraphs = []
    for para in re.split(r"\n\s*\n", raw.strip()):
        lines = [ln.strip() for ln in para.splitlines()]
        lines = [ln for ln in lines if ln and not ln.startswith("--") and not ln.startswith("~")]
        if lines:
            paragraphs.append(" ".join(lines))
    return "\n".join(paragraphs)


def fortunes_documents() -> tuple[list[str], list[str]]:
    """The kept fortune files' entries (``%`` lines separate them), one entry a document; sources
    ``fortunes/<file>#<i>``.

    Raises:
        DataError: ``fortunes`` is not installed.
    """
    texts, sources = [], []
    for path in fortune_files():
        for i, raw in enumerate(read_text(path).split("\n%\n")):
            text = fortune_entry(raw.strip("%\n"))
            if len(text.split()) >= 4:
                texts.append(text)
                sources.append(f"fortunes/{path.name}#{i}")
    return texts, sources


CORPORA["wordnet"] = Corpus(wordnet_documents, lambda: _files_fingerprint(wordnet_files()),
                            "WordNet 3.0 glosses and examples (Debian wordnet-base; WordNet licence)")
CORPORA["fortunes"] = Corpus(fortunes_documents, lambda: _files_fingerprint(fortune_files()),
                             "BSD fortune quotations, everyday and literary files (Debian fortunes; BSD)")
CORPORA["everyday"] = Corpus.mixture(("bbc", "wiki", "wordnet", "fortunes"),
                                     "BBC News + Wikipedia summaries + WordNet + fortunes, 3.5M words")
CORPORA["everyday+agree"] = Corpus.mixture(("bbc", "wiki", "wordnet", "fortunes", "agreement-aug"),
                                           "everyday + generated agreement sentences (agreement-aug)")
