"""Mixtures of corpora split per corpus, the Debian everyday corpora (wordnet, fortunes) and the generated
agreement data of the packaged model (bertcore.data.debian, bertcore.data.synthetic.AUGMENT_LEXICON)."""

import pytest

from bertcore import data as D
from bertcore.analysis.grammar import minimal_pairs as MP
from bertcore.data import debian, synthetic
from bertcore.data.corpora import CORPORA, Corpus


def _docs(prefix: str, n: int):
    texts = [f"the {prefix} number {i} is here . it has a second sentence about {prefix} {i} .\n"
             f"and a third line for {prefix} ." for i in range(n)]
    return lambda: (texts, [f"{prefix}/{i}" for i in range(n)])


@pytest.fixture
def toy_corpora(monkeypatch, tmp_path):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    monkeypatch.setitem(CORPORA, "toy-a", Corpus(_docs("apple", 40), lambda: "a1"))
    monkeypatch.setitem(CORPORA, "toy-b", Corpus(_docs("river", 60), lambda: "b1"))
    monkeypatch.setitem(CORPORA, "toy-ab", Corpus.mixture(("toy-a", "toy-b")))


def _rows(ds):
    return sorted(tuple(r) for r in ds["input_ids"])


def _has(rows, seq) -> bool:
    n = len(seq)
    return any(r[k:k + n] == seq for r in rows for k in range(len(r) - n + 1))


def _doc_key(tok, noun: str, i: int) -> list[int]:
    """The token ids that only document ``i`` of a toy corpus holds ("the <noun> number <i> is")."""
    return tok(f"the {noun} number {i} is", add_special_tokens=False)["input_ids"]


def _held_out(n: int, seed: int, fraction: float) -> set[int]:
    import random

    order = list(range(n))
    random.Random(seed).shuffle(order)
    return set(order[:max(2, round(n * fraction))])


def test_a_mixture_holds_out_what_each_corpus_holds_out_alone(toy_corpora, packaged):
    tok = packaged.tokenizer
    mix = D.build_pretraining_data(tok, "toy-ab", 64, seed=3, val_fraction=0.1)
    alone = {n: D.build_pretraining_data(tok, n, 64, seed=3, val_fraction=0.1) for n in ("toy-a", "toy-b")}
    # the mixture's held-out pairs are exactly the parts' held-out pairs: per-corpus metrics are clean
    assert _rows(mix.val) == sorted(_rows(alone["toy-a"].val) + _rows(alone["toy-b"].val))
    assert mix.stats["parts"] == {"toy-a": {"documents": 40, "val_documents": 4},
                                  "toy-b": {"documents": 60, "val_documents": 6}}
    assert mix.stats["val_documents"] == 10 and mix.stats["train_documents"] == 90
    train, val = list(mix.train["input_ids"]), list(mix.val["input_ids"])
    for noun, n in (("apple", 40), ("river", 60)):
        held = _held_out(n, 3, 0.1)
        for i in range(n):  # each document is in training or held out, never both
            key = _doc_key(tok, noun, i)
            assert _has(train, key) != (i in held), (noun, i)
        assert all(_has(val, _doc_key(tok, noun, i)) for i in held)


def test_a_single_corpus_splits_as_before(toy_corpora, packaged):
    """No mixture: the split is the seeded shuffle of the corpus's documents (what runs before mixtures got)."""
    tok = packaged.tokenizer
    d = D.build_pretraining_data(tok, "toy-a", 64, seed=3, val_fraction=0.1)
    assert "parts" not in d.stats and d.stats["val_documents"] == 4
    val = list(d.val["input_ids"])
    assert {i for i in range(40) if _has(val, _doc_key(tok, "apple", i))} == _held_out(40, 3, 0.1)


def test_mixture_fingerprint_follows_its_parts(toy_corpora, monkeypatch):
    before = CORPORA["toy-ab"].fingerprint()
    monkeypatch.setitem(CORPORA, "toy-b", Corpus(_docs("river", 60), lambda: "b2"))
    assert CORPORA["toy-ab"].fingerprint() != before
    assert CORPORA["toy-ab"].load()[1][:40] == [f"apple/{i}" for i in range(40)]


