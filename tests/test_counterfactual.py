"""bertcore.data.counterfactual / inflection / natural_agreement: counterfactual number pairs from natural sentences
(spaCy + inflect), their cache, and the held-out natural attractor set and its score."""

import pytest
import torch

from bertcore.data import counterfactual as CF
from bertcore.data import natural_agreement as NA
from bertcore.data.inflection import other_noun, other_verb
from bertcore.modeling.heads import BertForPreTraining
from bertcore.tokenization.tokenizer import load_tokenizer

from .conftest import ROOT, tiny_bert

SENTENCES = [
    "The keys to the cabinet are on the table.",
    "The children that the teacher likes were happy.",
    "The child near the old barn is playing.",
    "Our dogs have been running all day.",
    "The price of oil futures is rising.",
    "His sister was very tired.",
]
BLOCKED = [
    "Two dogs are here.",  # a number word
    "These keys are mine.",  # a determiner with number
    "Dogs are very loyal.",  # a bare plural: "Dog is very loyal" is wrong
    "The man who lives here is tall.",  # the relative clause's verb agrees with the same subject
    "The company says it will grow.",  # a pronoun after the verb
    "The cat is a mammal.",  # a predicate noun
    "The cat and the dog are asleep.",  # a coordinated subject
]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(ROOT / "models" / "minilm-mlm")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def by_text(items):
    return {it.text: it for it in items}


def test_pairs_differ_exactly_in_the_subject_noun_and_the_verb(tok):
    items, stats = CF.mine([SENTENCES], tok)
    assert {it.text for it in items} == set(SENTENCES)
    assert sum(it.text == SENTENCES[1] for it in items) == 2  # "the children ... were" and "the teacher likes"
    for it in items:
        a, b = it.text.split(), it.counterfactual.split()
        assert len(a) == len(b)
        diff = [(x, y) for x, y in zip(a, b) if x != y]
        assert len(diff) == 2, (it.text, it.counterfactual)
        (s0, s1), (v0, v1) = diff
        assert (s0.lower(), s1.lower()) == (it.subject, it.other_subject)
        assert (v0.lower().strip(".,"), v1.lower().strip(".,")) == (it.verb, it.other_verb)
        # the spans point at the words in both sentences
        assert it.text[slice(*it.verb_span)].lower() == it.verb
        assert it.counterfactual[slice(*it.cf_verb_span)].lower() == it.other_verb
        assert it.counterfactual[slice(*it.cf_subject_span)].lower() == it.other_subject
        for word in (it.verb, it.other_verb, it.subject, it.other_subject):
            assert tok.tokenize(word) == [word]  # single WordPieces
        for v in it.versions():
            got = CF.verb_token_index(tok, v)
            assert got is not None and tok.convert_ids_to_tokens(got[0][got[1]]) == v.good
    assert stats.sentences == len(SENTENCES) and stats.parsed == len(SENTENCES)


def test_examples_and_irregular_plurals(tok):
    mined = CF.mine([SENTENCES], tok)[0]
    items = by_text(mined)
    keys = items["The keys to the cabinet are on the table."]
    assert keys.counterfactual == "The key to the cabinet is on the table."
    assert (keys.number, keys.verb, keys.other_verb) == ("pl", "are", "is")
    child = items["The child near the old barn is playing."]
    assert child.counterfactual == "The children near the old barn are playing."
    kids = [it for it in mined if it.subject == "children"]
    assert kids and kids[0].counterfactual == "The child that the teacher likes was happy."
    assert items["Our dogs have been running all day."].counterfactual == "Our dog has been running all day."
    assert items["His sister was very tired."].counterfactual == "His sisters were very tired."
    assert other_noun("child", "sg") == "children" and other_noun("children", "pl") == "child"
    assert other_noun("person", "sg") == "people" and other_noun("news", "sg") is None


def test_attractors_are_marked_per_version_with_their_constituent(tok):
    mined = CF.mine([SENTENCES], tok)[0]
    items = by_text(mined)
    keys = items["The keys to the cabinet are on the table."]
    assert keys.original().attractor == "pp" and keys.flipped().attractor is None  # "the key to the cabinet is"
    child = items["The child near the old barn is playing."]
    assert child.original().attractor is None and child.flipped().attractor == "pp"  # "the children near the barn"
    rc = [it for it in mined if it.subject == "children"][0]
    assert rc.original().attractor == "rc" and [n.word for n in rc.intervening] == ["teacher"]
    assert items["His sister was very tired."].intervening == ()
    s = CF.summary(mined)
    assert s["pairs"] == len(mined) and s["by_type"]["pp"] >= 3 and s["by_type"]["rc"] >= 1
    assert s["attractor_sentences"] == sum(v.attractor is not None for it in mined for v in it.versions())


def test_sentences_that_would_need_more_changes_are_left_out(tok):
    items, stats = CF.mine([BLOCKED], tok)
    assert items == [] and stats.parsed == len(BLOCKED)


