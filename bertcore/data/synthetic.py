"""A small synthetic language with subject-verb number agreement, generated in code, to watch a BERT leave
the unigram plateau within minutes on a CPU (registered as the corpus ``agreement``).

Why this language: at a masked verb, frequency alone gives the most common verb form, while the right form
depends on the number of the subject, which can be several words away, across a prepositional phrase or a
relative clause whose own noun has the other number (an "attractor"; Linzen et al. 2016, Marvin & Linzen
2018). At a masked noun or adjective the word class is fixed by position but the word is not. So the loss
first falls to the unigram line (the model knows word frequencies), stays there, and drops when attention
starts to link a verb to its subject (the drop Chen et al. 2023 describe for real MLMs).

Grammar (every sentence ends with " ."; determiners agree with their noun too)::

    S    -> NP_x VP_x                       x = the number of the subject: sg or pl
    NP_x -> Det_x N_x | Det_x N_x PP | Det_x N_x RC
    PP   -> P Det_y N_y                     y: either number (the attractor when y != x)
    RC   -> "that" Det_y N_y V_y            the relative clause's own verb agrees with its own noun
    VP_x -> V_x | V_x Adv | Cop_x Adj

:func:`sentence` returns the words with each verb's controller, so a test can check agreement everywhere.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .corpora import CORPORA, Corpus

#: (singular, plural) nouns
NOUNS = [("dog", "dogs"), ("cat", "cats"), ("key", "keys"), ("boy", "boys"), ("girl", "girls"), ("bird", "birds"),
         ("teacher", "teachers"), ("farmer", "farmers"), ("car", "cars"), ("book", "books"), ("horse", "horses"),
         ("doctor", "doctors"), ("child", "children"), ("man", "men"), ("woman", "women"), ("mouse", "mice")]
#: (singular, plural) intransitive verbs
VERBS = [("runs", "run"), ("sleeps", "sleep"), ("sings", "sing"), ("waits", "wait"), ("falls", "fall"),
         ("smiles", "smile"), ("jumps", "jump"), ("works", "work")]
#: (singular, plural) transitive verbs of relative clauses ("the dog that the cats chase ...")
TRANSITIVE = [("sees", "see"), ("likes", "like"), ("follows", "follow"), ("helps", "help"), ("finds", "find")]
#: (singular, plural) copulas
COPULAS = [("is", "are"), ("was", "were")]
#: (singular, plural) determiners
DETERMINERS = [("the", "the"), ("this", "these"), ("a", "some")]  # "that" is only the relative pronoun
ADJECTIVES = ["old", "young", "happy", "tired", "small", "big", "red", "quiet"]
ADVERBS = ["quickly", "slowly", "today", "again", "often", "outside"]
PREPOSITIONS = ["near", "behind", "with", "beside", "under"]
NUMBERS = ("sg", "pl")


@dataclass(frozen=True)
class Lexicon:
    """The word lists a grammar draws from (the tables above by default); ``perfect`` / ``participles``: an
    optional third verb phrase, ``has/have + participle`` (another agreeing verb)."""

    nouns: list = field(default_factory=lambda: NOUNS)
    verbs: list = field(default_factory=lambda: VERBS)
    transitive: list = field(default_factory=lambda: TRANSITIVE)
    copulas: list = field(default_factory=lambda: COPULAS)
    determiners: list = field(default_factory=lambda: DETERMINERS)
    adjectives: list = field(default_factory=lambda: ADJECTIVES)
    adverbs: list = field(default_factory=lambda: ADVERBS)
    prepositions: list = field(default_factory=lambda: PREPOSITIONS)
    perfect: tuple = ()
    participles: tuple = ()


LEXICON = Lexicon()

#: the lexicon of the corpus ``agreement-aug`` (training data for the packaged model): no noun, verb or
#: preposition of the minimal-pair suite (:mod:`bertcore.analysis.grammar.minimal_pairs`), so the suite measures
#: whether agreement learned here carries over to other words; only is/are, was/were, has/have and the
#: determiners are shared (they are what agrees)
AUGMENT_LEXICON = Lexicon(
    nouns=[("nurse", "nurses"), ("singer", "singers"), ("lawyer", "lawyers"), ("player", "players"),
           ("painter", "painters"), ("worker", "workers"), ("baker", "bakers"), ("soldier", "soldiers"),
           ("neighbor", "neighbors"), ("friend", "friends"), ("window", "windows"), ("bottle", "bottles"),
           ("chair", "chairs"), ("flower", "flowers"), ("tree", "trees"), ("lamp", "lamps"), ("plate", "plates"),
           ("shoe", "shoes"), ("wolf", "wolves"), ("knife", "knives"), ("city", "cities"), ("baby", "babies"),
           ("story", "stories"), ("house", "houses"), ("coat", "coats"), ("girl", "girls"), ("boy", "boys"),
           ("king", "kings"), ("queen", "queens"), ("cup", "cups"), ("wall", "walls"), ("road", "roads")],
    verbs=[("sings", "sing"), ("swims", "swim"), ("works", "work"), ("cries", "cry"), ("falls", "fall"),
           ("shines", "shine"), ("moves", "move"), ("stays", "stay"), ("arrives", "arrive"), ("grows", "grow")],
    transitive=[("sees", "see"), ("helps", "help"), ("finds", "find"), ("follows", "follow"), ("needs", "need"),
                ("calls", "call"), ("visits", "visit")],
    copulas=[("is", "are"), ("was", "were")],
    determiners=[("the", "the"), ("this", "these"), ("a", "some"), ("my", "my"), ("her", "her")],
    adjectives=["tall", "kind", "busy", "late", "ready", "hungry", "broken", "clean", "open", "new", "warm", "empty"],
    adverbs=["today", "again", "now", "there", "at night", "every day", "in the morning", "too"],
    prepositions=["with", "under", "above", "from", "in", "on", "of", "by", "to", "across from", "inside"],
    perfect=("has", "have"),
    participles=("left", "arrived", "gone", "changed", "won", "fallen", "grown"),
)


@dataclass(frozen=True)
class Sentence:
    """``words``; ``agreements``: ``(verb index, controller noun index)`` for every verb and copula;
    ``kind``: ``"simple"``, ``"pp"`` or ``"rc"``; ``attractor``: the PP/RC noun's number differs from the subject's."""

    words: tuple[str, ...]
    agreements: tuple[tuple[int, int], ...]
    kind: str
    attractor: bool

    @property
    def text(self) -> str:
        return " ".join(self.words)


def _num(rng: random.Random) -> int:
    return rng.randrange(2)  # 0 = singular, 1 = plural


def _np(rng: random.Random, n: int, lex: Lexicon) -> list[str]:
    return [rng.choice(lex.determiners)[n], rng.choice(lex.nouns)[n]]


def sentence(rng: random.Random, kind: str | None = None, lex: Lexicon = LEXICON) -> Sentence:
    """One random sentence of the grammar (``kind`` None: simple 40%, pp 30%, rc 30%) from the words of
    ``lex``. Multi-word entries ("next to") stay one entry of ``words``."""
    kind = kind or rng.choices(("simple", "pp", "rc"), weights=(4, 3, 3))[0]
    x, y = _num(rng), _num(rng)
    words = _np(rng, x, lex)
    head = 1
    agreements = []
    if kind == "pp":
        words += [rng.choice(lex.prepositions), *_np(rng, y, lex)]
    elif kind == "rc":
        words += ["that", *_np(rng, y, lex)]
        agreements.append((len(words), len(words) - 1))
        words.append(rng.choice(lex.transitive)[y])
    elif kind != "simple":
        raise ValueError(f"kind must be simple, pp or rc; got {kind!r}")
    agreements.append((len(words), head))
    if lex.perfect and rng.random() < 0.25:
        words += [lex.perfect[x], rng.choice(lex.participles)]
    elif rng.random() < 0.5:
        words += [rng.choice(lex.copulas)[x], rng.choice(lex.adjectives)]
    else:
        words.append(rng.choice(lex.verbs)[x])
        if rng.random() < 0.5:
            words.append(rng.choice(lex.adverbs))
    words.append(".")
    return Sentence(tuple(words), tuple(agreements), kind, kind != "simple" and x != y)


def documents(n_docs: int = 3000, seed: int = 0, sentences_per_doc: tuple[int, int] = (3, 6),
              lex: Lexicon = LEXICON) -> list[str]:
    """``n_docs`` documents of random sentences (one per line), reproducible from ``seed``."""
    rng = random.Random(seed)
    return ["\n".join(sentence(rng, lex=lex).text for _ in range(rng.randint(*sentences_per_doc)))
            for _ in range(n_docs)]


def number_of(word: str) -> int | None:
    """0 (singular) or 1 (plural) for a noun, verb, copula or number-marked determiner; None otherwise
    ("the" is both)."""
    for table in (NOUNS, VERBS, TRANSITIVE, COPULAS, DETERMINERS):
        for pair in table:
            if pair[0] == pair[1]:
                continue
            if word in pair:
                return pair.index(word)
    return None


def agreement_documents() -> tuple[list[str], list[str]]:
    """The corpus ``agreement``: 3,000 documents (seed 0), sources ``agreement/<i>``."""
    docs = documents()
    return docs, [f"agreement/{i}" for i in range(len(docs))]


#: the corpus fingerprint: change it when the grammar or word lists change (the token cache follows it)
GRAMMAR_VERSION = "agreement-v1"

CORPORA["agreement"] = Corpus(agreement_documents, lambda: GRAMMAR_VERSION,
                              "a synthetic language with subject-verb agreement (generated, 3,000 documents)")


def augment_documents() -> tuple[list[str], list[str]]:
    """The corpus ``agreement-aug``: 6,000 documents of :data:`AUGMENT_LEXICON` sentences (seed 1), sources
    ``agreement-aug/<i>``: targeted augmentation data for agreement in a real-English model."""
    docs = documents(6000, seed=1, lex=AUGMENT_LEXICON)
    return docs, [f"agreement-aug/{i}" for i in range(len(docs))]


CORPORA["agreement-aug"] = Corpus(augment_documents, lambda: GRAMMAR_VERSION + "-aug1",
                                  "generated agreement sentences with words outside the minimal-pair suite")
