"""bertcore.data.synthetic: the generated agreement language (the phase-change demo)."""

import random
from collections import Counter

import pytest

from bertcore.data import CORPORA
from bertcore.data import synthetic as S

VERB_TABLES = (S.VERBS, S.TRANSITIVE, S.COPULAS)
VERB_FORMS = {w for table in VERB_TABLES for pair in table for w in pair}
NOUN_FORMS = {w for pair in S.NOUNS for w in pair}


def test_every_verb_agrees_with_its_subject_in_every_sentence():
    rng = random.Random(0)
    for _ in range(3000):
        s = S.sentence(rng)
        verbs = [i for i, w in enumerate(s.words) if w in VERB_FORMS]
        assert sorted(v for v, _ in s.agreements) == verbs  # every verb is listed, nothing else
        for verb, noun in s.agreements:
            assert s.words[noun] in NOUN_FORMS
            assert S.number_of(s.words[verb]) == S.number_of(s.words[noun]), s.text
        for i, w in enumerate(s.words[:-1]):  # determiners agree with the noun after them
            if w in {d for pair in S.DETERMINERS for d in pair} and (n := S.number_of(w)) is not None:
                assert S.number_of(s.words[i + 1]) == n, s.text
        assert s.words[1] in NOUN_FORMS and s.words[-1] == "."
        if s.kind == "rc":  # the main verb's subject is the first noun, across the clause
            assert s.agreements[-1][1] == 1 and s.words[2] == "that"


def test_word_lists_have_distinct_singular_and_plural_forms():
    for table in (S.NOUNS, *VERB_TABLES):
        for sg, pl in table:
            assert sg != pl and S.number_of(sg) == 0 and S.number_of(pl) == 1
    assert S.number_of("the") is None and S.number_of("quickly") is None


def test_counts_of_kinds_and_attractors():
    rng = random.Random(1)
    sents = [S.sentence(rng) for _ in range(4000)]
    kinds = Counter(s.kind for s in sents)
    assert kinds["simple"] / 4000 == pytest.approx(0.4, abs=0.03)
    assert kinds["pp"] / 4000 == pytest.approx(0.3, abs=0.03)
    embedded = [s for s in sents if s.kind != "simple"]
    assert sum(s.attractor for s in embedded) / len(embedded) == pytest.approx(0.5, abs=0.04)
    assert not any(s.attractor for s in sents if s.kind == "simple")
    with pytest.raises(ValueError, match="kind"):
        S.sentence(rng, "question")


def test_the_corpus_is_registered_and_reproducible():
    docs, sources = CORPORA["agreement"].load()
    assert len(docs) == len(sources) == 3000
    assert docs == S.documents()  # same seed, same text
    assert S.documents(seed=1) != docs
    assert all(3 <= len(d.splitlines()) <= 6 for d in docs)
    assert CORPORA["agreement"].fingerprint() == S.GRAMMAR_VERSION
