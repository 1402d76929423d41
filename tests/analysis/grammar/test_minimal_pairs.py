"""bertcore.analysis.grammar.minimal_pairs: the generated suite and its two scores."""

import pytest
import torch

from bertcore.loading import sources
from bertcore.analysis.grammar import minimal_pairs as M
from bertcore.modeling.heads import BertForMaskedLM

from tests.conftest import tiny_bert

NUMBER = {w: i for table in (M.NOUNS, M.THINGS, M.ANIMALS, M.IRREGULAR, M.VERBS, M.TRANSITIVE, M.BE, M.HAVE)
          for pair in table for i, w in enumerate(pair)}
NOUN_FORMS = {w for t in (M.NOUNS, M.THINGS, M.ANIMALS, M.IRREGULAR) for p in t for w in p}
VERB_FORMS = {w for t in (M.VERBS, M.BE) for p in t for w in p}


@pytest.fixture(scope="module")
def suite():
    return M.generate(100)


def test_each_paradigm_has_distinct_pairs_that_differ_in_one_word(suite):
    by = {}
    for p in suite:
        by.setdefault(p.paradigm, []).append(p)
        g, b = p.good.split(), p.bad.split()
        diff = [i for i, (x, y) in enumerate(zip(g, b)) if x != y]
        assert len(g) == len(b)
        if p.paradigm.startswith("NPI"):  # the same words, "no" and "the" swapped: frequency cannot decide
            assert sorted(g) == sorted(b) and len(diff) == 2 and {g[i] for i in diff} == {"no", "the"}, p
            assert p.critical is None
        else:
            assert len(diff) == 1, p
            assert p.critical is not None and p.critical[0].count("[MASK]") == 1
    assert len(by) == len(M.PARADIGMS) and all(len(v) == 100 for v in by.values())
    assert M.generate(100) == suite and M.generate(100, seed=M.HELDOUT_SEED) != suite


def test_the_good_side_is_grammatical(suite):
    for p in suite:
        g = p.good.split()
        if p.paradigm.startswith("agreement"):
            verb = next(i for i in range(len(g) - 1, -1, -1) if g[i] in VERB_FORMS)
            subject = 1 if "complement" not in p.paradigm else max(i for i in range(verb) if g[i] in NOUN_FORMS)
            assert NUMBER[g[verb]] == NUMBER[g[subject]], p
            if "phrase" in p.paradigm or "relative" in p.paradigm:  # an attractor of the other number
                assert any(g[i] in NOUN_FORMS and NUMBER[g[i]] != NUMBER[g[1]] for i in range(2, verb)), p
        elif p.paradigm.startswith("reflexive"):
            assert (g[3] == "themselves") == (NUMBER[g[1]] == 1), p
        elif p.paradigm.startswith("determiner"):
            assert (g[2] in ("these", "those")) == (NUMBER[g[3]] == 1), p
        else:  # "no" licenses "ever" from the subject, not from inside the relative clause
            assert g[0] == "no" and g[3] == "the" and p.bad.split()[3] == "no" and "ever" in g


def test_every_word_is_one_wordpiece_of_bert_base_uncased(suite):
    tok = sources.load(sources.PACKAGED).tokenizer
    words = {w for p in suite for w in (p.good + " " + p.bad).split()}
    assert [w for w in words if len(tok.tokenize(w)) != 1] == []


def test_a_head_biased_to_plural_verbs_gets_the_plural_half_only():
    tok = sources.load(sources.PACKAGED).tokenizer
    model = tiny_bert(BertForMaskedLM, 0, vocab_size=len(tok))
    with torch.no_grad():  # logits = the bias alone: every plural verb far above every singular one
        model.cls.predictions.decoder.weight.zero_()
        model.cls.predictions.transform.dense.weight.zero_()
        bias = model.cls.predictions.bias
        bias.zero_()
        for sg, pl in M.VERBS + M.BE:
            bias[tok.convert_tokens_to_ids(pl)] = 10.0
    pairs = M.generate(10, paradigms=["simple", "pp"])
    results = list(M.score(model, tok, pairs, metric="original"))
    for r in results:
        plural_good = NUMBER[r.pair.critical[1]] == 1
        assert r.pll_correct == plural_good and r.critical_correct == plural_good
    acc = M.accuracy_by_paradigm(results)
    assert set(acc) == {"agreement: simple", "agreement: across a prepositional phrase"}
    assert 0 < acc["agreement: simple"]["pll"] < 1 and acc["agreement: simple"]["n"] == 10
