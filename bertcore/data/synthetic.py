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
from dataclasses import dataclass

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


def _np(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(DETERMINERS)[n], rng.choice(NOUNS)[n]]


def sentence(rng: random.Random, kind: str | None = None) -> Sentence:
    """One random sentence of the grammar (``kind`` None: simple 40%, pp 30%, rc 30%)."""
    kind = kind or rng.choices(("simple", "pp", "rc"), weights=(4, 3, 3))[0]
    x, y = _num(rng), _num(rng)
    words = _np(rng, x)
    head = 1
    agreements = []
    if kind == "pp":
        words += [rng.choice(PREPOSITIONS), *_np(rng, y)]
    elif kind == "rc":
        words += ["that", *_np(rng, y)]
        agreements.append((len(words), len(words) - 1))
        words.append(rng.choice(TRANSITIVE)[y])
    elif kind != "simple":
        raise ValueError(f"kind must be simple, pp or rc; got {kind!r}")
    agreements.append((len(words), head))
    if rng.random() < 0.5:
        words += [rng.choice(COPULAS)[x], rng.choice(ADJECTIVES)]
    else:
        words.append(rng.choice(VERBS)[x])
        if rng.random() < 0.5:
            words.append(rng.choice(ADVERBS))
    words.append(".")
    return Sentence(tuple(words), tuple(agreements), kind, kind != "simple" and x != y)


def documents(n_docs: int = 3000, seed: int = 0, sentences_per_doc: tuple[int, int] = (3, 6)) -> list[str]:
    """``n_docs`` documents of random sentences (one per line), reproducible from ``seed``."""
    rng = random.Random(seed)
    return ["\n".join(sentence(rng).text for _ in range(rng.randint(*sentences_per_doc))) for _ in range(n_docs)]


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