def test_synset_line():
    line = ('00005930 03 n 01 dwarf 0 001 @ 00004475 n 0000 | a plant or animal that is atypically small; '
            '"the dwarf was hiding behind a tree"  ')
    assert debian.synset_line(line) == ("dwarf: a plant or animal that is atypically small. "
                                        "the dwarf was hiding behind a tree.")
    adj = '00001740 00 a 01 able(a) 0 005 = 05207437 n 0000 | (usually followed by `to\') having the necessary means'
    assert debian.synset_line(adj).startswith("able: (usually followed by")
    assert debian.synset_line("  1 This software and database is being provided to you") is None
    multi = '01234567 05 n 02 ice_cream 0 frozen_dessert 0 000 | frozen dessert; "she ate ice cream"'
    assert debian.synset_line(multi) == "ice cream: frozen dessert. she ate ice cream."


def test_fortune_entry_drops_attributions_and_joins_lines():
    raw = "Example is not the main thing in\ninfluencing others.  It is the only thing.\n\t\t-- Albert Schweitzer"
    assert debian.fortune_entry(raw) == "Example is not the main thing in influencing others.  It is the only thing."
    assert debian.fortune_entry("Q: Why?\n\nA: Because.") == "Q: Why?\nA: Because."


def test_missing_debian_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(debian, "WORDNET_DIR", tmp_path / "nope")
    with pytest.raises(D.DataError, match="apt-get install wordnet-base"):
        D.load_documents("wordnet")


@pytest.mark.skipif(not debian.WORDNET_DIR.is_dir() or not debian.FORTUNES_DIR.is_dir(),
                    reason="Debian wordnet-base / fortunes not installed (only needed to retrain the packaged model)")
def test_debian_corpora_load():
    texts, sources = CORPORA["wordnet"].load()
    assert len(texts) > 4000 and all(t.count("\n") >= 1 for t in texts[:-5])
    assert sum(len(t.split()) for t in texts) > 1_000_000
    texts, sources = CORPORA["fortunes"].load()
    assert len(texts) > 5000 and not any(s.startswith(("fortunes/linux", "fortunes/computers")) for s in sources)


def test_augmentation_words_are_not_the_suites():
    """The generated agreement data shares no noun, verb or preposition with the grammar suite, so the suite
    measures whether agreement carries over to other words."""
    lex = synthetic.AUGMENT_LEXICON
    suite_nouns = {w for table in (MP.NOUNS, MP.THINGS, MP.ANIMALS, MP.IRREGULAR) for pair in table for w in pair}
    suite_verbs = {w for table in (MP.VERBS, MP.TRANSITIVE) for pair in table for w in pair}
    ours = {w for pair in lex.nouns for w in pair}
    assert not ours & suite_nouns
    assert not {w for table in (lex.verbs, lex.transitive) for pair in table for w in pair} & suite_verbs
    assert not set(lex.prepositions) & set(MP.PREPOSITIONS)
    # and every generated sentence agrees: each verb has the number of its controller noun
    rng = __import__("random").Random(0)
    number = {w: i for table in (lex.nouns, lex.verbs, lex.transitive, lex.copulas) for pair in table
              for i, w in enumerate(pair) if pair[0] != pair[1]}
    number.update({lex.perfect[0]: 0, lex.perfect[1]: 1})
    for _ in range(300):
        s = synthetic.sentence(rng, lex=lex)
        for verb, noun in s.agreements:
            assert number[s.words[verb]] == number[s.words[noun]], s.text


def test_default_grammar_draws_unchanged():
    """The corpus 'agreement' is cached under GRAMMAR_VERSION 'agreement-v1': the lexicon parameter must not
    change its documents (the hash is the corpus as generated before the parameter existed)."""
    import hashlib

    assert synthetic.GRAMMAR_VERSION == "agreement-v1"
    docs = CORPORA["agreement"].load()[0]
    assert hashlib.sha256("\n\n".join(docs).encode()).hexdigest()[:16] == "79bf6480dde3879c"