def test_a_word_inflect_cannot_handle_is_dropped_not_mangled(tok):
    # inflect cannot give "focus" a singular that maps back (plural_verb("focuses") is "focuse"): dropped there
    assert other_verb("focus", "pl") is None
    assert CF.mine([["The teachers focus on the students."]], tokenizer=None)[0] == []
    # and the other way it answers "focuse", which is no word: without a vocabulary it would be kept ...
    raw = CF.mine([["The teacher focuses on the students."]], tokenizer=None)[0]
    assert [it.other_verb for it in raw] == ["focuse"]
    # ... the vocabulary check drops it
    items, stats = CF.mine([["The teacher focuses on the students."]], tok)
    assert items == [] and stats.dropped_vocabulary == 1
    # a noun whose inflection does not map back (inflect: thieves -> thief -> "thiefs") is dropped too
    assert other_noun("thieves", "pl") is None
    assert CF.mine([["The thieves near the house were caught."]], tokenizer=None)[0] == []
    assert other_verb("runs", "sg") == "run" and other_verb("tries", "sg") == "try"
    assert other_verb("try", "pl") == "tries" and other_verb("fix", "pl") == "fixes"
    assert other_verb("is", "sg") == "are" and other_verb("were", "pl") == "was" and other_verb("has", "sg") == "have"


def test_the_cache_is_keyed_by_content(tok):
    docs = [SENTENCES[:3], SENTENCES[3:]]
    first, s1 = CF.mine(docs, tok)
    again, s2 = CF.mine(docs, tok)
    assert s1.parsed == len(SENTENCES) and s2.parsed == 0 and s2.cached == len(SENTENCES)
    assert again == first and [(it.doc, it.sentence) for it in first] == [(it.doc, it.sentence) for it in again]
    changed = [SENTENCES[:3], [*SENTENCES[3:5], "The boxes in the hall were heavy."]]
    items, s3 = CF.mine(changed, tok)
    assert s3.parsed == len(SENTENCES) and "The boxes in the hall were heavy." in by_text(items)
    assert "His sister was very tired." not in by_text(items)


def test_natural_set_keeps_attractor_items_and_is_cached(tok, monkeypatch):
    texts = ["The opponents of the plan are out of excuses. The price of eggs is down.",
             "These keys to the cabinet are mine. The dog is asleep. The dogs near the houses are barking."]
    items = NA.build_natural_set(tok, texts=texts)
    assert [it.original().masked() for it in items] == [
        "The opponents of the plan [MASK] out of excuses.", "The price of eggs [MASK] down.",
        "These keys to the cabinet [MASK] mine."]  # a number-marked determiner is fine in natural text
    assert [it.attractor for it in items] == ["pp", "pp", "pp"]
    monkeypatch.setattr(NA, "mine", lambda *a, **k: pytest.fail("the natural set was not read from the cache"))
    assert NA.build_natural_set(tok, texts=texts) == items


def test_natural_score_is_the_logit_difference_at_the_masked_verb(tok):
    texts = ["The opponents of the plan are out of excuses. The price of eggs is down. The children that the teacher "
             "likes were happy."]
    items = NA.build_natural_set(tok, texts=texts, use_cache=False)
    model = tiny_bert(BertForPreTraining, seed=3)
    model.train()
    res = NA.score_natural(model, tok, items)
    assert model.training  # restored
    model.eval()
    for it, d in zip(items, res.diffs):
        enc = tok(it.original().masked(tok.mask_token), return_tensors="pt")
        pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero())
        with torch.no_grad():
            logits = model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).prediction_logits[0, pos]
        good, bad = tok.convert_tokens_to_ids([it.verb, it.other_verb])
        assert d == pytest.approx(float(logits[good] - logits[bad]), abs=1e-4)
    assert res.accuracy == pytest.approx(float((res.diffs > 0).mean()))
    by = res.by_type()
    assert sum(v["n"] for v in by.values()) == len(items) and set(by) <= set(CF.ATTRACTOR_TYPES)
    assert by["pp"]["n"] == 2 and by["rc"]["n"] == 1


def test_cache_chunks_are_cut_by_content_so_a_corpus_in_a_mixture_hits_them(tok, monkeypatch):
    monkeypatch.setattr(CF, "CHUNK_SIZE", 3)  # a boundary after about one sentence in three
    docs = [SENTENCES, BLOCKED]
    CF.mine(docs, tok)
    mixed = [["The boxes in the hall were heavy.", "Her cousins near the lake were swimming."], *docs]
    items, stats = CF.mine(mixed, tok)
    assert stats.cached >= len(SENTENCES + BLOCKED) - 4 and stats.parsed < len(SENTENCES + BLOCKED)
    fresh, _ = CF.mine(mixed, tok, use_cache=False)
    assert items == fresh  # read from the cache with the right documents and sentence indices
    assert [it.doc for it in items[:2]] == [0, 0] and all(it.doc >= 1 for it in items[2:])


def test_mining_stops_once_enough_pairs_are_found(tok, monkeypatch):
    """``enough``: parsing stops after the chunk that reaches it (a run needs thousands of pairs, not every
    sentence of a 250k-sentence mixture); without it every chunk is parsed."""
    monkeypatch.setattr(CF, "CHUNK_SIZE", 2)  # a boundary after about one sentence in two
    docs = [SENTENCES]
    every, s_all = CF.mine(docs, tok, use_cache=False)
    assert s_all.parsed == len(SENTENCES) and len(every) >= 3
    some, s_some = CF.mine(docs, tok, use_cache=False, enough=1)
    assert 0 < s_some.parsed < len(SENTENCES)
    assert 1 <= len(some) < len(every) and some == every[:len(some)]
