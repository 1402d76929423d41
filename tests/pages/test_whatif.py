"""AppTest of the what-if view (explorer/whatif.py) on the Masking and Attention pages: input B
prefilled with A gives exactly zero difference, a one-click edit changes B and the views, the numbers are
bertcore's, bad B (empty, longer than the model reads, odd Unicode) gets a message and never a traceback, and
the URL carries both inputs."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertcore.analysis.representations import whatif
from bertcore.loading.sources import PACKAGED, PACKAGED_MLM, load

from .conftest import BAD_TEXTS, PAGES, TIMEOUT, array, assert_clean, chart_specs, check, messages, page

A = "The keys to the cabinet [MASK] on the table."
MSK = {"msk_whatif": True, "msk_text": A}


@pytest.fixture(scope="module")
def mlm():
    return load(PACKAGED_MLM)


def heatmap(at: AppTest, title: str):
    return next(s for s in chart_specs(at) if s["layout"].get("title", {}).get("text") == title)


def test_masking_whatif_identical_then_one_click_edit(mlm):
    at = page("masking", **MSK)
    check(at, "info")
    assert at.text_area(key="msk_whatif_b").value == A  # B starts as A
    assert any("exactly zero" in i for i in messages(at)["info"])
    table = next(d.value for d in at.dataframe if "Δ" in d.value.columns)
    assert (table["Δ"] == 0).all()
    assert np.all(array(heatmap(at, "JS distance A vs B")["data"][0]["z"]) == 0)
    labels = [b.label for b in at.button]
    assert "keys → key" in labels and "are → is" not in labels  # [MASK] is not a verb: no number edit for it
    next(b for b in at.button if b.label == "keys → key").click().run()
    check(at, None)
    b = at.text_area(key="msk_whatif_b").value
    assert b == "The key to the cabinet [MASK] on the table."
    expected = whatif.compare(mlm.model, mlm.tokenizer, A, b)
    table = next(d.value for d in at.dataframe if "Δ" in d.value.columns)
    np.testing.assert_allclose(table["Δ"], expected.masks[0].delta, atol=1e-6)
    js = array(heatmap(at, "JS distance A vs B")["data"][0]["z"])
    np.testing.assert_allclose(js, expected.head_js, atol=1e-4)
    assert not any("exactly zero" in i for i in messages(at)["info"])


def test_masking_whatif_the_models_guess_and_reset():
    at = page("masking", **MSK)
    at.selectbox(key="msk_wi_word").set_value("2: keys").run()
    guess = next(b for b in at.button if b.label.startswith("keys → "))
    word = guess.label.split(" → ")[1].split(" (")[0]
    guess.click().run()
    check(at, None)
    assert at.text_area(key="msk_whatif_b").value == A.replace("keys", word)
    at.button(key="msk_wi_reset").click().run()
    assert at.text_area(key="msk_whatif_b").value == A


def test_masking_whatif_without_an_mlm_head():
    at = page("masking", PACKAGED, **MSK)  # all-MiniLM-L6-v2: no MLM head
    check(at, None)
    assert any("no MLM head, so it makes no guesses" in c.value for c in at.caption)
    assert not any(b.label.startswith("The → ") for b in at.button)  # no model guesses offered
    assert any(b.label == "keys → key" for b in at.button)


@pytest.mark.parametrize("prefix,name", [("msk", "masking"), ("att", "attention")])
def test_bad_b_gets_a_message(prefix, name):
    at = page(name, **{f"{prefix}_whatif": True})
    for case in ("empty", "whitespace", "over_max_positions", "emoji", "rtl", "zero_width_control",
                 "only_zero_width", "html"):
        at.text_area(key=f"{prefix}_whatif_b").input(BAD_TEXTS[case]).run()
        assert_clean(at)
        msgs = messages(at)
        assert not msgs["error"], (case, msgs)
        if case in ("empty", "whitespace"):
            assert any("edited text B is empty" in w for w in msgs["warning"]), (case, msgs)
        elif case == "over_max_positions":
            assert any("cut off" in w and "input B" in w for w in msgs["warning"]), (case, msgs)
        elif case == "only_zero_width":
            assert any("no token" in w for w in msgs["warning"]), (case, msgs)
        else:
            assert not msgs["warning"], (case, msgs)
        if case == "html":  # user text is escaped in the figures and in the token diff
            shown = str(chart_specs(at)) + " ".join(m.value for m in at.markdown if "**B:**" in m.value)
            assert "<script>" not in shown and "alert(1)" not in shown  # (the lens bolds tokens with <b> itself)

def test_attention_whatif_shows_the_chosen_head_on_a_and_b():
    at = page("attention", att_whatif=True, att_layer=2, att_head=3)
    check(at, "info")
    at.text_area(key="att_whatif_b").input("The keys to the cabinet is on the table.").run()
    check(at, None)
    titles = [s["layout"].get("annotations", [{}])[0].get("text") for s in chart_specs(at)
              if len(s["layout"].get("annotations", [])) == 2]
    assert ["A", "B"] in [[a["text"] for a in s["layout"]["annotations"]] for s in chart_specs(at)
                          if len(s["layout"].get("annotations", [])) == 2], titles
    assert any("Layer 2, head 3 on A and on B" in m.value for m in at.markdown)


def test_the_url_carries_both_inputs():
    at = AppTest.from_file(str(PAGES / "masking.py"), default_timeout=TIMEOUT)
    at.query_params.update({"msk_text": A, "msk_whatif": "1", "msk_whatif_b": "The key [MASK] here."})
    at.run()
    assert_clean(at)
    assert at.text_area(key="msk_whatif_b").value == "The key [MASK] here."
    at.text_area(key="msk_whatif_b").input("The keys [MASK] there.").run()
    params = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert params["msk_text"] == A and params["msk_whatif"] == "1"
    assert params["msk_whatif_b"] == "The keys [MASK] there."


def test_next_sentence_whatif_edits_sentence_b():
    at = page("next_sentence", nsp_whatif=True)
    check(at, "info")
    b = at.text_area(key="nsp_b").value
    assert at.text_area(key="nsp_whatif_b").value == b and any("exactly zero" in i for i in messages(at)["info"])
    first, edited = (m for m in at.metric if "P(IsNext)" in m.label)
    assert first.value == edited.value
    at.text_area(key="nsp_whatif_b").input("The striker scored twice in the second half.").run()
    check(at, None)
    first, edited = (m for m in at.metric if "P(IsNext)" in m.label)
    assert first.value != edited.value
    assert any("A:" in m.value and "B:" in m.value for m in at.markdown)
    at.text_area(key="nsp_whatif_b").input("  ").run()
    assert_clean(at)
    assert any("edited text B is empty" in w for w in messages(at)["warning"])


def test_attribution_whatif_fill_mask():
    at = page("attribution", attr_kind="fill_mask", attr_mlm_whatif=True, attr_steps=8)
    check(at, None)
    a, b = (m for m in at.metric if m.label.startswith(("A: ", "B: ")))
    assert a.value == b.value  # B starts as A
    at.text_area(key="attr_mlm_whatif_b").input("The capital of Germany is [MASK].").run()
    check(at, None)
    a, b = (m for m in at.metric if m.label.startswith(("A: ", "B: ")))
    assert a.label[3:] == b.label[3:] and a.value != b.value  # the same word explained, another probability
    at.text_area(key="attr_mlm_whatif_b").input("No mask in this one.").run()
    check(at, "info")
    at.text_area(key="attr_mlm_whatif_b").input("").run()
    assert any("edited text B is empty" in w for w in messages(at)["warning"])


def test_attribution_whatif_classifier_shows_both_predictions(run_source):
    at = page("attribution", run_source, attr_cls_whatif=True, attr_steps=8)
    check(at, None)
    at.text_area(key="attr_cls_whatif_b").input("The striker missed twice as the home side lost the final.").run()
    check(at, None)
    classes = next(d.value for d in at.dataframe if "P in B" in d.value.columns)
    assert list(classes["class"]) == ["business", "sport"]
    assert abs(classes["P in A"].sum() - 1) < 1e-5 and abs(classes["P in B"].sum() - 1) < 1e-5
    assert any(s["layout"].get("title", {}).get("text") == "Δ attribution, B − A" for s in chart_specs(at))


def test_grammar_compares_its_two_sentences_and_edits_sentence_2():
    at = page("grammar", gram_whatif=True)
    check(at, None)
    js = array(heatmap(at, "JS distance A vs B")["data"][0]["z"])
    assert js.max() > 0  # "are" / "is": the two sentences differ
    next(b for b in at.button if b.label == "is → are").click().run()  # sentence 2 becomes sentence 1
    check(at, "info")
    assert at.text_area(key="gram_b").value == at.text_area(key="gram_a").value
    assert any("exactly zero" in i for i in messages(at)["info"])
    assert np.all(array(heatmap(at, "JS distance A vs B")["data"][0]["z"]) == 0)
    at.text_area(key="gram_b").input("").run()
    assert_clean(at)
