"""AppTest of the Attention page: every tab (one head, a layer, all heads, head view, statistics, rollout
and flow, neuron view) with defaults, controls, a sentence pair, the word toggle and bad inputs; the
numbers drawn are the model's attention."""

import numpy as np
import pytest
import torch

from bertcore.analysis.attention import rollout
from bertcore.loading.sources import PACKAGED
from bertcore.tokenization.tokenizer import encode

from .conftest import (ATT_TABS, BAD_TEXTS, array, assert_clean, chart_specs, charts, check, each_attention_tab,
                       messages, open_page, page)

# what the page must say for each bad text (None: just render without error)
EXPECTED = {"empty": "warning", "whitespace": "warning", "20k_chars": "warning", "over_max_positions": "warning",
            "only_zero_width": "warning"}
BAD = {k: BAD_TEXTS[k] for k in ("empty", "whitespace", "over_max_positions", "emoji", "zero_width_control",
                                  "only_zero_width", "html", "typed_mask")}
WARN = {"empty", "whitespace", "only_zero_width", "over_max_positions"}


@pytest.fixture(scope="module")
def att_app():
    return open_page("attention")


def test_attention_default():
    at = open_page("attention")  # its own page: the module's is changed by the other tests, in any order
    check(at, None)
    assert [t.label for t in at.tabs] == ATT_TABS
    assert charts(at) == 1  # tabs are lazy: only the open one is drawn
    each_attention_tab(at)
    at.session_state["att_tab"] = "Head statistics"
    at.run()
    stats = at.dataframe[0].value
    assert len(stats) == 12 and "Entropy (bits)" in stats.columns
    assert stats["Share to [CLS]"].between(0, 1).all()
    at.session_state["att_tab"] = ATT_TABS[0]
    at.run()


def test_the_default_sentence_says_whether_the_model_agrees_and_names_the_head():
    from bertcore.loading import sources
    from bertcore.analysis.grammar.agreement import check_verb

    at = open_page("attention")  # its own page, as above
    lm = sources.load(sources.DEFAULT)
    want = check_verb(lm.model, lm.tokenizer, "The keys to the cabinet are on the table.", "are", "is", "keys",
                      "cabinet")
    said = " ".join(m.value for m in list(at.info) + list(at.warning))
    assert ("gets it right" in said) == want.right and f"layer {want.head[0] + 1}, head {want.head[1] + 1}" in said
    assert f"{want.p_correct:.1%}" in said
    at.text_area(key="att_text").set_value("The man went to the store.").run()  # another text: no verdict
    assert "gets it" not in " ".join(m.value for m in list(at.info) + list(at.warning))
    at.text_area(key="att_text").set_value("The keys to the cabinet are on the table.").run()


def test_attention_controls():
    at = open_page("attention")  # its own page: the bad-input tests leave the module's without a usable text
    at.slider(key="att_layer").set_value(6)
    at.slider(key="att_head").set_value(12)
    at.toggle(key="att_hide").set_value(True)
    at.run()
    check(at, None)
    assert any("removed" in c.value for c in at.caption)
    at.session_state["att_tab"] = "Head view"
    at.run()
    at.selectbox(key="att_query").set_value(3).run()
    check(at, None)
    at.session_state["att_tab"] = "Head statistics"
    at.run()
    at.radio(key="att_stat").set_value("to_sep").run()
    check(at, None)
    at.toggle(key="att_hide").set_value(False)
    at.session_state["att_tab"] = ATT_TABS[0]
    at.run()


def test_one_head_heatmap_is_the_models_attention(packaged):
    """The "One head" heatmap of layer L, head H holds the model's ``attentions[L - 1][0, H - 1]`` for the
    typed text, token by token (computed here by a plain forward of the same model)."""
    text = "The bank raised its rates, so the river bank flooded."
    enc = encode(packaged.tokenizer, text)
    with torch.no_grad():
        out = packaged.model(**enc.tensors(), output_attentions=True)
    at = page("attention", PACKAGED)
    at.text_area(key="att_text").set_value(text).run()
    for layer, head in ((1, 1), (4, 7), (6, 12)):
        at.slider(key="att_layer").set_value(layer)
        at.slider(key="att_head").set_value(head).run()
        assert_clean(at)
        [spec] = chart_specs(at)
        assert spec["layout"]["xaxis"]["ticktext"] == enc.tokens
        z = array(spec["data"][0]["z"]).reshape(len(enc.tokens), len(enc.tokens))
        np.testing.assert_allclose(z, out.attentions[layer - 1][0, head - 1].numpy(), atol=1e-5,
                                   err_msg=f"layer {layer}, head {head}")


@pytest.mark.parametrize("name", BAD_TEXTS)
def test_attention_bad_inputs(att_app, name):
    at = att_app
    at.text_area(key="att_text").set_value(BAD_TEXTS[name]).run()
    msgs = check(at, EXPECTED.get(name))
    if EXPECTED.get(name) is None or name in ("20k_chars", "over_max_positions"):
        assert charts(at) == 1
    if name in ("20k_chars", "over_max_positions"):
        assert any("cut" in w for w in msgs["warning"])
    if name in ("over_max_positions", "rtl"):  # every view of 512 tokens / another script
        each_attention_tab(at, EXPECTED.get(name))


