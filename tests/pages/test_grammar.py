"""AppTest of the Grammar page: defaults, the two sentences' PLL equal bertcore's, bad text gets a message,
the suite runs with a progress bar and draws accuracy by paradigm, a failing pair opens elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.loading import sources
from bertcore.analysis.grammar.scoring import pseudo_log_likelihood

from .conftest import array, assert_bad_texts_handled, assert_clean, chart_specs, charts, messages, open_page, page


def test_without_an_mlm_head_it_offers_the_minilm_mlm():
    at = page("grammar", source=sources.PACKAGED)
    assert_clean(at)
    assert any("no MLM head" in i for i in messages(at)["info"])
    at.button(key="gram_switch").click().run()
    assert at.session_state["model_source"] == sources.PACKAGED_MLM
    assert_clean(at)
    assert any("The model prefers **sentence" in s for s in messages(at)["success"])


def test_defaults_show_the_preference_and_each_tokens_contribution():
    at = page("grammar", source=sources.PACKAGED_MLM)
    assert_clean(at)
    lm = sources.load(sources.PACKAGED_MLM)
    a = pseudo_log_likelihood(lm.model, lm.tokenizer, at.text_area(key="gram_a").value, "within_word_l2r")
    b = pseudo_log_likelihood(lm.model, lm.tokenizer, at.text_area(key="gram_b").value, "within_word_l2r")
    text = messages(at)["success"][0]
    assert f"by {abs(a.pll - b.pll):.2f} nats" in text
    right = a.pll >= b.pll  # sentence 1 is the grammatical one of the default pair
    verdicts = messages(at)["info"] + messages(at)["warning"]
    assert any("gets this pair right" in m for m in verdicts) == right
    assert any("gets this pair wrong" in m for m in verdicts) == (not right)
    at.text_area(key="gram_b").input("Keys are here.").run()  # not the default pair: no verdict
    assert not any("gets this pair" in m for m in messages(at)["info"] + messages(at)["warning"])
    at.text_area(key="gram_b").input(at.text_area(key="gram_a").value.replace(" are ", " is ")).run()
    spec = chart_specs(at)[0]
    np.testing.assert_allclose(array(spec["data"][0]["y"]), a.log_probs, atol=1e-4)


def test_sentences_of_different_length_and_bad_text():
    at = page("grammar", source=sources.PACKAGED_MLM)
    at.text_area(key="gram_b").input("Keys are here.").run()
    assert_clean(at)
    assert messages(at)["success"] and charts(at) == 2  # the contributions, and the suite shipped with the model
    seen = assert_bad_texts_handled(at, "gram_a", own=("20k_chars", "over_max_positions"))
    for case in ("20k_chars", "over_max_positions"):
        assert any("more than the 128" in w for w in seen[case]["warning"]), seen[case]


@pytest.mark.parametrize("metric", ["original"])
def test_the_suite_runs_and_a_failing_pair_opens_in_attention(metric):
    at = page("grammar", source=sources.PACKAGED_MLM, gram_n=10, gram_metric=metric)
    at.button(key="gram_run").click().run()
    assert_clean(at)
    assert charts(at) == 2
    suite = chart_specs(at)[1]
    assert len(suite["data"][0]["y"]) == 8  # one bar per paradigm
    if at.session_state["gram_results"]["results"] and any(
            not r.pll_correct for r in at.session_state["gram_results"]["results"]):
        at.button(key="gram_use").click().run()
        assert_clean(at)
        pick = at.session_state["gram_results"]["results"]
        assert at.text_area(key="gram_a").value in {r.pair.good for r in pick}


def _failing_after_the_suite(at):
    at.slider(key="gram_n").set_value(10).run()
    at.button(key="gram_run").click().run()
    assert_clean(at)
    failing = [r for r in at.session_state["gram_results"]["results"] if not r.pll_correct]
    assert failing, "the shipped model fails some pairs"
    return failing


def test_a_failing_pair_opens_in_the_attention_page_through_the_app():
    at = open_page("grammar")  # the default model has an MLM head: no switch needed
    failing = _failing_after_the_suite(at)
    at.button(key="gram_att").click().run()
    assert_clean(at)
    assert at.title[0].value == "Attention"
    assert at.text_area(key="att_text").value == failing[0].pair.bad


def test_a_failing_pair_opens_in_attribution_at_its_critical_word():
    at = open_page("grammar")
    failing = _failing_after_the_suite(at)
    k = next((i for i, r in enumerate(failing) if r.pair.critical), None)
    if k is None:
        pytest.skip("no failing pair with a single critical word in this draw")
    at.selectbox(key="gram_pick").set_value(k).run()
    at.button(key="gram_attr").click().run()
    assert_clean(at)
    assert at.title[0].value == "Attribution"
    assert at.text_area(key="attr_mlm_text").value == failing[k].pair.critical[0]
    assert at.radio(key="attr_kind").value == "fill_mask"


def test_a_first_visit_shows_the_suite_shipped_with_the_model_without_a_click(monkeypatch):
    """The default suite (40 pairs per paradigm, within-word PLL) is drawn from the file shipped beside the
    MiniLM-MLM, with no scoring: it equals bertcore's accuracy on those results; another size is not shipped."""
    from bertcore.analysis import shipped
    from bertcore.analysis.grammar import minimal_pairs as M

    monkeypatch.setattr(M, "score", lambda *a, **k: (_ for _ in ()).throw(AssertionError("scored on a first visit")))
    at = page("grammar", source=sources.PACKAGED_MLM)
    assert_clean(at)
    assert charts(at) == 2 and any("Computed when this model was shipped" in c.value for c in at.caption)
    lm = sources.load(sources.PACKAGED_MLM)
    results = shipped.shipped(lm, shipped.grammar_suite(lm, shipped.GRAMMAR_PAIRS, shipped.GRAMMAR_METRIC))
    by = M.accuracy_by_paradigm(results)
    bars = chart_specs(at)[1]["data"][0]
    np.testing.assert_allclose(array(bars["x"]), [by[name]["pll"] for name in bars["y"]], atol=1e-9)
    at.slider(key="gram_n").set_value(20).run()  # not shipped: nothing drawn until Run
    assert_clean(at)
    assert charts(at) == 1
