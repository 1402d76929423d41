"""Does the model know grammar? A minimal-pair suite written for the project, and two ways to score it.

Paradigms after Marvin & Linzen 2018 ("Targeted Syntactic Evaluation of Language Models") and BLiMP
(Warstadt et al. 2020), generated from word lists with a fixed seed (BLiMP's own data is downloaded at run
time by its loaders, so it is not available offline). Each pair is a grammatical and an ungrammatical
sentence that differ in the intended word(s) only: one word, or for NPIs the same words with two swapped.

Scored two ways:
- ``pll``: the grammatical sentence has the higher pseudo-log-likelihood (Salazar et al. 2020;
  :mod:`bertcore.analysis.grammar.scoring`);
- ``critical``: with [MASK] at the one word where the pair differs, the model's logit for the grammatical word
  is above the ungrammatical one (Goldberg 2019, "Assessing BERT's Syntactic Abilities"). Only pairs that differ
  in one word, each a single WordPiece, have it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ...device import device_of
from ...readouts.fill_mask import mlm_logits_at
from .scoring import pseudo_log_likelihood

# (singular, plural); every form is one WordPiece of bert-base-uncased's vocabulary (tests check it)
NOUNS = [("author", "authors"), ("pilot", "pilots"), ("surgeon", "surgeons"), ("farmer", "farmers"),
         ("manager", "managers"), ("customer", "customers"), ("officer", "officers"), ("teacher", "teachers"),
         ("senator", "senators"), ("dancer", "dancers"), ("student", "students"), ("driver", "drivers")]
THINGS = [("key", "keys"), ("book", "books"), ("picture", "pictures"), ("car", "cars"), ("table", "tables"),
          ("letter", "letters"), ("box", "boxes"), ("door", "doors")]
ANIMALS = [("dog", "dogs"), ("cat", "cats"), ("horse", "horses"), ("bird", "birds"), ("rabbit", "rabbits"),
           ("cow", "cows"), ("duck", "ducks"), ("goat", "goats")]
IRREGULAR = [("child", "children"), ("man", "men"), ("woman", "women"), ("person", "people"), ("mouse", "mice"),
             ("foot", "feet"), ("tooth", "teeth"), ("goose", "geese")]
VERBS = [("laughs", "laugh"), ("smiles", "smile"), ("runs", "run"), ("waits", "wait"), ("talks", "talk"),
         ("writes", "write"), ("reads", "read"), ("sleeps", "sleep")]
TRANSITIVE = [("likes", "like"), ("trusts", "trust"), ("hates", "hate"), ("knows", "know"), ("loves", "love")]
BE = [("is", "are"), ("was", "were")]
HAVE = [("has", "have")]
PREPOSITIONS = ["near", "behind", "next to", "beside"]
NAMES = ["mary", "john", "sarah", "david", "anna", "peter"]


@dataclass(frozen=True)
class Pair:
    """``good`` / ``bad``: the grammatical and ungrammatical sentence; ``paradigm``; ``critical``: ``(masked
    sentence with one [MASK], good word, bad word)`` when the pair differs in exactly one word, else None."""

    paradigm: str
    good: str
    bad: str
    critical: tuple[str, str, str] | None


def _pair(paradigm: str, words_good: list[str], words_bad: list[str]) -> Pair:
    diff = [i for i, (a, b) in enumerate(zip(words_good, words_bad)) if a != b]
    critical = None
    if len(words_good) == len(words_bad) and len(diff) == 1:
        masked = list(words_good)
        masked[diff[0]] = "[MASK]"
        critical = (" ".join(masked), words_good[diff[0]], words_bad[diff[0]])
    return Pair(paradigm, " ".join(words_good), " ".join(words_bad), critical)


def _agreement(rng: random.Random, prefix: Callable[[random.Random, int], list[str]], paradigm: str) -> Pair:
    """``prefix(rng, n) + verb(n) + rest``: the good verb agrees with number n, the bad one does not."""
    n = rng.randrange(2)
    words = prefix(rng, n)
    if rng.random() < 0.5:
        verb, rest = rng.choice(VERBS), []
    else:
        verb, rest = rng.choice(BE), [rng.choice(["here", "there", "happy", "late", "tired"])]
    return _pair(paradigm, words + [verb[n], *rest, "."], words + [verb[1 - n], *rest, "."])


def _np(rng: random.Random, n: int, nouns=NOUNS) -> list[str]:
    return ["the", rng.choice(nouns)[n]]


def simple(rng):
    return _agreement(rng, _np, "agreement: simple")


def across_pp(rng):
    def prefix(r, n):  # the attractor has the other number
        return [*_np(r, n, THINGS), *r.choice(PREPOSITIONS).split(), *_np(r, 1 - n)]
    return _agreement(rng, prefix, "agreement: across a prepositional phrase")


def across_rc(rng):
    def prefix(r, n):
        m = 1 - n
        return [*_np(r, n), "that", *_np(r, m), r.choice(TRANSITIVE)[m]]
    return _agreement(rng, prefix, "agreement: across a relative clause")


def sentential_complement(rng):
    def prefix(r, n):
        return [*_np(r, r.randrange(2)), r.choice(["said", "thinks", "knows"]), *_np(r, n)]
    return _agreement(rng, prefix, "agreement: in a sentential complement")


def irregular_plural(rng):
    return _agreement(rng, lambda r, n: _np(r, n, IRREGULAR), "agreement: irregular plural subject")


def reflexive(rng):
    n = rng.randrange(2)
    words = [*_np(rng, n, ANIMALS), rng.choice(["hurt", "saw", "scratched", "washed", "bit", "fed"])]
    refl, end = ("itself", "themselves"), [rng.choice(["again", "today", "badly"]), "."]
    return _pair("reflexive anaphora number", words + [refl[n], *end], words + [refl[1 - n], *end])


def determiner_noun(rng):
    n = rng.randrange(2)
    det = rng.choice([("this", "these"), ("that", "those")])[n]
    noun = rng.choice(THINGS)
    words = [rng.choice(NAMES), rng.choice(["bought", "found", "saw", "lost"]), det]
    return _pair("determiner-noun number", words + [noun[n], "."], words + [noun[1 - n], "."])


def npi(rng):
    """Marvin & Linzen 2018's NPI across a relative clause: "no" must c-command "ever" ("no author that the
    senators like has ever ..."), not sit inside the clause ("the author that no senators like has ever ...").
    The two sentences hold the same words, so word frequency cannot decide (a pair "no ..." vs "the ..." would
    only measure how much more frequent "the" is); no single critical word."""
    noun, other = rng.choice(NOUNS)[0], rng.choice(NOUNS)[1]
    clause = [other, rng.choice(TRANSITIVE)[1]]
    rest = ["has", "ever", rng.choice(["seen", "visited", "liked", "met", "called", "helped", "trusted"]),
            rng.choice(["it", "them", "us", "her"]), "."]
    return _pair("NPI licensing (ever)", ["no", noun, "that", "the", *clause, *rest],
                 ["the", noun, "that", "no", *clause, *rest])


PARADIGMS: dict[str, Callable[[random.Random], Pair]] = {
    "simple": simple, "pp": across_pp, "rc": across_rc, "complement": sentential_complement,
    "irregular": irregular_plural, "reflexive": reflexive, "determiner": determiner_noun, "npi": npi,
}
#: seeds: the suite shown in the app and used to select checkpoints, and a held-out draw for model cards
SUITE_SEED, HELDOUT_SEED = 0, 1


def generate(n_per_paradigm: int = 100, seed: int = SUITE_SEED, paradigms: list[str] | None = None) -> list[Pair]:
    """``n_per_paradigm`` distinct pairs of each paradigm (fewer if the word lists run out), reproducible."""
    rng = random.Random(seed)
    out: list[Pair] = []
    for name in paradigms or list(PARADIGMS):
        seen: set[str] = set()
        for _ in range(50 * n_per_paradigm):
            if len(seen) >= n_per_paradigm:
                break
            p = PARADIGMS[name](rng)
            if p.good not in seen:
                seen.add(p.good)
                out.append(p)
    return out


@dataclass(frozen=True)
class PairResult:
    """One scored pair: PLL of each side (nats), their difference, and the critical-word logit difference
    (good - bad; None when the pair has no single critical word)."""

    pair: Pair
    pll_good: float
    pll_bad: float
    critical_diff: float | None

    @property
    def pll_correct(self) -> bool:
        return self.pll_good > self.pll_bad

    @property
    def critical_correct(self) -> bool | None:
        return None if self.critical_diff is None else self.critical_diff > 0


@torch.no_grad()
def critical_logit_diff(model, tokenizer, masked: str, good: str, bad: str) -> float | None:
    """Logit of ``good`` minus logit of ``bad`` at the one [MASK] of ``masked``; None unless both are single
    WordPieces of the vocabulary."""
    ids = [tokenizer.convert_tokens_to_ids(w) for w in (good, bad)]
    if any(i is None or i == tokenizer.unk_token_id for i in ids):
        return None
    enc = tokenizer(masked.replace("[MASK]", tokenizer.mask_token), return_tensors="pt").to(device_of(model))
    pos = (enc["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten()
    if pos.numel() != 1:
        return None
    logits = mlm_logits_at(model, enc["input_ids"][0], pos)[0]  # (V,)
    return float(logits[ids[0]] - logits[ids[1]])


def score(model, tokenizer, pairs: list[Pair], metric: str = "within_word_l2r") -> Iterator[PairResult]:
    """Score each pair (a generator, so a caller can draw a progress bar); the model needs an MLM head."""
    for p in pairs:
        good = pseudo_log_likelihood(model, tokenizer, p.good, metric).pll
        bad = pseudo_log_likelihood(model, tokenizer, p.bad, metric).pll
        crit = critical_logit_diff(model, tokenizer, *p.critical) if p.critical else None
        yield PairResult(p, good, bad, crit)


def accuracy_by_paradigm(results: list[PairResult]) -> dict[str, dict[str, float]]:
    """``{paradigm: {"pll": share correct, "critical": share correct or NaN, "n": pairs}}``."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r.pair.paradigm for r in results):
        rs = [r for r in results if r.pair.paradigm == name]
        crit = [r.critical_correct for r in rs if r.critical_correct is not None]
        out[name] = {"pll": float(np.mean([r.pll_correct for r in rs])),
                     "critical": float(np.mean(crit)) if crit else float("nan"), "n": float(len(rs))}
    return out
