"""The other grammatical number of an English noun or present-tense verb, with ``inflect`` (MIT; ``plural_noun``,
``singular_noun``, ``plural_verb``), checked both ways.

inflect has no ``singular_verb``: the singular of a plural verb is written by the spelling rule (run -> runs, try
-> tries, fix -> fixes; are / were / have / do are irregular) and kept only when inflect's ``plural_verb`` maps it
back. A form that inflect leaves unchanged, does not map back, or answers with something not alphabetic gives
None: the word is dropped, never mangled. What inflect gets wrong consistently both ways ("focuses" -> "focuse",
"lies" -> "ly") is caught by the vocabulary check of :func:`bertcore.data.counterfactual.mine`.
"""

from __future__ import annotations

import functools

SINGULAR, PLURAL = "sg", "pl"
#: plural -> singular forms of the irregular verbs (inflect's plural_verb maps them the other way)
IRREGULAR_SINGULAR = {"are": "is", "were": "was", "have": "has", "do": "does"}


@functools.lru_cache(maxsize=1)
def _engine():
    import inflect

    return inflect.engine()


def _safe(fn, word: str):
    try:
        out = fn(word)
    except Exception:  # noqa: BLE001 - inflect raises on odd input; such a word is dropped
        return None
    return out if isinstance(out, str) and out.isalpha() else None


@functools.lru_cache(maxsize=20_000)
def other_noun(word: str, number: str) -> str | None:
    """The other number of a noun (lower case), or None when inflect has no distinct form or its answer does not
    map back (``plural_noun`` / ``singular_noun`` both ways): child -> children, keys -> key, news -> None."""
    eng, w = _engine(), word.lower()
    if number == SINGULAR:
        other = _safe(eng.plural_noun, w)
        back = other and _safe(eng.singular_noun, other)
    else:
        other = _safe(eng.singular_noun, w)
        back = other and _safe(eng.plural_noun, other)
    return other if other and other != w and back == w else None


def _singular_verb(plural: str) -> str:
    """The third-person singular of a plural present verb by the spelling rule: are -> is, run -> runs, try -> tries,
    fix -> fixes (:func:`other_verb` keeps it only when inflect maps it back)."""
    if plural in IRREGULAR_SINGULAR:
        return IRREGULAR_SINGULAR[plural]
    if len(plural) > 1 and plural.endswith("y") and plural[-2] not in "aeiou":
        return plural[:-1] + "ies"
    if plural.endswith(("s", "sh", "ch", "x", "z", "o")):
        return plural + "es"
    return plural + "s"


@functools.lru_cache(maxsize=20_000)
def other_verb(word: str, number: str) -> str | None:
    """The other number of a present-tense verb or of was / were (lower case), checked both ways: is -> are,
    runs -> run, have -> has; None where inflect fails ("focuses" -> "focuse" maps back, but see the vocabulary
    check of :func:`bertcore.data.counterfactual.mine`; a form it leaves unchanged gives None)."""
    w = word.lower()
    if number == SINGULAR:
        other = _safe(_engine().plural_verb, w)
        back = other and _singular_verb(other)
    else:
        other = _singular_verb(w) if w.isalpha() else None
        back = other and _safe(_engine().plural_verb, other)
    return other if other and other != w and back == w else None