def test_attention_sentence_pair_and_shorter_text_after_long(att_app):
    at = att_app
    at.text_area(key="att_text").set_value("token " * 700).run()
    at.session_state["att_tab"] = "Head view"
    at.run()
    at.selectbox(key="att_query").set_value(400).run()  # a position that a short text does not have
    at.toggle(key="att_pair_on").set_value(True).run()
    at.text_area(key="att_text").set_value("The man went to the store.")
    at.text_area(key="att_text_b").set_value("He bought a gallon of milk.")
    at.run()
    check(at, None)
    assert charts(at) == 1
    assert at.selectbox(key="att_query").value < 20
    each_attention_tab(at)
    at.text_area(key="att_text_b").set_value("").run()
    check(at, "warning")
    at.toggle(key="att_pair_on").set_value(False).run()


# ----------------------------------------------------------------------------- rollout, flow, neuron view, words


@pytest.fixture(scope="module")
def att():
    return page("attention", att_tab="Rollout and flow")


def test_rollout_tab_shows_raw_rollout_and_flow_side_by_side(att):
    assert_clean(att)
    spec = chart_specs(att)[0]
    assert [a["text"] for a in spec["layout"]["annotations"]] == list(rollout.METHODS.values())
    for trace in spec["data"]:
        np.testing.assert_allclose(array(trace["z"]).sum(-1), 1.0, atol=1e-5)  # every row is a distribution
    # the rollout tab's own downloads, beside "Show the code"'s .py and notebook
    assert {d.label for d in att.get("download_button")} == {"HTML", "CSV", "Download .py", "Download notebook"}


def test_rollout_tab_says_when_flow_is_not_offered_and_word_merge_brings_it_back(att):
    words = " ".join(["Tokenization"] * (rollout.FLOW_MAX_TOKENS // 2))  # 2 pieces per word
    att.text_area(key="att_text").set_value(words).run()
    assert_clean(att)
    assert any(f"up to {rollout.FLOW_MAX_TOKENS} tokens" in m for m in messages(att)["info"])
    assert "not offered" in chart_specs(att)[0]["layout"]["annotations"][2]["text"]
    att.toggle(key="att_words").set_value(True).run()
    assert_clean(att)
    assert not messages(att)["info"]
    spec = chart_specs(att)[0]
    assert len(array(spec["data"][2]["z"]).reshape(6, -1)[0]) == rollout.FLOW_MAX_TOKENS // 2 + 2
    att.toggle(key="att_words").set_value(False)
    att.text_area(key="att_text").set_value("The animal didn't cross the street because it was too tired.").run()


@pytest.mark.parametrize("name", list(BAD))
def test_rollout_and_neuron_tabs_with_bad_inputs(att, name):
    for tab in ("Rollout and flow", "Neuron view"):
        att.session_state["att_tab"] = tab
        att.text_area(key="att_text").set_value(BAD[name]).run()
        assert_clean(att)
        msgs = messages(att)
        assert not msgs["error"], msgs["error"]
        if name in WARN:
            assert msgs["warning"], (tab, msgs)
        else:
            assert len(att.get("plotly_chart")) == 1, tab
    att.session_state["att_tab"] = "Rollout and flow"
    att.text_area(key="att_text").set_value("The animal didn't cross the street because it was too tired.").run()


def test_neuron_view_probabilities_are_the_attention_row(att):
    att.session_state["att_tab"] = "Neuron view"
    att.run()
    att.slider(key="att_layer").set_value(3)
    att.slider(key="att_head").set_value(5)
    att.selectbox(key="att_nq").set_value(4).run()
    assert_clean(att)
    probs = array(chart_specs(att)[0]["data"][4]["z"]).reshape(-1)
    att.session_state["att_tab"] = "One head"
    att.run()
    row = array(chart_specs(att)[0]["data"][0]["z"]).reshape(len(probs), -1)[4]
    np.testing.assert_allclose(probs, row, atol=1e-5)
    att.session_state["att_tab"] = "Rollout and flow"
    att.run()


def test_word_toggle_merges_every_attention_view(att):
    att.text_area(key="att_text").set_value("Snuffleupagus hibernates unbelievably.").run()
    for tab in ("One head", "All heads of a layer", "All layers × heads", "Head view", "Rollout and flow"):
        att.session_state["att_tab"] = tab
        att.toggle(key="att_words").set_value(False).run()
        n_tokens = len(att.selectbox(key="att_query").options) if tab == "Head view" else None
        att.toggle(key="att_words").set_value(True).run()
        assert_clean(att)
        assert any("merged into" in c.value for c in att.caption), tab
        if tab == "Head view":
            assert len(att.selectbox(key="att_query").options) < n_tokens
        if tab == "One head":
            z = array(chart_specs(att)[0]["data"][0]["z"])
            z = z.reshape(int(np.sqrt(z.size)), -1)
            assert z.shape[0] == 6  # [CLS] snuffleupagus hibernates unbelievably . [SEP]
            np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-5)
    att.toggle(key="att_words").set_value(False)
    att.session_state["att_tab"] = "Rollout and flow"
    att.text_area(key="att_text").set_value("The animal didn't cross the street because it was too tired.").run()


def test_part_of_speech_on_the_token_labels():
    """The toggle labels each token (or word) with spaCy's part of speech and dependency label."""
    import json

    at = page("attention", att_text="The keys to the cabinet are on the table.")
    assert_clean(at)
    at.toggle(key="att_pos").set_value(True).run()
    assert_clean(at)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    text = json.dumps(spec, ensure_ascii=False)
    assert "keys · NOUN nsubj" in text and "are · AUX ROOT" in text
    at.toggle(key="att_words").set_value(True).run()  # words: one label per word
    assert_clean(at)
    assert "keys · NOUN nsubj" in json.dumps(json.loads(at.get("plotly_chart")[0].proto.spec), ensure_ascii=False)
